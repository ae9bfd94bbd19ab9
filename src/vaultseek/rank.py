"""What happens around fusion: the fusion weights of a query, and note-level priors after it.

- Keyword queries (a few words, not a question) may lean on BM25 (`fusion_weights`; off by default).
- Priors: a short-chunk penalty (on), backlinks and recency (off). Each multiplies a result's fused
  score by a factor near 1 and is reported as one more additive term (`score * (factor - 1)`), so
  a result's terms still add up to its score. The facts they need (each chunk's note and length,
  each note's backlinks and date) are read once per index version into numpy arrays
  (`NoteFacts`), so applying them costs microseconds a query.

Defaults and the figures behind them: docs/evaluation.md, "The ranking defaults and why".
"""

from __future__ import annotations

import datetime
import math
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import numpy as np

from .fusion import Fused
from .query import CJK_RUN_RE, query_terms

if TYPE_CHECKING:
    from .config import SearchSettings
    from .store.sqlite import SqliteStore

DAY = 86_400.0
QUESTION_WORDS = frozenset("how what why when where which who whom whose can could does do did is are should would will".split())


@dataclass(frozen=True)
class NoteFacts:
    """Per-chunk and per-note facts for the priors, as arrays indexed by row."""

    chunk_ids: np.ndarray  # sorted chunk ids
    chunk_file: np.ndarray  # row of the chunk's note in the per-note arrays
    chunk_chars: np.ndarray  # length of the chunk's text
    file_ids: np.ndarray  # the store's file id per note row
    backlinks: np.ndarray  # notes linking to this one
    day: np.ndarray  # the note's date (front matter, else mtime) as seconds since the epoch

    def rows(self, ids: Sequence[int]) -> np.ndarray:
        """Rows of `ids` in the chunk arrays (-1 for ids not in the index any more)."""
        wanted = np.asarray(ids, dtype=np.int64)
        if not len(self.chunk_ids):
            return np.full(len(wanted), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.chunk_ids, wanted), len(self.chunk_ids) - 1)
        return np.where(self.chunk_ids[pos] == wanted, pos, -1)

    def note_of(self, ids: Sequence[int]) -> list[int | None]:
        """The store's file id of each chunk id (None if the chunk is gone)."""
        rows = self.rows(ids)
        return [int(self.file_ids[self.chunk_file[r]]) if r >= 0 else None for r in rows]


def load_facts(store: SqliteStore, ids: Sequence[int] | None = None) -> NoteFacts:
    """Read the facts of the chunks `ids` and their notes (a fraction of a millisecond for a
    result list), or of every chunk and note when `ids` is None (0.15-0.2 s for 100k chunks;
    only backlinks need that, being counted over the whole vault)."""
    if ids is None:
        files = store.conn.execute("SELECT id, path, links, date, mtime_ns FROM files ORDER BY id").fetchall()
        chunks = store.conn.execute("SELECT id, file_id, chars FROM chunks ORDER BY id").fetchall()
        counts = backlink_counts([f[1] for f in files], [f[2] for f in files])
    else:
        wanted = sorted(set(int(i) for i in ids))
        rows = []
        for start in range(0, len(wanted), 500):  # SQLite limits the variables of one statement
            part = wanted[start : start + 500]
            rows += store.conn.execute(
                f"SELECT c.id, c.file_id, c.chars, f.path, f.date, f.mtime_ns FROM chunks c JOIN files f ON f.id = c.file_id "
                f"WHERE c.id IN ({','.join('?' * len(part))}) ORDER BY c.id", part
            ).fetchall()
        chunks = [r[:3] for r in rows]
        files = sorted({(r[1], r[3], "", r[4], r[5]) for r in rows})
        counts = {}
    file_row = {int(f[0]): i for i, f in enumerate(files)}
    day = np.array([_epoch(f[3], f[4]) for f in files], dtype=np.float64)
    return NoteFacts(
        chunk_ids=np.fromiter((c[0] for c in chunks), dtype=np.int64, count=len(chunks)),
        chunk_file=np.fromiter((file_row.get(int(c[1]), 0) for c in chunks), dtype=np.int64, count=len(chunks)),
        chunk_chars=np.fromiter((c[2] for c in chunks), dtype=np.int64, count=len(chunks)),
        file_ids=np.fromiter((f[0] for f in files), dtype=np.int64, count=len(files)),
        backlinks=np.array([counts.get(f[1], 0) for f in files], dtype=np.float64),
        day=day,
    )


