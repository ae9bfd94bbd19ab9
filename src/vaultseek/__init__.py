"""vaultseek: fast local hybrid search for Markdown note vaults, in one SQLite file."""

__version__ = "0.1.0"
