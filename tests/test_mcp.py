"""`vaultseek mcp`: a round trip with the MCP SDK's own client over stdio, and `get_note`'s
confinement to the vault (`..`, absolute paths, NUL bytes, Windows separators, symlinks out).

`VaultService` (the tools without MCP) is tested directly; the stdio tests need the `mcp` extra
and are skipped without it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vaultseek.config import Config
from vaultseek.errors import UsageError
from vaultseek.indexer import Indexer
from vaultseek.mcp_server import NoteAccessError, TTLCache, VaultService, _sdk, normalise_note_path, section_text
from vaultseek.store.sqlite import SqliteStore

SAMPLE_VAULT = Path(__file__).resolve().parent.parent / "src" / "vaultseek" / "sample_vault"
FAKE_TOKEN = "ghp_" + "R2d2C3poL0veY0uTh1sIsN0tAReaLt0kenAb"  # built here so the file holds no token


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, embedder) -> dict[str, Path]:
    """An indexed copy of the sample vault with a private note and a credential; after indexing,
    one note is swapped for a symlink to a file outside the vault."""
    root = tmp_path_factory.mktemp("mcp")
    vault = root / "vault"
    shutil.copytree(SAMPLE_VAULT, vault)
    (vault / "Personal" / "Diary.md").write_text("---\nprivate: true\n---\n# Diary\nDear diary, the secret plans.\n")
    (vault / "Engineering" / "Deploy keys.md").write_text(f"# Deploy keys\n\n## CI token\nThe CI uses token: {FAKE_TOKEN} for pushes.\n")
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\nnot for agents\n")
    db = root / "index.db"
    store = SqliteStore(db)
    try:
        Indexer(vault, store, Config(), embedder=embedder).run()
    finally:
        store.close()
    note = vault / "Personal" / "Zettelkasten method.md"
    note.unlink()
    note.symlink_to(outside / "secret.md")
    return {"root": root, "vault": vault, "db": db, "outside": outside}


@pytest.fixture(scope="module")
def service(setup: dict[str, Path], embedder):
    svc = VaultService(setup["db"])
    svc.searcher._embedder = embedder  # the session's model, loaded once
    yield svc
    svc.close()


# -- get_note confinement --------------------------------------------------------------------------

ATTACKS = [
    ("../outside/secret.md", "'..' is not allowed"),
    ("Security/../../outside/secret.md", "'..' is not allowed"),
    ("..\\outside\\secret.md", "'..' is not allowed"),
    ("Security\\..\\..\\outside\\secret.md", "'..' is not allowed"),
    ("/etc/passwd", "absolute paths are not allowed"),
    ("\\\\server\\share\\x.md", "absolute paths are not allowed"),
    ("C:\\Windows\\win.ini", "absolute paths are not allowed"),
    ("c:/notes/x.md", "absolute paths are not allowed"),
    ("~/notes/x.md", "absolute paths are not allowed"),
    ("Security/OAuth Token Rotation.md\x00.png", "NUL byte"),
    ("", "relative to the vault"),
    ("Personal/Zettelkasten method.md", "leads outside the vault"),  # a symlink to ../outside/secret.md
    ("Personal/Diary.md", "is not indexed (marked private"),
    (".vaultseek/index.db", "not a note in the index"),
    ("Security/Missing.md", "not a note in the index"),
]


@pytest.mark.parametrize("path, message", ATTACKS)
def test_get_note_refuses_paths_outside_the_indexed_notes(path: str, message: str, service: VaultService):
    with pytest.raises(NoteAccessError, match=message.replace("(", r"\(")):
        service.get_note(path)


@pytest.mark.parametrize("path", ["Security/OAuth Token Rotation.md", "./Security/OAuth Token Rotation.md", "Security\\OAuth Token Rotation.md", "Security//OAuth Token Rotation.md"])
def test_get_note_accepts_the_ways_a_client_writes_a_path(path: str, service: VaultService):
    note = service.get_note(path)
    assert note["path"] == "Security/OAuth Token Rotation.md"
    assert note["text"].startswith("---\ntitle: OAuth Token Rotation") and not note["truncated"]


def test_get_note_section_and_scrubbing(service: VaultService):
    part = service.get_note("Security/OAuth Token Rotation.md", section="Refresh flow")
    assert part["text"].startswith("## Refresh flow\n") and "## Revoking" not in part["text"]
    assert part["start_line"] == 13
    nested = service.get_note("Security/OAuth Token Rotation.md", section="OAuth Token Rotation > Revoking a leaked token")
    assert nested["text"].startswith("## Revoking a leaked token")
    keys = service.get_note("Engineering/Deploy keys.md")
    assert FAKE_TOKEN not in keys["text"] and "[REDACTED" in keys["text"]
    with pytest.raises(UsageError, match="no section"):
        service.get_note("Security/OAuth Token Rotation.md", section="Nope")


def test_section_text_skips_code_fences_and_front_matter():
    text = "---\n# not: a heading\n---\n# A\nx\n```\n# B in code\n```\n## B\nb text\n# C\nc\n"
    assert section_text(text, "B") == ("## B\nb text\n", 8)
    assert section_text(text, "A")[0].startswith("# A\nx\n```\n# B in code")
    assert section_text(text, "not: a heading") is None


def test_normalise_note_path_is_strict():
    assert normalise_note_path(" a/./b.md ") == "a/b.md"
    for bad in ("..", "a/../../b", "/a", "a\x00", "D:x", ".", "./"):
        with pytest.raises(NoteAccessError):
            normalise_note_path(bad)


# -- search and the cache ------------------------------------------------------------------------------


def test_search_filters_and_cache(service: VaultService):
    first = service.search("token rotation", k=3)
    assert first["results"][0]["path"] == "Security/OAuth Token Rotation.md" and first["cached"] is False
    again = service.search("token rotation", k=3)
    assert again["cached"] is True and again["results"] == first["results"]
    chinese = service.search("token", k=5, path="中文笔记/")
    assert chinese["results"] and all(r["path"].startswith("中文笔记/") for r in chinese["results"])
    tagged = service.search("network", k=5, tag="#docker")
    assert {r["path"] for r in tagged["results"]} == {"Engineering/Docker Networking.md"}
    budget = service.search("token", k=10, max_tokens=60)
    assert sum(len(r["text"]) for r in budget["results"]) <= 60 * 4
    with pytest.raises(UsageError):
        service.search("  ")
    with pytest.raises(UsageError):
        service.search("token", k=0)


def test_ttl_cache_expires_and_evicts():
    now = [0.0]
    cache = TTLCache(size=2, ttl=10, clock=lambda: now[0])
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)  # evicts b, the least recently used
    assert cache.get("b") is None and cache.get("a") == 1
    now[0] = 10.0
    assert cache.get("a") is None and len(cache) == 1


def test_a_missing_sdk_is_an_install_hint(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)
    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver.exceptions", None)
    with pytest.raises(UsageError, match="MCP Python SDK") as info:
        _sdk()
    assert "vaultseek[mcp]" in str(info.value)


def test_mcp_command_without_an_index_fails_before_speaking(tmp_path: Path):
    r = subprocess.run([sys.executable, "-m", "vaultseek", "mcp", "--db", str(tmp_path / "none.db")], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stdout == ""
    assert "no index" in r.stderr and "vaultseek index" in r.stderr


# -- the real protocol: the SDK's client over stdio ------------------------------------------------------


def test_round_trip_with_the_sdk_client(setup: dict[str, Path]):
    pytest.importorskip("mcp.server.mcpserver")
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "vaultseek", "mcp", "--db", str(setup["db"])], env=dict(os.environ))
    seen: dict[str, object] = {}

    async def call(session: ClientSession, name: str, **arguments: object) -> tuple[bool, object]:
        result = await session.call_tool(name, arguments)
        text = result.content[0].text  # type: ignore[union-attr]
        return bool(result.is_error), (text if result.is_error else json.loads(text))

    async def main() -> None:
        with open(os.devnull, "w") as errlog:  # the server's log lines go to its stderr
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    seen["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
                    seen["search"] = await call(session, "search", query="how do I renew an expired access token", k=3)
                    seen["again"] = await call(session, "search", query="how do I renew an expired access token", k=3)
                    seen["filtered"] = await call(session, "search", query="token", k=5, path="中文笔记/")
                    seen["note"] = await call(session, "get_note", path="Security/OAuth Token Rotation.md", section="Refresh flow")
                    seen["dotdot"] = await call(session, "get_note", path="../outside/secret.md")
                    seen["absolute"] = await call(session, "get_note", path=str(setup["outside"] / "secret.md"))
                    seen["symlink"] = await call(session, "get_note", path="Personal/Zettelkasten method.md")
                    seen["nul"] = await call(session, "get_note", path="Security/OAuth Token Rotation.md\x00")
                    seen["backslash"] = await call(session, "get_note", path="..\\outside\\secret.md")
                    seen["status"] = await call(session, "status")

    anyio.run(main)
    assert seen["tools"] == ["get_note", "search", "status"]
    error, data = seen["search"]
    assert not error and data["results"][0]["path"] == "Security/OAuth Token Rotation.md" and data["cached"] is False  # type: ignore[index]
    assert seen["again"][1]["cached"] is True  # type: ignore[index]
    assert all(r["path"].startswith("中文笔记/") for r in seen["filtered"][1]["results"])  # type: ignore[index]
    error, note = seen["note"]
    assert not error and note["text"].startswith("## Refresh flow")  # type: ignore[index]
    for name in ("dotdot", "absolute", "symlink", "nul", "backslash"):
        error, message = seen[name]
        assert error and "not for agents" not in str(message), name
    assert "leads outside the vault" in str(seen["symlink"][1])
    status = seen["status"][1]
    assert status["files"] == 13 and status["vector_search"] is True and status["cache"]["hits"] == 1  # type: ignore[index]
