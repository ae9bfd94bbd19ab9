"""Scan -> diff -> apply: keeps the index in step with the vault, one file per transaction.

Only changed files are read (mtime and size first, then a content hash, so a touched but unchanged
note costs nothing). Vectors are re-used by the hash of what the model sees, so a renamed note or
an edited note's untouched sections are never re-embedded.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .chunking import chunk_note, heading_context
from .config import Config
from .embed import Embedder, load_embedder
from .errors import EmbedderUnavailable, UsageError
from .markdown import is_private_tag, parse_note
from .scan import FoundFile, folder_rule, scan_vault
from .scrub import scrub
from .store.sqlite import FileRecord, SqliteStore, WriterLock
from .store.vecblocks import quantize
from .types import Chunk

log = logging.getLogger("vaultseek")

EMBED_BATCH = 1024  # chunks embedded together (the model is fastest on large batches)
BINARY_SAMPLE = 8192
_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 11, 12, 13))
SCRUB_VERSION = "scrub-v1"


@dataclass
class IndexSummary:
    added: int = 0
    changed: int = 0
    deleted: int = 0
    unchanged: int = 0
    renamed: int = 0
    excluded: int = 0
    skipped: int = 0
    chunks: int = 0  # chunks in the index after the run
    chunks_written: int = 0
    embedded: int = 0  # chunks that went through the model (the rest re-used stored vectors)
    secrets_scrubbed: int = 0
    secrets_by_pattern: dict[str, int] = field(default_factory=dict)
    vectors: bool = True
    full: bool = False
    interrupted: bool = False
    seconds: float = 0.0

    def as_json(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class _Prepared:
    """A file read, scrubbed, parsed and chunked, waiting for its vectors."""

    found: FoundFile
    record: FileRecord
    chunks: list[Chunk]
    hashes: list[int]
    kind: str  # "added", "changed" or "renamed"
    old_path: str | None = None


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def embed_hash(text: str) -> int:
    """A 63-bit key for what the model sees: equal texts share one stored vector."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big") >> 1


def looks_binary(data: bytes) -> bool:
    """A `.md` file that is really an image, archive or executable."""
    sample = data[:BINARY_SAMPLE]
    if not sample:
        return False
    if sample.count(0) > len(sample) // 100 + 1:
        return True
    controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    return controls > len(sample) // 10


def index_fingerprint(config: Config, embedder: Embedder | None) -> str:
    model = embedder.fingerprint() if embedder is not None else "no-model"
    return f"{model}|{config.chunking.fingerprint()}|{SCRUB_VERSION if config.index.scrub_secrets else 'noscrub'}"


