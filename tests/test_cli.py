"""The command line as a user runs it: a new process, real files, stdout/stderr and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "vaultseek", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_index_search_status_json(vault: Path):
    r = run("index", str(vault), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    for key in ("added", "changed", "deleted", "unchanged", "chunks", "seconds"):
        assert key in summary
    assert summary["added"] == 12

    r = run("search", "docker", "port", "mapping", "--vault", str(vault), "--json", "-k", "3")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["query"] == "docker port mapping"
    first = data["results"][0]
    assert set(first) >= {"path", "section", "heading_context", "score", "bm25_rank", "vec_rank", "snippet", "text"}
    assert first["path"] == "Engineering/Docker Networking.md"
    assert len(data["results"]) == 3

    r = run("status", "--vault", str(vault), "--json")
    status = json.loads(r.stdout)
    assert status["files"] == 12 and status["vector_search"] is True
    assert status["changed_since_index"] == {"new": 0, "modified": 0, "deleted": 0}
    (vault / "new.md").write_text("a brand new note with enough words in it")
    status = json.loads(run("status", "--vault", str(vault), "--json").stdout)
    assert status["changed_since_index"]["new"] == 1


def test_human_output_and_explain(vault: Path):
    run("index", str(vault))
    r = run("search", "sourdough", "--explain", cwd=vault)  # finds the index from the current folder
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(" 1. Personal/Sourdough bread.md")
    assert "bm25 rank 1" in r.stdout and "convex score = bm25" in r.stdout
    r = run("index", str(vault))
    assert "12 unchanged" in r.stdout


def test_errors_exit_2_with_a_reason(tmp_path: Path, vault: Path):
    r = run("index", str(tmp_path / "missing"))
    assert r.returncode == 2 and "vault not found" in r.stderr and r.stdout == ""
    r = run("search", "x", "--db", str(tmp_path / "none.db"))
    assert r.returncode == 2 and "no index" in r.stderr and "vaultseek index" in r.stderr
    run("index", str(vault))
    r = run("search", " ", "--vault", str(vault))
    assert r.returncode == 2 and "empty" in r.stderr


def test_demo_runs_on_the_bundled_vault(tmp_path: Path):
    r = run("demo", "--db", str(tmp_path / "demo.db"))
    assert r.returncode == 0, r.stderr
    assert "Security/OAuth Token Rotation.md" in r.stdout and "中文笔记/认证失败排查.md" in r.stdout


def test_ctrl_c_finishes_whole_files_and_the_next_run_resumes(tmp_path: Path):
    import signal
    import time

    import apsw

    vault = tmp_path / "big"
    vault.mkdir()
    para = "Indexing keeps going until the user presses control C, then it stops cleanly. " * 12
    for i in range(2000):
        (vault / f"note-{i:04d}.md").write_text(f"# Note {i}\n\n## Part one\n{para}\n\n## Part two\n{para} number {i}\n")
    db = tmp_path / "index.db"
    proc = subprocess.Popen([sys.executable, "-m", "vaultseek", "index", str(vault), "--db", str(db), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until the first files are committed
        try:
            conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
            n = conn.execute("SELECT count(*) FROM files").fetchone()[0]
            conn.close()
            if n:
                break
        except apsw.Error:
            pass
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    summary = json.loads(out)
    assert summary["interrupted"] and 0 < summary["added"] < 2000
    assert "interrupted" in err and "Traceback" not in err
    resumed = json.loads(run("index", str(vault), "--db", str(db), "--json").stdout)
    assert resumed["added"] == 2000 - summary["added"] and resumed["chunks"] == 4000
