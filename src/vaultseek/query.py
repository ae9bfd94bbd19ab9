"""User query text -> a safe FTS5 MATCH expression, and the text form the FTS index stores. Pure.

Nothing the user types can break FTS5's query syntax: every term is quoted, so quotes, `*`, `:`,
`^`, NEAR, AND/OR/NOT and parentheses are all searched as text.

Chinese, Japanese and Korean are written without spaces between words, so the index stores each
CJK character as its own token and a query's CJK run is searched as overlapping two-character
phrases: `认证失败` finds notes holding `认证` and `失败`, adjacent or not, best when both occur.
"""

from __future__ import annotations

import re

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
    if not CJK_RUN_RE.search(text):
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


def all_of(phrases: list[str]) -> str:
    """FTS5 expression: chunks holding every one of the phrases."""
    return " AND ".join(quote_term(p) for p in phrases)


def fts_match(text: str) -> str | None:
    """An FTS5 expression that ranks chunks holding any of the query's words; None if no words."""
    phrases = lexical_phrases(text)
    return any_of(phrases) if phrases else None
