"""The lexical side: BM25 over FTS5, made forgiving.

- Words the index has never seen are expanded to indexed words they are a prefix of (`useEff` ->
  `useeffect`), else a substring of (`FileW` -> `createfilew`), else corrected to the closest
  indexed word by edit distance, preferring frequent words (`zettelkastn` -> `zettelkasten`).
- FTS5 scores every chunk a query matches, so a query of common words over a big vault would
  score most of it: see `Lexical._words_expr`.
- "Exact phrases" must all occur, -words must not, and filters restrict notes; the same
  constraints are handed to the vector side as a set of admissible chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .query import STOPWORDS, Query, is_cjk, lexical_phrases, phrase_expr, quote_term
from .snippet import term_pattern
from .store.sqlite import SqliteStore

OR_BUDGET = 4_000  # postings an OR query may score before the lexical side narrows it
EXPANSIONS = 4  # indexed words a substring may stand for (each costs its postings)
MIN_SUBSTRING = 4  # shorter parts of words match too many words to be useful
MIN_FIX_LEN = 4  # shorter unknown words are not corrected (too many near neighbours)


@dataclass
class Plan:
    """How a query is searched: the FTS5 expression parts and what was rewritten."""

    words: list[str]  # the query's words and CJK pairs, as typed (lower-cased)
    alternatives: dict[str, list[str]] = field(default_factory=dict)  # unknown word -> indexed words it is part of
    corrections: dict[str, str] = field(default_factory=dict)  # misspelt word -> indexed word (a stem)
    required: list[str] = field(default_factory=list)  # FTS5 phrases every result must hold
    excluded: list[str] = field(default_factory=list)  # FTS5 phrases no result may hold


class Lexical:
    """Plans and runs lexical searches for one store; caches the vocabulary's trigram index."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self._trigram_version: int | None = None
        self._count = 0
        self._count_version: int | None = None

    # -- planning -------------------------------------------------------------------------

    def plan(self, query: Query, fix_typos: bool = True) -> Plan:
        words = lexical_phrases(query.text)
        plan = Plan(words=[])
        for word in words:
            if " " in word or is_cjk(word) or word in STOPWORDS or self.store.doc_freq(word) > 0:
                plan.words.append(word)
                continue
            plan.words.append(word)
            expanded = self._expand(word) if len(word) >= 3 else []
            if expanded:
                plan.alternatives[word] = expanded
                continue
            fixed = self._correct(word) if fix_typos and len(word) >= MIN_FIX_LEN else None
            if fixed:
                plan.corrections[word] = fixed
        plan.required = [phrase_expr(p) for p in query.phrases]
        plan.excluded = [phrase_expr(p) for p in query.excluded]
        return plan

    def _expand(self, word: str) -> list[str]:
        """Indexed words that `word` is the start of (one prefix suffices), else a part of."""
        tokens = self.store.stem(word)
        stem = tokens[0][2] if len(tokens) == 1 else word
        if self.store.terms_with_prefix(stem, 1):
            return [stem]
        return [t for t, _ in self._substring(stem)] if len(stem) >= MIN_SUBSTRING else []

    def _substring(self, part: str) -> list[tuple[str, int]]:
        """Indexed words containing `part` (3+ characters), most frequent first."""
        if len(part) < 3:
            return []
        self._ensure_trigrams()
        return self.store.conn.execute(
            "SELECT term, df FROM temp.vocab_trigrams WHERE term MATCH ? ORDER BY df DESC LIMIT ?", (quote_term(part), EXPANSIONS)
        ).fetchall()

    def _correct(self, word: str) -> str | None:
        """The indexed word closest to `word` (edit distance 1, or 2 for long words), the most
        frequent one on ties. The index holds stems (`hotkeys` -> `hotkei`), so the word is
        compared both as typed and stemmed (`hotkys` -> `hotki`, one edit from `hotkei`)."""
        tokens = self.store.stem(word)
        forms = dict.fromkeys([word] + ([tokens[0][2]] if len(tokens) == 1 else []))
        best = None
        for form in forms:
            found = self._closest(form)
            if found and (best is None or found[:2] < best[:2]):
                best = found
        return best[2] if best else None

    def _closest(self, word: str) -> tuple[int, int, str] | None:
        """(distance, -df, term) of the indexed word nearest to `word`, among the 200 that share
        the most three-letter pieces with it."""
        if len(word) < 3:
            return None
        self._ensure_trigrams()
        pieces = list(dict.fromkeys(word[i : i + 3] for i in range(len(word) - 2)))
        rows = self.store.conn.execute(
            "SELECT term, df FROM temp.vocab_trigrams WHERE term MATCH ? ORDER BY rank LIMIT 200",
            (" OR ".join(quote_term(p) for p in pieces),),
        ).fetchall()
        limit = 1 if len(word) < 8 else 2
        best: tuple[int, int, str] | None = None
        for term, df in rows:
            if abs(len(term) - len(word)) > limit or term.isdigit() or term in STOPWORDS:
                continue
            d = edit_distance(word, term, limit)
            if d <= limit and (best is None or (d, -df) < (best[0], best[1])):
                best = (d, -df, term)
        return best

    def _ensure_trigrams(self) -> None:
        """A trigram index of the vocabulary (every indexed word once), built inside SQLite's temp
        database when first needed: ~0.3 s for 80k words, nothing on disk, rebuilt when the index
        changes."""
        version = self.store.data_version()
        if version == self._trigram_version:
            return
        vocab = self.store.vocabulary_table()
        conn = self.store.conn
        conn.execute("DROP TABLE IF EXISTS temp.vocab_trigrams")
        conn.execute("CREATE VIRTUAL TABLE temp.vocab_trigrams USING fts5(term, df UNINDEXED, tokenize='trigram')")
        conn.execute(f"INSERT INTO temp.vocab_trigrams(term, df) SELECT term, doc FROM {vocab} WHERE length(term) >= 3")
        self._trigram_version = version

    # -- running --------------------------------------------------------------------------

    def search(
        self, plan: Plan, limit: int, where: tuple[str, list[object]] | None = None, proximity: float = 0.0
    ) -> list[tuple[int, float]]:
        """BM25-ranked chunk ids, best first (scores: lower is better, as FTS5's bm25()).

        With `proximity` > 0, chunks where the query's words occur close together move up:
        each score is multiplied by 1 + proximity * closeness (see `closeness`).
        """
        hits = self._bm25(plan, limit, where)
        words = [w for w in plan.words if w not in STOPWORDS]
        if proximity <= 0 or len(words) < 2 or len(hits) < 2:
            return hits
        rows = self.store.fetch_chunks([cid for cid, _ in hits])
        patterns = [term_pattern(plan.alternatives.get(w, [plan.corrections.get(w, w)])) for w in words]
        rescored = [
            (cid, score * (1.0 + proximity * closeness(rows[cid].text, patterns)) if cid in rows else score)
            for cid, score in hits
        ]
        return sorted(rescored, key=lambda h: h[1])

    def _bm25(self, plan: Plan, limit: int, where: tuple[str, list[object]] | None) -> list[tuple[int, float]]:
        tiers = self._word_tiers(plan)
        if not tiers and not plan.required:
            return []
        hits: list[tuple[int, float]] = []
        seen: set[int] = set()
        for expr in tiers or [None]:
            parts = ([f"({expr})"] if expr else []) + plan.required
            match = " AND ".join(parts)
            if plan.excluded:
                match += " NOT (" + " OR ".join(plan.excluded) + ")"
            for cid, score in self.store.bm25(match, limit, where):
                if cid not in seen:
                    seen.add(cid)
                    hits.append((cid, score))
            if len(hits) >= limit:
                break
        return hits[:limit]

    def _word_tiers(self, plan: Plan) -> list[str]:
        """FTS5 expressions for the words, run in order until enough chunks are found.

        Normally one: the OR of the words. FTS5 scores every chunk a query matches, so over a big
        vault words in most chunks are dropped (their IDF is ~0) and, past `OR_BUDGET` postings,
        chunks holding every word come first, then chunks holding the rarest words.
        """
        if not plan.words:
            return []
        expr = {w: self._word_expr(plan, w) for w in plan.words}
        if len(plan.words) == 1:
            return [expr[plan.words[0]]]
        df = {w: self._word_df(plan, w) for w in plan.words}
        if sum(df.values()) <= OR_BUDGET:
            return [" OR ".join(expr[w] for w in plan.words)]
        total = self._chunk_count()
        kept = [w for w in plan.words if df[w] <= total // 2] or plan.words
        if sum(df[w] for w in kept) <= OR_BUDGET or len(kept) == 1:
            return [" OR ".join(expr[w] for w in kept)]
        rare: list[str] = []
        budget = 0
        for w in sorted(kept, key=lambda w: df[w]):
            if rare and budget + df[w] > OR_BUDGET:
                break
            rare.append(w)
            budget += df[w]
        return [" AND ".join(expr[w] for w in kept), " OR ".join(expr[w] for w in rare)]

    def _word_df(self, plan: Plan, word: str) -> int:
        """Chunks a word's expression matches (an upper bound for expansions)."""
        if word in plan.alternatives:
            return sum(self.store.doc_freq(t) for t in plan.alternatives[word])
        return self.store.doc_freq(plan.corrections.get(word, word))

    @staticmethod
    def _word_expr(plan: Plan, word: str) -> str:
        """One word's FTS5 expression. Indexed words (stems) are searched as prefixes: stemming
        a stem again can shorten it, and a prefix query still finds the original."""
        if word in plan.alternatives:
            return "(" + " OR ".join(quote_term(t) + " *" for t in plan.alternatives[word]) + ")"
        if word in plan.corrections:
            return quote_term(plan.corrections[word]) + " *"
        return quote_term(word)

    def _chunk_count(self) -> int:
        version = self.store.data_version()
        if self._count_version != version:
            self._count = self.store.chunk_count()
            self._count_version = version
        return self._count

    # -- constraints for the vector side ---------------------------------------------------

    def admissible(self, plan: Plan, where: tuple[str, list[object]] | None) -> np.ndarray | None:
        """Chunk ids the vector side may return (None: any), from filters, phrases, exclusions."""
        allowed: np.ndarray | None = None
        if where is not None:
            allowed = self.store.filter_ids(where)
        if plan.required:
            ids = self.store.match_ids(" AND ".join(plan.required))
            allowed = ids if allowed is None else np.intersect1d(allowed, ids)
        if plan.excluded:
            banned = self.store.match_ids(" OR ".join(plan.excluded))
            if allowed is None:
                # negative ids: "anything but these" (see Searcher); nothing banned: no constraint
                return -banned - 1 if len(banned) else None
            allowed = np.setdiff1d(allowed, banned)
        return allowed


def closeness(text: str, patterns: list) -> float:
    """How close together the query's words occur in `text`, in [0, 1]: the share of the words
    found in the tightest window that holds the most of them, times how tight that window is
    (1 when the words are next to each other; ~6 characters a word)."""
    marks: list[tuple[int, int]] = []
    for i, pattern in enumerate(patterns):
        if pattern is not None:
            marks.extend((m.start(), i) for m in pattern.finditer(text))
    if not marks:
        return 0.0
    marks.sort()
    n = len(patterns)
    best_k, best_span = 0, 0
    counts: dict[int, int] = {}
    j = 0
    for pos, term in marks:  # sliding window over match positions
        counts[term] = counts.get(term, 0) + 1
        while counts[marks[j][1]] > 1:
            counts[marks[j][1]] -= 1
            j += 1
        k, span = len(counts), pos - marks[j][0]
        if k > best_k or (k == best_k and span < best_span):
            best_k, best_span = k, span
    if best_k < 2:
        return 0.0
    words_apart = best_span / 6.0 + 1
    return (best_k / n) * min(1.0, best_k / words_apart)


def edit_distance(a: str, b: str, limit: int) -> int:
    """Damerau-Levenshtein distance (adjacent transpositions count 1), stopping early past `limit`."""
    if a == b:
        return 0
    prev2: list[int] | None = None
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, start=1):
            cost = 0 if ca == cb else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if prev2 is not None and i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]
