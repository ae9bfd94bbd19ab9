"""The `vaultseek` command: a thin layer over the indexer and the search pipeline.

Results go to stdout (`--json` output is stable, see docs/cli.md); logs, warnings and progress go
to stderr. Heavy modules are imported inside the commands so `--help` and errors stay instant.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from . import __version__
from .errors import UsageError, VaultseekError

log = logging.getLogger("vaultseek")


# -- shared helpers ------------------------------------------------------------------------


class _StderrHandler(logging.Handler):
    """Writes `vaultseek: level: message` lines to stderr, clearing any progress line first."""

    progress_shown = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = self.format(record)
            prefix = "" if record.levelno == logging.INFO else f"{record.levelname.lower()}: "
            clear = "\r\x1b[K" if _StderrHandler.progress_shown else ""
            sys.stderr.write(f"{clear}vaultseek: {prefix}{msg}\n")
            sys.stderr.flush()
        except Exception:  # pragma: no cover - never let logging crash a run
            self.handleError(record)


def setup_logging(verbose: int, quiet: bool = False) -> None:
    level = logging.WARNING if quiet else (logging.DEBUG if verbose else logging.INFO)
    log.handlers[:] = [_StderrHandler()]
    log.setLevel(level)
    log.propagate = False


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, sort_keys=False) + "\n")


def resolve_paths(db: str | None, vault: str | None) -> tuple[Path | None, Path]:
    """(vault, db) from the flags: --db wins; else VAULT/.vaultseek/index.db; else the nearest
    index at or above the current folder; else the current folder as the vault."""
    from .config import default_db_path, find_vault_upwards

    vault_path = Path(vault).expanduser() if vault else None
    if vault_path is not None and not vault_path.is_dir():
        raise UsageError(f"vault not found: {vault_path}", hint="pass the folder that holds your notes")
    if db:
        return vault_path, Path(db).expanduser()
    if vault_path is None:
        vault_path = find_vault_upwards(Path.cwd()) or Path.cwd()
    return vault_path, default_db_path(vault_path)


def open_store(db: Path, readonly: bool = True):
    from .store.sqlite import SqliteStore

    return SqliteStore(db, readonly=readonly)


def stored_vault(store) -> Path | None:
    root = store.get_meta("vault_root")
    return Path(root) if root else None


class Progress:
    """A one-line progress bar on stderr (files done / total, rate, ETA), only on a terminal."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled
        self.started = time.perf_counter()
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total < 200:
            return
        now = time.perf_counter()
        if now - self.last < 0.1 and done != total:
            return
        self.last = now
        elapsed = max(now - self.started, 1e-6)
        rate = done / elapsed
        eta = (total - done) / rate if rate > 0 else 0
        width = 24
        filled = int(width * done / max(total, 1))
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(f"\r\x1b[K{self.label} [{bar}] {done}/{total} files  {rate:,.0f}/s  ETA {eta:,.0f}s")
        sys.stderr.flush()
        _StderrHandler.progress_shown = True

    def close(self) -> None:
        if self.enabled and _StderrHandler.progress_shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            _StderrHandler.progress_shown = False


# -- commands ------------------------------------------------------------------------------


