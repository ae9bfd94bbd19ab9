"""Plain data passed between the pure modules, the store and the front ends. No I/O here."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Note:
    """A parsed Markdown note (front matter split off, body kept verbatim)."""

    path: str  # relative to the vault root, with forward slashes
    title: str  # front-matter title, else first H1, else the file name
    body: str  # text after the front matter
    tags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    type: str = "note"
    date: str | None = None  # ISO date from front matter (date/created/updated), if any
    private: bool = False  # front matter asks not to index this note
    explicit_title: str | None = None  # title from front matter or H1 (not from the file name)
    links: tuple[str, ...] = ()  # [[wiki-link]] targets
    body_start_line: int = 1  # 1-based line of the file where the body starts
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Chunk:
    """One searchable piece of a note: a section (or part of one) with its context."""

    seq: int  # position within the note
    section: str  # heading path of the section, e.g. "Setup > Tokens"; "" before the first heading
    heading_context: str  # "Title | type | tag1, tag2"
    text: str  # the chunk's text, already scrubbed of credentials
    start_line: int  # 1-based line in the note file where the chunk starts
    embed_text: str  # what the embedding model sees


@dataclass(frozen=True)
class Hit:
    """One search result after fusion."""

    chunk_id: int
    path: str
    section: str
    heading_context: str
    text: str
    score: float
    bm25_rank: int | None
    vec_rank: int | None
    start_line: int = 1
    snippet: str = ""
    terms: dict[str, float] = field(default_factory=dict)  # fusion terms, for --explain


SKIP_SECTIONS = ("related", "see also", "links", "references")


@dataclass(frozen=True)
class ChunkingParams:
    """The knobs that shape chunks; part of the index fingerprint."""

    max_chars: int = 2000
    min_chars: int = 30
    skip_sections: tuple[str, ...] = SKIP_SECTIONS

    def fingerprint(self) -> str:
        return f"chunk-v3:{self.max_chars}:{self.min_chars}:{','.join(sorted(self.skip_sections))}"
