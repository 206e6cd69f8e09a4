"""The pack as three steps: prepare (pure) → fetch the pool (one statement) → finish (pure).

:func:`prepare_pack` checks every argument of :func:`pgmem.pack` and builds a frozen
:class:`PackRequest` (hints, parameters, the embedder); :func:`embed_question` adds the
question's vector (CPU only, so the async driver runs it in a worker thread);
:func:`fetch_pool` is the only I/O — the one stage-one statement — and
:func:`finish_pack` calibrates, packs and writes the diagnostics, in numpy. The sync
driver (:func:`pgmem.pack`), the async one (:func:`pgmem.aio.pack`) and the evaluation
(:mod:`pgmem.eval.runner`) compose these same pieces; only the I/O differs.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from pgmem.db.errors import database_errors
from pgmem.db.queries import run
from pgmem.embeddings import Embedder, embed_unique, resolve_embedder
from pgmem.errors import ConfigurationError, InputError
from pgmem.ingestion.hints import QueryHints, derive_query_hints
from pgmem.params import ROLES, CalibrationParams, Mode, PackParams, StageOneParams, check_mode
from pgmem.retrieval.calibrate import calibrate
from pgmem.retrieval.packer import rank_and_pack
from pgmem.retrieval.pool import Pool
from pgmem.retrieval.rerank import Reranker, TopReranking, check_reranker
from pgmem.retrieval.stage_one import Hints, run_stage_one, stage_one_arguments
from pgmem.types import Diagnostics, Pack, Rejection, frozen_from_fields, jsonable
from pgmem.validate import check_namespace, check_text, describe_value, parse_timestamp, timeout_seconds

#: Longest question accepted, in characters (the embedder reads far less).
MAX_QUERY_CHARS = 4_096
#: Most entity, keyword or handle hints a pack uses, each kind counted apart. Stage one
#: compares every hint with every candidate's tags, so hints are bounded like the
#: question: 64 is the largest keyword budget and lexical term count, and more than any
#: question names (a 4,096-character question derives a few dozen at most).
MAX_HINTS = 64
#: Longest hint, in characters: as long as a document id or a long URL handle.
MAX_HINT_CHARS = 512
#: What a logged pack keeps of each packed item (pgmem.pack_log_items): ids and scores, no text.
LOGGED_ITEM_FIELDS = (
    "rank",
    "note_id",
    "family",
    "role",
    "base_score",
    "normalized_score",
    "regularizer",
    "final_score",
    "decayed_score",
    "max_overlap",
    "dense_score",
    "lexical_score",
    "facet_boost",
    "link_boost",
)


@dataclass(frozen=True)
class PackRequest:
    """Everything a pack needs, checked: what :func:`prepare_pack` returns.

    ``query_vector`` is None until :func:`embed_question` has run; ``started`` is the
    ``time.perf_counter()`` reading at which preparing began (the ``embed`` timing of
    the diagnostics counts from it, as it always has).
    """

    namespace: str
    question: str
    mode: Mode
    hints: Hints
    stage_one: StageOneParams
    calibration: CalibrationParams
    packing: PackParams
    embedder: Embedder
    timeout: float | None = None
    log: bool = False
    #: The caller's re-ranker of pgmem's top candidates (None: pgmem's order alone).
    reranker: Reranker | None = field(default=None, compare=False)
    query_vector: np.ndarray | None = field(default=None, compare=False, repr=False)
    started: float = field(default=0.0, compare=False)

    @property
    def embedding_model(self) -> str:
        return self.embedder.name

    def stage_one_arguments(self) -> dict[str, Any]:
        """The bind parameters of the ``stage_one`` statement (needs the vector)."""
        if self.query_vector is None:
            raise ConfigurationError("the pack request has no query vector yet: call embed_question(request) first")
        return stage_one_arguments(
            self.namespace, self.embedder.name, self.query_vector, self.question, self.hints, self.stage_one
        )


def check_strings(name: str, values: Sequence[str] | None, *, limit: int = MAX_HINTS) -> tuple[str, ...]:
    """``values`` as a tuple of checked, stripped strings (at most ``limit``), else InputError."""
    if values is None:
        return ()
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise InputError(f"{name} must be a list of non-empty strings, got {describe_value(values)}")
    items = list(itertools.islice(values, limit + 1))
    if len(items) > limit:
        raise InputError(f"{name} must hold at most {limit} values, got more")
    return tuple(check_text(f"{name}[{i}]", v, max_chars=MAX_HINT_CHARS).strip() for i, v in enumerate(items))


def _hints(
    entities: Sequence[str] | None,
    time_range: tuple[datetime | str | None, datetime | str | None] | None,
    keywords: Sequence[str] | None,
    handles: Sequence[str] | None,
    roles: Sequence[str] | None,
) -> Hints:
    time_from = time_to = None
    if time_range is not None:
        if not isinstance(time_range, tuple | list) or len(time_range) != 2:
            raise InputError(f"time_range must be a (start, end) pair, got {describe_value(time_range)}")
        start, end = time_range
        time_from = parse_timestamp(start, "time_range start") if start is not None else None
        time_to = parse_timestamp(end, "time_range end") if end is not None else None
        if time_from and time_to and time_to <= time_from:
            raise InputError(f"time_range end must be after its start, got {start} .. {end}")
    role_filter = None
    if roles is not None:
        role_filter = check_strings("roles", roles)
        unknown = [r for r in role_filter if r not in ROLES]
        if unknown or not role_filter:
            raise InputError(f"roles must be a non-empty list of {', '.join(ROLES)}; got {describe_value(roles)}")
    return Hints(
        entities=check_strings("entities", entities),
        time_from=time_from,
        time_to=time_to,
        keywords=check_strings("keywords", keywords),
        handles=check_strings("handles", handles),
        roles=role_filter,
    )


def build_hints(
    question: str,
    *,
    derive: bool = True,
    entities: Sequence[str] | None = None,
    time_range: tuple[datetime | str | None, datetime | str | None] | None = None,
    keywords: Sequence[str] | None = None,
    handles: Sequence[str] | None = None,
    roles: Sequence[str] | None = None,
    where: str | None = None,
) -> Hints:
    """The stage-one hints of a pack: the caller's, checked, plus those derived from the
    question, plus the compiled ``where`` filter (shared by pack() and the evaluation)."""
    hints = _hints(entities, time_range, keywords, handles, roles)
    if derive:
        hints = _with_derived(hints, derive_query_hints(question))
    if where is not None:
        # sqlglot costs ~60 ms to import: only packs with a filter pay it.
        from pgmem.retrieval.filters import compile_filter

        compiled = compile_filter(where)
        hints = dataclasses.replace(hints, filter_tree=compiled.tree, filter_text=compiled.expression)
    return hints


def _merge(given: tuple[str, ...], derived: tuple[str, ...]) -> tuple[str, ...]:
    """The given hints, then derived ones not among them, at most MAX_HINTS in all."""
    seen = {value.lower() for value in given}
    usable = (value for value in derived if value.lower() not in seen and len(value) <= MAX_HINT_CHARS)
    return (given + tuple(usable))[:MAX_HINTS]


def _with_derived(hints: Hints, derived: QueryHints) -> Hints:
    """The caller's hints, completed with those derived from the question itself.

    Derived entities, keywords and handles are added to the given ones; a derived time
    range is used only when the caller gave none.
    """
    use_time = hints.time_from is None and hints.time_to is None
    return dataclasses.replace(
        hints,
        entities=_merge(hints.entities, derived.entities),
        keywords=_merge(hints.keywords, derived.keywords),
        handles=_merge(hints.handles, derived.handles),
        time_from=derived.time_from if use_time else hints.time_from,
        time_to=derived.time_to if use_time else hints.time_to,
        derived={
            "entities": list(derived.entities),
            "time_from": derived.time_from.isoformat() if derived.time_from else None,
            "time_to": derived.time_to.isoformat() if derived.time_to else None,
            "keywords": list(derived.keywords),
            "handles": list(derived.handles),
        },
    )


def _packing(
    packing: PackParams | None,
    budget: int | None,
    token_budget: int | None,
    role_quotas: Mapping[str, int] | None,
    family_cap: int | None,
) -> PackParams:
    base = packing or PackParams()
    overrides: dict[str, Any] = {}
    if budget is not None:
        overrides["budget"] = budget
    if token_budget is not None:
        overrides["token_budget"] = token_budget
    if role_quotas is not None:
        overrides["role_quotas"] = role_quotas
    if family_cap is not None:
        overrides["family_cap"] = family_cap
    return dataclasses.replace(base, **overrides) if overrides else base


def prepare_pack(
    question: str,
    *,
    budget: int | None = None,
    namespace: str = "default",
    mode: Mode | str = "calibrated",
    token_budget: int | None = None,
    roles: Sequence[str] | None = None,
    role_quotas: Mapping[str, int] | None = None,
    family_cap: int | None = None,
    entities: Sequence[str] | None = None,
    time_range: tuple[datetime | str | None, datetime | str | None] | None = None,
    keywords: Sequence[str] | None = None,
    handles: Sequence[str] | None = None,
    where: str | None = None,
    derive_hints: bool = True,
    stage_one: StageOneParams | None = None,
    calibration: CalibrationParams | None = None,
    packing: PackParams | None = None,
    embedder: Embedder | str | None = None,
    log: bool = False,
    timeout: float | None = None,
    reranker: Reranker | None = None,
) -> PackRequest:
    """Check the arguments of :func:`pgmem.pack` and build its request (no I/O, no embedding).

    Takes exactly the keyword arguments of :func:`pgmem.pack`, documented there; a bad
    one raises :class:`pgmem.InputError` or :class:`pgmem.ConfigurationError` naming it.
    """
    started = time.perf_counter()
    check_namespace(namespace)
    question = check_text("question", question, max_chars=MAX_QUERY_CHARS)
    checked_mode = check_mode(mode)
    hints = build_hints(
        question,
        derive=derive_hints,
        entities=entities,
        time_range=time_range,
        keywords=keywords,
        handles=handles,
        roles=roles,
        where=where,
    )
    for name, value, kind in (
        ("stage_one", stage_one, StageOneParams),
        ("calibration", calibration, CalibrationParams),
        ("packing", packing, PackParams),
    ):
        if value is not None and not isinstance(value, kind):
            raise ConfigurationError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")
    return PackRequest(
        namespace=namespace,
        question=question,
        mode=checked_mode,
        hints=hints,
        stage_one=stage_one or StageOneParams(),
        calibration=calibration or CalibrationParams(),
        packing=_packing(packing, budget, token_budget, role_quotas, family_cap),
        embedder=resolve_embedder(embedder),
        timeout=timeout_seconds("timeout", timeout) if timeout is not None else None,
        log=bool(log),
        reranker=check_reranker(reranker),
        started=started,
    )


def embed_question(request: PackRequest) -> PackRequest:
    """``request`` with the question's vector (the only model call of a pack; CPU-bound)."""
    return dataclasses.replace(request, query_vector=embed_unique(request.embedder, [request.question])[0])


