"""Retrieval quality: nDCG@10, recall and MRR on test collections, golden sets and a vault self-test,
and `explain`, which tells why one note does or does not come up for one query.

A dataset is a folder in the BEIR layout: `queries.jsonl` ({"_id", "text"}), `qrels.tsv`
(`query-id corpus-id score`, tab-separated, with a header) and optionally `types.tsv`
(`query-id type`). With a `corpus.jsonl` ({"_id", "title", "text"}) it is a BEIR collection: each
document becomes a note in a cache vault, indexed like any vault. Without one it is a golden set
for a vault: `corpus-id` is a note's path relative to the vault.

Results are judged per note: a note counts once, at its best-ranked chunk. Everything written
(cache vaults, their indexes, saved runs) goes to the user cache dir, never into the dataset.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import logging
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from .errors import EmbedderUnavailable, UsageError

if TYPE_CHECKING:
    from .config import Config
    from .search import Searcher
    from .store.sqlite import SqliteStore
    from .types import Note

log = logging.getLogger("vaultseek")

MODES = ("hybrid", "bm25", "vector")
DEPTH = 100  # notes ranked per query (recall@100)
CHUNKS_PER_NOTE = 3  # chunks asked for per note wanted, so `DEPTH` distinct notes survive dedup
CORPUS_FORMAT = "beir-notes-v2"  # bump when the notes written for a corpus change
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


# -- metrics (pure) --------------------------------------------------------------------------
# `ranking` is a list of distinct ids, best first; `qrels` maps ids to graded relevance (ids not
# in it, and grades <= 0, are not relevant). Definitions follow trec_eval, as BEIR and MTEB report.


def dcg(gains: Sequence[float], k: int) -> float:
    """Discounted cumulative gain of the first `k` gains: sum over i = 1..k of gain_i / log2(i + 1)."""
    return sum(g / math.log2(i + 1) for i, g in enumerate(gains[:k], start=1) if g > 0)


def ndcg_at_k(ranking: Sequence[str], qrels: Mapping[str, float], k: int = 10) -> float:
    """Normalised DCG at `k` (Jarvelin and Kekalainen 2002; trec_eval `ndcg_cut`).

    The gain of the result at rank i is its grade in `qrels` (linear gains, 0 if unjudged);
    DCG@k = sum_{i=1..k} gain_i / log2(i + 1); the ideal DCG@k is the DCG of the qrels' grades
    sorted from best to worst; nDCG@k = DCG@k / IDCG@k, and 0 when nothing is relevant.
    """
    ideal = dcg(sorted((g for g in qrels.values() if g > 0), reverse=True), k)
    if ideal == 0:
        return 0.0
    return dcg([qrels.get(doc, 0.0) for doc in ranking], k) / ideal


def recall_at_k(ranking: Sequence[str], qrels: Mapping[str, float], k: int = 10) -> float:
    """Share of the relevant ids (grade > 0) found in the first `k` results; 0 when none is relevant."""
    relevant = {doc for doc, g in qrels.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranking[:k])) / len(relevant)


def mrr_at_k(ranking: Sequence[str], qrels: Mapping[str, float], k: int = 10) -> float:
    """Reciprocal rank of the first relevant result within the first `k` (1/rank), else 0."""
    for rank, doc in enumerate(ranking[:k], start=1):
        if qrels.get(doc, 0.0) > 0:
            return 1.0 / rank
    return 0.0


def metric_names(k: int) -> tuple[str, ...]:
    return (f"ndcg@{k}", f"recall@{k}", f"mrr@{k}", f"recall@{DEPTH}")


def score_query(ranking: Sequence[str], qrels: Mapping[str, float], k: int = 10) -> dict[str, float]:
    """The four reported metrics of one ranked list."""
    values = (ndcg_at_k(ranking, qrels, k), recall_at_k(ranking, qrels, k), mrr_at_k(ranking, qrels, k), recall_at_k(ranking, qrels, DEPTH))
    return dict(zip(metric_names(k), values))


# -- datasets --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    """Queries with relevance judgments; `corpus` is set for BEIR collections."""

    name: str
    queries: dict[str, str]  # id -> text, only queries with at least one relevant judgment
    qrels: dict[str, dict[str, float]]  # query id -> corpus id -> grade
    types: dict[str, str] = field(default_factory=dict)  # query id -> query type
    corpus: Path | None = None
    root: Path | None = None


def _read_jsonl(path: Path) -> Iterable[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
            if not isinstance(item, dict) or "_id" not in item:
                raise UsageError(f'{path}:{n}: each line must be a JSON object with an "_id"')
            yield item


def _read_tsv(path: Path, columns: int, header: str) -> Iterable[tuple[int, list[str]]]:
    """Tab-separated rows (paths may hold spaces), skipping blank lines and a header row."""
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split("\t")
            if n == 1 and parts[0].strip().lower() == header:
                continue
            if len(parts) < columns:
                raise UsageError(f"{path}:{n}: expected {columns} tab-separated columns, found {len(parts)}")
            yield n, [p.strip() for p in parts]


def load_dataset(root: Path) -> Dataset:
    """Read a dataset folder (see the module docstring)."""
    if not root.is_dir():
        raise UsageError(f"dataset not found: {root}", hint="pass a folder holding queries.jsonl and qrels.tsv")
    for name in ("queries.jsonl", "qrels.tsv"):
        if not (root / name).is_file():
            raise UsageError(f"{root} has no {name}", hint="a dataset folder holds queries.jsonl and qrels.tsv (BEIR layout)")
    qrels: dict[str, dict[str, float]] = {}
    for n, (qid, doc, grade, *_) in _read_tsv(root / "qrels.tsv", 3, "query-id"):
        try:
            qrels.setdefault(qid, {})[doc] = float(grade)
        except ValueError:
            raise UsageError(f"{root / 'qrels.tsv'}:{n}: score {grade!r} is not a number") from None
    texts = {str(q["_id"]): str(q.get("text", "")) for q in _read_jsonl(root / "queries.jsonl")}
    judged = {qid for qid, docs in qrels.items() if any(g > 0 for g in docs.values())}
    missing = judged - texts.keys()
    if missing:
        log.warning("%d judged queries are not in queries.jsonl (e.g. %s); they are skipped", len(missing), sorted(missing)[0])
    queries = {qid: text for qid, text in texts.items() if qid in judged and text.strip()}
    if not queries:
        raise UsageError(f"no query in {root} has a relevant judgment in qrels.tsv", hint="qrels.tsv rows are `query-id<TAB>corpus-id<TAB>score`")
    types: dict[str, str] = {}
    if (root / "types.tsv").is_file():
        types = {qid: qtype for _, (qid, qtype, *_) in _read_tsv(root / "types.tsv", 2, "query-id")}
    corpus = root / "corpus.jsonl"
    return Dataset(root.name, queries, {q: qrels[q] for q in queries}, types, corpus if corpus.is_file() else None, root)


def write_dataset(ds: Dataset, folder: Path) -> None:
    """Write `ds` (queries, qrels, types) as a dataset folder that `load_dataset` reads back."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as fh:
        for qid, text in ds.queries.items():
            fh.write(json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n")
    with open(folder / "qrels.tsv", "w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid in ds.queries:
            for doc, grade in ds.qrels[qid].items():
                fh.write(f"{qid}\t{doc}\t{grade:g}\n")
    if ds.types:
        with open(folder / "types.tsv", "w", encoding="utf-8") as fh:
            fh.write("query-id\ttype\n")
            for qid in ds.queries:
                if qid in ds.types:
                    fh.write(f"{qid}\t{ds.types[qid]}\n")


# -- where evaluation state lives -------------------------------------------------------------


def _digest(text: str, size: int = 8) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=size).hexdigest()


def cache_root() -> Path:
    """`$VAULTSEEK_CACHE_DIR`, else `$XDG_CACHE_HOME/vaultseek`, else `~/.cache/vaultseek`."""
    env = os.environ.get("VAULTSEEK_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "vaultseek"


def eval_cache(key_path: Path) -> Path:
    """The cache folder of one dataset (or vault), keyed by its absolute path.

    Datasets are often shared or read-only, so nothing is ever written next to them.
    """
    resolved = key_path.expanduser().resolve()
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", resolved.name)[:40] or "root"
    return cache_root() / "eval" / f"{slug}-{_digest(str(resolved))}"


def note_file_name(doc_id: str) -> str:
    """A safe, portable file name for a corpus document id (ids may hold `/`, `:` or spaces)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", doc_id).strip("._-")[:80]
    if safe != doc_id or not safe or safe.upper().split(".")[0] in _RESERVED:
        safe = f"{safe or 'doc'}-{_digest(doc_id, 4)}"
    return safe + ".md"


_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))})


def _front_matter_note(title: str, text: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar, so any title round-trips. The block is
    # written even without a title, so a text that starts with `---` is never read as front matter.
    head = f"title: {json.dumps(title.strip(), ensure_ascii=False)}\n" if title.strip() else ""
    return f"---\n{head}---\n" + text.strip() + "\n"


def build_corpus_vault(corpus: Path, folder: Path) -> dict[str, str]:
    """Write each document of `corpus.jsonl` as a note in `folder/vault`; returns {note path: _id}.

    Re-runs on an unchanged corpus write nothing (the signature of corpus.jsonl is kept in
    `folder/corpus.json`); a changed corpus rewrites only the notes whose text changed, so the
    incremental indexer re-embeds only those.
    """
    vault = folder / "vault"
    meta_path = folder / "corpus.json"
    st = corpus.stat()
    signature = f"{CORPUS_FORMAT}:{corpus.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    if meta_path.is_file() and vault.is_dir():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if meta.get("signature") == signature:
                return dict(meta["notes"])
        except (json.JSONDecodeError, KeyError):
            pass
    vault.mkdir(parents=True, exist_ok=True)
    notes: dict[str, str] = {}
    taken: set[str] = set()
    for doc in _read_jsonl(corpus):
        doc_id = str(doc["_id"])
        name = note_file_name(doc_id)
        if name.lower() in taken:  # e.g. ids "A" and "a" on a case-insensitive file system
            name = f"{name[:-3]}-{_digest(doc_id, 4)}.md"
        taken.add(name.lower())
        notes[name] = doc_id
        content = _front_matter_note(str(doc.get("title") or ""), str(doc.get("text") or ""))
        path = vault / name
        try:
            if path.read_text(encoding="utf-8") == content:
                continue
        except FileNotFoundError:
            pass
        path.write_text(content, encoding="utf-8")
    for stale in vault.glob("*.md"):
        if stale.name not in notes:
            stale.unlink()
    meta_path.write_text(json.dumps({"signature": signature, "notes": notes}, ensure_ascii=False), encoding="utf-8")
    return notes


def index_vault(vault: Path, db: Path, config: Config, progress: Callable[[int, int], None] | None = None) -> tuple[SqliteStore, float]:
    """Bring the index at `db` in step with `vault` (incremental); returns the open store and seconds."""
    from .indexer import Indexer
    from .store.sqlite import SqliteStore

    db.parent.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(db)
    summary = Indexer(vault, store, config, progress=progress).run()
    if not summary.vectors:
        log.warning("vector search is unavailable: the index holds keyword data only")
    return store, summary.seconds


# -- running queries ----------------------------------------------------------------------------


@dataclass
class QueryResult:
    id: str
    text: str
    type: str | None
    ranking: list[str]  # corpus ids, best first, up to DEPTH
    metrics: dict[str, float]


def ranked_chunks(searcher: Searcher, query: str, mode: str, limit: int, fix_typos: bool | None = None) -> list[int]:
    """The chunk ids `searcher.search(query, k=limit, mode=mode, per_note=0)` returns, in order.

    It is `Searcher.rank`, the ranking step of `search`, without reading texts and building
    snippets for hundreds of hits (that would take 95% of an evaluation). Results are judged per
    note, so the per-note cap of `search` is not applied.
    """
    ranking = searcher.rank(query, k=limit, mode=mode, fix_typos=fix_typos, per_note=0)
    return [int(f.id) for f in ranking.fused]  # type: ignore[call-overload]


class _PathCache:
    """Chunk id -> note path, fetched once per chunk for a whole evaluation."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.paths: dict[int, str] = {}

    def __call__(self, ids: Sequence[int]) -> list[str | None]:
        todo = [i for i in ids if i not in self.paths]
        if todo:
            self.paths.update((i, row.path) for i, row in self.store.fetch_chunks(todo).items())
        return [self.paths.get(i) for i in ids]


def rank_notes(searcher: Searcher, query: str, mode: str, to_id: Callable[[str], str | None], exclude: str | None = None, depth: int = DEPTH, paths: Callable[[Sequence[int]], list[str | None]] | None = None, fix_typos: bool | None = None) -> list[str]:
    """Corpus ids of the notes found for `query`, each once at its best chunk, best first.

    `to_id` maps a note path to its corpus id (None drops the note); a result equal to `exclude`
    (the query's own id: the BEIR convention) is never counted.
    """
    ids = ranked_chunks(searcher, query, mode, depth * CHUNKS_PER_NOTE, fix_typos=fix_typos)
    ranking: list[str] = []
    seen: set[str] = set()
    for path in (paths or _PathCache(searcher.store))(ids):
        doc = to_id(path) if path is not None else None
        if doc is None or doc == exclude or doc in seen:
            continue
        seen.add(doc)
        ranking.append(doc)
        if len(ranking) == depth:
            break
    return ranking


def run_dataset(searcher: Searcher, ds: Dataset, mode: str, to_id: Callable[[str], str | None], k: int = 10, fix_typos: bool | None = None) -> list[QueryResult]:
    """Run every query of `ds` and score it."""
    results = []
    paths = _PathCache(searcher.store)
    for qid, text in ds.queries.items():
        ranking = rank_notes(searcher, text, mode, to_id, exclude=qid, paths=paths, fix_typos=fix_typos)
        results.append(QueryResult(qid, text, ds.types.get(qid), ranking, score_query(ranking, ds.qrels[qid], k)))
    return results


def _mean(rows: list[dict[str, float]], names: Sequence[str]) -> dict[str, float]:
    return {n: round(sum(r[n] for r in rows) / len(rows), 4) if rows else 0.0 for n in names}


def half_of(query_id: str) -> str:
    """"A" or "B": a fixed split of a dataset's queries in two halves, by a hash of the query id.

    Settings are chosen on one half and checked on the other (see docs/evaluation.md); the
    experiments script splits the same way.
    """
    return "A" if int(_digest(query_id, 2), 16) % 2 == 0 else "B"


def summarize(results: list[QueryResult], k: int = 10) -> dict[str, Any]:
    """Mean metrics overall, per query type and per half: the stable `--json` shape."""
    names = metric_names(k)
    out: dict[str, Any] = _mean([r.metrics for r in results], names)
    out["queries"] = len(results)
    by_type: dict[str, Any] = {}
    for qtype in sorted({r.type for r in results if r.type}):
        rows = [r.metrics for r in results if r.type == qtype]
        by_type[qtype] = {**_mean(rows, names), "queries": len(rows)}
    out["by_type"] = by_type
    halves: dict[str, Any] = {}
    for half in ("A", "B"):
        rows = [r.metrics for r in results if half_of(r.id) == half]
        halves[half] = {**_mean(rows, names), "queries": len(rows)}
    out["halves"] = halves
    return out


# -- saved runs and comparisons -------------------------------------------------------------


def _run_path(cache: Path, name: str) -> Path:
    if not NAME_RE.match(name):
        raise UsageError(f"bad run name {name!r}", hint="use letters, digits, '.', '_' or '-' (e.g. baseline-2024-05)")
    return cache / "runs" / f"{name}.json"


def save_run(cache: Path, name: str, results: list[QueryResult], info: Mapping[str, Any]) -> Path:
    path = _run_path(cache, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        **info,
        "saved_at": time.time(),
        "queries": {r.id: {"text": r.text, "type": r.type, **r.metrics, "top": r.ranking[:10]} for r in results},
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    tmp.replace(path)
    return path


def load_run(cache: Path, name: str) -> dict[str, Any]:
    path = _run_path(cache, name)
    if not path.is_file():
        saved = sorted(p.stem for p in (cache / "runs").glob("*.json")) if (cache / "runs").is_dir() else []
        raise UsageError(f"no saved run named {name!r} for this dataset", hint=f"saved runs: {', '.join(saved)}" if saved else "save one first with --save NAME")
    return json.loads(path.read_text(encoding="utf-8"))


@dataclass
class Comparison:
    metric: str
    common: int
    only_now: int
    only_saved: int
    delta: dict[str, float]  # mean(now) - mean(saved) per metric, over the queries both runs share
    wins: list[tuple[str, str, float]]  # (query id, text, delta), biggest first
    losses: list[tuple[str, str, float]]  # biggest drop first

    def as_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric, "common": self.common, "only_now": self.only_now, "only_saved": self.only_saved,
            "delta": self.delta, "wins": len(self.wins), "losses": len(self.losses),
            "top_wins": [{"id": q, "text": t, "delta": round(d, 4)} for q, t, d in self.wins[:20]],
            "top_losses": [{"id": q, "text": t, "delta": round(d, 4)} for q, t, d in self.losses[:20]],
        }


def compare_runs(results: list[QueryResult], saved: Mapping[str, Mapping[str, Any]], k: int = 10) -> Comparison:
    """Per-query deltas of nDCG@k between this run and a saved one (wins: this run is better)."""
    names = metric_names(k)
    metric = names[0]
    now = {r.id: r for r in results}
    common = [q for q in now if q in saved and metric in saved[q]]
    deltas = [(q, now[q].text, now[q].metrics[metric] - float(saved[q][metric])) for q in common]
    mean_delta = {
        n: round(sum(now[q].metrics[n] - float(saved[q].get(n, 0.0)) for q in common) / len(common), 4) if common else 0.0
        for n in names
    }
    return Comparison(
        metric, len(common), len(now.keys() - saved.keys()), len(saved.keys() - now.keys()), mean_delta,
        sorted((d for d in deltas if d[2] > 1e-9), key=lambda d: -d[2]),
        sorted((d for d in deltas if d[2] < -1e-9), key=lambda d: d[2]),
    )


# -- the vault self-test --------------------------------------------------------------------

_MARKUP_RE = re.compile(r"\[\[(?:[^\]|]*\|)?([^\]]*)\]\]|[*_`~=]+|<[^>]+>")


def _clean_heading(text: str) -> str:
    return " ".join(_MARKUP_RE.sub(lambda m: m.group(1) or " ", text).split()).strip(" #:")


def note_headings(note: Note) -> list[str]:
    """The note's headings (levels 1-6, outside code), markup removed, in order."""
    from .markdown import HEADING_RE, iter_body_lines

    out = []
    for _, line, in_code in iter_body_lines(note.body):
        m = None if in_code else HEADING_RE.match(line)
        if m:
            out.append(_clean_heading(m.group(2)))
    return out


def self_test_dataset(
    notes: Iterable[Note], skip_sections: Sequence[str] = (), headings_per_note: int = 2, limit: int | None = 1000, variants: bool = False
) -> Dataset:
    """Known-item queries from the notes themselves: each title, alias and (up to
    `headings_per_note`) headings, the note being the one right answer. With `variants`, each
    title also gives a misspelt query (type `typo`) and one with its longest word cut short
    (type `partial`), as `title_variants` makes them.

    A text that names more than one note (two notes share a heading such as "Usage") has no single
    answer and is left out, as are texts without a word longer than two characters. With more
    than `limit` queries, a fixed sample (by hash of the query id) is kept.
    """
    from .query import STOPWORDS, query_terms

    notes = list(notes)
    candidates: list[tuple[str, str, str]] = []  # (type, text, path)
    for note in notes:
        candidates.append(("title", note.title, note.path))
        if variants:
            candidates.extend((kind, text, note.path) for kind, text in title_variants(note.title).items())
        candidates.extend(("alias", a, note.path) for a in note.aliases)
        skip = {s.lower() for s in skip_sections}
        seen = {note.title.lower(), *(a.lower() for a in note.aliases)}
        taken = 0
        for heading in note_headings(note):
            if taken == headings_per_note:
                break
            if heading.lower() in skip or heading.lower() in seen:
                continue
            seen.add(heading.lower())
            candidates.append(("heading", heading, note.path))
            taken += 1
    owners: dict[str, set[str]] = {}
    for _, text, path in candidates:
        owners.setdefault(" ".join(text.lower().split()), set()).add(path)
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, float]] = {}
    types: dict[str, str] = {}
    for qtype, text, path in candidates:
        text = " ".join(text.split())
        words = [w for w in query_terms(text) if w not in STOPWORDS and len(w) > 2]
        if not words or len(owners[text.lower()]) > 1:
            continue
        qid = f"{qtype}-{_digest(path + chr(0) + text, 5)}"
        queries[qid], qrels[qid], types[qid] = text, {path: 1.0}, qtype
    if limit and len(queries) > limit:
        keep = sorted(queries, key=lambda q: _digest(q))[:limit]
        queries = {q: queries[q] for q in sorted(keep)}
    return Dataset("self-test", queries, {q: qrels[q] for q in queries}, {q: types[q] for q in queries})


