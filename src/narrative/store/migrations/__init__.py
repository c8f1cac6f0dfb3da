"""Named, ordered migrations, one folder per backend."""