def _epoch(date: str | None, mtime_ns: int) -> float:
    if date:
        try:
            return datetime.datetime.fromisoformat(date[:10]).timestamp()
        except ValueError:
            pass
    return mtime_ns / 1e9


def backlink_counts(paths: Sequence[str], links: Iterable[str]) -> dict[str, int]:
    """How many other notes link to each note. Pure.

    `links[i]` holds the [[wiki-link]] targets of `paths[i]` joined by \\x1f. A target names a note
    by file name or by a path suffix, without `.md`, as Obsidian resolves it; when several notes
    match, the one sharing the longest folder prefix with the linking note wins (Obsidian's
    nearest match). A note linking to another several times counts once.
    """
    by_name: dict[str, list[str]] = {}
    for path in paths:
        by_name.setdefault(_stem(path).rsplit("/", 1)[-1], []).append(path)
    counts: dict[str, int] = {}
    for source, raw in zip(paths, links):
        targets = {t.strip().lower().removesuffix(".md") for t in (raw or "").split("\x1f") if t.strip()}
        linked = set()
        for target in targets:
            found = [p for p in by_name.get(target.rsplit("/", 1)[-1], ()) if _stem(p).endswith(target)]
            if found:
                linked.add(max(found, key=lambda p: (len(os.path.commonprefix([p, source])), -len(p))))
        for note in linked - {source}:
            counts[note] = counts.get(note, 0) + 1
    return counts


def _stem(path: str) -> str:
    low = path.lower()
    return low[:-3] if low.endswith(".md") else low


def is_keyword_query(text: str, max_words: int) -> bool:
    """A short query of a few words that is not a question (`CreateFileW`, `canvas plugin`): the
    kind that names what it looks for, where an exact word match matters most. Pure."""
    words = text.split()
    if not words or len(words) > max_words or "?" in text:
        return False
    return words[0].lower() not in QUESTION_WORDS


def fusion_weights(settings: SearchSettings, text: str) -> tuple[float, float]:
    """(BM25, vector) weights for a query: `keyword_bm25_weight` of their sum goes to BM25 for
    keyword queries when it is set (> 0), else the configured weights."""
    if settings.keyword_bm25_weight > 0 and is_keyword_query(text, settings.keyword_max_words):
        total = settings.bm25_weight + settings.vector_weight
        return settings.keyword_bm25_weight * total, (1.0 - settings.keyword_bm25_weight) * total
    return settings.bm25_weight, settings.vector_weight


def reranks(text: str, min_words: int) -> bool:
    """Whether the reranker should read this query: a phrase of at least `min_words` words (on
    one or two words, often a name, a fragment or a misspelling, it lowered the golden set's typo
    and partial queries), without CJK (the default model, all-MiniLM-L6-v2, reads English). Pure."""
    words = query_terms(text)
    return len(words) >= max(min_words, 1) and not any(CJK_RUN_RE.search(w) for w in words)


def prior_names(settings: SearchSettings) -> tuple[str, ...]:
    """The priors `settings` turns on, in the order their terms are reported."""
    names = []
    if settings.short_chunk_penalty > 0 and settings.short_chunk_chars > 0:
        names.append("short")
    if settings.link_weight > 0:
        names.append("links")
    if settings.recency_weight > 0 and settings.recency_half_life_days > 0:
        names.append("recency")
    return tuple(names)


