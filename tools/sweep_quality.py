"""Where LoCoMo's multi-hop / open-domain evidence is lost, and what the finish could do about it.

    PYTHONPATH=. .venv/bin/python tools/sweep_quality.py collect locomo multihop hotpotqa \
        --data-dir ../shared/data --home DIR --cache /tmp/quality-cache
    PYTHONPATH=. .venv/bin/python tools/sweep_quality.py diagnose locomo multihop hotpotqa --cache /tmp/quality-cache
    PYTHONPATH=. .venv/bin/python tools/sweep_quality.py sweep locomo multihop hotpotqa --cache /tmp/quality-cache

``collect`` runs stage one once per answerable question with the defaults (as ``pgmem
eval``) and once with a wider search (``k_dense = k_lex = 200``, 20 neighbour seeds;
stage one's own parameters, no SQL change), and reads every namespace's notes (ids,
document, span, links, entities, time tags, vector) — pickled under ``--cache``.
``diagnose`` packs the default pool in the default ``calibrated`` mode, budget 8, and
for every gold note left out says where it was: in the pool (at which base-score rank),
only in the wider pool, or nowhere; and whether it is linked (ingest's links, either
direction, or the previous / next span of its document) to a packed note, at one or two
hops. ``sweep`` packs the stored pools under finish-side variants, overall and per
category.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import json
import pickle
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

import pgmem.retrieval.packer as packer
from pgmem.eval.datasets import load_dataset
from pgmem.eval.fusion import rescored
from pgmem.eval.runner import answerable_pools
from pgmem.ingestion.hints import derive_query_hints
from pgmem.ingestion.times import extract_time_tags
from pgmem.params import StageOneParams
from pgmem.retrieval.calibrate import calibrate
from pgmem.retrieval.packer import rank_and_pack
from pgmem.retrieval.pipeline import PackRequest, fetch_pool, finish_pack
from pgmem.retrieval.pool import Pool
from pgmem.retrieval.rerank import note_text
from pgmem.retrieval.words import content_words

WIDE = StageOneParams(k_dense=200, k_lex=200, neighbour_seeds=20)
NOTES = """
SELECT namespace, note_id::text, external_id, document_id, span_start, links::text[] AS links,
       entities, time_tags, source_ts, embedding::real[] AS embedding
FROM pgmem.notes WHERE namespace = ANY(%(namespaces)s)
"""


def collect(conn: Any, name: str, data_dir: Path, embedder: Any, cache: Path) -> None:
    questions, requests, pools = answerable_pools(conn, load_dataset(name, data_dir), embedder)
    wide_requests = [dataclasses.replace(r, stage_one=WIDE) for r in requests]
    wide = [fetch_pool(conn, r) for r in wide_requests]
    namespaces = sorted({r.namespace for r in requests})
    cur = conn.cursor()
    rows = cur.execute(NOTES, {"namespaces": namespaces}).fetchall()
    notes = [dict(zip([d.name for d in cur.description], row, strict=True)) for row in rows]
    requests = [dataclasses.replace(r, embedder=None) for r in requests]
    payload = {"embedder": embedder.name, "questions": questions, "requests": requests}
    payload |= {"pools": pools, "wide": wide, "notes": notes}
    cache.mkdir(parents=True, exist_ok=True)
    (cache / f"{name}.pkl").write_bytes(pickle.dumps(payload))
    print(f"{name}: {len(questions)} questions, {len(notes)} notes", file=sys.stderr, flush=True)


#: The dense and the lexical top k of one stored request, as stage one ranks them (the
#: dense top k exactly: every namespace here is below ``pgmem.exact_dense_notes``; the
#: lexical top k by BM25 over the notes holding a screen term): the candidates stage one
#: found on their own, not as a neighbour of another. Read-only; no function is created.
ORIGINS = """
WITH namespace AS (
    SELECT n.model_id, n.note_count, greatest(n.lexeme_total::float8 / greatest(n.note_count, 1), 1) AS average_length
    FROM pgmem.namespaces AS n WHERE n.namespace = %(namespace)s
),
term AS (
    SELECT s.lexeme, s.document_frequency AS df,
           ln(1 + ((SELECT note_count FROM namespace)::float8 - s.document_frequency + 0.5)
                  / (s.document_frequency + 0.5)) AS idf,
           row_number() OVER w AS position, sum(s.document_frequency) OVER w AS postings
    FROM (SELECT DISTINCT u.lexeme FROM unnest(to_tsvector('english', %(question)s)) AS u) AS q
    JOIN pgmem.lexeme_stats AS s ON s.namespace = %(namespace)s AND s.lexeme = q.lexeme
    WHERE s.document_frequency > 0
    WINDOW w AS (ORDER BY s.document_frequency, s.lexeme)
),
terms AS (
    SELECT coalesce(array_agg(t.lexeme ORDER BY t.df, t.lexeme), '{}') AS terms,
           coalesce(array_agg(t.idf ORDER BY t.df, t.lexeme), '{}') AS idf,
           coalesce(array_agg(t.lexeme) FILTER (WHERE t.position <= %(lex_max_terms)s
                                                AND t.postings <= %(lex_max_postings)s), '{}') AS screen
    FROM term AS t
)
SELECT ARRAY(SELECT n.note_id::text FROM pgmem.notes AS n, namespace AS ns
             WHERE n.namespace = %(namespace)s AND n.model_id = ns.model_id
             ORDER BY n.embedding <=> %(vector)s::vector LIMIT %(k_dense)s) AS dense,
       ARRAY(SELECT n.note_id::text FROM pgmem.notes AS n, namespace AS ns, terms AS t,
                    LATERAL pgmem.bm25_v1(n.lexemes, n.lexeme_count, t.terms, t.idf, %(bm25_k1)s, %(bm25_b)s,
                                          ns.average_length) AS score
             WHERE n.namespace = %(namespace)s AND n.model_id = ns.model_id
               AND tsvector_to_array(n.lexemes) && t.screen
             ORDER BY score.bm25 DESC, n.note_id LIMIT %(k_lex)s) AS lexical
