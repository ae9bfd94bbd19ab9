"""The SQLite store: files, chunks, an FTS5 index and int8 vectors in one database file.

Every connection is opened by `connect()`, which owns the settings (WAL, busy timeout, foreign
keys). The bundled SQLite of apsw is used because many Pythons' `sqlite3` cannot load extensions
and ship an old SQLite; we need FTS5 with `contentless_delete` (SQLite 3.43+).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import apsw
import numpy as np

from ..errors import DatabaseBusy, IndexMissing, SchemaMismatch, VaultseekError
from ..query import fts_text
from .textpack import TextPacker, train_dictionary
from .vecblocks import VectorBlocks
from ..types import Chunk

SCHEMA_VERSION = 2
BUSY_TIMEOUT_MS = 3000
PAGE_SIZE = 16384
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
FTS_COLUMNS = ("text", "section", "heading_context")

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    hash TEXT NOT NULL,
    title TEXT NOT NULL,
    type TEXT NOT NULL,
    tags TEXT NOT NULL,
    date TEXT,
    links TEXT NOT NULL DEFAULT '',
    heading_context TEXT NOT NULL DEFAULT '',
    indexed_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS files_hash ON files(hash);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never re-used: vector tombstones and FTS rows key on it
    file_id INTEGER NOT NULL REFERENCES files(id),
    seq INTEGER NOT NULL,
    section TEXT NOT NULL,
    body BLOB NOT NULL,
    start_line INTEGER NOT NULL,
    chars INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_file ON chunks(file_id);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    {", ".join(FTS_COLUMNS)}, content='', contentless_delete=1, tokenize='{FTS_TOKENIZER}'
);
CREATE TABLE IF NOT EXISTS blobs (name TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS excluded (
    path TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    recorded_at REAL NOT NULL
);
"""


@dataclass(frozen=True)
class FileState:
    id: int
    path: str
    mtime_ns: int
    size: int
    hash: str


@dataclass(frozen=True)
class FileRecord:
    """What the store keeps about a note besides its chunks."""

    path: str
    mtime_ns: int
    size: int
    hash: str
    title: str
    type: str
    tags: tuple[str, ...]
    date: str | None
    links: tuple[str, ...] = ()
    heading_context: str = ""


@dataclass(frozen=True)
class ChunkRow:
    id: int
    path: str
    section: str
    heading_context: str
    text: str
    start_line: int


def connect(path: Path, readonly: bool = False) -> apsw.Connection:
    """Open the index database with the settings every connection needs."""
    if readonly:
        if not path.is_file():
            raise IndexMissing(f"no index at {path}", hint="run `vaultseek index VAULT` first, or pass --db")
        flags = apsw.SQLITE_OPEN_READONLY
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    fresh = not readonly and (not path.exists() or path.stat().st_size == 0)
    try:
        try:
            conn = _open(path, flags, fresh)
        except apsw.CantOpenError:
            if not readonly:
                raise
            # A WAL database in a read-only place (a mount, a snapshot, someone else's vault)
            # cannot create its -shm file: open it as immutable instead.
            conn = _open(path, flags | apsw.SQLITE_OPEN_URI, fresh, uri=f"{path.resolve().as_uri()}?mode=ro&immutable=1")
    except apsw.NotADBError:
        raise SchemaMismatch(f"{path} is not a vaultseek index (not an SQLite database)", hint="pass another --db, or delete the file") from None
    except apsw.BusyError:
        raise DatabaseBusy(f"{path} is locked by another process", hint="wait for the other vaultseek to finish and try again") from None
    except apsw.CantOpenError:
        raise VaultseekError(f"cannot open {path}", hint="check the path and its permissions") from None
    return conn


def _open(path: Path, flags: int, fresh: bool, uri: str | None = None) -> apsw.Connection:
    conn = apsw.Connection(uri or str(path), flags=flags)
    conn.setbusytimeout(BUSY_TIMEOUT_MS)
    if fresh:
        # 16 KB pages read the vector blocks (large blobs) in half the time of 4 KB pages.
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA schema_version").fetchall()  # touches the file: fails now if it is not a database
    return conn