def fetch_pool(conn: psycopg.Connection[Any], request: PackRequest) -> Pool:
    """The pack's one I/O step: stage one (exactly one statement), rows turned into a pool."""
    return run_stage_one(conn, request.stage_one_arguments(), request.timeout)


def _ms(start: float, end: float) -> float:
    return round((end - start) * 1000, 3)


class Stopwatch:
    """The pack's stage timings, in milliseconds, as the diagnostics report them."""

    def __init__(self, started: float) -> None:
        self.last = started
        self.laps: dict[str, float] = {}

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.laps[stage] = _ms(self.last, now)
        self.last = now


def finish_pack(request: PackRequest, pool: Pool, timings: Mapping[str, float] | None = None) -> Pack:
    """Calibrate and pack ``pool`` for ``request`` and explain it (numpy only, no I/O).

    ``timings`` are the milliseconds already spent (``embed``, ``stage_one``); the time
    spent here is added as ``calibrate_and_pack``.
    """
    tick = time.perf_counter()
    calibrated = calibrate(pool, request.calibration, request.mode)
    reranking = (
        TopReranking(request.reranker, request.question, request.packing) if request.reranker is not None else None
    )
    result = rank_and_pack(pool, calibrated, request.packing, reorder=reranking, entities=len(request.hints.entities))
    # Each rejection is explained like a packed item: its base score and regulariser.
    base_scores = {c.note_id: c.base_score for c in pool.candidates} if result.rejections else {}
    regularizer = calibrated.regularizer
    rejections = tuple(
        frozen_from_fields(
            Rejection, {**vars(r), "base_score": base_scores[r.note_id], "regularizer": regularizer(r.family)}
        )
        for r in result.rejections
    )
    diagnostics = Diagnostics(
        mode=request.mode,
        degraded=calibrated.degraded,
        degraded_reasons=calibrated.degraded_reasons,
        pool_size=pool.size,
        pool_mean=pool.mean,
        pool_variance=pool.variance,
        entropy=pool.entropy,
        families=calibrated.families,
        rejections=rejections,
        parameters=_parameters(request, reranking),
        hints=request.hints.as_dict(),
        timings_ms={
            **(timings or {}),
            "calibrate_and_pack": _ms(tick, time.perf_counter()),
            **({"rerank": reranking.elapsed_ms} if reranking is not None else {}),
        },
        namespace=request.namespace,
        embedding_model=request.embedding_model,
        rerank=reranking.outcome if reranking is not None else None,
    )
    return Pack(query=request.question, items=result.items, diagnostics=diagnostics)


