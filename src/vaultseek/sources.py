"""External material (`vaultseek add URL|FILE --ttl 24h`), kept apart from the vault.

Each added page or file becomes a Markdown file in its own folder beside the index
(`index.db.sources/notes/`), indexed into its own index (`index.db.sources/index.db`) with the same
pipeline as notes (credentials scrubbed first), and listed in `sources.json` with where it came
from, when it was fetched, its TTL and when a search last used it. The vault is never written.

A source is refetched once its TTL has passed (by `vaultseek add`, or in the background when the
hook or the MCP server uses it), and dropped when no search has used it for `UNUSED_DAYS` days.
The hook and the MCP server search the sources along with the vault (`SourceSearch`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

from .errors import UsageError, VaultseekError

log = logging.getLogger("vaultseek")

DEFAULT_TTL = "24h"
UNUSED_DAYS = 14
MAX_BYTES = 5 * 1024 * 1024  # a larger page or file is refused
FETCH_TIMEOUT_SECONDS = 20
USE_MARK_SECONDS = 3600  # `last_used_at` is written at most this often per source
TEXT_SUFFIXES = (".md", ".markdown", ".txt")
HTML_SUFFIXES = (".html", ".htm")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_ttl(text: str) -> int:
    """Seconds in a TTL like `90s`, `30m`, `24h`, `7d`, `2w` (a bare number is seconds)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text or "", re.IGNORECASE)
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"not a TTL: {text!r}", hint="use a number with s, m, h, d or w, e.g. 24h or 7d")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "s").lower()])


def sources_root(db_path: Path) -> Path:
    """The folder of one index's external sources (beside it, so several indexes never share one)."""
    return db_path.with_name(db_path.name + ".sources")


# -- fetching and converting -------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _converter() -> type:
    """The HTML-to-Markdown parser class, built on first use (the hook and the MCP server import
    this module on every question, and need no HTML parser)."""
    from html.parser import HTMLParser

    class _HtmlToMarkdown(HTMLParser):
        """Just enough HTML to Markdown for reading and search: headings, paragraphs, list items and
        preformatted blocks; scripts, styles and page furniture (nav, header, footer) are dropped."""

        SKIP = {"script", "style", "noscript", "nav", "header", "footer", "svg", "template", "head"}
        BLOCK = {"p", "div", "section", "article", "main", "br", "tr", "table", "blockquote", "ul", "ol", "dl", "dd", "dt", "hr"}

        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.out: list[str] = []
            self.title = ""
            self._skip = 0
            self._in_title = False
            self._pre = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag in self.SKIP:
                self._skip += 1
            elif tag == "title":
                self._in_title = True
            elif self._skip:
                return
            elif re.fullmatch(r"h[1-6]", tag):
                self.out.append("\n\n" + "#" * int(tag[1]) + " ")
            elif tag == "li":
                self.out.append("\n- ")
            elif tag == "pre":
                self._pre += 1
                self.out.append("\n\n```\n")
            elif tag in self.BLOCK:
                self.out.append("\n\n")

        def handle_endtag(self, tag: str) -> None:
            if tag in self.SKIP:
                self._skip = max(0, self._skip - 1)
            elif tag == "title":
                self._in_title = False
            elif self._skip:
                return
            elif tag == "pre" and self._pre:
                self._pre -= 1
                self.out.append("\n```\n\n")
            elif re.fullmatch(r"h[1-6]", tag) or tag in self.BLOCK:
                self.out.append("\n\n")

        def handle_data(self, data: str) -> None:
            if self._in_title:
                self.title += data
            elif not self._skip:
                self.out.append(data if self._pre else re.sub(r"\s+", " ", data))

        def markdown(self) -> str:
            lines: list[str] = []
            fenced = False
            for line in "".join(self.out).split("\n"):
                if line.strip() == "```":
                    fenced = not fenced
                    lines.append("```")
                else:
                    lines.append(line.rstrip() if fenced else line.strip())  # keep indentation in code
            return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"

    return _HtmlToMarkdown


