"""Chunk text compression: zlib primed with a dictionary sampled from the vault itself.

Chunks are short (a few hundred to 2,000 characters), too short for zlib to find much repetition
on its own; a 32 KB dictionary of the vault's own phrasing makes them about 30% smaller than plain
zlib (measured on win32-17k: 0.19 vs 0.27 of the raw size).
"""

from __future__ import annotations

import random
import zlib
from typing import Sequence

DICT_BYTES = 32 * 1024
SLICE_BYTES = 200
PLAIN, WITH_DICT = b"\x00", b"\x01"


def train_dictionary(texts: Sequence[str], seed: int = 0) -> bytes:
    """A zlib preset dictionary: slices of sample texts (zlib favours the dictionary's end)."""
    if not texts:
        return b""
    rng = random.Random(seed)
    picks = rng.sample(list(texts), min(len(texts), 4 * DICT_BYTES // SLICE_BYTES))
    out = bytearray()
    for text in picks:
        out += text.encode("utf-8")[:SLICE_BYTES]
        if len(out) >= DICT_BYTES:
            break
    return bytes(out[-DICT_BYTES:])


class TextPacker:
    """Compresses and decompresses chunk bodies with one dictionary."""

    def __init__(self, dictionary: bytes = b"") -> None:
        self.dictionary = dictionary
        # Level 4: 0.197 of raw size at 70% of level 6's time (0.188); measured on win32-17k chunks.
        self._primed = zlib.compressobj(4, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, dictionary) if dictionary else None

    def pack(self, text: str) -> bytes:
        data = text.encode("utf-8")
        if self._primed is None:
            return PLAIN + zlib.compress(data, 6)
        co = self._primed.copy()  # priming a fresh object with the dictionary costs more than the copy
        return WITH_DICT + co.compress(data) + co.flush()

    def unpack(self, blob: bytes) -> str:
        kind, body = blob[:1], blob[1:]
        if kind == WITH_DICT:
            return zlib.decompressobj(zdict=self.dictionary).decompress(body).decode("utf-8")
        return zlib.decompress(body).decode("utf-8")