def factors(facts: NoteFacts, ids: Sequence[int], settings: SearchSettings, now: float | None = None) -> dict[str, np.ndarray]:
    """Each active prior's multiplier for each chunk id (1 = no change).

    - short: 1 - penalty * (1 - chars / short_chunk_chars) for chunks shorter than that, so a
      note that is little more than a title and tags does not outrank the note that explains the
      topic (BM25 favours very short chunks, and tags share the title's column weight).
    - links: 1 + link_weight * log(1 + backlinks) / log(1 + most backlinks of any note).
    - recency: 1 - recency_weight + recency_weight * 0.5 ** (age in days / half-life).
    """
    rows = facts.rows(ids)
    ok = rows >= 0
    r = np.where(ok, rows, 0)
    out: dict[str, np.ndarray] = {}
    for name in prior_names(settings):
        if name == "short":
            chars = facts.chunk_chars[r].astype(np.float64)
            short = np.clip(1.0 - chars / settings.short_chunk_chars, 0.0, 1.0)
            f = 1.0 - settings.short_chunk_penalty * short
        elif name == "links":
            top = float(facts.backlinks.max()) if len(facts.backlinks) else 0.0
            scale = math.log1p(top) or 1.0
            f = 1.0 + settings.link_weight * np.log1p(facts.backlinks[facts.chunk_file[r]]) / scale
        else:
            age = np.maximum(0.0, ((time.time() if now is None else now) - facts.day[facts.chunk_file[r]]) / DAY)
            f = 1.0 - settings.recency_weight + settings.recency_weight * np.power(0.5, age / settings.recency_half_life_days)
        out[name] = np.where(ok, f, 1.0)
    return out


def in_candidates(x: Fused, cut: int) -> bool:
    """Whether a fused result is within the first `cut` of one of its lists. The steps after
    fusion look only at such results, so a list read deeper (`eval` asks for 300) ranks its top
    exactly as a `-k 10` search does."""
    return any(r is not None and r <= cut for r in x.ranks)


def note_support(fused: list[Fused], notes: Sequence[int | None], weight: float, max_rank: int) -> list[Fused]:
    """Each result gains `weight` × the score of the best other chunk of its note, and the list is
    re-sorted: of two notes whose best sections score alike, the one with a second matching section
    is the likelier answer. Pure.

    Only results within the first `max_rank` of some list take part (give or get support; see
    `in_candidates`). The change is reported as one more term, so the terms still add up to the score.
    """
    if weight <= 0 or not fused:
        return fused
    eligible = [in_candidates(x, max_rank) for x in fused]
    top_two: dict[int, list[tuple[object, float]]] = {}
    for x, note, ok in zip(fused, notes, eligible):  # `fused` is best first
        if ok and note is not None and len(top_two.setdefault(note, [])) < 2:
            top_two[note].append((x.id, x.score))
    out = []
    for i, (x, note, ok) in enumerate(zip(fused, notes, eligible)):
        others = [score for cid, score in top_two.get(note, ()) if cid != x.id] if ok and note is not None else []
        bonus = weight * others[0] if others else 0.0
        out.append((-(x.score + bonus), i, Fused(x.id, x.score + bonus, x.ranks, x.terms + (bonus,))))
    out.sort(key=lambda t: t[:2])
    return [x for _, _, x in out]


def apply_priors(fused: list[Fused], multipliers: Mapping[str, np.ndarray]) -> list[Fused]:
    """Multiply each result's score by its priors, one reported term per prior, and re-sort.

    The terms stay additive: a prior's term is the change it made to the score, so
    sum(terms) == score. Ties keep the fused order.
    """
    if not multipliers or not fused:
        return fused
    columns = list(multipliers.values())
    out = []
    for i, x in enumerate(fused):
        score = x.score
        extra = []
        for f in columns:
            new = score * float(f[i])
            extra.append(new - score)
            score = new
        out.append((-score, i, Fused(x.id, score, x.ranks, x.terms + tuple(extra))))
    out.sort(key=lambda t: t[:2])
    return [x for _, _, x in out]
