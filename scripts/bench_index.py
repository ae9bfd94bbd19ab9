#!/usr/bin/env python3
"""Measure the figures of docs/benchmarks.md on a real corpus (default: ../shared/data/win32-17k).

The corpus is copied to a temporary folder (it is read-only and some steps edit notes), then:
full index, no-op re-index, re-index after editing 20 notes, cold `vaultseek search` in new
processes (with `grep -rli` over the same files as the baseline), index size, peak memory of a
search process, and the warm per-mode latency from `vaultseek bench`.

    python scripts/bench_index.py [--corpus DIR] [--cold-runs 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT.parent / "shared" / "data" / "win32-17k"
COLD_QUERIES = ["CreateFileW", "registry key security", "how to create a window", "GetLastError", "named pipe server"]


def run(args: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """Run a command; return (wall seconds, peak RSS in MB, stdout)."""
    started = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = proc.stdout.read() if proc.stdout else b""
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        sys.stderr.write(err.decode(errors="replace"))
        raise SystemExit(f"failed: {' '.join(args)}")
    return wall, usage.ru_maxrss // 1024, out.decode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--cold-runs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        raise SystemExit(f"corpus not found: {args.corpus}")
    vs = [sys.executable, "-m", "vaultseek"]
    # Measure what an installed user runs: byte-compiled modules. (Some shells set
    # PYTHONDONTWRITEBYTECODE, which makes every new process recompile the sources: ~30 ms.)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["NO_COLOR"] = "1"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src" / "vaultseek")], env=env, check=False, stdout=subprocess.DEVNULL)
    figures: dict[str, object] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}",
        "corpus": str(args.corpus),
    }
    with tempfile.TemporaryDirectory(prefix="vaultseek-bench-") as tmp:
        vault = Path(tmp) / "vault"
        shutil.copytree(args.corpus, vault)
        db = Path(tmp) / "index.db"
        md = [p for p in vault.rglob("*.md")]
        figures["files"] = len(md)
        figures["markdown_bytes"] = sum(p.stat().st_size for p in md)

        wall, rss, out = run([*vs, "index", str(vault), "--db", str(db), "--json"], env)
        summary = json.loads(out)
        figures.update(full_index_s=round(wall, 2), full_index_peak_mb=rss, chunks=summary["chunks"], secrets_scrubbed=summary.get("secrets_scrubbed"))

        wall, _, out = run([*vs, "index", str(vault), "--db", str(db), "--json"], env)
        figures["noop_reindex_s"] = round(wall, 3)

        for p in sorted(md)[:: max(1, len(md) // 20)][:20]:
            with open(p, "a", encoding="utf-8") as fh:
                fh.write("\n\nEdited for the benchmark: a new paragraph about ephemeral widgets.\n")
        wall, _, out = run([*vs, "index", str(vault), "--db", str(db), "--json"], env)
        figures["edit20_reindex_s"] = round(wall, 3)
        figures["edit20_summary"] = {k: json.loads(out)[k] for k in ("changed", "embedded")}

        db_bytes = sum(p.stat().st_size for p in (db, Path(str(db) + "-wal")) if p.exists())
        figures["index_bytes"] = db_bytes
        figures["index_ratio"] = round(db_bytes / figures["markdown_bytes"], 3)  # type: ignore[operator]

        cold, grep, peak = [], [], 0
        for i in range(args.cold_runs):
            q = COLD_QUERIES[i % len(COLD_QUERIES)]
            wall, rss, _ = run([*vs, "search", q, "--db", str(db)], env)
            cold.append(wall)
            peak = max(peak, rss)
            wall, _, _ = run(["grep", "-rli", q.split()[0], str(vault)], env)
            grep.append(wall)
        figures["cold_search_p50_ms"] = round(statistics.median(cold) * 1000, 1)
        figures["grep_rli_p50_ms"] = round(statistics.median(grep) * 1000, 1)
        figures["cold_vs_grep"] = round(statistics.median(cold) / statistics.median(grep), 2)
        figures["search_peak_mb"] = peak

        _, rss, out = run([*vs, "bench", "--db", str(db), "--json"], env)
        figures["warm"] = json.loads(out)
        figures["bench_peak_mb"] = rss

    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            print(f"{key:<22} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