"""


def origins(conn: Any, name: str, cache: Path) -> None:
    """Store, per question, the candidates of its pool that stage one found independently
    (in its dense or lexical top k), the others being neighbour pulls only."""
    data = pickle.loads((cache / f"{name}.pkl").read_bytes())
    found: list[frozenset[str]] = []
    for request, pool in zip(data["requests"], data["pools"], strict=True):
        params = request.stage_one
        arguments = {
            "namespace": request.namespace,
            "question": request.question,
            "vector": "[" + ",".join(repr(float(x)) for x in request.query_vector) + "]",
            **{key: getattr(params, key) for key in ("k_dense", "k_lex", "lex_max_terms", "lex_max_postings")},
            "bm25_k1": params.bm25_k1,
            "bm25_b": params.bm25_b,
        }
        dense, lexical = conn.execute(ORIGINS, arguments).fetchone()
        independent = frozenset(dense) | frozenset(lexical)
        present = {c.note_id for c in pool.candidates}
        if not independent <= present:
            raise SystemExit(f"{name}: question {request.question!r}: a top-k note is not in its stored pool")
        found.append(independent)
    (cache / f"{name}-origins.pkl").write_bytes(pickle.dumps(found))
    print(f"{name}: {sum(len(f) for f in found)} independent candidates", file=sys.stderr, flush=True)


def load(cache: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = pickle.loads((cache / f"{name}.pkl").read_bytes())
    # The embedder is not pickled: finishing a pack only reads its name.
    named = SimpleNamespace(name=data.get("embedder", "minilm"))
    data["requests"] = [dataclasses.replace(r, embedder=named) for r in data["requests"]]
    return data


def ident(candidate: Any) -> str:
    return str(candidate.external_id or candidate.note_id)


class Graph:
    """Notes by id and their undirected neighbourhood: ingest's links and adjacent spans."""

    def __init__(self, notes: list[dict[str, Any]]) -> None:
        self.by_note = {n["note_id"]: n for n in notes}
        self.ident = {n["note_id"]: str(n["external_id"] or n["note_id"]) for n in notes}
        self.note_of = {v: k for k, v in self.ident.items()}
        self.links: dict[str, set[str]] = defaultdict(set)
        self.adjacent: dict[str, set[str]] = defaultdict(set)
        for n in notes:
            for target in n["links"] or ():
                if target in self.by_note:
                    self.links[n["note_id"]].add(target)
                    self.links[target].add(n["note_id"])
        by_document: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
        for n in notes:
            by_document[(n.get("namespace", ""), n["document_id"])].append((n["span_start"], n["note_id"]))
        for spans in by_document.values():
            spans.sort()
            for (_, a), (_, b) in itertools.pairwise(spans):
                self.adjacent[a].add(b)
                self.adjacent[b].add(a)

    def hops(self, start: set[str], target: str, kind: str) -> int | None:
        """1 or 2 when ``target`` is that many steps from a note of ``start``, else None."""
        edges = self.links if kind == "link" else self.adjacent
        first = set().union(*(edges[s] for s in start)) if start else set()
        if target in first:
            return 1
        second = set().union(*(edges[s] for s in first)) if first else set()
        return 2 if target in second else None


