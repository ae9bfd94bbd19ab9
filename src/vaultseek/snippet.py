"""Snippets: a window of text around the densest cluster of query terms. Pure."""

from __future__ import annotations

import re

WORD_RE = re.compile(r"\w+", re.UNICODE)


def make_snippet(text: str, terms: list[str], width: int = 220) -> str:
    """About `width` characters of `text`, on word boundaries, around where the query's words cluster."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    lowered = [t.lower() for t in terms if t]
    hits = [m.start() for m in WORD_RE.finditer(flat) if _matches(m.group(0).lower(), lowered)]
    if not hits:
        start = 0
    else:
        best, best_count = hits[0], 0
        j = 0
        for i, pos in enumerate(hits):  # sliding window: the start with the most hits within `width`
            while hits[j] < pos - width // 2:
                j += 1
            count = i - j + 1
            if count > best_count:
                best, best_count = hits[j], count
        start = max(0, best - width // 4)
    end = min(len(flat), start + width)
    start = max(0, end - width) if end == len(flat) else start
    if start > 0:
        space = flat.find(" ", start)
        start = space + 1 if 0 <= space < start + 30 else start
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    return ("…" if start > 0 else "") + flat[start:end].strip() + ("…" if end < len(flat) else "")


def _matches(word: str, terms: list[str]) -> bool:
    """A word matches a term if it equals it or shares its stem-ish prefix (porter folds endings)."""
    for t in terms:
        if word == t or (len(t) >= 4 and word.startswith(t[: max(4, len(t) - 2)])):
            return True
    return False
