"""Obsidian-flavoured Markdown -> Note: front matter, title, tags, aliases, wiki-links. Pure."""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import PurePosixPath
from typing import Any

from .types import Note

FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
# Starts with the literal '#' so the regex engine can skip ahead; the character before it is checked in code.
INLINE_TAG_RE = re.compile(r"#([A-Za-z_\u00C0-\uFFFF][\w/\-\u00C0-\uFFFF]*)")
H1_RE = re.compile(r"^ {0,3}#[ \t]+([^\n]*?)[ \t#]*$", re.MULTILINE)
WIKILINK_RE = re.compile(r"!?\[\[([^\]|#^]+)(?:[#^][^\]|]*)?(?:\|[^\]]*)?\]\]")
DATE_KEYS = ("date", "created", "updated", "modified")


def split_front_matter(text: str) -> tuple[str | None, str, int]:
    """Split a leading `---` YAML block off `text`.

    Returns (yaml_text or None, body, number of lines the front matter took).
    """
    if not text.startswith("---"):
        return None, text, 0
    lines = text.split("\n")
    if lines[0].rstrip() != "---":
        return None, text, 0
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :]), i + 1
    return None, text, 0


_SIMPLE_KEY_RE = re.compile(r"([A-Za-z_][\w.\-]*):(?:[ \t]+(.*?))?[ \t]*$")
_PLAIN_VALUE_RE = re.compile(r"[^\[\]{}&*!|>%@`#'\"][^#]*|'[^']*'|\"[^\"\\]*\"")


def simple_front_matter(text: str) -> dict[str, Any] | None:
    """Parse the common, simple front matter (`key: value`, `key: [a, b]`, `key:` then `- item`
    lines) without YAML, which costs ~0.15 ms a note; None when anything looks less simple."""
    out: dict[str, Any] = {}
    key: str | None = None
    for line in text.split("\n"):
        if not line.strip():
            continue
        if line.startswith(("- ", "  - ")) and key is not None and isinstance(out.get(key), list):
            item = line.split("- ", 1)[1].strip()
            if not _PLAIN_VALUE_RE.fullmatch(item):
                return None
            out[key].append(_unquote(item))
            continue
        m = _SIMPLE_KEY_RE.fullmatch(line)
        if not m:
            return None
        key, value = m.group(1), m.group(2)
        if key in out:
            return None  # YAML would complain about the duplicate; let it
        if not value:
            out[key] = []
        elif value.startswith("[") and value.endswith("]"):
            items = [v.strip() for v in value[1:-1].split(",")]
            if not all(_PLAIN_VALUE_RE.fullmatch(v) for v in items if v):
                return None
            out[key] = [_unquote(v) for v in items if v]
        elif _PLAIN_VALUE_RE.fullmatch(value) and ": " not in value:
            out[key] = _scalar(_unquote(value), quoted=value[0] in "'\"")
        else:
            return None
    return {k: (v if v != [] else None) for k, v in out.items()}


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _scalar(value: str, quoted: bool) -> Any:
    """YAML's reading of the plain scalars front matter uses: booleans, null, integers; the
    rest stays text (dates are read by `_as_date` either way)."""
    if quoted:
        return value
    low = value.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("null", "~"):
        return None
    if re.fullmatch(r"[-+]?\d+", value):
        return int(value)
    return value


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in re.split(r"[,\s]+", value) if v]
    if isinstance(value, (list, tuple, set)):
        out: list[str] = []
        for v in value:
            out.extend(_as_list(v) if isinstance(v, str) else ([str(v)] if v is not None else []))
        return out
    return [str(value)]


def _clean_tag(tag: str) -> str:
    return tag.strip().lstrip("#").strip()


def _as_date(value: Any) -> str | None:
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()[:10]
    if isinstance(value, str):
        m = re.match(r"\d{4}-\d{2}-\d{2}", value.strip())
        return m.group(0) if m else None
    return None


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1", "on")
    return bool(value)


