"""Shared fixtures: the real bundled model (loaded once), real SQLite files in tmp dirs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vaultseek.config import Config
from vaultseek.embed import load_embedder
from vaultseek.indexer import Indexer
from vaultseek.store.sqlite import SqliteStore

SAMPLE_VAULT = Path(__file__).resolve().parent.parent / "src" / "vaultseek" / "sample_vault"


@pytest.fixture(autouse=True)
def _isolated_user_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the real user's cache or config."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.delenv("VAULTSEEK_CONFIG", raising=False)


@pytest.fixture(scope="session")
def embedder():
    return load_embedder()


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A writable copy of the bundled sample vault."""
    dest = tmp_path / "vault"
    shutil.copytree(SAMPLE_VAULT, dest)
    return dest


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "index" / "index.db"


@pytest.fixture
def index_folder(tmp_path: Path, embedder):
    """Index any folder into a new index under tmp_path; returns a function giving the open store
    (closed after the test)."""
    stores: list[SqliteStore] = []

    def run(folder: Path, config: Config = Config()) -> SqliteStore:
        store = SqliteStore(tmp_path / f"folder-{len(stores)}.db")
        stores.append(store)
        Indexer(folder, store, config, embedder=embedder).run()
        return store

    yield run
    for s in stores:
        s.close()


@pytest.fixture
def index(vault: Path, db_path: Path, embedder):
    """Index `vault` into `db_path`; returns a function that (re-)runs the indexer."""
    stores: list[SqliteStore] = []

    def run(config: Config = Config(), full: bool = False, **kwargs):
        store = SqliteStore(db_path)
        stores.append(store)
        return Indexer(vault, store, config, embedder=embedder, **kwargs).run(full=full), store

    yield run
    for s in stores:
        s.close()
