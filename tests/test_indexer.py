"""Incremental indexing, FTS consistency, fingerprints and bad input, on real SQLite files."""

from __future__ import annotations

import os
import threading
from dataclasses import replace

import apsw
import pytest

from vaultseek.config import Config, IndexSettings
from vaultseek.errors import DatabaseBusy, SchemaMismatch, UsageError
from vaultseek.indexer import Indexer
from vaultseek.search import Searcher
from vaultseek.store.sqlite import SqliteStore, WriterLock


def fts_rows(store: SqliteStore) -> int:
    return store.conn.execute("SELECT count(*) FROM chunks_fts").fetchone()[0]


def assert_consistent(store: SqliteStore) -> None:
    """No ghost rows: every FTS row and vector belongs to a live chunk, and the other way round."""
    c = store.counts()
    assert fts_rows(store) == c["chunks"]
    assert c["vectors"] == c["chunks"]
    orphans = store.conn.execute("SELECT count(*) FROM vec_keys WHERE chunk_id NOT IN (SELECT id FROM chunks)").fetchone()[0]
    assert orphans == 0
    ids, q, scales, bits = store.load_vectors()  # what search loads: live vectors only, one per chunk
    assert len(ids) == c["chunks"] == len(set(ids.tolist()))
    live = {r[0] for r in store.conn.execute("SELECT id FROM chunks")}
    assert set(ids.tolist()) == live
    orphan_chunks = store.conn.execute("SELECT count(*) FROM chunks WHERE file_id NOT IN (SELECT id FROM files)").fetchone()[0]
    assert orphan_chunks == 0


def bm25_paths(store: SqliteStore, query: str) -> list[str]:
    return [h.path for h in Searcher(store).search(query, mode="bm25").hits]


def test_first_run_then_noop(index, vault):
    summary, store = index()
    assert summary.added == 12 and summary.chunks == store.counts()["chunks"] > 20
    assert_consistent(store)
    again, _ = index()
    assert (again.added, again.changed, again.deleted, again.unchanged, again.embedded) == (0, 0, 0, 12, 0)


def test_touched_but_unchanged_file_costs_nothing(index, vault):
    index()
    note = vault / "Personal" / "Sourdough bread.md"
    os.utime(note, ns=(note.stat().st_atime_ns, note.stat().st_mtime_ns + 10_000_000_000))
    summary, _ = index()
    assert summary.changed == 0 and summary.unchanged == 12 and summary.embedded == 0


def test_edit_replaces_fts_rows_and_only_embeds_changed_sections(index, vault):
    _, store = index()
    note = vault / "Personal" / "Sourdough bread.md"
    text = note.read_text().replace("500 g bread flour", "500 g spelt flour")
    note.write_text(text)
    summary, store = index()
    assert summary.changed == 1 and summary.embedded == 1  # only the Ingredients section changed
    assert_consistent(store)
    assert bm25_paths(store, "spelt") == ["Personal/Sourdough bread.md"]
    assert bm25_paths(store, "bread flour 500")[0] == "Personal/Sourdough bread.md"


def test_removed_words_leave_no_ghost_rows(index, vault):
    _, store = index()
    assert bm25_paths(store, "autolyse")
    note = vault / "Personal" / "Sourdough bread.md"
    note.write_text("---\ntitle: Sourdough bread\n---\n## Method\nNothing left of the old recipe text here.\n")
    _, store = index()
    assert bm25_paths(store, "autolyse") == []
    assert_consistent(store)


def test_delete_removes_everything(index, vault):
    _, store = index()
    before = store.counts()
    (vault / "Engineering" / "Docker Networking.md").unlink()
    summary, store = index()
    assert summary.deleted == 1
    after = store.counts()
    assert after["files"] == before["files"] - 1 and after["chunks"] < before["chunks"]
    assert bm25_paths(store, "docker") == []
    assert_consistent(store)


