"""Starting a vaultseek command in the background, detached from the current process."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger("vaultseek")


def start_detached(args: list[str], marker: Path, backoff_seconds: float) -> None:
    """Run `python -m vaultseek ARGS` detached, unless `marker` says one started within
    `backoff_seconds` (so a burst of callers starts it once). Failures are logged, never raised."""
    try:
        if time.time() - marker.stat().st_mtime < backoff_seconds:
            return
    except OSError:
        pass
    try:
        marker.touch()
        subprocess.Popen(
            [sys.executable, "-m", "vaultseek", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True,
        )
    except OSError as exc:
        log.debug("could not start `vaultseek %s`: %s", " ".join(args[:2]), exc)
