"""Config files, folder rules and the index location."""

from __future__ import annotations

from pathlib import Path

import pytest

from vaultseek import indexer as indexer_module
from vaultseek.config import IndexSettings, load_config
from vaultseek.errors import UsageError
from vaultseek.scan import exclusion_reason, scan_vault


def write_config(vault: Path, text: str) -> Path:
    (vault / ".vaultseek").mkdir(exist_ok=True)
    path = vault / ".vaultseek" / "config.toml"
    path.write_text(text)
    return path


def test_defaults_without_a_file(tmp_path):
    config = load_config(tmp_path)
    assert config.search.rrf_k == 60 and config.search.candidates == 30 and config.search.k == 10
    assert config.chunking.max_chars == 2000 and config.model == "potion-base-8M"


def test_values_are_read(tmp_path):
    write_config(tmp_path, 'model = "my-model"\n[index]\nexclude = ["Templates"]\nmax_file_mb = 5\n[search]\nrrf_k = 30\nbm25_weight = 1.5\n')
    config = load_config(tmp_path)
    assert config.model == "my-model" and config.index.exclude == ("Templates",) and config.index.max_file_mb == 5.0
    assert config.search.rrf_k == 30 and config.search.bm25_weight == 1.5


@pytest.mark.parametrize(
    "text, message",
    [
        ("[search]\nrrf_kk = 1\n", "unknown setting search.rrf_kk"),
        ("[index]\nexclude = \"Templates\"\n", "must be a list of strings"),
        ("[search]\nk = \"ten\"\n", "must be a number"),
        ("[nonsense]\n", "unknown section"),
        ("[search\n", "not valid TOML"),
        ("[chunking]\nmax_chars = 10\n", "max_chars must be at least 100"),
    ],
)
def test_mistakes_are_reported(tmp_path, text, message):
    write_config(tmp_path, text)
    with pytest.raises(UsageError, match=message):
        load_config(tmp_path)


def test_folder_rules(tmp_path):
    settings = IndexSettings(include=("Notes", "Work/Projects"), exclude=("Notes/Archive",))
    assert exclusion_reason("Notes/a.md", settings) is None
    assert exclusion_reason("Work/Projects/x/y.md", settings) is None
    assert exclusion_reason("Work/other.md", settings) == "outside the include list"
    assert exclusion_reason("Notes/Archive/old.md", settings) == "excluded folder Notes/Archive/"
    assert "always skipped" in exclusion_reason("Notes/.obsidian/x.md", IndexSettings())
    assert "always skipped" in exclusion_reason("node_modules/pkg/readme.md", IndexSettings())


def test_scan_skips_always_skipped_and_non_notes(tmp_path):
    for rel in ["a.md", "b.markdown", "c.txt", ".obsidian/app.md", ".trash/old.md", "node_modules/x/README.md", ".git/x.md", "sub/d.MD"]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("some words")
    assert sorted(f.path for f in scan_vault(tmp_path, IndexSettings())) == ["a.md", "b.markdown", "sub/d.MD"]


def test_unreadable_file_keeps_its_previous_version(index, vault, monkeypatch):
    _, store = index()
    note = vault / "Personal" / "Sourdough bread.md"
    note.write_text(note.read_text() + "\nA new paragraph about rye.\n")
    real_open = open

    def guarded_open(path, *args, **kwargs):
        if str(path).endswith("Sourdough bread.md"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(indexer_module, "open", guarded_open, raising=False)
    summary, store = index()
    assert summary.skipped == 1 and summary.deleted == 0
    assert store.conn.execute("SELECT count(*) FROM files WHERE path='Personal/Sourdough bread.md'").fetchone()[0] == 1


def test_file_vanishing_mid_run_is_skipped_then_removed(index, vault, monkeypatch):
    _, store = index()
    note = vault / "Personal" / "Sourdough bread.md"
    note.write_text(note.read_text() + "\nmore\n")
    real_open = open

    def vanish(path, *args, **kwargs):
        if str(path).endswith("Sourdough bread.md"):
            note.unlink(missing_ok=True)  # deleted between the scan and the read
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(indexer_module, "open", vanish, raising=False)
    summary, store = index()
    assert summary.skipped == 1
    monkeypatch.undo()
    summary, store = index()
    assert summary.deleted == 1
    assert store.conn.execute("SELECT count(*) FROM files WHERE path='Personal/Sourdough bread.md'").fetchone()[0] == 0