class WriterLock:
    """An advisory lock beside the database, so only one indexer writes at a time."""

    def __init__(self, db_path: Path, wait_seconds: float = 3.0) -> None:
        self.path = db_path.with_name(db_path.name + ".lock")
        self.wait_seconds = wait_seconds
        self._fh: object | None = None

    def __enter__(self) -> "WriterLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")
        deadline = time.monotonic() + self.wait_seconds
        while True:
            try:
                _lock_file(fh)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    fh.close()
                    raise DatabaseBusy(
                        f"another vaultseek process (pid {holder}) is writing to this index",
                        hint="wait for it to finish, then run this again",
                    ) from None
                time.sleep(0.1)
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            _unlock_file(self._fh)
            self._fh.close()  # type: ignore[attr-defined]
            self._fh = None


if os.name == "nt":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _lock_file(fh: object) -> None:
        fh.seek(0)  # type: ignore[attr-defined]
        msvcrt.locking(fh.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]

    def _unlock_file(fh: object) -> None:
        fh.seek(0)  # type: ignore[attr-defined]
        msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]

else:
    import fcntl

    def _lock_file(fh: object) -> None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # type: ignore[attr-defined]

    def _unlock_file(fh: object) -> None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)  # type: ignore[attr-defined]


def _slices(ids: Sequence[int], size: int = 500) -> Iterator[list[int]]:
    """`ids` in lists of at most `size` (SQLite limits the variables of one statement)."""
    ids = list(ids)
    for i in range(0, len(ids), size):
        yield ids[i : i + size]