def html_to_markdown(html: str) -> tuple[str, str]:
    """(title, Markdown body) of an HTML page."""
    parser = _converter()()
    parser.feed(html)
    parser.close()
    return " ".join(parser.title.split()), parser.markdown()


@dataclass(frozen=True)
class Fetched:
    title: str
    body: str  # Markdown


def fetch(origin: str) -> Fetched:
    """The text of a URL (http or https) or a local file, as Markdown."""
    if re.match(r"^[a-z][a-z0-9+.-]*://", origin, re.IGNORECASE):
        return _fetch_url(origin)
    return _read_file(Path(origin).expanduser())


def _fetch_url(url: str) -> Fetched:
    import urllib.error
    import urllib.request

    from . import __version__

    if not url.lower().startswith(("http://", "https://")):
        raise UsageError(f"only http and https URLs can be added, not {url!r}")
    request = urllib.request.Request(url, headers={"User-Agent": f"vaultseek/{__version__}", "Accept": "text/html, text/markdown, text/plain"})
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_SECONDS) as response:
            data = response.read(MAX_BYTES + 1)
            kind = (response.headers.get_content_type() or "").lower()
            charset = response.headers.get_content_charset() or "utf-8"
    except urllib.error.HTTPError as exc:
        raise VaultseekError(f"{url}: HTTP {exc.code} {exc.reason}", hint="check the URL") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise VaultseekError(f"cannot fetch {url}: {reason}", hint="check the URL and your network connection") from None
    if len(data) > MAX_BYTES:
        raise UsageError(f"{url} is larger than {MAX_BYTES // (1024 * 1024)} MB; not added")
    text = data.decode(charset, errors="replace")
    if kind in ("text/html", "application/xhtml+xml"):
        title, body = html_to_markdown(text)
        return Fetched(title or _title_from(url), body)
    if kind.startswith("text/") or kind in ("application/markdown", ""):
        return Fetched(_title_from(url), text)
    raise UsageError(f"{url} is {kind}, not text or HTML; not added", hint="add HTML, Markdown or plain-text pages")


def _read_file(path: Path) -> Fetched:
    if not path.is_file():
        raise UsageError(f"not found: {path}", hint="pass a URL (http/https) or the path of a Markdown, text or HTML file")
    suffix = path.suffix.lower()
    if suffix not in TEXT_SUFFIXES + HTML_SUFFIXES:
        raise UsageError(f"{path.name}: only Markdown, text and HTML files can be added")
    if path.stat().st_size > MAX_BYTES:
        raise UsageError(f"{path} is larger than {MAX_BYTES // (1024 * 1024)} MB; not added")
    text = path.read_bytes().decode("utf-8", errors="replace")
    if suffix in HTML_SUFFIXES:
        title, body = html_to_markdown(text)
        return Fetched(title or path.stem, body)
    return Fetched(path.stem, text)


def _title_from(url: str) -> str:
    tail = [p for p in re.split(r"[/?#]", url.split("://", 1)[-1]) if p]
    return tail[-1] if len(tail) > 1 else tail[0] if tail else url


# -- the manifest ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    origin: str  # the URL, or the absolute path of the file
    file: str  # the Markdown file's name in notes/
    title: str
    ttl_seconds: int
    added_at: float
    fetched_at: float
    last_used_at: float
    sha256: str