def test_rename_moves_without_reembedding(index, vault):
    _, store = index()
    src = vault / "Engineering" / "Docker Networking.md"
    src.rename(vault / "Engineering" / "Containers and networks.md")
    summary, store = index()
    assert summary.renamed == 1 and summary.deleted == 0 and summary.embedded == 0
    assert set(bm25_paths(store, "docker network inspect")) == {"Engineering/Containers and networks.md"}
    assert_consistent(store)


def test_fingerprint_change_reembeds_everything(index, vault):
    first, store = index()
    config = replace(Config(), chunking=replace(Config().chunking, max_chars=1500))
    summary, store = index(config)
    assert summary.full and summary.embedded > 0 and summary.added == 12
    assert store.get_meta("fingerprint") != "" and "1500" in store.get_meta("fingerprint")
    assert_consistent(store)


def test_full_flag_rebuilds(index):
    index()
    summary, store = index(full=True)
    assert summary.full and summary.added == 12
    assert_consistent(store)


def test_private_notes_are_not_indexed_and_audited(index, vault):
    (vault / "Diary").mkdir()
    (vault / "Diary" / "today.md").write_text("Dear diary, today I wrote my bank PIN on a sticky note.")
    (vault / "Security" / "keys.md").write_text("---\nprivate: true\n---\nThe master passphrase hint is purple elephant.")
    config = replace(Config(), index=IndexSettings(private_folders=("Diary",)))
    summary, store = index(config)
    assert summary.excluded == 2
    excluded = store.excluded()
    assert excluded["Diary/today.md"].startswith("private folder")
    assert "front matter" in excluded["Security/keys.md"]
    assert bm25_paths(store, "elephant") == [] and bm25_paths(store, "diary") == []
    raw = store.path.read_bytes()
    assert b"elephant" not in raw and b"sticky" not in raw
    from vaultseek.cli import main
    import json, io, contextlib

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["status", "--db", str(store.path), "--json"])
    assert json.loads(out.getvalue())["sensitive"] == 2


def test_bad_files_do_not_stop_the_run(index, vault, caplog):
    (vault / "latin1.md").write_bytes("caf\xe9 menu with cr\xe8me br\xfbl\xe9e and more words".encode("latin-1"))
    (vault / "nul.md").write_bytes(b"text with a stray \x00 NUL byte inside that is still a note")
    (vault / "empty.md").write_bytes(b"")
    (vault / "image.md").write_bytes(bytes(range(256)) * 40)
    (vault / "loop").symlink_to(vault, target_is_directory=True)
    (vault / "dangling.md").symlink_to(vault / "nowhere.md")
    summary, store = index()
    assert summary.added == 12 + 3  # latin1, nul and empty are notes; the binary one is not
    assert store.excluded()["image.md"].startswith("binary")
    assert "latin1.md" in bm25_paths(store, "menu")
    assert "nul.md" in bm25_paths(store, "stray")
    assert any("not valid UTF-8" in r.message for r in caplog.records)
    assert_consistent(store)


def test_large_note_is_indexed_and_oversized_one_is_excluded(index, vault):
    big = vault / "big.md"
    big.write_text(("## Section\n" + "lorem ipsum dolor sit amet " * 200 + "\n\n") * 300)  # ~1.6 MB
    summary, store = index()
    assert summary.added == 13
    assert max(r[0] for r in store.conn.execute("SELECT chars FROM chunks")) <= 2000
    config = replace(Config(), index=IndexSettings(max_file_mb=1))
    big.write_text(big.read_text() + "more")
    summary, store = index(config)
    assert "larger than" in store.excluded()["big.md"]
    assert_consistent(store)


def test_missing_vault_is_a_usage_error(db_path, embedder, tmp_path):
    store = SqliteStore(db_path)
    with pytest.raises(UsageError, match="vault not found"):
        Indexer(tmp_path / "nope", store, Config(), embedder=embedder).run()


