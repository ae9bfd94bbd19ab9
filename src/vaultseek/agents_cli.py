"""The agent-facing commands: `vaultseek hook ...` (Claude Code), `vaultseek mcp` and
`vaultseek add` (external sources), and the editing of Claude Code's settings.json that
`hook install` and `hook uninstall` do.

`register_cli(sub)` adds the commands to the main parser. Nothing heavy is imported here: a hook
runs on every prompt, and the MCP SDK takes about a second to import, so each command imports its
module when it runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from .errors import UsageError

log = logging.getLogger("vaultseek")

# What the hook answers (see hooks.query_for_event); kept here so registering the commands imports nothing.
PROMPT_EVENT = "UserPromptSubmit"
TOOL_EVENT = "PreToolUse"
TOOL_MATCHER = "Grep|Glob|Read|WebSearch"
HOOK_TIMEOUT_SECONDS = 10
DEFAULT_MAX_TOKENS = 500


def _add_location(p: argparse.ArgumentParser, what: str = "index") -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--db", help=f"{what} file (default: VAULT/.vaultseek/index.db)")
    g.add_argument("--vault", help="the vault folder (default: the nearest indexed folder at or above the current one)")


def _add_scope(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--project", dest="scope", action="store_const", const="project", help="./.claude/settings.json (the default)")
    g.add_argument("--user", dest="scope", action="store_const", const="user", help="~/.claude/settings.json (every project)")
    p.set_defaults(scope="project")
    p.add_argument("--dry-run", action="store_true", help="print the change as a diff and write nothing")


def _never_fail(status: int = 0, message: str | None = None) -> NoReturn:
    """`exit` for the hook's parser: Claude Code treats exit 2 as "block this prompt", so even a
    bad flag must exit 0 (with the reason on stderr)."""
    if message:
        sys.stderr.write(f"vaultseek: hook not run: {message.strip()}\n")
    sys.exit(0)


def _keeping_unknown(parse: Any) -> Any:
    """`parse_known_args` for the hook's parser that keeps unknown arguments to itself: passed up,
    the main parser would exit 2 on them, which blocks the user's prompt."""

    def parse_known_args(args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, unknown = parse(args, namespace)
        parsed.unknown_args = unknown
        return parsed, []

    return parse_known_args


# -- settings.json: install and uninstall ----------------------------------------------------------

_OURS_RE = re.compile(r"\bvaultseek\b.*\bhook\s+claude-code\b")


@dataclass(frozen=True)
class SettingsChange:
    path: Path
    before: str | None  # None when the file did not exist
    after: str
    backup: Path | None = None

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        import difflib

        old = (self.before or "").splitlines(keepends=True)
        new = self.after.splitlines(keepends=True)
        name = str(self.path)
        return "".join(difflib.unified_diff(old, new, fromfile=name if self.before is not None else "/dev/null", tofile=name))


def settings_path(scope: str, cwd: Path | None = None) -> Path:
    """Claude Code's settings file: `./.claude/settings.json` (project) or `~/.claude/settings.json` (user)."""
    if scope == "user":
        return Path.home() / ".claude" / "settings.json"
    return (cwd or Path.cwd()) / ".claude" / "settings.json"


def hook_command(db: str | None = None, vault: str | None = None, max_tokens: int | None = None) -> str:
    """The shell command Claude Code runs: this vaultseek, by absolute path, so the hook works
    whatever PATH Claude Code has."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name.split(".")[0] == "vaultseek" and script.exists():
        argv = [str(script.absolute())]
    else:  # `python -m vaultseek`, or an embedding program
        argv = [sys.executable, "-m", "vaultseek"]
    argv += ["hook", "claude-code"]
    if db:
        argv += ["--db", str(Path(db).expanduser().absolute())]
    elif vault:
        argv += ["--vault", str(Path(vault).expanduser().absolute())]
    if max_tokens is not None and max_tokens != DEFAULT_MAX_TOKENS:
        argv += ["--max-tokens", str(max_tokens)]
    if os.name == "nt":  # pragma: no cover - Windows quoting
        import subprocess

        return subprocess.list2cmdline(argv)
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


def is_ours(hook: Any) -> bool:
    return isinstance(hook, dict) and isinstance(hook.get("command"), str) and bool(_OURS_RE.search(hook["command"]))


def _read_settings(path: Path) -> tuple[str | None, dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}; nothing was changed") from None
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise UsageError(
            f"{path} is not valid JSON ({getattr(exc, 'msg', exc)}{where}); nothing was changed",
            hint="fix the file by hand (or move it aside), then run this again",
        ) from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} does not hold a JSON object; nothing was changed", hint="fix the file by hand, then run this again")
    return text, data


def _hooks_table(settings: dict[str, Any], path: Path) -> dict[str, Any]:
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f'"hooks" in {path} is not an object; nothing was changed', hint="fix the file by hand, then run this again")
    for event in (PROMPT_EVENT, TOOL_EVENT):
        groups = hooks.get(event, [])
        if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
            raise UsageError(f'"hooks.{event}" in {path} is not a list of matcher groups; nothing was changed', hint="fix the file by hand, then run this again")
    return hooks


def _wanted_groups(command: str) -> dict[str, dict[str, Any]]:
    entry = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SECONDS}
    return {PROMPT_EVENT: {"hooks": [dict(entry)]}, TOOL_EVENT: {"matcher": TOOL_MATCHER, "hooks": [dict(entry)]}}


def _remove_ours(settings: dict[str, Any]) -> bool:
    """Remove our hook entries; drop the groups, event lists and `hooks` table this empties."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return False
    removed = False
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        touched = False
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(inner, list) and any(is_ours(h) for h in inner):
                touched = True
                rest = [h for h in inner if not is_ours(h)]
                if rest:
                    kept_groups.append({**group, "hooks": rest})
            else:
                kept_groups.append(group)
        if touched:
            removed = True
            if kept_groups:
                hooks[event] = kept_groups
            else:
                del hooks[event]
    if removed and not hooks:
        del settings["hooks"]
    return removed


def _dump(settings: dict[str, Any], like: str | None = None) -> str:
    """JSON text for the settings, indented as the file was (2 spaces for a new file)."""
    indent: str | int = 2
    for line in (like or "").splitlines()[1:]:
        if line[:1] in (" ", "\t"):
            indent = line[: len(line) - len(line.lstrip())]
            break
    return json.dumps(settings, indent=indent, ensure_ascii=False) + "\n"


def plan_install(path: Path, command: str) -> SettingsChange:
    """The settings file with our hook entries in it (replacing older ones of ours), unwritten."""
    before, settings = _read_settings(path)
    hooks = _hooks_table(settings, path)
    wanted = _wanted_groups(command)
    present = all(
        sum(1 for g in hooks.get(event, []) for h in g.get("hooks", []) if is_ours(h)) == 1 and group in hooks.get(event, [])
        for event, group in wanted.items()
    )
    if present:  # already installed as wanted: leave the file exactly as it is
        return SettingsChange(path, before, before if before is not None else _dump(settings))
    _remove_ours(settings)
    hooks = settings.setdefault("hooks", {})
    for event, group in wanted.items():
        hooks.setdefault(event, []).append(group)
    return SettingsChange(path, before, _dump(settings, before))


def plan_uninstall(path: Path) -> SettingsChange:
    """The settings file without our hook entries, unwritten."""
    before, settings = _read_settings(path)
    _hooks_table(settings, path)
    if before is None or not _remove_ours(settings):
        return SettingsChange(path, before, before or "")
    return SettingsChange(path, before, _dump(settings, before))


def apply_change(change: SettingsChange, now: float | None = None) -> SettingsChange:
    """Write a planned change: a timestamped backup of the old file first, then an atomic replace."""
    if not change.changed:
        return change
    path = change.path
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if change.before is not None:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
        backup = path.with_name(f"{path.name}.bak-{stamp}")
        n = 1
        while backup.exists():
            n += 1
            backup = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        backup.write_text(change.before, encoding="utf-8")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(change.after, encoding="utf-8")
    if path.exists():
        os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)
    return SettingsChange(path, change.before, change.after, backup)