def cmd_index(args: argparse.Namespace) -> int:
    import threading

    from .config import default_db_path, find_vault_upwards, load_config
    from .indexer import Indexer
    from .store.sqlite import SqliteStore

    if args.vault:
        vault = Path(args.vault).expanduser()
        if not vault.is_dir():
            raise UsageError(f"vault not found: {vault}", hint="pass the folder that holds your notes")
        db = Path(args.db).expanduser() if args.db else default_db_path(vault)
        store = SqliteStore(db)
    elif args.db:
        db = Path(args.db).expanduser()
        store = SqliteStore(db)
        vault = stored_vault(store) or Path.cwd()
    else:
        vault = find_vault_upwards(Path.cwd()) or Path.cwd()
        store = SqliteStore(default_db_path(vault))
    config = load_config(vault, Path(args.config) if args.config else None)

    stop = threading.Event()

    def on_sigint(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        log.warning("stopping after the current file (press Ctrl-C again to abort now)")

    previous = signal.signal(signal.SIGINT, on_sigint)
    progress = Progress("indexing", enabled=sys.stderr.isatty() and not args.json)
    try:
        summary = Indexer(vault, store, config, progress=progress, stop=stop).run(full=args.full)
    finally:
        progress.close()
        signal.signal(signal.SIGINT, previous)
        store.close()
    if args.json:
        emit_json(summary.as_json())
    else:
        parts = [f"{summary.added} added", f"{summary.changed} changed", f"{summary.deleted} deleted", f"{summary.unchanged} unchanged"]
        if summary.renamed:
            parts.append(f"{summary.renamed} renamed")
        if summary.excluded:
            parts.append(f"{summary.excluded} not indexed (private/binary/too large)")
        if summary.skipped:
            parts.append(f"{summary.skipped} skipped (unreadable)")
        print(f"{vault}: {', '.join(parts)}")
        print(f"{summary.chunks} chunks in the index ({summary.chunks_written} written, {summary.embedded} embedded) in {summary.seconds:.2f}s")
        if summary.secrets_scrubbed:
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(summary.secrets_by_pattern.items()))
            print(f"{summary.secrets_scrubbed} secrets scrubbed before indexing ({kinds})")
        if not summary.vectors:
            print("vector search is unavailable: notes are indexed for keyword search only (see `vaultseek status`)")
    return 130 if summary.interrupted else 0


def _open_for_read(args: argparse.Namespace):
    vault, db = resolve_paths(args.db, getattr(args, "vault", None))
    store = open_store(db, readonly=True)
    return vault, db, store


