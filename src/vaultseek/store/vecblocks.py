"""Vectors stored in blocks of a few thousand rows, so a new process loads 100k vectors in a few
milliseconds (a handful of blobs) instead of reading 100k rows one by one.

Each block holds chunk ids, per-vector scales, int8 components and sign bits. Adding appends to
the last block; removing writes a tombstone (the block keeps the row until it is compacted);
`vec_keys` maps each live chunk to its block and the hash of the text it was embedded from, so
vectors are re-used instead of re-embedded.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import apsw
import numpy as np

BLOCK_ROWS = 4096
COMPACT_DEAD_FRACTION = 0.25

SCHEMA = """
CREATE TABLE IF NOT EXISTS vec_keys (
    chunk_id INTEGER PRIMARY KEY,
    embed_hash INTEGER NOT NULL,
    block INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS vec_keys_hash ON vec_keys(embed_hash);
CREATE TABLE IF NOT EXISTS vec_blocks (
    block INTEGER PRIMARY KEY,
    rows INTEGER NOT NULL,
    dead INTEGER NOT NULL DEFAULT 0,
    ids BLOB NOT NULL,
    scales BLOB NOT NULL,
    q BLOB NOT NULL,
    bits BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS vec_dead (chunk_id INTEGER PRIMARY KEY);
"""


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 unit vectors -> (float32 scales, int8 components); x ~= scale * q."""
    vectors = np.asarray(vectors, dtype=np.float32)
    peak = np.abs(vectors).max(axis=1) if len(vectors) else np.zeros(0, np.float32)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)
    return scales, q


def sign_bits(q: np.ndarray) -> np.ndarray:
    """Sign bits of each row packed into uint64 words (rows padded to a multiple of 64 bits)."""
    bits = np.packbits(q > 0, axis=1)
    pad = (-bits.shape[1]) % 8
    if pad:
        bits = np.pad(bits, ((0, 0), (0, pad)))
    return np.ascontiguousarray(bits).view(np.uint64)


class VectorBlocks:
    """The vector part of the store; every method runs inside the caller's transaction."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn

    def create(self) -> None:
        self.conn.execute(SCHEMA)

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM vec_keys").fetchone()[0])

    def add(self, ids: Sequence[int], hashes: Sequence[int], scales: np.ndarray, q: np.ndarray) -> None:
        """Append vectors for new chunks (ids must be larger than any stored before)."""
        if not len(ids):
            return
        ids_arr = np.asarray(ids, dtype=np.int64)
        scales = np.asarray(scales, dtype=np.float32)
        q = np.asarray(q, dtype=np.int8)
        start = 0
        while start < len(ids_arr):
            tail = self.conn.execute("SELECT block, rows, ids, scales, q, bits FROM vec_blocks ORDER BY block DESC LIMIT 1").fetchone()
            if tail is None or tail[1] >= BLOCK_ROWS:
                block = (tail[0] + 1) if tail else 1
                room, old = BLOCK_ROWS, None
            else:
                block, room, old = tail[0], BLOCK_ROWS - tail[1], tail
            end = min(len(ids_arr), start + room)
            part_ids, part_scales, part_q = ids_arr[start:end], scales[start:end], q[start:end]
            blobs = [part_ids.tobytes(), part_scales.tobytes(), part_q.tobytes(), sign_bits(part_q).tobytes()]
            if old is None:
                self.conn.execute(
                    "INSERT INTO vec_blocks(block, rows, dead, ids, scales, q, bits) VALUES(?,?,0,?,?,?,?)",
                    (block, end - start, *blobs),
                )
            else:
                self.conn.execute(
                    "UPDATE vec_blocks SET rows=rows+?, ids=?, scales=?, q=?, bits=? WHERE block=?",
                    (end - start, *(bytes(a) + b for a, b in zip(old[2:], blobs)), block),
                )
            self.conn.executemany(
                "INSERT INTO vec_keys(chunk_id, embed_hash, block) VALUES(?,?,?)",
                [(int(i), int(h), block) for i, h in zip(part_ids, hashes[start:end])],
            )
            start = end

    def remove(self, chunk_ids: Iterable[int]) -> None:
        """Forget the vectors of deleted chunks (tombstones until the block is compacted)."""
        for cid in chunk_ids:
            row = self.conn.execute("DELETE FROM vec_keys WHERE chunk_id=? RETURNING block", (cid,)).fetchone()
            if row:
                self.conn.execute("INSERT OR IGNORE INTO vec_dead(chunk_id) VALUES(?)", (cid,))
                self.conn.execute("UPDATE vec_blocks SET dead=dead+1 WHERE block=?", (row[0],))

    def clear(self) -> None:
        self.conn.execute("DELETE FROM vec_keys")
        self.conn.execute("DELETE FROM vec_blocks")
        self.conn.execute("DELETE FROM vec_dead")

    def by_hash(self, hashes: Iterable[int]) -> dict[int, tuple[float, bytes]]:
        """Stored (scale, int8 bytes) for texts embedded before, keyed by their hash."""
        where: dict[int, list[tuple[int, int]]] = {}
        wanted = list(dict.fromkeys(hashes))
        if not wanted or self.conn.execute("SELECT 1 FROM vec_keys LIMIT 1").fetchone() is None:
            return {}
        found: dict[int, tuple[int, int]] = {}
        for i in range(0, len(wanted), 500):  # one query per 500 hashes, not one per hash
            part = wanted[i : i + 500]
            sql = f"SELECT embed_hash, chunk_id, block FROM vec_keys WHERE embed_hash IN ({','.join('?' * len(part))})"
            for h, cid, block in self.conn.execute(sql, part):
                found.setdefault(h, (cid, block))
        for h, (cid, block) in found.items():
            where.setdefault(block, []).append((h, cid))
        return self._read(where)

    def by_chunk(self, chunk_ids: Iterable[int]) -> dict[int, tuple[float, bytes]]:
        """Stored (scale, int8 bytes) of these chunks, keyed by chunk id."""
        where: dict[int, list[tuple[int, int]]] = {}
        for cid in chunk_ids:
            row = self.conn.execute("SELECT block FROM vec_keys WHERE chunk_id=?", (cid,)).fetchone()
            if row:
                where.setdefault(row[0], []).append((cid, cid))
        return self._read(where)

    def _read(self, where: dict[int, list[tuple[int, int]]]) -> dict[int, tuple[float, bytes]]:
        """For each block, the rows of the given chunk ids, keyed by the paired key."""
        out: dict[int, tuple[float, bytes]] = {}
        for block, wanted in where.items():
            ids_b, scales_b, q_b = self.conn.execute("SELECT ids, scales, q FROM vec_blocks WHERE block=?", (block,)).fetchone()
            ids = np.frombuffer(ids_b, dtype=np.int64)
            scales = np.frombuffer(scales_b, dtype=np.float32)
            q = np.frombuffer(q_b, dtype=np.int8).reshape(len(ids), -1)
            for h, cid in wanted:
                r = int(np.searchsorted(ids, cid))
                out[h] = (float(scales[r]), q[r].tobytes())
        return out

    def load(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(chunk ids, int8 matrix, scales, sign-bit words) of every live vector."""
        lazy = self.load_lazy()
        return lazy.ids, lazy.all_rows(), lazy.scales, lazy.bits

    def load_lazy(self) -> "LazyVectors":
        """Ids, scales and sign bits of every live vector (a seventh of the bytes); the int8
        components are read on demand, a few rows or all of them."""
        rows = self.conn.execute("SELECT block, rows, ids, scales, bits FROM vec_blocks ORDER BY block").fetchall()
        if not rows:
            return LazyVectors(self.conn, np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros((0, 0), np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        ids = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.int64)
        scales = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32)
        bits = np.frombuffer(b"".join(r[4] for r in rows), dtype=np.uint64).reshape(len(ids), -1)
        blocks = np.array([r[0] for r in rows], dtype=np.int64)
        counts = np.array([r[1] for r in rows], dtype=np.int64)
        stored = np.arange(len(ids), dtype=np.int64)  # row of each live vector among all stored rows
        dead = [r[0] for r in self.conn.execute("SELECT chunk_id FROM vec_dead")]
        if dead:
            live = ~np.isin(ids, np.asarray(dead, dtype=np.int64))
            ids, scales, bits, stored = ids[live], scales[live], bits[live], stored[live]
        return LazyVectors(self.conn, ids, scales, bits, blocks, counts, stored)

    def compact(self) -> int:
        """Rewrite blocks that are mostly tombstones; returns how many blocks were rewritten."""
        stale = self.conn.execute(
            "SELECT block FROM vec_blocks WHERE dead > 0 AND dead >= rows * ?", (COMPACT_DEAD_FRACTION,)
        ).fetchall()
        for (block,) in stale:
            ids_b, scales_b, q_b, bits_b = self.conn.execute("SELECT ids, scales, q, bits FROM vec_blocks WHERE block=?", (block,)).fetchone()
            ids = np.frombuffer(ids_b, dtype=np.int64)
            live_ids = {r[0] for r in self.conn.execute("SELECT chunk_id FROM vec_keys WHERE block=?", (block,))}
            keep = np.fromiter((int(i) in live_ids for i in ids), dtype=bool, count=len(ids))
            dead_ids = [(int(i),) for i in ids[~keep]]
            self.conn.executemany("DELETE FROM vec_dead WHERE chunk_id=?", dead_ids)
            if not keep.any():
                self.conn.execute("DELETE FROM vec_blocks WHERE block=?", (block,))
                continue
            n = len(ids)
            parts = [
                ids[keep],
                np.frombuffer(scales_b, dtype=np.float32)[keep],
                np.frombuffer(q_b, dtype=np.int8).reshape(n, -1)[keep],
                np.frombuffer(bits_b, dtype=np.uint64).reshape(n, -1)[keep],
            ]
            self.conn.execute(
                "UPDATE vec_blocks SET rows=?, dead=0, ids=?, scales=?, q=?, bits=? WHERE block=?",
                (int(keep.sum()), *(p.tobytes() for p in parts), block),
            )
        return len(stale)


class LazyVectors:
    """Live vectors whose int8 components stay in the database until asked for."""

    def __init__(self, conn: apsw.Connection, ids: np.ndarray, scales: np.ndarray, bits: np.ndarray,
                 blocks: np.ndarray, counts: np.ndarray, stored: np.ndarray) -> None:
        self.conn = conn
        self.ids, self.scales, self.bits = ids, scales, bits
        self._blocks = blocks  # block number of each block, in order
        self._starts = np.cumsum(counts) - counts  # first stored row of each block
        self._total = int(counts.sum())  # rows stored, live or dead
        self._stored = stored  # stored row of each live vector

    def rows(self, rows: np.ndarray, dim: int) -> np.ndarray:
        """The int8 components of some live rows, read with incremental blob I/O (no full load)."""
        out = np.empty((len(rows), dim), dtype=np.int8)
        stored = self._stored[rows]
        which = np.searchsorted(self._starts, stored, side="right") - 1
        for b in sorted(set(which.tolist())):  # (np.unique would import numpy.ma: 8 ms per process)
            with self.conn.blob_open("main", "vec_blocks", "q", int(self._blocks[b]), False) as blob:
                for i in np.flatnonzero(which == b):
                    blob.seek(int(stored[i] - self._starts[b]) * dim)
                    out[i] = np.frombuffer(blob.read(dim), dtype=np.int8)
        return out

    def all_rows(self) -> np.ndarray:
        """Every live vector's int8 components, as one matrix."""
        if not self._total:
            return np.zeros((0, 0), np.int8)
        data = b"".join(r[0] for r in self.conn.execute("SELECT q FROM vec_blocks ORDER BY block"))
        return np.frombuffer(data, dtype=np.int8).reshape(self._total, -1)[self._stored]
