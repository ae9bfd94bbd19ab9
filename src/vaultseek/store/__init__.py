"""Storage backends. `sqlite.SqliteStore` is the default: one local file, no service."""
