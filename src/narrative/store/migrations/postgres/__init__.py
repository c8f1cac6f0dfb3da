"""PostgreSQL migrations, applied in name order (see narrative.store.postgres.base)."""