# -- commands ----------------------------------------------------------------------------------


def cmd_hook_claude_code(args: argparse.Namespace) -> NoReturn:
    """Answer one Claude Code hook event. Always exits 0: a hook must never block the user."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")  # one small search: BLAS worker threads would only compete with it
    if getattr(args, "unknown_args", None):
        log.warning("hook: ignoring unknown arguments %s", " ".join(args.unknown_args))
    try:
        from .hooks import run_claude_code_hook

        stdin = sys.stdin.buffer.read().decode("utf-8", errors="replace")
        out = run_claude_code_hook(
            stdin, db=args.db, vault=args.vault, max_tokens=args.max_tokens, use_cache=not args.no_cache, use_server=not args.no_server
        )
    except BaseException as exc:  # noqa: BLE001 - any failure (even SystemExit(2)) means "add nothing", never a blocked prompt
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.warning("hook: %s (nothing added to the prompt)", reason)
        _exit_now()
    if out:
        try:
            sys.stdout.write(out)
            sys.stdout.flush()
        except OSError as exc:  # Claude Code went away
            log.warning("hook: cannot write the answer: %s", exc)
    _exit_now()


def _exit_now() -> NoReturn:
    """Exit 0 at once. Tearing down the interpreter (freeing the vectors, unloading numpy, joining
    the search thread) takes ~60 ms on a large vault, which every prompt would wait for."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