class SqliteStore:
    """All reads and writes of one index file."""

    def __init__(self, path: Path, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        self.conn = connect(path, readonly=readonly)
        self.vectors = VectorBlocks(self.conn)
        self._check_schema()
        if not readonly:  # only now: never switch someone else's database to WAL
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
        self._tokenizer = None
        self._packer: TextPacker | None = None
        self._df_cache: dict[str, int] = {}
        self._df_version = -1

    # -- schema ---------------------------------------------------------------------------

    def _check_schema(self) -> None:
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            if self.readonly:
                raise IndexMissing(f"{self.path} is empty", hint="run `vaultseek index` first")
            self._create()
            return
        if "meta" not in tables:
            raise SchemaMismatch(f"{self.path} is an SQLite database but not a vaultseek index", hint="pass another --db")
        found = int(self.get_meta("schema_version") or 0)
        if found > SCHEMA_VERSION:
            raise SchemaMismatch(
                f"the index at {self.path} was written by a newer vaultseek (schema {found}, this one reads {SCHEMA_VERSION})",
                hint="upgrade vaultseek (pip install -U vaultseek), or index into another --db",
            )
        if found < SCHEMA_VERSION:
            if self.readonly:
                raise SchemaMismatch(
                    f"the index at {self.path} uses an older schema ({found}); this vaultseek needs {SCHEMA_VERSION}",
                    hint="run `vaultseek index` once to upgrade it",
                )
            self._migrate(found)

    def _create(self) -> None:
        with self.transaction():
            self.conn.execute(SCHEMA)
            self.vectors.create()
            self.set_meta("schema_version", str(SCHEMA_VERSION))
            self.set_meta("created_at", str(time.time()))

    def _migrate(self, found: int) -> None:
        """Older schemas hold only derived data: rebuild them from the notes."""
        self.conn.execute("PRAGMA foreign_keys=OFF")  # tables go in any order; all are rebuilt
        with self.transaction():
            for (name,) in list(self.conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'chunks_fts_%'")):
                self.conn.execute(f'DROP TABLE IF EXISTS "{name}"')
            self.conn.execute(SCHEMA)
            self.vectors.create()
            self.set_meta("schema_version", str(SCHEMA_VERSION))
            self.set_meta("migrated_from", str(found))
        self.conn.execute("PRAGMA foreign_keys=ON")

    # -- meta -----------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value", (key, value))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction; takes the write lock up front so a busy database fails early."""
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except apsw.BusyError:
            raise DatabaseBusy(f"{self.path} is locked by another writer", hint="wait for it to finish and try again") from None
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")

    # -- files ----------------------------------------------------------------------------

    def file_states(self) -> dict[str, FileState]:
        return {
            r[1]: FileState(*r)
            for r in self.conn.execute("SELECT id, path, mtime_ns, size, hash FROM files")
        }

    def file_tags(self) -> dict[str, tuple[str, ...]]:
        """Each indexed note's tags."""
        return {path: tuple(t for t in tags.split("\x1f") if t) for path, tags in self.conn.execute("SELECT path, tags FROM files")}

    def touch_file(self, file_id: int, mtime_ns: int, size: int) -> None:
        self.conn.execute("UPDATE files SET mtime_ns=?, size=? WHERE id=?", (mtime_ns, size, file_id))

    def delete_file(self, file_id: int) -> None:
        """Remove a note with its chunks, FTS rows and vectors."""
        ids = [r[0] for r in self.conn.execute("SELECT id FROM chunks WHERE file_id=?", (file_id,))]
        self._delete_chunks(ids)
        self.conn.execute("DELETE FROM files WHERE id=?", (file_id,))

    def _delete_chunks(self, ids: list[int]) -> None:
        if not ids:
            return
        rows = [(i,) for i in ids]
        self.conn.executemany("DELETE FROM chunks_fts WHERE rowid=?", rows)
        self.vectors.remove(ids)
        self.conn.executemany("DELETE FROM chunks WHERE id=?", rows)

    def write_file(self, record: FileRecord, chunks: Sequence[Chunk]) -> list[int]:
        """Replace a note's row, chunks and FTS rows (call inside `transaction()`); returns the
        new chunk ids, for `add_vectors`."""
        row = self.conn.execute("SELECT id FROM files WHERE path=?", (record.path,)).fetchone()
        values = (
            record.mtime_ns, record.size, record.hash, record.title, record.type, "\x1f".join(record.tags),
            record.date, "\x1f".join(record.links), record.heading_context, time.time(),
        )
        if row:
            file_id = row[0]
            self._delete_chunks([r[0] for r in self.conn.execute("SELECT id FROM chunks WHERE file_id=?", (file_id,))])
            self.conn.execute(
                "UPDATE files SET mtime_ns=?, size=?, hash=?, title=?, type=?, tags=?, date=?, links=?, heading_context=?, indexed_at=? WHERE id=?",
                (*values, file_id),
            )
        else:
            file_id = self.conn.execute(
                "INSERT INTO files(path, mtime_ns, size, hash, title, type, tags, date, links, heading_context, indexed_at) "
                "VALUES(?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
                (record.path, *values),
            ).fetchone()[0]
        # Ids are assigned here (one writer holds the lock), so rows go in with executemany.
        row = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name='chunks'").fetchone()
        first = (row[0] if row else 0) + 1
        ids = list(range(first, first + len(chunks)))
        self.conn.executemany(
            "INSERT INTO chunks(id, file_id, seq, section, body, start_line, chars) VALUES(?,?,?,?,?,?,?)",
            [(i, file_id, c.seq, c.section, self.packer().pack(c.text), c.start_line, len(c.text)) for i, c in zip(ids, chunks)],
        )
        self.conn.executemany(
            "INSERT INTO chunks_fts(rowid, text, section, heading_context) VALUES(?,?,?,?)",
            [(i, fts_text(c.text), fts_text(c.section), fts_text(c.heading_context)) for i, c in zip(ids, chunks)],
        )
        return ids

    def add_vectors(self, ids: Sequence[int], hashes: Sequence[int], scales: np.ndarray, q: np.ndarray) -> None:
        """Store int8 vectors for chunks written by `write_file` (call inside `transaction()`)."""
        self.vectors.add(ids, hashes, scales, q)

    def vectors_by_hash(self, hashes: Iterable[int]) -> dict[int, tuple[float, bytes]]:
        """Stored (scale, int8 bytes) whose embedding input has one of these hashes (re-used, not re-embedded)."""
        return self.vectors.by_hash(hashes)

    def vectors_of_file(self, path: str) -> dict[int, tuple[float, bytes]]:
        """Stored vectors of a note's chunks, keyed by the chunk's position in the note."""
        rows = self.conn.execute("SELECT c.seq, c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.path=?", (path,)).fetchall()
        by_id = self.vectors.by_chunk([cid for _, cid in rows])
        return {seq: by_id[cid] for seq, cid in rows if cid in by_id}

    def compact_vectors(self) -> None:
        with self.transaction():
            self.vectors.compact()

    def clear(self) -> None:
        """Drop every note, chunk, FTS row and vector (a full rebuild follows)."""
        with self.transaction():
            self.conn.execute("DELETE FROM blobs WHERE name='zdict'")
            self._packer = None
            self.vectors.clear()
            self.conn.execute("DELETE FROM chunks_fts")
            self.conn.execute("DELETE FROM chunks")
            self.conn.execute("DELETE FROM files")
            self.conn.execute("DELETE FROM excluded")

    # -- excluded (audit of sensitive notes: paths and reasons, never content) ---------------

    def set_excluded(self, path: str, reason: str) -> None:
        self.conn.execute(
            "INSERT INTO excluded(path, reason, recorded_at) VALUES(?,?,?) "
            "ON CONFLICT(path) DO UPDATE SET reason=excluded.reason, recorded_at=excluded.recorded_at",
            (path, reason, time.time()),
        )

    def clear_excluded(self, path: str) -> None:
        self.conn.execute("DELETE FROM excluded WHERE path=?", (path,))

    def excluded(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT path, reason FROM excluded"))

    # -- reads ----------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        one = lambda sql: int(self.conn.execute(sql).fetchone()[0])  # noqa: E731
        return {
            "files": one("SELECT count(*) FROM files"),
            "chunks": one("SELECT count(*) FROM chunks"),
            "vectors": self.vectors.count(),
            "excluded": one("SELECT count(*) FROM excluded"),
        }

    def bm25(
        self, match: str, limit: int, where: tuple[str, list[object]] | None = None, weights: tuple[float, float, float] = (1.0, 0.5, 2.0)
    ) -> list[tuple[int, float]]:
        """Top chunk ids for an FTS5 MATCH expression, best first, with their bm25 scores (lower
        is better). `where` is an SQL condition on the note's row `f` (see `filter_sql`)."""
        w = ", ".join(str(float(x)) for x in weights)
        if where is None:
            sql = f"SELECT rowid, bm25(chunks_fts, {w}) AS s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s LIMIT ?"
            return [(int(r[0]), float(r[1])) for r in self.conn.execute(sql, (match, limit))]
        sql = (
            f"SELECT chunks_fts.rowid, bm25(chunks_fts, {w}) AS s FROM chunks_fts "
            "JOIN chunks c ON c.id = chunks_fts.rowid JOIN files f ON f.id = c.file_id "
            f"WHERE chunks_fts MATCH ? AND ({where[0]}) ORDER BY s LIMIT ?"
        )
        return [(int(r[0]), float(r[1])) for r in self.conn.execute(sql, [match, *where[1], limit])]

    def match_ids(self, match: str) -> np.ndarray:
        """Every chunk id an FTS5 expression matches (no ranking)."""
        rows = self.conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (match,)).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def filter_ids(self, where: tuple[str, list[object]]) -> np.ndarray:
        """Every chunk id of the notes a filter condition admits."""
        rows = self.conn.execute(f"SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE {where[0]}", where[1]).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def vocabulary_table(self) -> str:
        """The name of a virtual table of (term, doc): every indexed term and how many chunks hold it."""
        self._ensure_vocab()
        return "temp.chunks_vocab"

    def terms_with_prefix(self, prefix: str, limit: int) -> list[tuple[str, int]]:
        """Indexed terms starting with `prefix`, most frequent first."""
        self._ensure_vocab()
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return self.conn.execute(
            "SELECT term, doc FROM temp.chunks_vocab WHERE term >= ? AND term < ? ORDER BY doc DESC LIMIT ?", (prefix, upper, limit)
        ).fetchall()

    def stem(self, text: str) -> list[tuple[int, int, str]]:
        """The index tokenizer's tokens of `text`: (start byte, end byte, token)."""
        self._ensure_vocab()
        return [(t[0], t[1], t[2]) for t in self._tokenizer(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None) if len(t) > 2]

    def _ensure_vocab(self) -> None:
        if self._tokenizer is None:
            self.conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_vocab USING fts5vocab(main, chunks_fts, 'row')")
            self._tokenizer = self.conn.fts5_tokenizer(FTS_TOKENIZER.split()[0], FTS_TOKENIZER.split()[1:])

    def doc_freq(self, phrase: str) -> int:
        """How many chunks hold `phrase` (an upper bound for multi-token phrases), cached until
        the index changes. Costs about as much as counting the term's postings once."""
        version = self.data_version()
        if version != self._df_version:
            self._df_cache.clear()
            self._df_version = version
        cached = self._df_cache.get(phrase)
        if cached is not None:
            return cached
        self._ensure_vocab()
        tokens = [t[2] for t in self._tokenizer(phrase.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None) if len(t) > 2]
        df = 0
        for i, token in enumerate(dict.fromkeys(tokens)):
            row = self.conn.execute("SELECT doc FROM temp.chunks_vocab WHERE term=?", (token,)).fetchone()
            n = int(row[0]) if row else 0
            df = n if i == 0 else min(df, n)
        self._df_cache[phrase] = df
        return df

    def filter_sql(self, tags: Sequence[str], paths: Sequence[str], types: Sequence[str], after: str | None, before: str | None) -> tuple[str, list[object]] | None:
        """An SQL condition on a note row `f` for the search filters; None when there are none.
        Values of one kind are alternatives (OR); different kinds must all hold (AND)."""
        clauses: list[str] = []
        params: list[object] = []
        if tags:
            # Obsidian's nested tags: tag:project also finds project/alpha.
            alts = []
            for tag in tags:
                alts.append("(instr(lower(char(31) || f.tags || char(31)), char(31) || ? || char(31)) > 0 OR instr(lower(char(31) || f.tags), char(31) || ? || '/') > 0)")
                params += [tag.lower(), tag.lower()]
            clauses.append("(" + " OR ".join(alts) + ")")
        if paths:
            clauses.append("(" + " OR ".join("lower(substr(f.path, 1, ?)) = lower(?)" for _ in paths) + ")")
            for p in paths:
                params += [len(p), p]
        if types:
            clauses.append("lower(f.type) IN (" + ",".join("?" * len(types)) + ")")
            params += [t.lower() for t in types]
        day = "coalesce(f.date, date(f.mtime_ns / 1000000000, 'unixepoch'))"
        if after:
            clauses.append(f"{day} >= ?")
            params.append(after)
        if before:
            clauses.append(f"{day} < ?")
            params.append(before)
        return (" AND ".join(clauses), params) if clauses else None

    def chunk_count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def load_vectors(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(chunk ids, int8 matrix, scales, sign-bit words) of every stored vector."""
        return self.vectors.load()

    def load_vectors_lazy(self):
        """Like `load_vectors`, with the int8 matrix left in the database until needed."""
        return self.vectors.load_lazy()

    def data_version(self) -> int:
        """Changes whenever the database changes; used to refresh in-memory caches."""
        return int(self.conn.data_version())

    def fetch_chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        packer = self.packer()
        out: dict[int, ChunkRow] = {}
        for part in _slices(ids):
            marks = ",".join("?" * len(part))
            sql = (
                "SELECT c.id, f.path, c.section, f.heading_context, c.body, c.start_line FROM chunks c "
                f"JOIN files f ON f.id = c.file_id WHERE c.id IN ({marks})"
            )
            out.update({r[0]: ChunkRow(r[0], r[1], r[2], r[3], packer.unpack(r[4]), r[5]) for r in self.conn.execute(sql, part)})
        return out

    # -- text compression -----------------------------------------------------------------

    def packer(self) -> TextPacker:
        if self._packer is None:
            row = self.conn.execute("SELECT data FROM blobs WHERE name='zdict'").fetchone()
            self._packer = TextPacker(row[0] if row else b"")
        return self._packer

    def ensure_dictionary(self, sample: Sequence[str]) -> None:
        """Train the compression dictionary from the first texts written to an empty index."""
        if self.packer().dictionary or not sample:
            return
        if self.conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone():
            return  # existing bodies were packed without a dictionary; keep it that way
        dictionary = train_dictionary(sample)
        self.conn.execute("INSERT OR REPLACE INTO blobs(name, data) VALUES('zdict', ?)", (dictionary,))
        self._packer = TextPacker(dictionary)

    def close(self) -> None:
        self.conn.close()
