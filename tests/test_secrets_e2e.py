"""Planted credentials never reach the database, its WAL, the FTS vocabulary, the logs or any output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import apsw

from secret_factory import CONTEXTS, planted_set
from vaultseek.store.textpack import TextPacker


def run(*args: str, config: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    if config is not None:
        env["VAULTSEEK_CONFIG"] = str(config)
    return subprocess.run([sys.executable, "-m", "vaultseek", *args], capture_output=True, text=True, timeout=180, env=env)


def everything_stored(db: Path) -> str:
    """Every value of every table, chunk bodies decompressed, plus the FTS vocabulary."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    zdict = conn.execute("SELECT data FROM blobs WHERE name='zdict'").fetchone()
    packer = TextPacker(zdict[0] if zdict else b"")
    parts: list[str] = [packer.dictionary.decode("utf-8", errors="replace")]  # sampled from chunk text
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'chunks_fts%'")]
    for table in tables:
        for row in conn.execute(f'SELECT * FROM "{table}"'):
            for value in row:
                if isinstance(value, bytes) and table == "chunks":
                    try:
                        parts.append(packer.unpack(value))
                    except Exception:
                        pass
                elif isinstance(value, str):
                    parts.append(value)
    conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, chunks_fts, 'row')")
    parts.extend(r[0] for r in conn.execute("SELECT term FROM temp.v"))
    conn.close()
    return "\n".join(parts)


def index_and_find_leaks(tmp_path: Path, scrub: bool) -> tuple[list[tuple], str, dict]:
    """Plant credentials in every context, index, search, and list every place a secret shows up."""
    config = tmp_path / "config.toml"
    config.write_text(f"[index]\nscrub_secrets = {'true' if scrub else 'false'}\n")
    vault = tmp_path / "vault"
    vault.mkdir()
    planted = planted_set(seed=20261130, per_kind=1)
    assert {p.context for p in planted} == set(CONTEXTS)
    for i, p in enumerate(planted):
        (vault / f"note-{i:03d}-{p.context}.md").write_text(
            f"---\ntitle: Debugging session {i}\ntags: [debug]\n---\n## Setup\nWhile debugging the {p.kind} integration I pasted this:\n\n{p.text}\n\nThen the deploy worked.\n"
        )
    db = tmp_path / "index.db"
    index = run("index", str(vault), "--db", str(db), "-v", "--json", config=config)
    assert index.returncode == 0, index.stderr
    summary = json.loads(index.stdout)
    outputs = [index.stdout, index.stderr]
    for query in ["debugging", "pasted", "token key secret password", "integration deploy", "BEGIN PRIVATE KEY"]:
        for mode in ("hybrid", "bm25"):
            r = run("search", query, "--db", str(db), "--json", "-k", "50", "--mode", mode, config=config)
            assert r.returncode == 0, r.stderr
            outputs += [r.stdout, r.stderr]
    scan = run("scan", str(vault))
    assert scan.returncode == 1
    outputs += [scan.stdout, scan.stderr]
    planted_count = len(planted)

    stored = everything_stored(db)
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("index.db*"))
    vocab_terms = set(stored.lower().split())
    leaks = []
    for p in planted:
        for secret in p.secrets:
            if secret in stored or secret.encode() in raw or any(secret in out for out in outputs):
                leaks.append((p.kind, p.context))
            # no distinctive piece of a secret may be a searchable term either
            for piece in re.findall(r"[A-Za-z0-9]{12,}", secret):
                if piece.lower() in vocab_terms:
                    leaks.append((p.kind, p.context, "fts"))
    summary["planted"] = planted_count
    return leaks, stored, summary


def test_no_planted_secret_survives_indexing(tmp_path: Path):
    leaks, stored, summary = index_and_find_leaks(tmp_path, scrub=True)
    assert not leaks, f"{len(leaks)} leaks: {sorted(set(leaks))[:20]}"
    assert "[REDACTED:" in stored
    assert summary["secrets_scrubbed"] >= summary["planted"]


def test_the_leak_check_can_fail(tmp_path: Path):
    """With scrubbing switched off the same check finds the secrets: the test above has teeth."""
    leaks, stored, summary = index_and_find_leaks(tmp_path, scrub=False)
    assert len(leaks) >= summary["planted"]
    assert summary["secrets_scrubbed"] == 0
