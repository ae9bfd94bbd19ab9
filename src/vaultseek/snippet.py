"""Snippets: a window of text around the densest cluster of query terms. Pure."""

from __future__ import annotations

import re

from .query import CJK_RUN_RE


def term_pattern(terms: list[str]) -> re.Pattern[str] | None:
    """A regex matching the query's words in text: the word itself or a longer form of its stem
    (`token` finds `tokens`), and any two-character piece of a CJK run."""
    alternatives: list[str] = []
    for term in terms:
        if not term:
            continue
        if CJK_RUN_RE.fullmatch(term):
            pieces = [term] if len(term) == 1 else [term[i : i + 2] for i in range(len(term) - 1)]
            alternatives.extend(re.escape(p) for p in pieces)
        else:
            stem = term[: max(4, len(term) - 2)] if len(term) > 4 else term
            alternatives.append(rf"\b{re.escape(stem)}\w*")
    if not alternatives:
        return None
    return re.compile("|".join(sorted(set(alternatives), key=len, reverse=True)), re.IGNORECASE)


def make_snippet(text: str, terms: list[str], width: int = 220) -> str:
    """About `width` characters of `text`, on word boundaries, around where the query's words cluster."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    pattern = term_pattern(terms)
    hits = [m.start() for m in pattern.finditer(flat)] if pattern else []
    start = 0
    if hits:
        best, best_count = hits[0], 0
        j = 0
        for i, pos in enumerate(hits):  # sliding window: the start with the most hits within `width`
            while hits[j] < pos - width // 2:
                j += 1
            if i - j + 1 > best_count:
                best, best_count = hits[j], i - j + 1
        start = max(0, best - width // 4)
    end = min(len(flat), start + width)
    if end == len(flat):
        start = max(0, end - width)
    if start > 0:
        space = flat.find(" ", start)
        start = space + 1 if 0 <= space < start + 30 else start
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    return ("…" if start > 0 else "") + flat[start:end].strip() + ("…" if end < len(flat) else "")


def highlight_spans(snippet: str, terms: list[str]) -> list[list[int]]:
    """[start, end) character offsets of the query's words in a snippet, for highlighting."""
    pattern = term_pattern(terms)
    return [[m.start(), m.end()] for m in pattern.finditer(snippet)] if pattern else []
