"""Note -> Chunks, following the note's structure. Pure.

Sections split at H1/H2 headings; a section longer than `max_chars` splits again at H3, then at
paragraphs (blank lines outside code fences), then at lines, and finally at word boundaries, so no
chunk is ever longer than `max_chars`. Headings inside fenced code blocks are not headings.
"""

from __future__ import annotations

from dataclasses import dataclass

from .markdown import HEADING_RE, iter_body_lines
from .types import Chunk, ChunkingParams, Note

@dataclass
class _Block:
    """Lines of the note between two headings of interest."""

    heading: str  # the heading text that opens the block ("" for text before any heading)
    level: int  # heading level (0 for the preamble)
    start: int  # 0-based body line index of the first content line
    lines: list[str]


def _split_at(lines: list[str], start: int, levels: range) -> list[_Block]:
    """Split `lines` into blocks at headings whose level is in `levels` (outside code fences)."""
    blocks = [_Block("", 0, start, [])]
    for i, line, in_code in iter_body_lines("\n".join(lines)):
        m = None if in_code or "#" not in line else HEADING_RE.match(line)
        if m and len(m.group(1)) in levels:
            blocks.append(_Block(m.group(2).strip(), len(m.group(1)), start + i + 1, []))
        else:
            blocks[-1].lines.append(line)
    return blocks


def _paragraphs(lines: list[str], start: int) -> list[tuple[int, str]]:
    """Paragraphs (start line, text), split at blank lines outside code fences."""
    paras: list[tuple[int, str]] = []
    current: list[str] = []
    first = start
    for i, line, in_code in iter_body_lines("\n".join(lines)):
        if not line.strip() and not in_code:
            if current:
                paras.append((first, "\n".join(current)))
            current = []
            continue
        if not current:
            first = start + i
        current.append(line)
    if current:
        paras.append((first, "\n".join(current)))
    return paras


def _hard_split(text: str, max_chars: int) -> list[str]:
    """Split one over-long paragraph at line breaks, then at spaces, then anywhere."""
    pieces: list[str] = []
    while len(text) > max_chars:
        cut = text.rfind("\n", 0, max_chars + 1)
        if cut < max_chars // 2:
            cut = text.rfind(" ", 0, max_chars + 1)
        if cut < max_chars // 2:
            cut = max_chars
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        pieces.append(text)
    return [p for p in pieces if p]


def _pack(paras: list[tuple[int, str]], max_chars: int) -> list[tuple[int, str]]:
    """Greedily pack consecutive paragraphs into pieces of at most `max_chars`."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    buf_start = 0
    size = 0
    for line_no, para in paras:
        for piece in _hard_split(para, max_chars) if len(para) > max_chars else [para]:
            added = len(piece) + (2 if buf else 0)
            if buf and size + added > max_chars:
                out.append((buf_start, "\n\n".join(buf)))
                buf, size = [], 0
            if not buf:
                buf_start = line_no
                added = len(piece)
            buf.append(piece)
            size += added
    if buf:
        out.append((buf_start, "\n\n".join(buf)))
    return out


def heading_context(note: Note) -> str:
    """`Title (alias, alias) | type | tag1, tag2`: the context every chunk of the note carries."""
    title = f"{note.title} ({', '.join(note.aliases)})" if note.aliases else note.title
    parts = [title, note.type]
    if note.tags:
        parts.append(", ".join(note.tags))
    return " | ".join(parts)


def chunk_note(note: Note, params: ChunkingParams = ChunkingParams()) -> list[Chunk]:
    """Split a note into chunks of `min_chars`..`max_chars` characters."""
    lines = note.body.split("\n")
    context = heading_context(note)
    skip = {s.lower() for s in params.skip_sections}
    title_line = ", ".join([note.title, *note.aliases])  # what the model reads first in every chunk
    pieces: list[tuple[str, int, str]] = []  # (section, body line index, text)

    for block in _split_at(lines, 0, range(1, 3)):
        if block.heading.lower() in skip:
            continue
        text = "\n".join(block.lines).strip()
        if len(text) <= params.max_chars:
            pieces.append((block.heading, block.start, text))
            continue
        for sub in _split_at(block.lines, block.start, range(3, 4)):
            section = f"{block.heading} > {sub.heading}" if block.heading and sub.heading else (sub.heading or block.heading)
            if sub.heading.lower() in skip:
                continue
            sub_text = "\n".join(sub.lines).strip()
            if len(sub_text) <= params.max_chars:
                pieces.append((section, sub.start, sub_text))
            else:
                for start, packed in _pack(_paragraphs(sub.lines, sub.start), params.max_chars):
                    pieces.append((section, start, packed))

    chunks: list[Chunk] = []
    for section, start, text in pieces:
        if len(text) < params.min_chars:
            continue
        embed_parts = [p for p in (title_line, section, text) if p]
        chunks.append(
            Chunk(
                seq=len(chunks),
                section=section,
                heading_context=context,
                text=text,
                start_line=note.body_start_line + start,
                embed_text="\n".join(embed_parts),
            )
        )
    return chunks
