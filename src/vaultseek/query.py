"""User query text -> words, phrases, exclusions and filters; safe FTS5 expressions. Pure.

Nothing the user types can break FTS5's query syntax: every term is quoted, so quotes, `*`, `:`,
`^`, NEAR, AND/OR/NOT and parentheses are all searched as text.

Chinese, Japanese and Korean are written without spaces between words, so the index stores each
CJK character as its own token and a query's CJK run is searched as overlapping two-character
phrases: `认证失败` finds notes holding `认证` and `失败`, adjacent or not, best when both occur.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import UsageError

CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
CJK_RUN_RE = re.compile(f"[{CJK}]+")
TERM_RE = re.compile(f"[{CJK}]+|(?:(?![{CJK}])\\w)+", re.UNICODE)

# English function words: searched only when the query has nothing else. They match most chunks,
# so leaving them out of OR queries saves time and does not change what ranks first.
STOPWORDS = frozenset(
    """a an and are as at be but by for from has have how i if in into is it its of on or
    that the their then there these they this to was were what when where which who why will with
    do does did can could should would you your we our not no""".split()
)


def is_cjk(term: str) -> bool:
    return bool(CJK_RUN_RE.fullmatch(term))


def query_terms(text: str) -> list[str]:
    """The words (and CJK runs) of a query, lower-cased, in order, without duplicates."""
    return list(dict.fromkeys(t.lower() for t in TERM_RE.findall(text)))


def fts_text(text: str) -> str:
    """The form of a text the FTS index stores: CJK characters spaced apart."""
    if text.isascii() or not CJK_RUN_RE.search(text):
        return text
    return CJK_RUN_RE.sub(lambda m: " " + " ".join(m.group(0)) + " ", text)


def quote_term(term: str) -> str:
    """One FTS5 string: double quotes doubled, so it is always a literal."""
    return '"' + term.replace('"', '""') + '"'


def lexical_phrases(text: str) -> list[str]:
    """What the lexical side searches for: the query's content words, and CJK runs as
    overlapping character pairs ("认 证"). Stopwords count only when there is nothing else."""
    terms = query_terms(text)
    content = [t for t in terms if t not in STOPWORDS] or terms
    phrases: list[str] = []
    for term in content:
        if is_cjk(term) and len(term) > 1:
            phrases.extend(f"{a} {b}" for a, b in zip(term, term[1:]))
        else:
            phrases.append(term)
    return list(dict.fromkeys(phrases))


def any_of(phrases: list[str]) -> str:
    """FTS5 expression: chunks holding at least one of the phrases."""
    return " OR ".join(quote_term(p) for p in phrases)


def fts_match(text: str) -> str | None:
    """An FTS5 expression that ranks chunks holding any of the query's words; None if no words."""
    phrases = lexical_phrases(text)
    return any_of(phrases) if phrases else None


# -- the user's query language: words, "exact phrases", -exclusions and field filters ---------

FILTER_KEYS = {"tag": "tags", "path": "paths", "folder": "paths", "type": "types", "after": "after", "before": "before"}
_TOKEN_RE = re.compile(r'(?P<neg>-)?(?:(?P<key>[A-Za-z]+):)?(?:"(?P<quoted>[^"]*)"|(?P<bare>\S+))')
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class Filters:
    """Restrictions applied to both lists before fusion."""

    tags: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()  # path prefixes relative to the vault ("Projects/" is that folder)
    types: tuple[str, ...] = ()
    after: str | None = None  # ISO date, inclusive, on the note's front-matter date or else its mtime
    before: str | None = None  # ISO date, exclusive

    def __bool__(self) -> bool:
        return bool(self.tags or self.paths or self.types or self.after or self.before)

    def merged(self, other: "Filters") -> "Filters":
        return Filters(
            self.tags + other.tags, self.paths + other.paths, self.types + other.types,
            other.after or self.after, other.before or self.before,
        )


@dataclass(frozen=True)
class Query:
    """A parsed query. `text` is what the embedding model sees (words and phrases, no operators)."""

    raw: str
    text: str
    phrases: tuple[str, ...] = ()  # "exact phrases": every result holds each of them
    excluded: tuple[str, ...] = ()  # -words: no result holds any of them
    filters: Filters = Filters()


def parse_query(raw: str) -> Query:
    """Split a query into free text, "phrases", -exclusions and filters (tag:, path:/folder:,
    type:, after:, before:). Anything else, including unbalanced quotes, is searched as text."""
    raw = raw.replace("\x00", " ")  # NUL cannot be part of an FTS5 string
    text_parts: list[str] = []
    phrases: list[str] = []
    excluded: list[str] = []
    found: dict[str, list[str]] = {"tags": [], "paths": [], "types": []}
    after = before = None
    if raw.count('"') % 2:
        raw_scan = raw.replace('"', " ")  # an unbalanced quote is just a character
    else:
        raw_scan = raw
    for m in _TOKEN_RE.finditer(raw_scan):
        neg, key, quoted, bare = m.group("neg"), m.group("key"), m.group("quoted"), m.group("bare")
        value = quoted if quoted is not None else bare
        field = FILTER_KEYS.get(key.lower()) if key else None
        if field and value and not neg:
            if field in ("after", "before"):
                if not _DATE_RE.fullmatch(value):
                    raise UsageError(f"{key}: needs a date like 2025-01-31, not {value!r}")
                after, before = (value, before) if field == "after" else (after, value)
            else:
                # a path keeps its trailing slash: `path:Proj/` is that folder, `path:Proj` any prefix
                found[field].append(value.strip().lower() if field != "paths" else value.strip().lstrip("/"))
            continue
        literal = f"{key}:{value}" if key else value
        if neg and literal and TERM_RE.search(literal):
            excluded.append(literal)
        elif quoted is not None and not key:
            if TERM_RE.search(quoted):
                phrases.append(quoted)
                text_parts.append(quoted)
        else:
            text_parts.append(("-" if neg else "") + literal)
    return Query(
        raw=raw,
        text=" ".join(text_parts).strip(),
        phrases=tuple(phrases),
        excluded=tuple(excluded),
        filters=Filters(tuple(found["tags"]), tuple(found["paths"]), tuple(found["types"]), after, before),
    )


def phrase_expr(phrase: str) -> str:
    """One FTS5 phrase for an exact phrase the user quoted (CJK spaced as the index stores it)."""
    return quote_term(" ".join(fts_text(phrase).split()))