def iter_body_lines(body: str):
    """Yield (line_index, line, in_code) for each line, tracking fenced code blocks."""
    fence: str | None = None
    for i, line in enumerate(body.split("\n")):
        m = FENCE_RE.match(line) if ("`" in line or "~" in line) else None
        if fence is None:
            if m:
                fence = m.group(1)
                yield i, line, True
                continue
            yield i, line, False
        else:
            yield i, line, True
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)) :].strip():
                fence = None


def parse_note(path: str, text: str, private_tags: tuple[str, ...] = ("private",)) -> Note:
    """Parse a note's text. A malformed front matter block is kept as body text, with a warning."""
    warnings: list[str] = []
    fm_text, body, fm_lines = split_front_matter(text)
    meta: dict[str, Any] = {}
    if fm_text is not None:
        import yaml  # only the indexer parses front matter; keep search start-up light

        try:
            loaded = simple_front_matter(fm_text)
            if loaded is None:
                loaded = yaml.load(fm_text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 2})" if mark is not None else ""
            warnings.append(f"malformed front matter{where}; indexed as text")
            body, fm_lines = text, 0
        else:
            if isinstance(loaded, dict):
                meta = {str(k).lower(): v for k, v in loaded.items()}
            elif loaded is not None:
                warnings.append("front matter is not a key/value mapping; indexed as text")
                body, fm_lines = text, 0

    tags = [_clean_tag(t) for t in _as_list(meta.get("tags", meta.get("tag")))]
    aliases = [str(a).strip() for a in _as_list_keep_spaces(meta.get("aliases", meta.get("alias")))]
    prose = body if ("```" not in body and "~~~" not in body) else "\n".join(line for _, line, code in iter_body_lines(body) if not code)
    m = H1_RE.search(prose)
    h1 = m.group(1).strip() if m else None
    if "#" in prose:
        tags.extend(m.group(1) for m in INLINE_TAG_RE.finditer(prose) if m.start() == 0 or prose[m.start() - 1].isspace())
    links = [t.strip() for t in WIKILINK_RE.findall(prose)] if "[[" in prose else []

    fm_title = meta.get("title")
    explicit_title = str(fm_title).strip() if fm_title not in (None, "") else h1
    title = explicit_title or PurePosixPath(path).stem
    seen: set[str] = set()
    unique_tags = tuple(t for t in tags if t and not (t.lower() in seen or seen.add(t.lower())))
    date = next((d for d in (_as_date(meta.get(k)) for k in DATE_KEYS) if d), None)
    private = (
        _truthy(meta.get("private", False))
        or any(is_private_tag(t, private_tags) for t in unique_tags)
        or (fm_text is not None and not meta and _private_hint(fm_text, private_tags))
    )
    return Note(
        path=path,
        title=title,
        body=body,
        tags=unique_tags,
        aliases=tuple(a for a in aliases if a),
        type=str(meta.get("type") or "note").strip() or "note",
        date=date,
        private=private,
        explicit_title=explicit_title,
        links=tuple(dict.fromkeys(links)),
        warnings=tuple(warnings),
        body_start_line=fm_lines + 1,
    )


def is_private_tag(tag: str, private_tags: tuple[str, ...]) -> bool:
    """`private` and its nested tags (`private/health`) are private."""
    low = tag.lower()
    return any(low == p or low.startswith(p + "/") for p in private_tags)


def _private_hint(fm_text: str, private_tags: tuple[str, ...]) -> bool:
    """Front matter that YAML cannot read still counts as private if a line says so: fail closed."""
    for line in fm_text.split("\n"):
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip().strip("'\"").lower()
        if key == "private" and value in ("true", "yes", "on", "1"):
            return True
        if key in ("tags", "tag") and any(is_private_tag(t, private_tags) for t in re.split(r"[\s,\[\]#'\"]+", value) if t):
            return True
    return False


def _as_list_keep_spaces(value: Any) -> list[str]:
    """Aliases may contain spaces: only split lists, never strings (except on commas)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None]
    return [str(value)]
