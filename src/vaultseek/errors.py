"""Errors a user can act on: each says what happened and what to do next."""

from __future__ import annotations


class VaultseekError(Exception):
    """Base class; the CLI prints the message and exits with `exit_code`."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def __str__(self) -> str:
        base = super().__str__()
        return f"{base}\n  hint: {self.hint}" if self.hint else base

    def one_line(self, with_hint: bool = False) -> str:
        """The message's first line (and with `with_hint`, "; " and the hint): for warnings and
        status lines, where the full text would be too long."""
        lines = super().__str__().splitlines()
        first = lines[0] if lines else type(self).__name__
        return f"{first}; {self.hint}" if with_hint and self.hint else first


class UsageError(VaultseekError):
    """Bad arguments or input: a missing vault, an empty query, a bad config value."""

    exit_code = 2


class IndexMissing(VaultseekError):
    """No index exists yet where one was expected."""

    exit_code = 2


class DatabaseBusy(VaultseekError):
    """Another process holds the write lock for longer than we wait."""

    exit_code = 3


class SchemaMismatch(VaultseekError):
    """The index was written by a newer vaultseek (or is not a vaultseek index)."""

    exit_code = 2


class EmbedderUnavailable(VaultseekError):
    """The embedding model cannot be loaded; search falls back to BM25."""