def pack(request: PackRequest, pool: Pool, **packing: Any) -> list[str]:
    if packing:
        request = dataclasses.replace(request, packing=dataclasses.replace(request.packing, **packing))
    return [item.external_id or item.note_id for item in finish_pack(request, pool).items]


def diagnose(name: str, data: dict[str, Any]) -> dict[str, Any]:
    graph = Graph(data["notes"])
    rows: list[dict[str, Any]] = []
    for question, request, pool, wide in zip(
        data["questions"], data["requests"], data["pools"], data["wide"], strict=True
    ):
        packed = pack(request, pool)
        missing = [g for g in dict.fromkeys(question.gold) if g not in set(packed)]
        order = sorted(pool.candidates, key=lambda c: (-c.base_score, c.note_id))
        rank = {ident(c): i + 1 for i, c in enumerate(order)}
        wide_order = sorted(wide.candidates, key=lambda c: (-c.base_score, c.note_id))
        wide_rank = {ident(c): i + 1 for i, c in enumerate(wide_order)}
        packed_notes = {graph.note_of[p] for p in packed if p in graph.note_of}
        for gold in missing:
            note = graph.note_of.get(gold)
            rows.append(
                {
                    "category": question.category,
                    "question": question.id,
                    "gold": gold,
                    "pool_size": pool.size,
                    "rank": rank.get(gold),
                    "wide_rank": wide_rank.get(gold),
                    "link": None if note is None else graph.hops(packed_notes, note, "link"),
                    "adjacent": None if note is None else graph.hops(packed_notes, note, "adjacent"),
                    "any_gold_packed": any(g in set(packed) for g in question.gold),
                }
            )
    reach: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for question, request, pool, wide in zip(
        data["questions"], data["requests"], data["pools"], data["wide"], strict=True
    ):
        gold = set(question.gold)
        packed = set(pack(request, pool))
        in_pool = {ident(c) for c in pool.candidates} & gold
        in_wide = {ident(c) for c in wide.candidates} & gold
        for key in ("all", question.category):
            reach[key].append(tuple(len(found) / len(gold) for found in (packed & gold, in_pool, in_wide)))
    ceilings = {key: [100 * float(np.mean([v[i] for v in values])) for i in range(3)] for key, values in reach.items()}
    return {"dataset": name, "missing": rows, "ceilings": ceilings}


def render_ceilings(results: list[dict[str, Any]]) -> str:
    lines = ["| data | category | packed (recall) | in the pool | in the wide pool |", "|---|---|---|---|---|"]
    for result in results:
        for key, (packed, pool, wide) in sorted(result["ceilings"].items()):
            lines.append(f"| {result['dataset']} | {key} | {packed:.1f} | {pool:.1f} | {wide:.1f} |")
    return "\n".join(lines)


def bucket(row: dict[str, Any]) -> str:
    if row["rank"] is not None:
        return "pool ≤ 16" if row["rank"] <= 16 else ("pool 17–40" if row["rank"] <= 40 else "pool > 40")
    return "wide pool only" if row["wide_rank"] is not None else "not in wide pool"