def cmd_search(args: argparse.Namespace) -> int:
    from .config import load_config, with_rerank
    from .search import Searcher

    query = " ".join(args.query)
    vault, db, store = _open_for_read(args)
    config = load_config(vault or stored_vault(store), Path(args.config) if args.config else None)
    from .query import _DATE_RE, Filters

    for flag, value in (("--after", args.after), ("--before", args.before)):
        if value is not None and not _DATE_RE.fullmatch(value):
            raise UsageError(f"{flag} needs a date like 2025-01-31, not {value!r}")
    filters = Filters(tuple(args.tag or ()), tuple(p.lstrip("/") for p in args.path or ()), tuple(args.type or ()), args.after, args.before)
    searcher = Searcher(store, with_rerank(config.search, args.rerank))
    result = searcher.search(
        query, k=args.k, mode=args.mode, max_tokens=args.max_tokens, filters=filters,
        fix_typos=config.search.fix_typos and not args.no_correct,
    )
    for warning in result.warnings:
        log.warning(warning)
    if result.corrections and not args.json:
        fixed = " ".join(result.corrections.get(w.lower(), w) for w in query.split())
        print(f'showing results for "{fixed}" (no match for {", ".join(repr(w) for w in result.corrections)}; --no-correct searches as typed)', file=sys.stderr)
    if args.json:
        data = result.as_json()
        if args.explain:
            for item, hit in zip(data["results"], result.hits):  # type: ignore[arg-type]
                item["score_terms"] = {k: round(v, 6) for k, v in hit.terms.items()}
        emit_json(data)
        return 0
    if not result.hits:
        print(f"no results for {query!r}")
        return 0
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    bold, dim, mark, reset = ("\x1b[1m", "\x1b[2m", "\x1b[1;33m", "\x1b[0m") if color else ("", "", "", "")
    from .snippet import highlight_spans
    for rank, hit in enumerate(result.hits, start=1):
        where = f" › {hit.section}" if hit.section else ""
        print(f"{bold}{rank:>2}. {hit.path}{where}{reset}  {dim}{hit.score:.4f}{reset}")
        if args.explain:
            parts = [f"bm25 rank {hit.bm25_rank or '-'}", f"vector rank {hit.vec_rank or '-'}"]
            terms = " + ".join(f"{name} {value:.5f}" for name, value in hit.terms.items())
            print(f"    {dim}{', '.join(parts)}; {config.search.fusion} score = {terms} = {hit.score:.5f}{reset}")
        snippet = hit.snippet
        if color:
            for start, end in reversed(highlight_spans(snippet, result.terms)):
                snippet = snippet[:start] + mark + snippet[start:end] + reset + snippet[end:]
        print(f"    {snippet}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from .config import load_config
    from .embed import load_embedder
    from .errors import EmbedderUnavailable
    from .scan import scan_vault

    vault, db, store = _open_for_read(args)
    root = vault or stored_vault(store)  # a vault named (or found) here wins over where it was indexed
    config = load_config(root, Path(args.config) if args.config else None)
    counts = store.counts()
    known = store.file_states()
    changed = {"new": 0, "modified": 0, "deleted": 0}
    if root is not None and root.is_dir():
        found = scan_vault(root, config.index)
        excluded = store.excluded()
        seen = set()
        for f in found:
            seen.add(f.path)
            state = known.get(f.path)
            if state is None:
                changed["new"] += 0 if f.path in excluded else 1
            elif state.mtime_ns != f.mtime_ns or state.size != f.size:
                changed["modified"] += 1
        changed["deleted"] = sum(1 for p in known if p not in seen)
    model = store.get_meta("model") or config.model
    vector_ok, vector_reason = True, ""
    try:
        embedder = load_embedder(model)
        embedder.embed_batch(["status check"])
    except EmbedderUnavailable as exc:
        vector_ok, vector_reason = False, exc.one_line()
    if vector_ok and counts["vectors"] == 0 and counts["chunks"] > 0:
        vector_ok, vector_reason = False, "the index holds no vectors; run `vaultseek index --full`"
    elif vector_ok and counts["vectors"] < counts["chunks"]:
        log.warning("%d chunks have no vector (the model failed during an index run): run `vaultseek index --full`", counts["chunks"] - counts["vectors"])
    rerank = config.search.rerank or None
    rerank_reason = None
    if rerank:
        from .rerank import load_reranker

        try:
            load_reranker(rerank, config.search.rerank_tokens)
        except EmbedderUnavailable as exc:
            rerank_reason = exc.one_line(with_hint=True)
    last = store.get_meta("last_indexed_at")
    reasons = store.excluded().values()
    sensitive = sum(1 for r in reasons if r.startswith(("private folder", "marked private")))
    data = {
        "vault": str(root) if root else None,
        "db": str(db),
        "db_bytes": sum(p.stat().st_size for p in (db, db.with_name(db.name + "-wal")) if p.exists()),
        "files": counts["files"],
        "chunks": counts["chunks"],
        "vectors": counts["vectors"],
        "excluded": counts["excluded"],
        "sensitive": sensitive,
        "changed_since_index": changed,
        "model": model,
        "fingerprint": store.get_meta("fingerprint"),
        "vector_search": vector_ok,
        "vector_search_reason": vector_reason or None,
        "rerank": rerank,
        "rerank_available": None if rerank is None else rerank_reason is None,
        "rerank_reason": rerank_reason,
        "last_indexed_at": float(last) if last else None,
    }
    if args.json:
        emit_json(data)
        return 0
    pending = sum(changed.values())
    print(f"vault        {data['vault']}")
    print(f"index        {db} ({data['db_bytes'] / 1e6:.1f} MB)")
    print(f"notes        {data['files']} indexed; not indexed: {sensitive} sensitive (private folder or marked private), {data['excluded'] - sensitive} binary or too large")
    print(f"chunks       {data['chunks']} ({data['vectors']} with vectors)")
    print(f"changed      {pending} notes on disk since the last index" + (f" ({changed['new']} new, {changed['modified']} modified, {changed['deleted']} deleted): run `vaultseek index`" if pending else ""))
    print(f"model        {model}")
    print(f"fingerprint  {data['fingerprint']}")
    print(f"vectors      {'available' if vector_ok else 'unavailable: ' + vector_reason + ' (search uses BM25 only)'}")
    if rerank:
        print(f"reranker     {rerank}: " + ("available" if rerank_reason is None else f"unavailable: {rerank_reason} (results stay in fused order)"))
    else:
        print("reranker     off (search.rerank; `search --rerank` for one query)")
    if last:
        print(f"indexed at   {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(float(last)))}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import default_queries, run_bench
    from .config import load_config
    from .search import Searcher

    vault, db, store = _open_for_read(args)
    config = load_config(stored_vault(store) or vault, None)
    queries = default_queries()
    if args.queries:
        lines = Path(args.queries).read_text(encoding="utf-8").splitlines()
        queries = [q.strip() for q in lines if q.strip() and not q.startswith("#")]
        if not queries:
            raise UsageError(f"no queries in {args.queries}", hint="one query per line")
    report = run_bench(Searcher(store, config.search), queries, rounds=args.rounds)
    if args.json:
        emit_json(report)
    else:
        print(f"{len(queries)} queries x {args.rounds} rounds, warm, one process ({db})")
        for mode, figures in report.items():
            print(f"{mode:<7} p50 {figures['p50_ms']:7.2f} ms   p95 {figures['p95_ms']:7.2f} ms   max {figures['max_ms']:7.2f} ms")
    return 0


def cmd_scan(args: argparse.Namespace) -> int:
    """Report credentials in notes (file, line, pattern; never the value). Exit 1 if any are found."""
    from .config import IndexSettings, load_config
    from .scan import scan_vault
    from .scrub import find_secrets

    target = Path(args.path or ".").expanduser()
    if target.is_file():
        files = [(target.name, target)]
    elif target.is_dir():
        settings = load_config(target).index if (target / ".vaultseek").is_dir() else IndexSettings()
        files = [(f.path, Path(f.abspath)) for f in scan_vault(target, settings)]
    else:
        raise UsageError(f"not found: {target}", hint="pass a vault folder or a note file")
    findings: list[dict[str, object]] = []
    for rel, path in files:
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            log.warning("cannot read %s: %s", rel, exc.strerror or exc)
            continue
        for f in find_secrets(text):
            findings.append({"path": rel, "line": f.line, "pattern": f.pattern})
    if args.json:
        emit_json({"scanned": len(files), "findings": findings})
    else:
        for item in findings:
            print(f"{item['path']}:{item['line']}: {item['pattern']}")
        kinds = len({f["pattern"] for f in findings})
        summary = f"{len(findings)} possible secrets ({kinds} kinds) in {len({f['path'] for f in findings})} of {len(files)} notes" if findings else f"no secrets found in {len(files)} notes"
        print(summary, file=sys.stderr)
    return 1 if findings else 0


DEMO_QUERIES = ("how do I renew an expired access token", "useEffect cleanup", "认证失败", "docker container cannot resolve name")


def cmd_demo(args: argparse.Namespace) -> int:
    """Index the bundled sample vault and run a few queries: the quickest way to see vaultseek work."""
    from .config import Config
    from .indexer import Indexer
    from .search import Searcher
    from .store.sqlite import SqliteStore

    vault = Path(__file__).resolve().parent / "sample_vault"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vaultseek"
    db = Path(args.db) if args.db else cache / "demo.db"
    store = SqliteStore(db)
    try:
        summary = Indexer(vault, store, Config()).run()
        print(f"indexed the sample vault ({summary.chunks} chunks from {summary.added + summary.changed + summary.unchanged} notes) into {db} in {summary.seconds:.2f}s")
        searcher = Searcher(store)
        for query in args.query or DEMO_QUERIES:
            result = searcher.search(query, k=3)
            print(f"\n$ vaultseek search {query!r}")
            for rank, hit in enumerate(result.hits, start=1):
                where = f" › {hit.section}" if hit.section else ""
                print(f"{rank:>2}. {hit.path}{where}  {hit.score:.4f}")
                print(f"    {hit.snippet[:160]}")
    finally:
        store.close()
    print("\nnext: vaultseek index PATH/TO/YOUR/VAULT, then vaultseek search --vault PATH/TO/YOUR/VAULT \"your words\"")
    return 0


# -- argument parsing ----------------------------------------------------------------------


def _add_location(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--db", help="index file (default: VAULT/.vaultseek/index.db)")
    g.add_argument("--vault", help="the vault folder (default: the nearest indexed folder at or above the current one)")


# Commands defined in other modules, imported only when they are asked for (or for --help), so a
# one-off search or a hook does not pay for importing them.
EXTENSIONS = {"eval": "evaluate", "explain": "evaluate", "hook": "agents_cli", "mcp": "agents_cli", "add": "agents_cli", "fetch-reranker": "fetch_reranker"}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vaultseek", description="Fast local hybrid search for Markdown note vaults.")
    parser.add_argument("--version", action="version", version=f"vaultseek {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("index", help="index a vault (incremental after the first run)")
    p.add_argument("vault", nargs="?", help="the vault folder (default: the indexed vault, or the current folder)")
    p.add_argument("--db", help="index file (default: VAULT/.vaultseek/index.db)")
    p.add_argument("--full", action="store_true", help="rebuild everything from scratch")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log per-file decisions to stderr")
    p.add_argument("--config", help="config file (default: VAULT/.vaultseek/config.toml)")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("search", help="search the index")
    p.add_argument("query", nargs="+", help="words to search for (searched as text: no query syntax can break it)")
    _add_location(p)
    p.add_argument("-k", type=int, default=None, help="number of results (default 10)")
    p.add_argument("--mode", choices=["hybrid", "bm25", "vector"], default="hybrid")
    p.add_argument("--max-tokens", type=int, default=None, help="cut the results to about this many tokens of text")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("--explain", action="store_true", help="show each result's rank in each list and its RRF terms")
    p.add_argument("--tag", action="append", help="only notes with this tag (repeatable; same as tag:X in the query)")
    p.add_argument("--path", action="append", help="only notes under this folder or path prefix (same as path:X)")
    p.add_argument("--type", action="append", help="only notes of this front-matter type (same as type:X)")
    p.add_argument("--after", help="only notes dated on or after YYYY-MM-DD (front-matter date, else modification time)")
    p.add_argument("--before", help="only notes dated before YYYY-MM-DD")
    p.add_argument("--no-correct", action="store_true", help="search words as typed, without typo correction")
    p.add_argument("--rerank", action="store_true", help="rescore the top results with a transformer model (all-MiniLM-L6-v2 unless search.rerank names one; slower, see docs/evaluation.md)")
    p.add_argument("--config", help="config file")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("status", help="what is indexed, what changed, whether vectors work")
    _add_location(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--config", help="config file")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("scan", help="report credentials in notes (exit 1 if any); never prints the values")
    p.add_argument("path", nargs="?", help="a vault folder or a note (default: the current folder)")
    p.add_argument("--json", action="store_true", help='print {"scanned", "findings": [{"path", "line", "pattern"}]}')
    p.set_defaults(func=cmd_scan)

    p = sub.add_parser("demo", help="index the bundled sample vault and run example searches")
    p.add_argument("query", nargs="*", help="queries to run (default: a few examples in English and Chinese)")
    p.add_argument("--db", help="where to put the demo index (default: ~/.cache/vaultseek/demo.db)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("bench", help="warm query latency per mode (p50/p95)")
    _add_location(p)
    p.add_argument("--queries", help="file with one query per line (default: a built-in set)")
    p.add_argument("--rounds", type=int, default=5, help="times each query runs (default 5)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_bench)

    import importlib

    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    wanted = {EXTENSIONS[words[0]]} if words and words[0] in EXTENSIONS else (set() if words and words[0] in sub.choices else set(EXTENSIONS.values()))
    for module in sorted(wanted):
        importlib.import_module(f".{module}", __package__).register_cli(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    setup_logging(getattr(args, "verbose", 0), quiet=getattr(args, "json", False) and not getattr(args, "verbose", 0))
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except VaultseekError as exc:
        log.error("%s", exc)
        return exc.exit_code
    except KeyboardInterrupt:
        log.error("interrupted")
        return 130
    except BrokenPipeError:  # e.g. `vaultseek search x | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