class Sources:
    """One index's external sources: the manifest, the Markdown files and their index."""

    def __init__(self, db_path: Path) -> None:
        self.root = sources_root(db_path)
        self.notes = self.root / "notes"
        self.db = self.root / "index.db"
        self.manifest = self.root / "sources.json"

    def load(self) -> list[Source]:
        try:
            data = json.loads(self.manifest.read_text(encoding="utf-8"))
            return [Source(**item) for item in data.get("sources", [])]
        except FileNotFoundError:
            return []
        except (ValueError, TypeError, AttributeError) as exc:
            raise VaultseekError(f"{self.manifest} is damaged ({exc})", hint=f"delete {self.root} and add the sources again") from None

    def save(self, sources: list[Source]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest.with_name(f"{self.manifest.name}.{os.getpid()}.tmp")
        data = {"version": 1, "sources": [asdict(s) for s in sorted(sources, key=lambda s: s.origin)]}
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, self.manifest)

    def _write(self, origin: str, fetched: Fetched, now: float) -> tuple[str, str]:
        """Write the Markdown file for a source; (file name, sha256 of the text)."""
        slug = re.sub(r"[^a-z0-9]+", "-", fetched.title.lower()).strip("-")[:60] or "source"
        name = f"{slug}-{hashlib.sha256(origin.encode('utf-8')).hexdigest()[:8]}.md"
        def quoted(value: str) -> str:  # one line, double-quoted, nothing to escape
            return '"' + " ".join(value.replace('"', "'").replace("\\", "/").split()) + '"'

        date = time.strftime("%Y-%m-%d", time.gmtime(now))
        text = f"---\ntitle: {quoted(fetched.title or name)}\ntype: external\ntags: [external]\nsource: {quoted(origin)}\nfetched: {date}\n---\n{fetched.body}"
        digest = hashlib.sha256(fetched.body.encode("utf-8")).hexdigest()
        self.notes.mkdir(parents=True, exist_ok=True)
        path = self.notes / name
        if not path.exists() or hashlib.sha256(_body_of(path).encode("utf-8")).hexdigest() != digest:
            path.write_text(text, encoding="utf-8")
        return name, digest

    def add(self, origin: str, ttl_seconds: int, now: float | None = None, fetcher: Callable[[str], Fetched] = fetch) -> Source:
        """Fetch `origin` now and keep it (replacing an earlier copy); the index is not updated."""
        now = time.time() if now is None else now
        if not re.match(r"^[a-z][a-z0-9+.-]*://", origin, re.IGNORECASE):
            origin = str(Path(origin).expanduser().resolve())
        fetched = fetcher(origin)
        name, digest = self._write(origin, fetched, now)
        known = self.load()
        old = next((s for s in known if s.origin == origin), None)
        if old is not None and old.file != name:
            (self.notes / old.file).unlink(missing_ok=True)  # the title changed, so did the file name
        source = Source(origin, name, fetched.title, ttl_seconds, old.added_at if old else now, now, now, digest)
        self.save([s for s in known if s.origin != origin] + [source])
        return source

    def maintain(self, now: float | None = None, fetcher: Callable[[str], Fetched] = fetch) -> dict[str, list[str]]:
        """Drop sources unused for UNUSED_DAYS days and refetch those past their TTL (a failed
        refetch keeps the old copy). Returns the origins {"dropped": [...], "refreshed": [...], "failed": [...]}."""
        now = time.time() if now is None else now
        report: dict[str, list[str]] = {"dropped": [], "refreshed": [], "failed": []}
        kept: list[Source] = []
        for source in self.load():
            if now - source.last_used_at > UNUSED_DAYS * 86400:
                (self.notes / source.file).unlink(missing_ok=True)
                report["dropped"].append(source.origin)
                continue
            if now - source.fetched_at >= source.ttl_seconds:
                try:
                    fetched = fetcher(source.origin)
                except VaultseekError as exc:
                    log.warning("could not refetch %s: %s (keeping the copy from %s)", source.origin, str(exc).splitlines()[0],
                                time.strftime("%Y-%m-%d %H:%M", time.localtime(source.fetched_at)))
                    report["failed"].append(source.origin)
                else:
                    name, digest = self._write(source.origin, fetched, now)
                    if name != source.file:
                        (self.notes / source.file).unlink(missing_ok=True)
                    source = replace(source, file=name, title=fetched.title, fetched_at=now, sha256=digest)
                    report["refreshed"].append(source.origin)
            kept.append(source)
        if report["dropped"] or report["refreshed"]:
            self.save(kept)
        return report

    def reindex(self) -> Any:
        """Bring the sources' index in step with their files; returns the index summary."""
        from .config import Config
        from .indexer import Indexer
        from .store.sqlite import SqliteStore

        self.notes.mkdir(parents=True, exist_ok=True)
        store = SqliteStore(self.db)
        try:
            return Indexer(self.notes, store, Config()).run()
        finally:
            store.close()

    def mark_used(self, files: set[str], now: float | None = None) -> None:
        """Record that searches returned these files (at most once an hour per source)."""
        now = time.time() if now is None else now
        try:
            sources = self.load()
        except VaultseekError:
            return
        if not any(s.file in files and now - s.last_used_at >= USE_MARK_SECONDS for s in sources):
            return
        try:
            self.save([replace(s, last_used_at=now) if s.file in files else s for s in sources])
        except OSError as exc:
            log.debug("could not record source use: %s", exc)

    def text_of(self, origin: str) -> str | None:
        """The stored Markdown of the source fetched from `origin`, or None if there is none."""
        try:
            source = next((s for s in self.load() if s.origin == origin), None)
        except VaultseekError:
            return None
        if source is None or not re.fullmatch(r"[a-z0-9-]+-[0-9a-f]{8}\.md", source.file):
            return None
        try:
            return (self.notes / source.file).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def due(self, now: float | None = None) -> bool:
        """Whether some source is past its TTL or unused for too long (a refresh has work to do)."""
        now = time.time() if now is None else now
        try:
            return any(now - s.fetched_at >= s.ttl_seconds or now - s.last_used_at > UNUSED_DAYS * 86400 for s in self.load())
        except VaultseekError:
            return False


