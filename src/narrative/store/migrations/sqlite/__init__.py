"""SQLite migrations (applied in name order)."""
