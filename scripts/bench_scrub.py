"""Benchmark vaultseek.scrub on a folder of Markdown files and show what it redacts.

Usage (from the repository root):

    .venv/bin/python scripts/bench_scrub.py [FOLDER] [--show N] [--repeat N] [--compare-detect-secrets]

FOLDER defaults to ../shared/data/win32-17k. Files are read in place, never copied.
Chunks are paragraphs (split on blank lines) grouped up to ~1,500 characters, close to what
the indexer stores. Example findings are printed with the value masked (``ab…yz (len 40)``):
no raw secret value is ever printed.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from vaultseek.scrub import Finding, find_secrets, scrub  # noqa: E402

CHUNK_CHARS = 1500
_BLANK = re.compile(r"\n[ \t]*\n")


def chunks_of(text: str) -> list[tuple[int, str]]:
    """Paragraph groups of up to ~CHUNK_CHARS characters, each with its 1-based first line."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    size = 0
    line = 1
    buf_line = 1
    pos = 0
    for m in list(_BLANK.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        para = text[pos:end]
        if buf and size + len(para) > CHUNK_CHARS:
            out.append((buf_line, "\n\n".join(buf)))
            buf, size = [], 0
        if not buf:
            buf_line = line
        if para.strip():
            buf.append(para)
            size += len(para) + 2
        elif not buf:
            buf_line = line + para.count("\n") + (m.group().count("\n") if m else 0)
        line += para.count("\n") + (m.group().count("\n") if m else 0)
        pos = m.end() if m else len(text)
    if buf:
        out.append((buf_line, "\n\n".join(buf)))
    return out


def mask(value: str) -> str:
    """A value shown without revealing it: first and last two characters and the length."""
    flat = value.replace("\n", "⏎")
    if len(value) < 8:
        return f"… (len {len(value)})"
    return f"{flat[:2]}…{flat[-2:]} (len {len(value)})"


def context_line(chunk: str, f: Finding) -> str:
    """The line holding ``f`` with the value masked, trimmed to ~160 characters."""
    ls = chunk.rfind("\n", 0, f.start) + 1
    le = chunk.find("\n", f.end)
    le = len(chunk) if le < 0 else le
    shown = chunk[ls : f.start] + "«" + mask(chunk[f.start : f.end]) + "»" + chunk[f.end : le]
    shown = shown.replace("\t", " ")
    if len(shown) > 160:
        k = f.start - ls
        shown = ("…" if k > 60 else "") + shown[max(0, k - 60) : k + 100] + "…"
    return shown


def load(folder: Path, pattern: str = "*.md") -> list[tuple[str, list[tuple[int, str]]]]:
    """Every file matching ``pattern`` under ``folder``, read in place and chunked."""
    files = sorted(folder.rglob(pattern))
    return [(str(p.relative_to(folder)), chunks_of(p.read_text(encoding="utf-8", errors="replace"))) for p in files]


def run_ours(docs: list[tuple[str, list[tuple[int, str]]]], show: int, repeat: int = 1) -> tuple[int, float]:
    """Scrub every chunk (best time of ``repeat`` runs) and print throughput, counts and examples."""
    n_chunks = sum(len(c) for _, c in docs)
    n_chars = sum(len(t) for _, c in docs for _, t in c)
    mb = n_chars / 1e6
    dt = cpu = float("inf")
    for _ in range(max(1, repeat)):
        t0, c0 = time.perf_counter(), time.process_time()
        results = [[scrub(text) for _, text in chunks] for _, chunks in docs]
        dt = min(dt, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    counts: dict[str, int] = {}
    examples: list[str] = []
    for (name, chunks), res in zip(docs, results):
        for (first_line, text), r in zip(chunks, res):
            for f in r.findings:
                counts[f.pattern] = counts.get(f.pattern, 0) + 1
                if len(examples) < show:
                    examples.append(f"{name}:{first_line + f.line - 1} {f.pattern} {context_line(text, f)}")
    total = sum(counts.values())
    print(f"files: {len(docs)}  chunks: {n_chunks}  MB: {mb:.1f}")
    print(
        f"vaultseek.scrub: {dt:.2f} s wall ({mb / dt:.1f} MB/s), {cpu:.2f} s CPU ({mb / cpu:.1f} MB/s)"
        f"  redactions: {total}  per 1,000 chunks: {1000 * total / n_chunks:.2f}"
    )
    for k, v in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"  {k:28s} {v}")
    if examples:
        print(f"\nexample findings ({len(examples)}):")
        for e in examples:
            print("  " + e)
    return n_chunks, mb


def _ds_scan_lines(lines: list[str]) -> list[tuple[int, str, str]]:
    """detect-secrets findings (1-based line, type, value) for one note's lines, default plugins and filters.

    This is the line-based path that ``SecretsCollection.scan_file`` takes, minus reading the file.
    """
    from detect_secrets.core.scan import _process_line_based_plugins

    found = _process_line_based_plugins(lines=list(enumerate(lines, 1)), filename="note.md")
    return [(s.line_number, s.type, s.secret_value or "") for s in found]


def run_detect_secrets(docs: list[tuple[str, list[tuple[int, str]]]], max_mb: float) -> None:
    """detect-secrets over an evenly spaced sample of files (it is ~1,000x slower than ours)."""
    try:
        from detect_secrets.settings import default_settings
    except ImportError:
        print("\ndetect-secrets is not installed: .venv/bin/pip install detect-secrets")
        return
    total_chars = sum(len(t) for _, c in docs for _, t in c)
    step = max(1, round(total_chars / 1e6 / max_mb))
    sample = docs[::step]
    counts: dict[str, int] = {}
    examples: list[str] = []
    ours = 0
    chars = used_chunks = 0
    with default_settings():
        t0 = time.perf_counter()
        for name, chunks in sample:
            for first_line, text in chunks:
                for line_no, typ, value in _ds_scan_lines(text.split("\n")):
                    counts[typ] = counts.get(typ, 0) + 1
                    if len(examples) < 30:
                        line = text.split("\n")[line_no - 1].strip()
                        shown = line.replace(value, "«" + mask(value) + "»") if value and value in line else "«line not shown»"
                        examples.append(f"{name}:{first_line + line_no - 1} {typ}: {shown[:150]}")
                chars += len(text)
                used_chunks += 1
        dt = time.perf_counter() - t0
    t1 = time.perf_counter()
    ours = sum(len(find_secrets(text)) for _, chunks in sample for _, text in chunks)
    dt_ours = time.perf_counter() - t1
    total = sum(counts.values())
    print(f"\ndetect-secrets 1.x (default plugins and filters) on every {step}th file: {len(sample)} files, "
          f"{chars / 1e6:.2f} MB, {used_chunks} chunks")
    print(f"  detect-secrets: {dt:.1f} s  {chars / 1e6 / dt:.3f} MB/s  findings {total}  per 1,000 chunks {1000 * total / max(used_chunks, 1):.2f}")
    print(f"  vaultseek.scrub on the same sample: {dt_ours:.2f} s  {chars / 1e6 / dt_ours:.1f} MB/s  findings {ours}")
    for k, v in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"    {k:36s} {v}")
    if examples:
        print("  detect-secrets example findings (value masked):")
        for e in examples:
            print("    " + e)
    recall()