def _settings_change(args: argparse.Namespace, install: bool) -> int:
    path = settings_path(args.scope)
    if install:
        change = plan_install(path, hook_command(args.db, args.vault, args.max_tokens))
    else:
        change = plan_uninstall(path)
    if not change.changed:
        print(f"{'already installed in' if install else 'not installed in'} {path}; nothing to do")
        return 0
    sys.stdout.write(change.diff())
    if args.dry_run:
        print(f"dry run: {path} not written")
        return 0
    done = apply_change(change)
    if done.backup:
        print(f"backup of the previous file: {done.backup}")
    print(f"{'installed the vaultseek hook in' if install else 'removed the vaultseek hook from'} {path}")
    if install:
        print("Claude Code reads hooks at start-up: restart it (or check with /hooks).")
    return 0


def cmd_hook_serve(args: argparse.Namespace) -> int:
    """The resident search process (started by the hook itself; stops when idle)."""
    from .hooks import serve

    serve(Path(args.db).expanduser(), idle_seconds=args.idle)
    return 0


def cmd_hook_install(args: argparse.Namespace) -> int:
    return _settings_change(args, install=True)


def cmd_hook_uninstall(args: argparse.Namespace) -> int:
    return _settings_change(args, install=False)


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the index over MCP on stdio."""
    from .config import default_db_path, find_vault_upwards
    from .errors import UsageError
    from .mcp_server import serve

    vault = Path(args.vault).expanduser() if args.vault else None
    if vault is not None and not vault.is_dir():
        raise UsageError(f"vault not found: {vault}", hint="pass the folder that holds your notes")
    if args.db:
        db = Path(args.db).expanduser()
    else:
        vault = vault or find_vault_upwards(Path.cwd()) or Path.cwd()
        db = default_db_path(vault)
    log.info("serving %s over MCP on stdio", db)
    serve(db, vault)
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    """Add a page or file as an external source (or, with --refresh, refetch and drop what is due)."""
    from .config import default_db_path, find_vault_upwards
    from .errors import IndexMissing
    from .sources import DEFAULT_TTL, Sources, parse_ttl

    if not args.target and not args.refresh:
        raise UsageError("give a URL or a file to add", hint="vaultseek add https://example.com/page --ttl 24h")
    ttl = parse_ttl(args.ttl or DEFAULT_TTL)
    if args.db:
        db = Path(args.db).expanduser()
    else:
        vault = Path(args.vault).expanduser() if args.vault else (find_vault_upwards(Path.cwd()) or Path.cwd())
        db = default_db_path(vault)
    if not db.is_file():
        raise IndexMissing(f"no index at {db}", hint="index the vault first (`vaultseek index VAULT`); sources are kept beside its index")
    sources = Sources(db)
    report = sources.maintain()
    added = sources.add(args.target, ttl) if args.target else None
    summary = sources.reindex()
    known = sources.load()
    if args.json:
        emit = {
            "added": {"origin": added.origin, "title": added.title, "file": added.file, "ttl_seconds": added.ttl_seconds} if added else None,
            **report,
            "sources": len(known),
            "chunks": summary.chunks,
        }
        print(json.dumps(emit, ensure_ascii=False))
        return 0
    if added:
        print(f"added {added.origin} ({added.title}); refetched after {args.ttl or DEFAULT_TTL}, dropped after 14 days unused")
    for origin in report["refreshed"]:
        print(f"refetched {origin}")
    for origin in report["dropped"]:
        print(f"dropped {origin} (unused for 14 days)")
    print(f"{len(known)} sources, {summary.chunks} chunks in {sources.root}")
    return 1 if report["failed"] and not added else 0


# -- registration ------------------------------------------------------------------------------


def register_cli(sub: Any) -> None:
    """Add `hook`, `add` and `mcp` to the main parser's subcommands (`sub` from `add_subparsers`)."""
    hook = sub.add_parser("hook", help="Claude Code hook: add relevant notes to prompts; install or remove it")
    hook_sub = hook.add_subparsers(dest="hook_command", metavar="HOOK", required=True)

    p = hook_sub.add_parser(
        "claude-code",
        help="answer one Claude Code hook event (JSON on stdin); prints hook JSON or nothing; always exits 0",
        description="Read a Claude Code hook event on stdin (UserPromptSubmit, or PreToolUse for Grep, Glob, Read and "
        "WebSearch) and print the notes relevant to it as additionalContext, or nothing. Never blocks: every error "
        "exits 0 with the reason on stderr.",
    )
    _add_location(p)
    p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS, help=f"size of the added context (~4 characters a token; default {DEFAULT_MAX_TOKENS})")
    p.add_argument("--no-cache", action="store_true", help="always search (skip the small answer cache beside the index)")
    p.add_argument("--no-server", action="store_true", help="search in this process; never use or start the resident search process")
    p.exit = _never_fail  # type: ignore[method-assign]
    p.parse_known_args = _keeping_unknown(p.parse_known_args)  # type: ignore[method-assign]
    p.set_defaults(func=cmd_hook_claude_code)

    p = hook_sub.add_parser(
        "serve",
        help="the resident search process that `hook claude-code` starts by itself (stops when idle)",
        description="Keep one index's search loaded and answer `vaultseek hook claude-code` over a Unix socket in a private "
        "runtime folder. Started by the hook when absent; stops after --idle seconds without a question, or when the index is "
        "replaced or reconfigured.",
    )
    p.add_argument("--db", required=True, help="the index file")
    p.add_argument("--idle", type=float, default=600, help="seconds without a question before it stops (default 600)")
    p.set_defaults(func=cmd_hook_serve)

    for name, func, text in (
        ("install", cmd_hook_install, "add the vaultseek hook to Claude Code's settings.json (idempotent; backup + diff)"),
        ("uninstall", cmd_hook_uninstall, "remove the vaultseek hook from Claude Code's settings.json (backup + diff)"),
    ):
        p = hook_sub.add_parser(name, help=text, description=text)
        _add_scope(p)
        if name == "install":
            g = p.add_mutually_exclusive_group()
            g.add_argument("--db", help="bake this index into the hook command (default: found from the project folder at run time)")
            g.add_argument("--vault", help="bake this vault into the hook command")
            p.add_argument("--max-tokens", type=int, default=None, help=f"context size for the hook (default {DEFAULT_MAX_TOKENS})")
        else:
            p.set_defaults(db=None, vault=None, max_tokens=None)
        p.set_defaults(func=func)

    p = sub.add_parser(
        "add",
        help="index a web page or a file as an external source beside the vault (refetched after --ttl)",
        description="Fetch a URL (http/https: HTML, Markdown or text) or read a file and index it as an external "
        "source, kept beside the vault's index and never in the vault. The hook and the MCP server search sources "
        "with the notes. A source is refetched once its TTL has passed and dropped when no search used it for 14 days.",
    )
    p.add_argument("target", nargs="?", help="a URL or a Markdown, text or HTML file")
    p.add_argument("--ttl", default=None, help="refetch after this long: 90s, 30m, 24h (default), 7d")
    p.add_argument("--refresh", action="store_true", help="only refetch sources past their TTL and drop unused ones")
    _add_location(p)
    p.add_argument("--json", action="store_true", help='print {"added", "refreshed", "dropped", "failed", "sources", "chunks"}')
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("mcp", help="serve the index to AI agents over MCP (stdio): tools search, get_note, status")
    _add_location(p)
    p.set_defaults(func=cmd_mcp)
