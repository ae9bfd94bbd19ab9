"""`vaultseek add URL|FILE --ttl`: external sources fetched from a local HTTP server on 127.0.0.1,
kept beside the index, searched by the hook and the MCP server, refetched after their TTL and
dropped when unused for 14 days."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vaultseek import sources as sources_mod
from vaultseek.config import Config
from vaultseek.errors import UsageError, VaultseekError
from vaultseek.hooks import run_claude_code_hook
from vaultseek.indexer import Indexer
from vaultseek.mcp_server import VaultService
from vaultseek.sources import Sources, html_to_markdown, parse_ttl
from vaultseek.store.sqlite import SqliteStore

SAMPLE_VAULT = Path(__file__).resolve().parent.parent / "src" / "vaultseek" / "sample_vault"
FAKE_TOKEN = "ghp_" + "R2d2C3poL0veY0uTh1sIsN0tAReaLt0kenAb"  # built here so the file holds no token

PAGE = """<html><head><title>Widget API: rate limits</title><script>document.write("<b>tracking</b>")</script>
<style>p { color: red }</style></head><body><nav>Home | Docs | Pricing</nav>
<h1>Rate limits</h1><p>The widget API allows <b>120 requests per minute</b> per token. Over the limit it
answers <code>429 Too Many Requests</code> with a <code>Retry-After</code> header.</p>
<h2>Backoff</h2><ul><li>Wait for Retry-After seconds.</li><li>Then retry with exponential backoff.</li></ul>
<pre>curl -H "Authorization: Bearer TOKEN" https://api.widget.example/v1/items
  --retry 3</pre><p>CI token: %s</p><footer>(c) Widget Corp</footer></body></html>"""


class Site:
    """A tiny web server on 127.0.0.1: pages by path, a request counter, switchable failures."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, bytes]] = {}
        self.hits: dict[str, int] = {}
        self.fail = False
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                site.hits[self.path] = site.hits.get(self.path, 0) + 1
                if site.fail or self.path not in site.pages:
                    self.send_error(500 if site.fail else 404)
                    return
                kind, body = site.pages[self.path]
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site():
    s = Site()
    s.pages["/limits.html"] = ("text/html; charset=utf-8", (PAGE % FAKE_TOKEN).encode())
    s.pages["/notes.md"] = ("text/markdown", "# Deploy checklist\n\nRun the smoke tests against the canary before widening the rollout.\n".encode())
    s.pages["/logo.png"] = ("image/png", b"\x89PNG....")
    yield s
    s.close()


@pytest.fixture
def indexed(tmp_path: Path, embedder) -> Path:
    vault = tmp_path / "vault"
    shutil.copytree(SAMPLE_VAULT, vault)
    db = tmp_path / "index.db"
    store = SqliteStore(db)
    Indexer(vault, store, Config(), embedder=embedder).run()
    store.close()
    return db


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vaultseek", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("30m", 1800), ("24h", 86400), ("7d", 604800), ("2W", 1209600), ("1.5h", 5400)])
def test_parse_ttl(text: str, seconds: int):
    assert parse_ttl(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "-1h", "soon", "24 hours", "h"])
def test_parse_ttl_refuses_nonsense(text: str):
    with pytest.raises(UsageError):
        parse_ttl(text)


def test_html_becomes_markdown_without_page_furniture():
    title, body = html_to_markdown(PAGE % "x")
    assert title == "Widget API: rate limits"
    assert body.startswith("# Rate limits\n\nThe widget API allows 120 requests per minute per token.")
    assert "## Backoff" in body and "- Wait for Retry-After seconds." in body
    assert '```\ncurl -H "Authorization: Bearer TOKEN" https://api.widget.example/v1/items\n  --retry 3\n```' in body
    for furniture in ("tracking", "color: red", "Pricing", "Widget Corp"):
        assert furniture not in body


def test_add_a_page_then_the_hook_and_mcp_find_it(site: Site, indexed: Path):
    url = site.url("/limits.html")
    r = run_cli("add", url, "--ttl", "2h", "--db", str(indexed), "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["added"]["origin"] == url and report["added"]["ttl_seconds"] == 7200 and report["sources"] == 1
    src = Sources(indexed)
    stored = (src.notes / report["added"]["file"]).read_text()
    assert stored.startswith(f'---\ntitle: "Widget API: rate limits"\ntype: external\ntags: [external]\nsource: "{url}"')
    assert not any(p.name == "limits.html" for p in indexed.parent.rglob("*"))  # the vault holds nothing new

    event = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "the widget API answers 429 Too Many Requests, how long should we back off?"})
    out = run_claude_code_hook(event, db=str(indexed), use_cache=False)
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert f"### Rate limits ({url})" in context and FAKE_TOKEN not in context

    service = VaultService(indexed)
    try:
        found = service.search("retry after 429 too many requests", k=3)
        assert [r["path"] for r in found["results"] if r["external"]] == [url]
        assert all(r["external"] is False for r in found["results"] if r["path"] != url)
        note = service.get_note(url, section="Backoff")
        assert note["text"].startswith("## Backoff\n") and note["path"] == url
        whole = service.get_note(url)
        assert FAKE_TOKEN not in whole["text"] and "[REDACTED" in whole["text"]
        assert service.search("retry after 429", k=3, path="Security/")["results"][0]["external"] is False  # filters: the vault only
    finally:
        service.close()
    with sqlite_store(src.db) as store:
        assert all(FAKE_TOKEN not in row.text for row in store.fetch_chunks(list(range(1, 50))).values())