def recall() -> None:
    """Fraction of planted secrets each tool flags (a finding on a line of the credential)."""
    from detect_secrets.settings import default_settings
    from secret_factory import planted_set

    planted = planted_set(seed=2024, per_kind=3)
    ours_hit = ours_full = ds_hit = 0
    by_kind: dict[str, list[int]] = {}
    with default_settings():
        for p in planted:
            lines = p.text.split("\n")
            # the credential's lines: those holding a secret fragment, plus PEM/PuTTY header and footer
            # lines (detect-secrets reports a private key on its BEGIN line)
            secret_lines = {
                i + 1
                for i, line in enumerate(lines)
                if any(s and s in line for s in p.secrets) or re.search(r"-----(?:BEGIN|END) |PuTTY-User-Key-File", line)
            }
            ours = {f.line for f in find_secrets(p.text)}
            ds = {ln for ln, _, _ in _ds_scan_lines(lines)}
            o, d = bool(ours & secret_lines), bool(ds & secret_lines)
            full = all(s not in scrub(p.text).text for s in p.secrets)
            ours_hit += o
            ds_hit += d
            ours_full += full
            k = by_kind.setdefault(p.kind, [0, 0, 0])
            k[0] += 1
            k[1] += o
            k[2] += d
    n = len(planted)
    print(f"\nrecall on {n} planted credentials ({len(by_kind)} kinds x 3 x contexts, seed 2024):")
    print(f"  vaultseek.scrub  flagged {ours_hit / n:.1%}  fully redacted {ours_full / n:.1%}")
    print(f"  detect-secrets   flagged {ds_hit / n:.1%}")
    print("  per kind (planted, ours, detect-secrets):")
    for kind, (t, o, d) in by_kind.items():
        print(f"    {kind:22s} {t:3d} {o:3d} {d:3d}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", nargs="?", default=str(ROOT.parent / "shared" / "data" / "win32-17k"))
    ap.add_argument("--show", type=int, default=0, metavar="N", help="print N example findings (values masked)")
    ap.add_argument("--glob", default="*.md", help="which files to read (default *.md)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N", help="time the best of N runs (shared machines)")
    ap.add_argument("--compare-detect-secrets", action="store_true", help="also run detect-secrets if importable")
    ap.add_argument("--ds-max-mb", type=float, default=2.0, help="MB of evenly spaced files for detect-secrets")
    args = ap.parse_args(argv)
    folder = Path(args.folder)
    if not folder.is_dir():
        print(f"no such folder: {folder}", file=sys.stderr)
        return 2
    docs = load(folder, args.glob)
    run_ours(docs, args.show, args.repeat)
    if args.compare_detect_secrets:
        run_detect_secrets(docs, args.ds_max_mb)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