#: PackParams fields read only when a re-ranker is given: recorded under "rerank" then.
RERANK_FIELDS = ("rerank_top", "rerank_weight")


def _parameters(request: PackRequest, reranking: TopReranking | None) -> dict[str, Any]:
    """The parameters a pack records: the three parameter objects, and the re-ranker's
    name, top and weight when it had one (without one those fields shape nothing and are
    left out, so such packs record what they always did)."""
    packing = request.packing.as_dict()
    for name in RERANK_FIELDS:
        del packing[name]
    parameters = {
        "stage_one": request.stage_one.as_dict(),
        "calibration": request.calibration.as_dict(),
        "packing": packing,
    }
    if reranking is not None:
        parameters["rerank"] = {"reranker": reranking.name, "top": reranking.top, "weight": reranking.weight}
    return parameters


def log_document(evidence: Pack) -> tuple[Pack, dict[str, Any]]:
    """The pack with a fresh ``pack_id``, and the bind parameters of the ``log_pack`` statement.

    The document holds what ``Pack.to_dict()`` holds for the logged fields (JSON-ready:
    datetimes as text, non-finite floats as null), built field by field: a deep
    ``dataclasses.asdict`` of the whole pack cost several milliseconds per logged pack.
    """
    pack_id = str(uuid.uuid4())
    d = evidence.diagnostics
    document = {
        "namespace": d.namespace,
        "pack_id": pack_id,
        "query": evidence.query,
        "mode": d.mode,
        "embedding_model": d.embedding_model,
        "degraded": d.degraded,
        "degraded_reasons": list(d.degraded_reasons),
        "pool_size": d.pool_size,
        "pool_mean": d.pool_mean,
        "pool_variance": d.pool_variance,
        "entropy": d.entropy,
        "note_ids": [item.note_id for item in evidence.items],
        "items": [{key: getattr(item, key) for key in LOGGED_ITEM_FIELDS} for item in evidence.items],
        "parameters": d.parameters,
        "hints": d.hints,
        "rejections": [vars(rejection) for rejection in d.rejections],
        "timings_ms": d.timings_ms,
        "families": [vars(family) for family in d.families],
    }
    return dataclasses.replace(evidence, pack_id=pack_id), {"pack": Jsonb(jsonable(document))}


def log_pack(conn: psycopg.Connection[Any], evidence: Pack) -> Pack:
    """Persist ``evidence`` and its diagnostics (one statement); returns it with its ``pack_id``."""
    logged, arguments = log_document(evidence)
    with database_errors("log pack"):
        # prepare=False: a server-side prepare would cost a round trip of its own.
        run(conn, "log_pack", arguments, prepare=False)
    return logged