_WORD_RE = re.compile(r"[A-Za-z]+")


def title_variants(title: str) -> dict[str, str]:
    """A misspelt and a cut-short form of a title, as people type them. Pure and deterministic.

    - typo: two neighbouring letters of the title's longest word (of 5+ letters) swapped, at a
      position picked by a hash of the title (`Bookmarks` -> `Bookmraks`);
    - partial: the longest word (of 7+ letters) cut to 60% of its letters, at least 4, and the
      words after it dropped, as a query typed mid-word (`Properties view` -> `Proper`).
    Titles without such a word give no variant of that kind.
    """
    out: dict[str, str] = {}
    words = list(_WORD_RE.finditer(title))
    if not words:
        return out
    longest = max(words, key=lambda m: (len(m.group()), -m.start()))
    word = longest.group()
    if len(word) >= 5:
        seed = int(_digest(title, 4), 16)
        for step in range(len(word) - 1):
            i = 1 + (seed + step) % (len(word) - 2)  # never the first letter: people rarely miss it
            if word[i].lower() != word[i + 1].lower():
                typo = word[:i] + word[i + 1] + word[i] + word[i + 2 :]
                out["typo"] = title[: longest.start()] + typo + title[longest.end() :]
                break
    if len(word) >= 7:
        cut = max(4, round(len(word) * 0.6))
        out["partial"] = (title[: longest.start()] + word[:cut]).strip()
    return out