class sqlite_store:
    def __init__(self, path: Path) -> None:
        self.store = SqliteStore(path, readonly=True)

    def __enter__(self) -> SqliteStore:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.store.close()


def test_refetched_after_the_ttl_and_kept_when_the_refetch_fails(site: Site, indexed: Path):
    src = Sources(indexed)
    url = site.url("/notes.md")
    added = src.add(url, ttl_seconds=3600, now=1000.0)
    assert site.hits["/notes.md"] == 1
    assert src.maintain(now=1000.0 + 3599) == {"dropped": [], "refreshed": [], "failed": []}
    assert site.hits["/notes.md"] == 1  # not yet due
    site.pages["/notes.md"] = ("text/markdown", b"# Deploy checklist\n\nRoll back when the canary error rate doubles.\n")
    assert src.maintain(now=1000.0 + 3600)["refreshed"] == [url]
    text = (src.notes / added.file).read_text()
    assert "Roll back when the canary" in text and "smoke tests" not in text
    src.reindex()
    with sqlite_store(src.db) as store:
        assert any("Roll back" in row.text for row in store.fetch_chunks(list(range(1, 20))).values())

    site.fail = True
    report = src.maintain(now=1000.0 + 3600 * 3)
    assert report["failed"] == [url] and "Roll back when the canary" in (src.notes / added.file).read_text()


def test_dropped_when_unused_for_14_days_but_kept_while_used(site: Site, indexed: Path):
    src = Sources(indexed)
    day = 86400.0
    page = src.add(site.url("/limits.html"), ttl_seconds=int(100 * day), now=0.0)
    notes = src.add(site.url("/notes.md"), ttl_seconds=int(100 * day), now=0.0)
    src.mark_used({notes.file}, now=13 * day)  # a search used this one on day 13
    report = src.maintain(now=15 * day)
    assert report["dropped"] == [page.origin] and not (src.notes / page.file).exists()
    assert [s.origin for s in src.load()] == [notes.origin] and (src.notes / notes.file).exists()
    src.reindex()
    with sqlite_store(src.db) as store:
        assert store.counts()["files"] == 1


def test_add_a_local_file_and_refuse_what_is_not_text(site: Site, indexed: Path, tmp_path: Path):
    note = tmp_path / "elsewhere" / "runbook.md"
    note.parent.mkdir()
    note.write_text("# Runbook\n\nRotate the signing key every ninety days.\n")
    src = Sources(indexed)
    added = src.add(str(note), ttl_seconds=60)
    assert added.origin == str(note.resolve()) and "Rotate the signing key" in src.text_of(added.origin)
    for bad, message in ((site.url("/logo.png"), "image/png"), ("ftp://127.0.0.1/x.txt", "only http and https"),
                         ("file:///etc/passwd", "only http and https"), (site.url("/missing.html"), "HTTP 404"),
                         (str(tmp_path / "nope.md"), "not found"), (str(Path(sys.executable)), "only Markdown")):
        with pytest.raises(VaultseekError, match=message):
            src.add(bad, ttl_seconds=60)
    assert [s.origin for s in src.load()] == [added.origin]


def test_size_limit(site: Site, indexed: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sources_mod, "MAX_BYTES", 100)
    with pytest.raises(UsageError, match="larger than"):
        Sources(indexed).add(site.url("/limits.html"), ttl_seconds=60)


def test_add_needs_an_index_and_a_target(tmp_path: Path):
    r = run_cli("add", "http://127.0.0.1:9/x", "--db", str(tmp_path / "none.db"))
    assert r.returncode == 2 and "no index" in r.stderr
    r = run_cli("add", "--db", str(tmp_path / "none.db"))
    assert r.returncode == 2 and "give a URL or a file" in r.stderr
    r = run_cli("add", "http://127.0.0.1:9/x", "--ttl", "soon", "--db", str(tmp_path / "none.db"))
    assert r.returncode == 2 and "not a TTL" in r.stderr