def test_second_writer_gets_a_clear_message(index, db_path):
    index()
    with WriterLock(db_path):
        lock = WriterLock(db_path, wait_seconds=0.2)
        with pytest.raises(DatabaseBusy, match="another vaultseek process"):
            lock.__enter__()


def test_locked_database_is_reported(index, db_path):
    _, store = index()
    other = apsw.Connection(str(db_path))
    other.execute("BEGIN IMMEDIATE")
    try:
        store.conn.setbusytimeout(100)
        with pytest.raises(DatabaseBusy):
            with store.transaction():
                pass
    finally:
        other.execute("ROLLBACK")


def test_newer_schema_is_refused_and_older_is_rebuilt(index, db_path):
    _, store = index()
    store.set_meta("schema_version", "999")
    store.close()
    with pytest.raises(SchemaMismatch, match="newer vaultseek"):
        SqliteStore(db_path)
    conn = apsw.Connection(str(db_path))
    conn.execute("UPDATE meta SET value='0' WHERE key='schema_version'")
    conn.close()
    with pytest.raises(SchemaMismatch, match="run `vaultseek index`"):
        SqliteStore(db_path, readonly=True)
    summary, store = index()
    assert summary.added == 12
    assert store.get_meta("migrated_from") == "0"
    assert_consistent(store)


def test_not_a_database(tmp_path):
    bogus = tmp_path / "x.db"
    bogus.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(Exception, match="not a vaultseek index"):
        SqliteStore(bogus)


def test_interrupted_run_resumes(index, vault):
    stop = threading.Event()

    def progress(done: int, total: int) -> None:
        if done == 5:
            stop.set()

    summary, store = index(progress=progress, stop=stop)
    assert summary.interrupted
    assert 0 < store.counts()["files"] < 12
    assert_consistent(store)
    summary, store = index()
    assert not summary.interrupted and store.counts()["files"] == 12
    assert summary.added == 12 - (5)
    assert_consistent(store)


def test_settings_that_make_indexed_notes_private_apply_without_edits(index, vault):
    """Adding a private folder or tag to the config removes already indexed notes (review #1)."""
    (vault / "Journal").mkdir()
    (vault / "Journal" / "day1.md").write_text("Ate pineapples on the balcony and thought about the move.")
    (vault / "health.md").write_text("---\ntags: [health]\n---\nBlood test results were fine, said the clinic.")
    _, store = index()
    assert bm25_paths(store, "pineapples") and bm25_paths(store, "clinic")
    config = replace(Config(), index=IndexSettings(private_folders=("Journal",), private_tags=("private", "health")))
    summary, store = index(config)
    assert summary.excluded == 2
    assert bm25_paths(store, "pineapples") == [] and bm25_paths(store, "clinic") == []
    assert set(store.excluded()) == {"Journal/day1.md", "health.md"}
    assert_consistent(store)
    summary, store = index()  # the rules relaxed again: the notes come back
    assert bm25_paths(store, "pineapples") and bm25_paths(store, "clinic")


def test_private_notes_fail_closed(index, vault):
    """Malformed front matter that says private, and nested private tags, are never indexed (review #2)."""
    (vault / "a.md").write_text("---\nprivate: true\ntitle: Meeting: notes [draft\n---\n# Secret\n\nThe lawyer is called Fenwick.")
    (vault / "b.md").write_text("---\ntags: [private/health]\n---\nThe allergist is called Okonkwo.")
    _, store = index()
    assert bm25_paths(store, "fenwick") == [] and bm25_paths(store, "okonkwo") == []
    assert {"a.md", "b.md"} <= set(store.excluded())


def test_a_foreign_database_is_refused_untouched(tmp_path, embedder, vault):
    """Pointing --db at another program's SQLite file changes nothing in it (review #9)."""
    other = tmp_path / "other.db"
    conn = apsw.Connection(str(other))
    conn.execute("CREATE TABLE t(x)")
    conn.close()
    with pytest.raises(SchemaMismatch, match="not a vaultseek index"):
        SqliteStore(other)
    conn = apsw.Connection(str(other))
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
