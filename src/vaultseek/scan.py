"""Find the notes of a vault: which files count, which folders are skipped and why."""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .config import ALWAYS_SKIPPED, IndexSettings

log = logging.getLogger("vaultseek")


@dataclass(frozen=True)
class FoundFile:
    path: str  # relative to the vault, forward slashes
    abspath: str
    mtime_ns: int
    size: int


def _norm_folder(folder: str) -> str:
    return folder.strip().strip("/").replace("\\", "/")


def folder_rule(relpath: str, folders: tuple[str, ...]) -> str | None:
    """The first folder of `folders` that contains `relpath`, if any."""
    for folder in folders:
        f = _norm_folder(folder)
        if f and (relpath == f or relpath.startswith(f + "/")):
            return f
    return None


def exclusion_reason(relpath: str, settings: IndexSettings) -> str | None:
    """Why a note at `relpath` is not indexed by the folder rules, or None."""
    parts = relpath.split("/")
    for part in parts[:-1]:
        if part in ALWAYS_SKIPPED:
            return f"folder {part}/ is always skipped"
        if part.startswith("."):
            return f"hidden folder {part}/"
    if settings.include and folder_rule(relpath, settings.include) is None:
        return "outside the include list"
    hit = folder_rule(relpath, settings.exclude)
    if hit:
        return f"excluded folder {hit}/"
    return None


def scan_vault(root: Path, settings: IndexSettings) -> list[FoundFile]:
    """Every note under `root` that the folder rules admit (private folders included: the
    indexer records them as excluded). Follows symlinked folders once; loops are skipped."""
    found: list[FoundFile] = []
    seen_dirs: set[tuple[int, int]] = set()
    exts = tuple(e.lower() for e in settings.extensions)
    root_str = str(root)

    def walk(dir_path: str, rel: str) -> None:
        try:
            st = os.stat(dir_path)
        except OSError as exc:
            log.warning("cannot read folder %s: %s", rel or ".", exc.strerror or exc)
            return
        key = (st.st_dev, st.st_ino)
        if key in seen_dirs:
            log.warning("skipping %s: symlink loop or folder already indexed", rel)
            return
        seen_dirs.add(key)
        try:
            entries = sorted(os.scandir(dir_path), key=lambda e: e.name)
        except OSError as exc:
            log.warning("cannot list folder %s: %s", rel or ".", exc.strerror or exc)
            return
        for entry in entries:
            name = entry.name
            child_rel = f"{rel}/{name}" if rel else name
            try:
                is_dir = entry.is_dir()  # follows symlinks
            except OSError:
                continue
            if is_dir:
                if name in ALWAYS_SKIPPED or name.startswith("."):
                    continue
                if settings.include and not _may_contain_included(child_rel, settings.include):
                    continue
                if folder_rule(child_rel, settings.exclude):
                    continue
                walk(entry.path, child_rel)
                continue
            if not name.lower().endswith(exts):
                continue
            try:
                est = entry.stat()
            except OSError as exc:  # dangling symlink, vanished file
                log.warning("skipping %s: %s", child_rel, exc.strerror or exc)
                continue
            if not stat.S_ISREG(est.st_mode):
                continue
            if exclusion_reason(child_rel, settings):
                continue
            found.append(FoundFile(child_rel, entry.path, est.st_mtime_ns, est.st_size))

    walk(root_str, "")
    return found


def _may_contain_included(rel_dir: str, include: tuple[str, ...]) -> bool:
    for folder in include:
        f = _norm_folder(folder)
        if not f or rel_dir == f or rel_dir.startswith(f + "/") or f.startswith(rel_dir + "/"):
            return True
    return False