def _body_of(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end >= 0:
            return text[end + 5 :]
    return text


def refresh_in_background(db_path: Path) -> None:
    """Start `vaultseek add --refresh` for this index, detached (at most once an hour)."""
    from .detached import start_detached

    sources = Sources(db_path)
    start_detached(["add", "--refresh", "--db", str(db_path.resolve())], sources.root / ".refresh-started", USE_MARK_SECONDS)


# -- searching the sources alongside the vault -----------------------------------------------------


class SourceSearch:
    """The sources' index, opened when it exists, for the hook and the MCP server.

    Hits come back with `path` set to the source's origin (its URL or file), so a reader sees where
    the text came from. Using a source records it (see `Sources.mark_used`), and a source past its
    TTL is refetched in the background.
    """

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self.sources = Sources(db_path)
        self._store: Any = None
        self.searcher: Any = None
        self._origins: dict[str, str] = {}
        self._manifest_mtime: int | None = None

    def available(self) -> bool:
        return self.sources.db.is_file() and self.sources.manifest.is_file()

    @property
    def store(self) -> Any:
        return self._store

    def open(self) -> None:
        """Open the sources' index (once) and re-read the manifest when it changed."""
        from .search import Searcher
        from .store.sqlite import SqliteStore

        if self.searcher is None:
            self._store = SqliteStore(self.sources.db, readonly=True)
            self.searcher = Searcher(self._store)
        mtime = self.sources.manifest.stat().st_mtime_ns
        if mtime != self._manifest_mtime:
            self._origins = {s.file: s.origin for s in self.sources.load()}
            self._manifest_mtime = mtime

    def origin(self, file: str) -> str | None:
        return self._origins.get(file)

    def search(self, query: str, k: int, **options: Any) -> tuple[Any, list[Any]]:
        """(searcher, hits with `path` = origin); hits of files no longer in the manifest are dropped."""
        self.open()
        result = self.searcher.search(query, k=k, **options)
        hits = [replace(h, path=self._origins[h.path]) for h in result.hits if h.path in self._origins]
        return self.searcher, hits

    def used(self, origins: set[str]) -> None:
        """Record use of these origins; refetch stale sources in the background."""
        files = {f for f, o in self._origins.items() if o in origins}
        if not files:
            return
        self.sources.mark_used(files)
        if self.sources.due():
            refresh_in_background(self.db_path)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = self.searcher = None
