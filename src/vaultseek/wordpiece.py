"""A pure-Python BERT WordPiece tokenizer, token-for-token equal to the `tokenizers` library's
for BertNormalizer + BertPreTokenizer + WordPiece models (potion-base-8M is one).

Loading the Rust tokenizer from tokenizer.json takes ~40 ms; a one-off search only needs to
tokenize a short query, which this does in microseconds after reading the vocabulary.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import unicodedata
from pathlib import Path

# CJK Unified Ideographs blocks that BERT splits into single characters (not kana or hangul).
_CJK_BLOCKS = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


class WordPiece:
    """Tokenizes text into vocabulary ids exactly as the BERT tokenizer in tokenizer.json."""

    def __init__(self, vocab: dict[str, int], unk: str = "[UNK]", prefix: str = "##", max_chars: int = 100) -> None:
        self.vocab = vocab
        self.unk = unk
        self.unk_id = vocab.get(unk)
        self.prefix = prefix
        self.max_chars = max_chars

    @classmethod
    def from_tokenizer_json(cls, path: Path, cache_dir: Path | None = None) -> "WordPiece | None":
        """The tokenizer described by `path`, or None if it is not a plain lower-casing BERT one.

        Parsing the 700 KB JSON costs ~12 ms a process; with `cache_dir`, the result is kept
        there in marshal form (~2 ms to read), keyed by the file's path, size and mtime."""
        cached = _cache_file(path, cache_dir)
        if cached is not None:
            try:
                args = marshal.loads(cached.read_bytes())
                return cls(*args) if args else None
            except (OSError, EOFError, ValueError, TypeError):
                pass
        made = cls._parse(path)
        if cached is not None:
            try:
                cached.parent.mkdir(parents=True, exist_ok=True)
                tmp = cached.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_bytes(marshal.dumps((made.vocab, made.unk, made.prefix, made.max_chars) if made else ()))
                os.replace(tmp, cached)
            except OSError:
                pass  # a read-only cache only costs time
        return made

    @classmethod
    def _parse(cls, path: Path) -> "WordPiece | None":
        spec = json.loads(path.read_text(encoding="utf-8"))
        norm, pre, model = spec.get("normalizer") or {}, spec.get("pre_tokenizer") or {}, spec.get("model") or {}
        plain_bert = (
            norm.get("type") == "BertNormalizer" and norm.get("clean_text") and norm.get("handle_chinese_chars")
            and norm.get("lowercase") and norm.get("strip_accents") in (None, True)
            and pre.get("type") == "BertPreTokenizer" and model.get("type") == "WordPiece"
            and not spec.get("added_tokens_decoder_special_only")
        )
        if not plain_bert:
            return None
        return cls(model["vocab"], model.get("unk_token", "[UNK]"), model.get("continuing_subword_prefix", "##"), model.get("max_input_chars_per_word", 100))

    def ids(self, text: str) -> list[int]:
        out: list[int] = []
        for word in _pre_tokenize(_normalize(text)):
            out.extend(self._word_ids(word))
        return out

    def _word_ids(self, word: str) -> list[int]:
        unk = [self.unk_id] if self.unk_id is not None else []
        if len(word) > self.max_chars:
            return unk
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return unk
            ids.append(found)
            start = end
        return ids


def _cache_file(path: Path, cache_dir: Path | None) -> Path | None:
    if cache_dir is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    key = hashlib.blake2b(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode(), digest_size=10).hexdigest()
    return cache_dir / f"wordpiece-{key}.marshal"


def _normalize(text: str) -> str:
    """BertNormalizer: drop control characters, spaces for whitespace, CJK ideographs spaced,
    accents stripped, lower case."""
    out: list[str] = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD:
            continue
        if ch in "\t\n\r" or unicodedata.category(ch) == "Zs" or ch == " ":
            out.append(" ")
            continue
        if unicodedata.category(ch).startswith("C"):
            continue
        if any(lo <= cp <= hi for lo, hi in _CJK_BLOCKS):
            out.append(f" {ch} ")
            continue
        out.append(ch)
    text = "".join(out)
    text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    return text.lower()


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _pre_tokenize(text: str) -> list[str]:
    """BertPreTokenizer: split on whitespace, and each punctuation character on its own."""
    words: list[str] = []
    for chunk in text.split():
        current: list[str] = []
        for ch in chunk:
            if _is_punct(ch):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(ch)
            else:
                current.append(ch)
        if current:
            words.append("".join(current))
    return words