class Indexer:
    """Brings one store in step with one vault."""

    def __init__(
        self,
        vault: Path,
        store: SqliteStore,
        config: Config,
        embedder: Embedder | None = None,
        progress: Callable[[int, int], None] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.vault = vault
        self.store = store
        self.config = config
        self.embedder = embedder if embedder is not None else load_embedder(config.model)
        self.progress = progress
        self.stop = stop or threading.Event()
        self.summary = IndexSummary()
        self._excluded: set[str] = set()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vaultseek-embed")
        self._inflight: tuple[list[_Prepared], dict[int, tuple[float, bytes]], list[int], Future | None] | None = None

    def run(self, full: bool = False) -> IndexSummary:
        started = time.perf_counter()
        if not self.vault.is_dir():
            raise UsageError(f"vault not found: {self.vault}", hint="pass the folder that holds your notes")
        with WriterLock(self.store.path):
            try:
                self._run(full)
            finally:
                self._pool.shutdown(wait=True, cancel_futures=True)
        self.summary.chunks = self.store.counts()["chunks"]
        self.summary.seconds = round(time.perf_counter() - started, 3)
        return self.summary

    def _run(self, full: bool) -> None:
        store, summary = self.store, self.summary
        fingerprint = self._fingerprint()
        stored = store.get_meta("fingerprint")
        if self.embedder is None and stored is not None:
            fingerprint = stored  # a model that failed to load must not wipe the vectors we have
        if full or (stored is not None and stored != fingerprint):
            if not full:
                log.warning("model or chunking settings changed since the last index: rebuilding everything")
            store.clear()
            summary.full = True
        with store.transaction():
            store.set_meta("vault_root", str(self.vault.resolve()))
            store.set_meta("fingerprint", fingerprint)
            store.set_meta("model", self.config.model)

        files = scan_vault(self.vault, self.config.index)
        known = store.file_states()
        seen = {f.path for f in files}
        gone = {p: s for p, s in known.items() if p not in seen}
        gone_by_hash = {s.hash: p for p, s in gone.items()}
        self._excluded = set(store.excluded())
        for path in list(self._excluded):
            if path not in seen:
                with store.transaction():
                    store.clear_excluded(path)

        total = len(files)
        done = 0
        pending: list[_Prepared] = []
        pending_chunks = 0
        private_tags = tuple(t.lower() for t in self.config.index.private_tags)
        stored_tags = store.file_tags() if private_tags else {}
        for found in files:
            if self.stop.is_set():
                break
            state = known.get(found.path)
            if state and state.mtime_ns == found.mtime_ns and state.size == found.size:
                # Unchanged, but today's settings may make it private (a folder or a tag added).
                folder = folder_rule(found.path, self.config.index.private_folders)
                if folder or any(is_private_tag(t, private_tags) for t in stored_tags.get(found.path, ())):
                    self._exclude(found, state, f"private folder {folder}/" if folder else "marked private by a tag")
                else:
                    summary.unchanged += 1
                    log.debug("unchanged %s", found.path)
            else:
                prepared = self._prepare(found, state, gone_by_hash)
                if prepared is not None:
                    pending.append(prepared)
                    pending_chunks += len(prepared.chunks)
                    if prepared.old_path:
                        gone.pop(prepared.old_path, None)
            if pending_chunks >= EMBED_BATCH:
                self._flush(pending)
                pending, pending_chunks = [], 0
            done += 1
            if self.progress:
                self.progress(done, total)
        self._flush(pending)
        self._finish()

        if self.stop.is_set():
            summary.interrupted = True
            log.warning("interrupted: the files done so far are saved; run `vaultseek index` again to finish")
            return
        for path, state in gone.items():
            with store.transaction():
                store.delete_file(state.id)
            summary.deleted += 1
            log.debug("deleted %s", path)
        store.compact_vectors()
        with store.transaction():
            store.set_meta("last_indexed_at", str(time.time()))

    def _fingerprint(self) -> str:
        if self.embedder is None:
            return index_fingerprint(self.config, None)
        try:
            return index_fingerprint(self.config, self.embedder)
        except EmbedderUnavailable as exc:
            log.warning("vector search disabled: %s", exc)
            self.embedder = None
            self.summary.vectors = False
            return index_fingerprint(self.config, None)

    def _exclude(self, found: FoundFile, state: object, reason: str) -> None:
        with self.store.transaction():
            if state is not None:
                self.store.delete_file(state.id)  # type: ignore[attr-defined]
            self.store.set_excluded(found.path, reason)
        self._excluded.add(found.path)
        self.summary.excluded += 1
        log.info("not indexed: %s (%s)", found.path, reason)

    def _prepare(self, found: FoundFile, state, gone_by_hash: dict[str, str]) -> _Prepared | None:
        """Read, hash, scrub, parse and chunk one new or modified file."""
        settings = self.config.index
        private = folder_rule(found.path, settings.private_folders)
        if private:
            self._exclude(found, state, f"private folder {private}/")
            return None
        if found.size > settings.max_file_mb * 1024 * 1024:
            self._exclude(found, state, f"larger than index.max_file_mb ({settings.max_file_mb:g} MB)")
            return None
        try:
            with open(found.abspath, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            log.warning("skipping %s: it disappeared while indexing", found.path)
            self.summary.skipped += 1
            return None
        except OSError as exc:
            log.warning("skipping %s: %s (its previous version stays indexed)", found.path, exc.strerror or exc)
            self.summary.skipped += 1
            return None
        digest = content_hash(data)
        if state is not None and state.hash == digest:
            with self.store.transaction():
                self.store.touch_file(state.id, found.mtime_ns, found.size)
            self.summary.unchanged += 1
            log.debug("touched but unchanged %s", found.path)
            return None
        if looks_binary(data):
            self._exclude(found, state, "binary file, not Markdown text")
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = data.decode("utf-8", errors="replace")
            log.warning("%s is not valid UTF-8 (byte %d); undecodable bytes were replaced", found.path, exc.start)
        if text.startswith("\ufeff"):
            text = text[1:]
        text = text.replace("\x00", "").replace("\r\n", "\n")

        if settings.scrub_secrets:
            scrubbed = scrub(text)
            if scrubbed.findings:
                counts = scrubbed.counts
                self.summary.secrets_scrubbed += len(scrubbed.findings)
                for name, n in counts.items():
                    self.summary.secrets_by_pattern[name] = self.summary.secrets_by_pattern.get(name, 0) + n
                log.info("scrubbed %s in %s", ", ".join(f"{n}x {name}" for name, n in sorted(counts.items())), found.path)
            text = scrubbed.text

        note = parse_note(found.path, text, private_tags=tuple(t.lower() for t in settings.private_tags))
        for warning in note.warnings:
            log.warning("%s: %s", found.path, warning)
        if note.private:
            self._exclude(found, state, "marked private in front matter")
            return None
        if found.path in self._excluded:
            with self.store.transaction():
                self.store.clear_excluded(found.path)
            self._excluded.discard(found.path)

        chunks = chunk_note(note, self.config.chunking)
        old_path = gone_by_hash.get(digest) if state is None else None
        kind = "changed" if state is not None else ("renamed" if old_path else "added")
        record = FileRecord(found.path, found.mtime_ns, found.size, digest, note.title, note.type, note.tags, note.date, note.links, heading_context(note))
        return _Prepared(found, record, chunks, [embed_hash(c.embed_text) for c in chunks], kind, old_path)

    def _flush(self, batch: list[_Prepared]) -> None:
        """Start embedding `batch` in the background, then write the batch before it.

        The model (tokenizer threads and numpy) works while this thread reads and chunks the next
        files, so a full index costs little more than the embedding itself.
        """
        job = self._submit(batch) if batch else None
        if self._inflight is not None:
            self._write(*self._inflight)
        self._inflight = job

    def _finish(self) -> None:
        if self._inflight is not None:
            self._write(*self._inflight)
            self._inflight = None
        self._pool.shutdown()

    def _submit(self, batch: list[_Prepared]) -> tuple[list[_Prepared], dict[int, tuple[float, bytes]], list[int], Future | None]:
        """Look up re-usable vectors and start embedding the rest."""
        if self.embedder is None:
            return batch, {}, [], None
        vectors = self.store.vectors_by_hash({h for p in batch for h in p.hashes})
        for p in batch:
            if p.old_path:
                # A renamed note: same content, but the title (from the file name) that the model
                # sees has changed. Keep its vectors rather than re-embed the whole note.
                old = self.store.vectors_of_file(p.old_path)
                if len(old) == len(p.chunks):
                    for c, h in zip(p.chunks, p.hashes):
                        if c.seq in old:
                            vectors.setdefault(h, old[c.seq])
        todo: dict[int, str] = {}
        for p in batch:
            for h, c in zip(p.hashes, p.chunks):
                if h not in vectors:
                    todo.setdefault(h, c.embed_text)
        if not todo:
            return batch, vectors, [], None
        embedder = self.embedder
        texts = list(todo.values())
        future = self._pool.submit(lambda: quantize(embedder.embed_batch(texts)))  # -> (scales, q)
        return batch, vectors, list(todo.keys()), future

    def _write(self, batch: list[_Prepared], vectors: dict[int, tuple[float, bytes]], keys: list[int], future: Future | None) -> None:
        """Write a batch of whole files in one transaction (a file is never half applied)."""
        if future is not None:
            try:
                scales, q = future.result()
                vectors.update((k, (float(s), row.tobytes())) for k, s, row in zip(keys, scales, q))
                self.summary.embedded += len(keys)
            except EmbedderUnavailable as exc:
                log.warning("vector search disabled: %s", exc)
                self.embedder = None
                self.summary.vectors = False
        vec_ids: list[int] = []
        vec_hashes: list[int] = []
        with self.store.transaction():
            self.store.ensure_dictionary([c.text for p in batch for c in p.chunks])
            for p in batch:
                ids = self.store.write_file(p.record, p.chunks)
                for cid, h in zip(ids, p.hashes):
                    if h in vectors:
                        vec_ids.append(cid)
                        vec_hashes.append(h)
                if p.old_path:
                    old = self.store.conn.execute("SELECT id FROM files WHERE path=?", (p.old_path,)).fetchone()
                    if old:
                        self.store.delete_file(old[0])
            if vec_ids:
                scales = np.fromiter((vectors[h][0] for h in vec_hashes), dtype=np.float32, count=len(vec_hashes))
                q = np.frombuffer(b"".join(vectors[h][1] for h in vec_hashes), dtype=np.int8).reshape(len(vec_hashes), -1)
                self.store.add_vectors(vec_ids, vec_hashes, scales, q)
        for p in batch:
            setattr(self.summary, p.kind, getattr(self.summary, p.kind) + 1)
            self.summary.chunks_written += len(p.chunks)
            log.debug("%s %s (%d chunks)", p.kind, p.found.path, len(p.chunks))