def read_indexed_notes(vault: Path, paths: Iterable[str], config: Config) -> list[Note]:
    """Parse the indexed notes of `vault` as the indexer sees them (scrubbed, private tags applied)."""
    from .markdown import parse_note

    try:
        from .scrub import scrub
    except ImportError:  # pragma: no cover - the scrubber ships with vaultseek
        scrub = None
    notes = []
    private_tags = tuple(t.lower() for t in config.index.private_tags)
    for path in sorted(paths):
        try:
            text = (vault / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        text = text.lstrip("\ufeff").replace("\r\n", "\n")
        if scrub is not None and config.index.scrub_secrets:
            text = scrub(text).text
        note = parse_note(path, text, private_tags=private_tags)
        if not note.private:
            notes.append(note)
    return notes


# -- explain ----------------------------------------------------------------------------------


@dataclass
class Explanation:
    """Why `note` does or does not come up for `query`."""

    query: str
    note: str
    status: str  # indexed | stale | deleted | excluded | not-indexed | missing
    detail: str = ""
    mode: str = "hybrid"
    k: int = 10
    candidates: int = 30
    chunks: int = 0  # the note's chunks in the index
    bm25_rank: int | None = None  # rank of the note's best chunk among all chunks, 1-based
    bm25_matches: int = 0  # chunks the lexical search returned (those matching the query words it kept)
    vector_rank: int | None = None
    vector_score: float | None = None
    vector_top_score: float | None = None
    fused_rank: int | None = None  # position among the shown results (chunks), 1-based
    fused_note_rank: int | None = None  # position among the distinct notes shown
    deep_fused_rank: int | None = None  # rank after fusing the complete lists (no candidates cut)
    terms: dict[str, dict[str, int | bool]] = field(default_factory=dict)  # word -> {in_note, chunks}
    reasons: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def normalize_note_path(note: str, vault: Path | None) -> str:
    """A note path as the index keys it: relative to the vault, forward slashes."""
    path = note.replace("\\", "/").strip()
    if vault is not None and os.path.isabs(path):
        try:
            path = Path(path).resolve().relative_to(vault.resolve()).as_posix()
        except ValueError:
            raise UsageError(f"{note} is not inside the vault {vault}") from None
    while path.startswith("./"):
        path = path[2:]
    return path


def _note_chunk_ids(store: SqliteStore, path: str) -> list[int]:
    # Read-only query on the store's tables; belongs in the store as `chunk_ids(path)`.
    sql = "SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.path = ? ORDER BY c.seq"
    return [int(r[0]) for r in store.conn.execute(sql, (path,))]


def _note_status(store: SqliteStore, vault: Path | None, path: str, config: Config) -> tuple[str, str, str]:
    """(status, detail, resolved path) of a note before any ranking."""
    from .scan import exclusion_reason, folder_rule

    states = store.file_states()
    if path not in states and not path.lower().endswith(tuple(config.index.extensions)):
        for ext in config.index.extensions:
            if path + ext in states or (vault is not None and (vault / (path + ext)).is_file()):
                path += ext
                break
    on_disk = vault / path if vault is not None else None
    exists = on_disk is not None and on_disk.is_file()
    excluded = store.excluded()
    if path in excluded:
        return "excluded", f"not indexed: {excluded[path]}", path
    rule = exclusion_reason(path, config.index)
    if rule:
        return "excluded", f"not indexed: {rule}", path
    if not path.lower().endswith(tuple(e.lower() for e in config.index.extensions)):
        return "excluded", f"not indexed: only files ending in {', '.join(config.index.extensions)} are notes", path
    private = folder_rule(path, config.index.private_folders)
    if private and path not in states:
        return "excluded", f"not indexed: private folder {private}/", path
    state = states.get(path)
    if state is None:
        if exists:
            return "not-indexed", "the note is new since the last index: run `vaultseek index`", path
        return "missing", "no note with this path in the vault or the index", path
    if vault is not None and not exists:
        return "deleted", "indexed, but the file is gone from the vault: run `vaultseek index` (ranks below are for the old copy)", path
    if on_disk is not None:
        st = on_disk.stat()
        if st.st_mtime_ns != state.mtime_ns or st.st_size != state.size:
            return "stale", "the note changed since the last index (mtime/size differ): run `vaultseek index`; ranks below are for the indexed copy", path
    return "indexed", "", path


def explain(searcher: Searcher, vault: Path | None, query: str, note: str, config: Config, mode: str = "hybrid", k: int = 10) -> Explanation:
    """Where the note's best chunk ranks in each list and after fusion, and why it is (not) shown."""
    from .fusion import fuse
    from .query import STOPWORDS, fts_match, query_terms, quote_term
    from .rank import fusion_weights

    store = searcher.store
    path = normalize_note_path(note, vault)
    status, detail, path = _note_status(store, vault, path, config)
    n = max(searcher.settings.candidates, k)
    ex = Explanation(query, path, status, detail, mode, k, n)
    if status in ("excluded", "not-indexed", "missing"):
        if status == "missing":
            ex.suggestions = difflib.get_close_matches(path, list(store.file_states()), n=5, cutoff=0.5)
        ex.reasons.append(detail)
        return ex
    mine = set(_note_chunk_ids(store, path))
    ex.chunks = len(mine)
    if not mine:
        ex.reasons.append("the note is indexed but has no chunks (shorter than chunking.min_chars, or only skipped sections)")
        return ex
    total = store.counts()["chunks"]

    lexical: list[int] = []
    lexical_scored: list[tuple[int, float]] = []
    if mode in ("hybrid", "bm25"):
        lexical_scored = [(i, -s) for i, s in searcher.lexical(query, total)]  # higher is better, as fused
        lexical = [i for i, _ in lexical_scored]
        ex.bm25_matches = len(lexical)
        ex.bm25_rank = next((r for r, i in enumerate(lexical, start=1) if i in mine), None)
        words = query_terms(query)
        content = [w for w in words if w not in STOPWORDS] or words
        for word in content:
            hits = [i for i, _ in store.bm25(quote_term(word), total)]
            ex.terms[word] = {"in_note": bool(mine.intersection(hits)), "chunks": len(hits)}
    scored: list[tuple[int, float]] = []
    if mode in ("hybrid", "vector"):
        try:
            scored = searcher.semantic(query, total)
        except EmbedderUnavailable as exc:
            ex.reasons.append(f"vector search unavailable: {exc.one_line()}")
            scored = []
        for r, (i, s) in enumerate(scored, start=1):
            if i in mine:
                ex.vector_rank, ex.vector_score = r, round(s, 4)
                break
        ex.vector_top_score = round(scored[0][1], 4) if scored else None

    result = searcher.search(query, k=k, mode=mode)
    notes_seen: list[str] = []
    for r, hit in enumerate(result.hits, start=1):
        if hit.path not in notes_seen:
            notes_seen.append(hit.path)
        if hit.path == path and ex.fused_rank is None:
            ex.fused_rank, ex.fused_note_rank = r, len(notes_seen)
    settings = searcher.settings
    bm25_weight, vector_weight = fusion_weights(settings, query) if mode == "hybrid" else (1.0, 1.0)
    picked = [(lst, w) for lst, w, m in ((lexical_scored, bm25_weight, ("hybrid", "bm25")), (scored, vector_weight, ("hybrid", "vector"))) if mode in m]
    deep = fuse(settings.fusion, [lst for lst, _ in picked], [w for _, w in picked], rrf_k=settings.rrf_k) if picked else []
    ex.deep_fused_rank = next((r for r, f in enumerate(deep, start=1) if f.id in mine), None)
    ex.reasons.extend(_reasons(ex, fts_match(query) is not None))
    return ex


def _reasons(ex: Explanation, has_words: bool) -> list[str]:
    out: list[str] = []
    if ex.fused_rank is not None:
        out.append(f"shown: result {ex.fused_rank} of {ex.k} (note {ex.fused_note_rank} among the notes shown)")
    if ex.mode in ("hybrid", "bm25"):
        missing = [w for w, t in ex.terms.items() if not t["in_note"]]
        if not has_words:
            out.append("bm25: the query has no words to match")
        elif ex.bm25_rank is None:
            out.append(f"bm25: no chunk of the note contains any query word ({', '.join(ex.terms)}), after stemming")
        else:
            where = "inside" if ex.bm25_rank <= ex.candidates else "below"
            out.append(f"bm25: best chunk ranked {ex.bm25_rank} of {ex.bm25_matches} chunks the lexical search returned, {where} the {ex.candidates}-candidate cut")
            if missing:
                out.append(f"bm25: the note lacks the word(s) {', '.join(missing)}")
            common = [w for w, t in ex.terms.items() if t["in_note"] and ex.bm25_matches and int(t["chunks"]) > 0.2 * ex.bm25_matches and len(ex.terms) > 1]
            if common and ex.bm25_rank > ex.candidates:
                out.append(f"bm25: the words it does hold ({', '.join(common)}) are common, so they weigh little")
    if ex.mode in ("hybrid", "vector") and ex.vector_rank is not None:
        where = "inside" if ex.vector_rank <= ex.candidates else "below"
        out.append(f"vector: best chunk ranked {ex.vector_rank} (cosine {ex.vector_score} vs {ex.vector_top_score} for the top chunk), {where} the {ex.candidates}-candidate cut")
    in_cut = {name: r for name, r in (("bm25", ex.bm25_rank), ("vector", ex.vector_rank)) if r is not None and r <= ex.candidates}
    if ex.mode == "hybrid" and len(in_cut) == 1 and ex.fused_rank is not None and ex.fused_rank > min(in_cut.values()):
        (name, rank), = in_cut.items()
        out.append(f"fusion: only the {name} list has it among its {ex.candidates} candidates, so fusion puts it below chunks both lists rate well ({name} rank {rank} -> result {ex.fused_rank})")
    if ex.fused_rank is None:
        in_lists = [r for r in (ex.bm25_rank, ex.vector_rank) if r is not None and r <= ex.candidates]
        if not in_lists:
            out.append(f"not shown: below the {ex.candidates}-candidate cut in every list, so fusion never saw it")
        else:
            out.append(f"not shown: a fusion candidate, but other chunks scored higher after fusion (results stop at -k {ex.k})")
        if ex.deep_fused_rank is not None:
            out.append(f"fusing the complete lists would rank it {ex.deep_fused_rank}")
    return out


def render_explanation(ex: Explanation) -> str:
    lines = [f"{ex.note}: {ex.status}" + (f" ({ex.detail})" if ex.detail and ex.status != "indexed" else "")]
    if ex.suggestions:
        lines.append("  did you mean: " + ", ".join(ex.suggestions))
    if ex.terms:
        words = ", ".join(f"{w} {'yes' if t['in_note'] else 'no'} ({t['chunks']} chunks)" for w, t in ex.terms.items())
        lines.append(f"  query words in the note: {words}")
    lines.extend(f"  - {r}" for r in ex.reasons if r != ex.detail)
    return "\n".join(lines)


# -- the command line -------------------------------------------------------------------------


def _print_summary(summary: Mapping[str, Any], k: int, title: str) -> None:
    names = metric_names(k)
    width = max([len(t) for t in summary["by_type"]] + [7])
    print(title)
    print(f"{'':<{width}}  {'queries':>7}  " + "  ".join(f"{n:>10}" for n in names))
    print(f"{'overall':<{width}}  {summary['queries']:>7}  " + "  ".join(f"{summary[n]:>10.4f}" for n in names))
    for qtype, row in summary["by_type"].items():
        print(f"{qtype:<{width}}  {row['queries']:>7}  " + "  ".join(f"{row[n]:>10.4f}" for n in names))
    for half, row in summary.get("halves", {}).items():
        print(f"{'half ' + half:<{width}}  {row['queries']:>7}  " + "  ".join(f"{row[n]:>10.4f}" for n in names))


def _print_comparison(c: Comparison, name: str) -> None:
    print(f"\nagainst {name!r} ({c.common} queries in both runs): {len(c.wins)} better, {len(c.losses)} worse, {c.common - len(c.wins) - len(c.losses)} equal on {c.metric}")
    print("  mean delta: " + ", ".join(f"{n} {d:+.4f}" for n, d in c.delta.items()))
    if c.only_now or c.only_saved:
        print(f"  ({c.only_now} queries only in this run, {c.only_saved} only in the saved one: not compared)")
    for label, rows in (("better", c.wins), ("worse", c.losses)):
        for qid, text, d in rows[:10]:
            print(f"  {label:<6} {d:+.3f}  {qid}  {text[:70]}")


def cmd_eval(args: argparse.Namespace) -> int:
    from .cli import Progress, emit_json, open_store, resolve_paths, stored_vault
    from .config import Config, load_config, with_rerank
    from .search import Searcher

    if args.k < 1 or args.k > DEPTH:
        raise UsageError(f"-k must be between 1 and {DEPTH}")
    if bool(args.dataset) == bool(args.self_test):
        raise UsageError("give a DATASET folder or --self-test (one of the two)", hint="vaultseek eval path/to/scifact  |  vaultseek eval --self-test --vault ~/notes")
    progress = Progress("indexing", enabled=sys.stderr.isatty() and not args.json)
    config_path = Path(args.config) if args.config else None
    ds: Dataset | None = None
    if args.dataset:
        ds = load_dataset(Path(args.dataset).expanduser())
        cache = eval_cache(ds.root)  # type: ignore[arg-type]
    if ds is not None and ds.corpus is not None:
        if args.vault:
            raise UsageError(f"{args.dataset} holds its own corpus.jsonl; --vault is for golden sets of a vault")
        cache.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        notes = build_corpus_vault(ds.corpus, cache)
        write_seconds = time.perf_counter() - started
        config = load_config(None, config_path) if config_path else Config()
        db = Path(args.db).expanduser() if args.db else cache / "index.db"
        try:
            store, index_seconds = index_vault(cache / "vault", db, config, progress)
        finally:
            progress.close()
        index_seconds += write_seconds
        to_id: Callable[[str], str | None] = notes.get
    else:
        vault, db = resolve_paths(args.db, args.vault)
        if args.db and not args.vault:
            if not db.is_file():
                raise UsageError(f"no index at {db}", hint="index the vault first (vaultseek index VAULT --db DB), or pass --vault too")
            existing = open_store(db, readonly=True)
            vault = stored_vault(existing)
            existing.close()
        if vault is None or not vault.is_dir():
            raise UsageError("the vault of this index is unknown or gone", hint="pass --vault VAULT")
        config = load_config(vault, config_path)
        try:
            store, index_seconds = index_vault(vault, db, config, progress)
        finally:
            progress.close()
        to_id = lambda p: p  # noqa: E731 - corpus ids are note paths
        if ds is None:
            notes_read = read_indexed_notes(vault, store.file_states(), config)
            ds = self_test_dataset(notes_read, config.chunking.skip_sections, limit=args.limit or None, variants=args.variants)
            cache = eval_cache(vault)
            if not ds.queries:
                raise UsageError(f"no self-test queries could be made from {vault}", hint="the vault needs notes with distinct titles or headings")
            if args.write:
                write_dataset(ds, Path(args.write).expanduser())
                log.info("wrote %d queries to %s (run them again with: vaultseek eval %s --vault %s)", len(ds.queries), args.write, args.write, vault)
    try:
        searcher = Searcher(store, with_rerank(config.search, args.rerank))
        if searcher.settings.rerank:
            try:
                searcher.reranker()  # figures "with the reranker" must never be figures without it
            except EmbedderUnavailable as exc:
                raise UsageError(f"cannot evaluate with the reranker: {exc.one_line()}", hint=exc.hint) from None
        started = time.perf_counter()
        results = run_dataset(searcher, ds, args.mode, to_id, k=args.k, fix_typos=False if args.no_correct else None)
        search_seconds = time.perf_counter() - started
        mode = args.mode
        if args.mode != "bm25" and searcher.vector_error:
            mode = "bm25"
            log.warning("vector search unavailable (%s): these figures are BM25 only", searcher.vector_error)
    finally:
        store.close()
    summary = summarize(results, args.k)
    rerank = searcher.settings.rerank or None
    info = {"dataset": str(ds.root or "self-test"), "mode": mode, "rerank": rerank, "k": args.k, "summary": summary}
    comparison = compare_runs(results, load_run(cache, args.compare)["queries"], args.k) if args.compare else None
    if args.save:
        where = save_run(cache, args.save, results, info)
        log.info("saved this run as %r (%s)", args.save, where)
    timing = {"index": round(index_seconds, 2), "search": round(search_seconds, 2), "per_query_ms": round(1000 * search_seconds / max(len(results), 1), 2)}
    if args.json:
        data = dict(summary)
        data["mode"] = mode
        data["rerank"] = rerank
        data["seconds"] = timing
        if comparison is not None:
            data["compare"] = {"name": args.compare, **comparison.as_json()}
        emit_json(data)
        return 0
    _print_summary(summary, args.k, f"{ds.name}: {summary['queries']} queries, mode {mode}{', reranked by ' + rerank if rerank else ''}, judged per note")
    print(f"\nindex {timing['index']:.2f}s (incremental), {len(results)} queries in {timing['search']:.2f}s ({timing['per_query_ms']:.1f} ms each)")
    if comparison is not None:
        _print_comparison(comparison, args.compare)
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from .cli import emit_json, open_store, resolve_paths, stored_vault
    from .config import load_config
    from .search import Searcher

    query = " ".join(args.query)
    if not query.strip():
        raise UsageError("the query is empty")
    vault, db = resolve_paths(args.db, args.vault)
    store = open_store(db, readonly=True)
    try:
        root = stored_vault(store) if args.db and not args.vault else vault
        if root is not None and not root.is_dir():
            root = None
        config = load_config(root, Path(args.config) if args.config else None)
        searcher = Searcher(store, config.search)
        ex = explain(searcher, root, query, args.note, config, mode=args.mode, k=args.k or config.search.k)
    finally:
        store.close()
    if args.json:
        emit_json(ex.as_json())
    else:
        print(render_explanation(ex))
    return 1 if ex.status == "missing" else 0


def register_cli(sub: argparse._SubParsersAction) -> None:
    """Add the `eval` and `explain` subcommands to the `vaultseek` parser."""
    p = sub.add_parser(
        "eval",
        help="measure search quality (nDCG@10, recall, MRR) on a test collection, a golden set or the vault itself",
        description="Evaluate search on a BEIR-style DATASET folder (with corpus.jsonl: a test collection; "
        "without: a golden set for --vault), or on queries made from the vault's own titles, aliases and headings "
        "(--self-test). The index is brought up to date first. See docs/evaluation.md.",
    )
    p.add_argument("dataset", nargs="?", metavar="DATASET", help="folder with queries.jsonl, qrels.tsv [, types.tsv, corpus.jsonl]")
    p.add_argument("--self-test", action="store_true", help="make known-item queries from the vault's titles, aliases and headings")
    p.add_argument("--vault", help="the vault a golden set or self-test refers to")
    p.add_argument("--db", help="index file (default: VAULT/.vaultseek/index.db; for collections, one in the cache)")
    p.add_argument("--mode", choices=MODES, default="hybrid")
    p.add_argument("-k", type=int, default=10, help="cut-off for nDCG, recall and MRR (default 10)")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    p.add_argument("--save", metavar="NAME", help="keep this run's per-query results under NAME")
    p.add_argument("--compare", metavar="NAME", help="show per-query wins and losses against the saved run NAME")
    p.add_argument("--no-correct", action="store_true", help="search misspelt words as typed (no typo correction), as `search --no-correct`")
    p.add_argument("--rerank", action="store_true", help="rescore the top results with the reranking model, as `search --rerank`")
    p.add_argument("--write", metavar="DIR", help="with --self-test: write the generated queries as a dataset folder")
    p.add_argument("--variants", action="store_true", help="with --self-test: also a misspelt (typo) and a cut-short (partial) form of each title")
    p.add_argument("--limit", type=int, default=1000, help="with --self-test: at most this many queries (0: all; default 1000)")
    p.add_argument("--config", help="config file")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log indexing decisions to stderr")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("explain", help="why a note does or does not come up for a query", description="Tell whether NOTE is indexed, excluded (and by which rule) or stale, where its best chunk ranks in each list and after fusion, and why it falls below the cut.")
    p.add_argument("query", nargs="+", help="the query, as given to `vaultseek search`")
    p.add_argument("--note", required=True, help="the note's path, relative to the vault (or absolute)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--db", help="index file (default: VAULT/.vaultseek/index.db)")
    g.add_argument("--vault", help="the vault folder")
    p.add_argument("--mode", choices=MODES, default="hybrid")
    p.add_argument("-k", type=int, default=None, help="number of results the search shows (default 10)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--config", help="config file")
    p.set_defaults(func=cmd_explain)