def render_diagnosis(results: list[dict[str, Any]]) -> str:
    buckets = ("pool ≤ 16", "pool 17–40", "pool > 40", "wide pool only", "not in wide pool")
    lines = [
        "| data | category | missed gold | "
        + " | ".join(buckets)
        + " | link 1 hop | link 2 hops | adjacent 1 | adjacent 2 |",
        "|---" * (8 + len(buckets)) + "|",
    ]
    for result in results:
        by_category: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in result["missing"]:
            by_category[row["category"]].append(row)
        for category in sorted(by_category):
            group = by_category[category]
            counts = Counter(bucket(r) for r in group)
            total = len(group)
            cells = [f"{counts[b]} ({100 * counts[b] / total:.0f} %)" for b in buckets]
            link1 = sum(r["link"] == 1 for r in group)
            link2 = sum(r["link"] == 2 for r in group)
            adj1 = sum(r["adjacent"] == 1 for r in group)
            adj2 = sum(r["adjacent"] == 2 for r in group)
            links = f" | {link1} | {link2} | {adj1} | {adj2} |"
            lines.append(f"| {result['dataset']} | {category} | {total} | " + " | ".join(cells) + links)
    return "\n".join(lines)


Variant = Callable[[PackRequest, Pool, Any], list[str]]


def recall(questions: list[Any], packs: list[list[str]]) -> tuple[float, dict[str, float], list[float]]:
    per = [len(set(q.gold) & set(p)) / len(set(q.gold)) for q, p in zip(questions, packs, strict=True)]
    by: dict[str, list[float]] = defaultdict(list)
    for q, r in zip(questions, per, strict=True):
        by[q.category].append(r)
    return 100 * float(np.mean(per)), {c: 100 * float(np.mean(v)) for c, v in sorted(by.items())}, per


def variants() -> dict[str, Variant]:
    """Name -> packs of a question (request, default pool, wide pool)."""
    found: dict[str, Variant] = {"default": lambda request, pool, wide: pack(request, pool)}
    # The variants below measure one coverage rule each: the default's multi-entity
    # coverage is off in them unless they set it.
    found["no multi-entity coverage"] = partial(_packed_with, multi_entity_coverage=0.0)
    for weight in COVERAGE:
        found[f"coverage {weight}"] = partial(_packed_with, coverage=weight, multi_entity_coverage=0.0)
    for weight in COVERAGE[1:3]:
        found[f"coverage {weight}, decayed"] = partial(
            _packed_with, coverage=weight, order="decayed", multi_entity_coverage=0.0
        )
    for weight in ENTITY_COVERAGE:
        found[f"entity coverage {weight}"] = partial(_entity_covered, coverage=weight)
    for weight in (2.0, 3.0, 4.0):
        found[f"gated coverage {weight}"] = partial(_gated, coverage=weight)
    found["wide pool"] = lambda request, pool, wide: pack(request, wide)
    for hops, seeds in EXPANSIONS:
        found[f"link expansion {hops} hop(s) from the first {seeds} packed"] = partial(
            _expanded, hops=hops, seeds=seeds
        )
    for bonus, seeds in LINK_BONUSES:
        found[f"link bonus {bonus} from the first {seeds} packed"] = partial(_link_bonus, bonus=bonus, seeds=seeds)
    for boost in TIME_BOOSTS:
        found[f"question times at note times {boost}"] = partial(_time_hinted, boost=boost)
    for reranker in ("oracle", "nanoranker"):
        for top in RERANK_TOPS:
            for weight in RERANK_WEIGHTS:
                found[f"rerank {reranker} top {top} weight {weight}"] = partial(
                    _reranked, reranker=reranker, top=top, weight=weight
                )
    for first, alpha, top, weight in DENSE_FEEDBACK:
        found[f"dense feedback first {first} alpha {alpha} top {top} weight {weight}"] = partial(
            _dense_feedback, first=first, alpha=alpha, top=top, weight=weight
        )
    found["independent aggregates"] = partial(_independent, normalise=False)
    found["independent aggregates and normalisation"] = partial(_independent, normalise=True)
    found["relevance mode"] = lambda request, pool, wide: pack(dataclasses.replace(request, mode="relevance"), pool)
    return found


COVERAGE = (0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
ENTITY_COVERAGE = (0.5, 1.0, 2.0)


@functools.lru_cache(maxsize=4096)
def entity_words(question: str) -> frozenset[str]:
    """The words of the entities named in ``question`` (the hints stage one gets)."""
    return frozenset(w for e in derive_query_hints(question).entities for w in content_words(e))


def _gated(request: PackRequest, pool: Pool, wide: Pool, coverage: float) -> list[str]:
    """Coverage only for questions naming two entities or more (several things to cover):
    ``PackParams.multi_entity_coverage``, 2.0 by default since session 24."""
    return pack(request, pool, multi_entity_coverage=coverage)


def _entity_covered(request: PackRequest, pool: Pool, wide: Pool, coverage: float) -> list[str]:
    """Coverage of the question's named entities only, not of all its content words."""
    aspects = packer.question_aspects
    packer.question_aspects = entity_words  # type: ignore[assignment]
    try:
        return pack(request, pool, coverage=coverage, multi_entity_coverage=0.0)
    finally:
        packer.question_aspects = aspects


EXPANSIONS = ((1, 8), (2, 4), (2, 8))
#: The --cache folder, set by :func:`main`.
CACHE: list[Path] = []
#: The dataset's link graph, set by :func:`sweep`.
GRAPH: list[Graph] = []


def merged(pool: Pool, added: list[Any], wide: Pool) -> Pool:
    """``pool`` with ``added`` candidates (rows of ``wide``) and its aggregates recomputed."""
    return with_candidates(pool, pool.candidates + tuple(added), (*wide.families, *pool.families))


def with_candidates(pool: Pool, candidates: tuple[Any, ...], known: Any) -> Pool:
    """``pool`` holding ``candidates``, its aggregates recomputed over them (each family's
    namespace count, age and feedback taken from its record among ``known``)."""
    records = {f.family: f for f in known}
    members: dict[str, list[Any]] = defaultdict(list)
    for candidate in candidates:
        members[candidate.family].append(candidate)
    families = tuple(
        dataclasses.replace(
            records[name],
            count=len(group),
            score_sum=float(sum(c.base_score for c in group)),
            mean_confidence=float(np.mean([c.confidence for c in group])),
        )
        for name, group in sorted(members.items())
    )
    shares = np.array([f.count / len(candidates) for f in families])
    base = np.array([c.base_score for c in candidates])
    return dataclasses.replace(
        pool,
        candidates=candidates,
        size=len(candidates),
        mean=float(base.mean()),
        variance=float(base.var()),
        entropy=max(float(-np.sum(shares * np.log(shares))), 0.0),
        families=families,
    )


LINK_BONUSES = ((0.05, 2), (0.1, 2), (0.2, 2), (0.1, 4))


def _link_bonus(request: PackRequest, pool: Pool, wide: Pool, bonus: float, seeds: int) -> list[str]:
    """Pack, then add ``bonus`` to the base score of every candidate that ingest linked
    to one of the first ``seeds`` packed notes from another document (a shared rare
    entity or handle: the bridge of a two-hop question), and pack again."""
    graph = GRAPH[0]
    first = [graph.note_of[p] for p in pack(request, pool)[:seeds] if p in graph.note_of]
    document = {n: graph.by_note[n]["document_id"] for n in first}
    bridged = {t for n in first for t in graph.links[n] if graph.by_note[t]["document_id"] != document[n]}
    if not bridged:
        return pack(request, pool)
    base = np.array([c.base_score + (bonus if c.note_id in bridged else 0.0) for c in pool.candidates])
    return pack(request, rescored(pool, base))


def _expanded(request: PackRequest, pool: Pool, wide: Pool, hops: int, seeds: int) -> list[str]:
    """Pack again after adding the notes linked (ingest's links, up to ``hops`` steps) to
    the first ``seeds`` packed notes, scored as the wide search scored them."""
    graph = GRAPH[0]
    first = [graph.note_of[p] for p in pack(request, pool)[:seeds] if p in graph.note_of]
    reach: set[str] = set(first)
    frontier = set(first)
    for _ in range(hops):
        frontier = set().union(*(graph.links[n] for n in frontier)) - reach if frontier else set()
        reach |= frontier
    present = {c.note_id for c in pool.candidates}
    added = [c for c in wide.candidates if c.note_id in reach and c.note_id not in present]
    return pack(request, merged(pool, added, wide)) if added else pack(request, pool)


TIME_BOOSTS = (0.05, 0.1)
#: Note id -> the note's own time tags as (start, end), set by :func:`sweep` per dataset.
NOTE_TIMES: dict[str, list[tuple[datetime, datetime]]] = {}


def question_times_at(question: str, anchor: datetime | None) -> list[tuple[datetime, datetime]]:
    """The question's time expressions that need an anchor ("last year", "in June"),
    resolved as if it were asked when ``anchor`` was written (absolute ones are stage
    one's time hints already)."""
    if anchor is None:
        return []
    absolute = {(t.start, t.end) for t in extract_time_tags(question, None)}
    return [(t.start, t.end) for t in extract_time_tags(question, anchor) if (t.start, t.end) not in absolute]


def _time_hinted(request: PackRequest, pool: Pool, wide: Pool, boost: float) -> list[str]:
    """Pack with ``boost`` added to the base score of each candidate one of whose times
    (its day, its own time tags) meets one of the question's relative expressions
    resolved at that candidate's time."""
    if not question_times_at(request.question, datetime(2000, 1, 1, tzinfo=UTC)):
        return pack(request, pool)
    base = np.array([c.base_score for c in pool.candidates])
    for i, candidate in enumerate(pool.candidates):
        asked = question_times_at(request.question, candidate.source_ts)
        if candidate.source_ts is None or not asked:
            continue
        day = candidate.source_ts.replace(hour=0, minute=0, second=0, microsecond=0)
        own = [(day, day + timedelta(days=1)), *NOTE_TIMES.get(candidate.note_id, [])]
        if any(a < d and c < b for a, b in asked for c, d in own):
            base[i] += boost
    return pack(request, rescored(pool, base))


#: Per stored pool (by id), its independently found candidates (``origins``), set by :func:`sweep`.
ORIGINS_OF: dict[int, frozenset[str]] = {}


def independent_pool(pool: Pool, independent: frozenset[str]) -> Pool:
    """``pool`` cut to its independently found candidates, its aggregates recomputed over
    them (the namespace counts, ages and feedback of each family kept)."""
    kept = tuple(c for c in pool.candidates if c.note_id in independent)
    return with_candidates(pool, kept, pool.families)


def _independent(request: PackRequest, pool: Pool, wide: Pool, normalise: bool) -> list[str]:
    """Pack with the families calibrated over the independently found candidates only
    (null model, regulariser and alarm); a family present only through neighbour pulls
    gets no regulariser (its full-pool quarantine, if any, is kept). With ``normalise``
    the base scores are also standardised by the independent candidates' mean and spread."""
    independent = ORIGINS_OF[id(pool)]
    cut = independent_pool(pool, independent)
    full = calibrate(pool, request.calibration, request.mode)
    own = calibrate(cut, request.calibration, request.mode)
    records = {record.family: record for record in own.families}
    families = tuple(
        records.get(record.family)
        or dataclasses.replace(record, regularizer=0.0 if not record.quarantined else record.regularizer)
        for record in full.families
    )
    calibration = dataclasses.replace(own, families=families)
    packed = dataclasses.replace(pool, mean=cut.mean, variance=cut.variance) if normalise else pool
    return [item.external_id or item.note_id for item in rank_and_pack(packed, calibration, request.packing).items]


class GoldFirst:
    """The oracle re-ranker: 1 for a gold note's text, 0 otherwise (the ceiling of re-ranking)."""

    name = "gold-first oracle"

    def __init__(self, texts: set[str]) -> None:
        self.texts = texts

    def score(self, question: str, texts: Any) -> list[float]:
        return [1.0 if text in self.texts else 0.0 for text in texts]


class Nanoranker:
    """``nanoranker`` 1.2 (its model ships in the wheel: a universal-sentence-encoder ONNX
    and an MLP over the question's and the note's vectors), as a :class:`pgmem.Reranker`.
    Vectors are cached by text: the same notes come back question after question."""

    name = "nanoranker-1.2"

    def __init__(self) -> None:
        import nanoranker  # type: ignore[import-not-found]  # from --reranker-path

        self.model = nanoranker
        self.vectors: dict[str, np.ndarray] = {}

    def vector(self, text: str) -> np.ndarray:
        found = self.vectors.get(text)
        if found is None:
            found = self.vectors[text] = self.model.embed(text)
        return found

    def score(self, question: str, texts: Any) -> list[float]:
        query = self.vector(question)
        pairs = np.stack([np.concatenate([query, self.vector(text)]) for text in texts]).astype(np.float32)
        scores: list[float] = self.model.reranker_model.run(["output"], {"input": pairs})[0].reshape(-1).tolist()
        return scores


class DenseFeedback:
    """Pseudo-relevance feedback on the dense side, as a re-ranker of pgmem's top N: each
    note scores its cosine with ``alpha * q + (1 - alpha) * c`` (``q`` the question's
    vector, ``c`` the mean of the first ``first`` notes of pgmem's order, both unit
    length; ``alpha`` above 1 pushes away from them). No model: the stored vectors."""

    name = "dense feedback"

    def __init__(self, pool: Pool, query: np.ndarray, first: int, alpha: float) -> None:
        self.vectors = {note_text(c): NOTE_VECTORS[c.note_id] for c in pool.candidates}
        self.query = query / np.linalg.norm(query)
        self.first = first
        self.alpha = alpha

    def score(self, question: str, texts: Any) -> list[float]:
        vectors = np.stack([self.vectors[text] for text in texts]).astype(np.float64)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        centroid = vectors[: self.first].mean(axis=0)
        target = self.alpha * self.query + (1 - self.alpha) * centroid / np.linalg.norm(centroid)
        scores: list[float] = (vectors @ target).tolist()
        return scores


#: Each note's stored vector (``collect`` reads them), set by :func:`sweep`.
NOTE_VECTORS: dict[str, np.ndarray] = {}
#: The dataset's answers by pool (gold note texts, as a re-ranker reads them), set by :func:`sweep`.
GOLD_TEXTS: dict[int, set[str]] = {}
RERANKERS: dict[str, Any] = {}


def _reranked_by(request: PackRequest, pool: Pool, reranker: Any, top: int, weight: float) -> list[str]:
    """Pack through the finish with ``reranker`` re-ranking pgmem's ``top`` candidates (the API's path)."""
    packing = dataclasses.replace(request.packing, rerank_top=top, rerank_weight=weight)
    request = dataclasses.replace(request, reranker=reranker, packing=packing)
    return [item.external_id or item.note_id for item in finish_pack(request, pool).items]


def _reranked(request: PackRequest, pool: Pool, wide: Pool, reranker: str, top: int, weight: float) -> list[str]:
    chosen = GoldFirst(GOLD_TEXTS[id(pool)]) if reranker == "oracle" else RERANKERS[reranker]
    return _reranked_by(request, pool, chosen, top, weight)


def _dense_feedback(
    request: PackRequest, pool: Pool, wide: Pool, first: int, alpha: float, top: int, weight: float
) -> list[str]:
    """Pack through the finish with :class:`DenseFeedback` re-ranking pgmem's ``top`` candidates."""
    if not NOTE_VECTORS:
        raise SystemExit("dense feedback needs the notes' vectors: run `collect` again (it stores them now)")
    query = np.asarray(request.query_vector, dtype=np.float64)
    return _reranked_by(request, pool, DenseFeedback(pool, query, first, alpha), top, weight)


#: (first notes averaged, alpha, top N, weight) of the dense feedback variants.
DENSE_FEEDBACK = (
    (3, 0.0, 16, 0.25),
    (3, 0.5, 16, 0.25),
    (5, 0.5, 16, 0.25),
    (5, 0.5, 16, 0.5),
    (8, 0.5, 32, 0.25),
    (3, 1.0, 16, 0.25),
    (3, 2.0, 16, 0.25),
)
RERANK_TOPS = (8, 16, 32)
RERANK_WEIGHTS = (0.1, 0.25, 0.5, 0.75, 1.0)


def _packed_with(request: PackRequest, pool: Pool, wide: Pool, **packing: Any) -> list[str]:
    return pack(request, pool, **packing)


def sweep(name: str, data: dict[str, Any], only: list[str] | None = None) -> dict[str, Any]:
    questions = data["questions"]
    GRAPH[:] = [Graph(data["notes"])]
    NOTE_TIMES.clear()
    for note in data["notes"]:
        NOTE_TIMES[note["note_id"]] = [
            (datetime.fromisoformat(t["start"]), datetime.fromisoformat(t["end"])) for t in note["time_tags"]
        ]
    ORIGINS_OF.clear()
    if only and any(prefix.startswith("independent") for prefix in only):
        # `origins` stored them beside the pools, one per question, in the pools' order.
        found = pickle.loads((CACHE[0] / f"{name}-origins.pkl").read_bytes())
        for pool, independent in zip(data["pools"], found, strict=True):
            ORIGINS_OF[id(pool)] = independent
    NOTE_VECTORS.clear()
    for note in data["notes"]:
        if "embedding" in note:  # caches collected before session 32 lack them
            NOTE_VECTORS[note["note_id"]] = np.asarray(note["embedding"], dtype=np.float32)
    GOLD_TEXTS.clear()
    for question, pool in zip(questions, data["pools"], strict=True):
        gold = set(question.gold)
        GOLD_TEXTS[id(pool)] = {note_text(c) for c in pool.candidates if ident(c) in gold}
    if only and any(prefix.startswith("rerank nanoranker") for prefix in only) and "nanoranker" not in RERANKERS:
        RERANKERS["nanoranker"] = Nanoranker()
    rows: dict[str, Any] = {}
    for label, variant in variants().items():
        if only and label != "default" and not any(label.startswith(prefix) for prefix in only):
            continue
        packs = [
            variant(request, pool, wide)
            for request, pool, wide in zip(data["requests"], data["pools"], data["wide"], strict=True)
        ]
        overall, by, per = recall(questions, packs)
        rows[label] = {"recall": overall, "categories": by, "per_question": per}
        print(f"{name}: {label} {overall:.2f}", file=sys.stderr, flush=True)
    return {"dataset": name, "variants": rows}


def interval(gain: np.ndarray, resamples: int = 2000) -> tuple[float, float]:
    """95 % paired bootstrap interval of a mean per-question gain (seed 0)."""
    rng = np.random.default_rng(0)
    means = gain[rng.integers(0, len(gain), size=(resamples, len(gain)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def render_sweep(results: list[dict[str, Any]]) -> str:
    lines = ["| variant | " + " | ".join(r["dataset"] for r in results) + " |", "|---" * (1 + len(results)) + "|"]
    for label in results[0]["variants"]:
        cells = []
        for result in results:
            row, base = result["variants"][label], result["variants"]["default"]
            gain = 100 * (np.array(row["per_question"]) - np.array(base["per_question"]))
            low, high = interval(gain)
            categories = " / ".join(f"{v:.1f}" for v in row["categories"].values())
            cells.append(f"{row['recall']:.1f} ({gain.mean():+.1f} [{low:+.1f}, {high:+.1f}]; {categories})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("collect", "origins", "diagnose", "sweep"))
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--dsn")
    parser.add_argument("--home")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--cache", default="/tmp/quality-cache")
    parser.add_argument("--out")
    parser.add_argument("--only", nargs="*", help="sweep: only the variants whose names start so")
    parser.add_argument(
        "--reranker-path", help="sweep: a site-packages folder with nanoranker (the 'rerank nanoranker' variants)"
    )
    args = parser.parse_args(argv)
    cache = Path(args.cache)
    if args.command == "collect":
        from pgmem.db.connection import connect
        from pgmem.embeddings import get_embedder

        embedder = get_embedder(args.embedder)
        with connect(args.dsn, home=args.home, migrate=True) as conn:
            for name in args.datasets:
                collect(conn, name, Path(args.data_dir), embedder, cache)
        return
    if args.command == "origins":
        from pgmem.db.connection import connect

        with connect(args.dsn, home=args.home, migrate=False) as conn:
            for name in args.datasets:
                origins(conn, name, cache)
        return
    if args.command == "diagnose":
        results = [diagnose(name, load(cache, name)) for name in args.datasets]
        print(render_diagnosis(results))
        print()
        print(render_ceilings(results))
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        return
    CACHE[:] = [cache]
    if args.reranker_path:
        sys.path.append(args.reranker_path)
    results = [sweep(name, load(cache, name), args.only) for name in args.datasets]
    print(render_sweep(results))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
