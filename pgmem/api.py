"""The public operations: ingest spans, pack evidence for a question."""

from __future__ import annotations

import dataclasses
import itertools
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pgmem.db.errors import database_errors
from pgmem.db.queries import query, run
from pgmem.embeddings import Embedder, embed_unique, resolve_embedder
from pgmem.errors import ConfigurationError, DatabaseError, InputError
from pgmem.ingest.enricher import Enricher
from pgmem.ingest.hints import QueryHints, derive_query_hints
from pgmem.ingest.spans import MAX_ID_CHARS
from pgmem.ingest.writer import IngestResult, check_reason
from pgmem.ingest.writer import write as write_spans
from pgmem.params import (
    ROLES,
    CalibrationParams,
    Mode,
    PackParams,
    StageOneParams,
    check_mode,
)
from pgmem.retrieval.calibrate import calibrate
from pgmem.retrieval.packer import rank_and_pack
from pgmem.retrieval.stage_one import Hints, run_stage_one, stage_one_arguments
from pgmem.types import Diagnostics, Pack, Span
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
#: Most families one :func:`reset_feedback` call names.
MAX_FAMILIES = 10_000
#: Longest reason of a :func:`forget` call, in characters (it is kept in the audit table).
MAX_REASON_CHARS = 4_096


def ingest(
    conn: psycopg.Connection[Any],
    spans: Iterable[Span],
    *,
    namespace: str = "default",
    embedder: Embedder | str | None = None,
    enricher: Enricher | None = None,
    progress: Callable[[int], None] | None = None,
) -> IngestResult:
    """Write spans as immutable notes in ``namespace``.

    Each span is validated, enriched (role, keywords, entity and time tags,
    micro-handles, context, confidence, local links) and embedded once; the batch is
    written through COPY in one transaction (a savepoint if the connection is already
    in a transaction). A bad span raises :class:`pgmem.InputError` naming it, and
    nothing of the batch is written. Note ids are deterministic, so re-ingesting a
    span exactly as stored is a no-op; a span (document, start, end) that already
    holds a note with other text or other caller-given fields (family, source_ts,
    metadata, external_id; context, role and confidence when given) is refused with
    an InputError naming the span and the fields — replace it with :func:`supersede`.

    Parameters
    ----------
    conn : psycopg.Connection
        Any psycopg 3 connection to a migrated database.
    spans : iterable of Span
        The spans to write.
    namespace : str
        The isolated memory to write into (default ``"default"``); created on first use
        and bound to the embedder's model.
    embedder : Embedder or str, optional
        The embedding model (default: ``$PGMEM_EMBEDDER`` or the bundled MiniLM).
    enricher : Enricher, optional
        Replaces the default rule-based enricher.
    progress : callable, optional
        Called with the number of spans embedded after each chunk.

    Returns
    -------
    IngestResult
        Note ids in input order, and how many notes were new or already present.
    """
    return write_spans(
        conn,
        spans,
        namespace=namespace,
        embedder=resolve_embedder(embedder),
        enricher=enricher,
        progress=progress,
    )


def supersede(
    conn: psycopg.Connection[Any],
    spans: Iterable[Span],
    *,
    namespace: str,
    reason: str,
    embedder: Embedder | str | None = None,
    enricher: Enricher | None = None,
    progress: Callable[[int], None] | None = None,
) -> IngestResult:
    """Write spans, replacing the note stored on each same document span; audited.

    A corrected document re-ingested with :func:`ingest` is refused span by span (a
    note never changes silently); ``supersede`` is the explicit form. Every span is
    written as :func:`ingest` writes it; where a note with other text or other
    caller-given fields is stored on the same (document_id, start, end), that note is
    deleted and one row of ``pgmem.supersede_audit`` records the namespace, the old
    and new note ids, the document and offsets, ``reason``, who (``session_user``) and
    when (ids only, no content). A span stored exactly as given is left alone, and a
    span with no note yet is simply written. One transaction (a savepoint inside the
    caller's), so either every replacement happens or none.

    The database checks each request as the caller (row-level security): the
    connection's session namespace (``pgmem.connect(namespace=...)``) must be
    ``namespace``, unless the caller owns the schema, and the replaced note must be
    visible to it. Members of ``pgmem_writer`` (and admins) may supersede; readers may
    not.

    Parameters
    ----------
    conn : psycopg.Connection
        A connection of a ``pgmem_writer`` member (or the schema owner).
    spans : iterable of Span
        The corrected spans.
    namespace : str
        The namespace to write into.
    reason : str
        Why the notes are replaced (required, at most 1,000 characters, kept in the
        audit table).
    embedder : Embedder or str, optional
        As for :func:`ingest`.
    enricher : Enricher, optional
        As for :func:`ingest`.
    progress : callable, optional
        As for :func:`ingest`.

    Returns
    -------
    IngestResult
        Note ids in input order, how many notes were written or left alone, and in
        ``superseded`` the ids of the notes replaced.
    """
    return write_spans(
        conn,
        spans,
        namespace=namespace,
        embedder=resolve_embedder(embedder),
        enricher=enricher,
        progress=progress,
        supersede_reason=check_reason(reason),
    )


def _check_question(question: object) -> str:
    return check_text("question", question, max_chars=MAX_QUERY_CHARS)


def _strings(name: str, values: Sequence[str] | None, *, limit: int = MAX_HINTS) -> tuple[str, ...]:
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
        role_filter = _strings("roles", roles)
        unknown = [r for r in role_filter if r not in ROLES]
        if unknown or not role_filter:
            raise InputError(f"roles must be a non-empty list of {', '.join(ROLES)}; got {describe_value(roles)}")
    return Hints(
        entities=_strings("entities", entities),
        time_from=time_from,
        time_to=time_to,
        keywords=_strings("keywords", keywords),
        handles=_strings("handles", handles),
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


def pack(
    conn: psycopg.Connection[Any],
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
) -> Pack:
    """Select a fixed-budget evidence pack for ``question`` from ``namespace``.

    Stage one (candidate search and pool aggregates) is one SQL statement, so a pack
    costs exactly one database round trip; family calibration and the greedy packer
    then run in numpy. The connection is used as it is (autocommit or not, inside a
    transaction or not) and never committed or closed.

    Parameters
    ----------
    conn : psycopg.Connection
        Any psycopg 3 connection to a migrated database.
    question : str
        The question the evidence is for (at most 4,096 characters).
    budget : int, optional
        Maximum notes in the pack (default 8); shortcut for ``PackParams.budget``.
    namespace : str
        The memory to read (default ``"default"``). An unknown namespace gives an
        empty pack whose diagnostics say the pool was too small.
    mode : {"calibrated", "relevance", "raw_bonus", "beta"}
        ``calibrated`` (default) adds the bounded family regulariser; ``relevance``
        zeroes it; ``raw_bonus`` uses an uncalibrated family-count bonus; ``beta`` uses
        each family's reliability learned from :func:`feedback` instead of the pool.
    token_budget, role_quotas, family_cap : optional
        Shortcuts for the :class:`PackParams` fields of the same names.
    roles : list of str, optional
        Only notes with these roles are candidates.
    entities, keywords, handles : list of str, optional
        Hints: notes tagged with them get bounded boosts in stage one.
    derive_hints : bool
        Also derive entity, time, keyword and handle hints from the question itself
        with the write path's extractors (default True); the diagnostics list them
        under ``hints["derived"]``.
    time_range : (start, end), optional
        Time hint; notes whose time tags (or source time) fall in it get a boost.
    where : str, optional
        A metadata filter such as ``"role = 'fact' AND source_ts >= '2023-05-01' AND
        metadata->>'lang' = 'en'"``, applied inside stage one (so a selective filter
        still fills the pool). Parsed and allowlisted in Python, compiled again with
        quoted literals in the database; anything else is an InputError. See
        docs/filters.md.
    stage_one, calibration, packing : parameter objects, optional
        Full control of every parameter (defaults documented on each class).
    embedder : Embedder or str, optional
        Must be the model the namespace was written with (else EmbeddingMismatchError).
    log : bool
        Persist the pack and its diagnostics to ``pgmem.pack_log`` (one more
        statement, in the caller's transaction if there is one).
    timeout : float, optional
        Seconds stage one may run (0 < timeout <= 86,400); past it the statement is cancelled and
        :class:`pgmem.DatabaseError` says so (inside a transaction, the transaction is
        then aborted, as after any failed statement). Server-side limits still apply.

    Returns
    -------
    Pack
        ``items`` in pack order and ``diagnostics`` explaining them.
    """
    started = time.perf_counter()
    check_namespace(namespace)
    question = _check_question(question)
    mode = check_mode(mode)
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
    stage_one = stage_one or StageOneParams()
    calibration = calibration or CalibrationParams()
    for name, value, kind in (
        ("stage_one", stage_one, StageOneParams),
        ("calibration", calibration, CalibrationParams),
        ("packing", packing, PackParams),
    ):
        if value is not None and not isinstance(value, kind):
            raise ConfigurationError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")
    packing = _packing(packing, budget, token_budget, role_quotas, family_cap)
    if timeout is not None:
        timeout = timeout_seconds("timeout", timeout)
    model = resolve_embedder(embedder)

    query_vector = embed_unique(model, [question])[0]
    embedded = time.perf_counter()
    pool = run_stage_one(
        conn, stage_one_arguments(namespace, model.name, query_vector, question, hints, stage_one), timeout
    )
    searched = time.perf_counter()
    calibrated = calibrate(pool, calibration, mode)
    result = rank_and_pack(pool, calibrated, packing)
    packed = time.perf_counter()

    diagnostics = Diagnostics(
        mode=mode,
        degraded=calibrated.degraded,
        degraded_reasons=calibrated.degraded_reasons,
        pool_size=pool.size,
        pool_mean=pool.mean,
        pool_variance=pool.variance,
        entropy=pool.entropy,
        families=calibrated.families,
        rejections=result.rejections,
        parameters={
            "stage_one": stage_one.as_dict(),
            "calibration": calibration.as_dict(),
            "packing": packing.as_dict(),
        },
        hints=hints.as_dict(),
        timings_ms={
            "embed": round((embedded - started) * 1000, 3),
            "stage_one": round((searched - embedded) * 1000, 3),
            "calibrate_and_pack": round((packed - searched) * 1000, 3),
        },
        namespace=namespace,
        embedding_model=model.name,
    )
    evidence = Pack(query=question, items=result.items, diagnostics=diagnostics)
    if log:
        evidence = _log(conn, evidence)
    return evidence


def _log(conn: psycopg.Connection[Any], evidence: Pack) -> Pack:
    pack_id = str(uuid.uuid4())
    d = evidence.to_dict()["diagnostics"]
    document = {
        "namespace": d["namespace"],
        "pack_id": pack_id,
        "query": evidence.query,
        "mode": d["mode"],
        "embedding_model": d["embedding_model"],
        "degraded": d["degraded"],
        "degraded_reasons": d["degraded_reasons"],
        "pool_size": d["pool_size"],
        "pool_mean": d["pool_mean"],
        "pool_variance": d["pool_variance"],
        "entropy": d["entropy"],
        "note_ids": [item.note_id for item in evidence.items],
        "parameters": d["parameters"],
        "hints": d["hints"],
        "rejections": d["rejections"],
        "timings_ms": d["timings_ms"],
        "families": d["families"],
    }
    with database_errors("log pack"):
        conn.execute(query("log_pack"), {"pack": Jsonb(document)})
    return dataclasses.replace(evidence, pack_id=pack_id)


@dataclass(frozen=True)
class ForgetResult:
    """What :func:`forget` removed: how many notes, and the audit record that says so."""

    audit_id: int
    notes_removed: int


def forget(
    conn: psycopg.Connection[Any],
    *,
    namespace: str,
    reason: str,
    note_ids: Sequence[str] | None = None,
    document_id: str | None = None,
    family: str | None = None,
) -> ForgetResult:
    """Erase notes for good: by note ids, by document or by family, with a reason.

    The one way notes leave the store (they are otherwise immutable). The notes'
    content is deleted and ``pgmem.forget_audit`` records who asked, when, what (the
    selector and the removed note ids — no content) and why. Runs the privileged SQL
    function ``pgmem.forget_v1``: the caller must own the schema or be a member of
    ``pgmem_admin``. Deleted rows leave the table files at the next VACUUM.

    Parameters
    ----------
    conn : psycopg.Connection
        A connection of the schema owner or a ``pgmem_admin`` member.
    namespace : str
        The namespace to erase from.
    reason : str
        Why (required, kept in the audit table).
    note_ids, document_id, family : exactly one
        What to erase.
    """
    check_namespace(namespace)
    selectors = {"notes": note_ids, "document": document_id, "family": family}
    given = [(scope, value) for scope, value in selectors.items() if value is not None]
    if len(given) != 1:
        raise InputError("forget needs exactly one of note_ids, document_id or family")
    check_text("forget: reason", reason, max_chars=MAX_REASON_CHARS)
    scope, value = given[0]
    if scope == "notes":
        selector = _note_ids("forget: note_ids", value)
        if not selector:
            raise InputError("forget: note_ids must be a non-empty list of note ids")
    else:
        field = "document_id" if scope == "document" else scope
        selector = [check_text(f"forget: {field}", value, max_chars=MAX_ID_CHARS)]
    with database_errors("forget"):
        row = run(
            conn, "forget", {"namespace": namespace, "scope": scope, "selector": selector, "reason": reason}
        ).fetchone()
    if row is None:
        raise DatabaseError("forget: pgmem.forget_v1 returned nothing")
    return ForgetResult(audit_id=int(row["audit_id"]), notes_removed=int(row["notes_removed"]))


def _uuid(name: str, value: object) -> str:
    """``value`` as a canonical UUID string, else InputError naming ``name``."""
    # Only text is parsed: str() of an arbitrary object can fail in any way.
    parsed = value
    if isinstance(value, str):
        try:
            parsed = uuid.UUID(value)
        except ValueError:
            parsed = None
    if not isinstance(parsed, uuid.UUID):
        raise InputError(f"{name} must be a UUID, got {describe_value(value)}")
    return str(parsed)


@dataclass(frozen=True)
class FeedbackResult:
    """What :func:`feedback` recorded, and the families' updated summed feedback weights."""

    recorded: int
    #: family -> (helpful, unhelpful) summed weights after this feedback.
    families: Mapping[str, tuple[float, float]]


def _note_ids(name: str, values: Iterable[str] | None) -> list[str]:
    """Canonical note ids from a list of UUIDs, else InputError naming the bad element."""
    if values is None:
        return []
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise InputError(f"{name} must be a list of note ids, got {describe_value(values)}")
    return [_uuid(f"{name}[{i}]", v) for i, v in enumerate(values)]


def _unique_note_ids(name: str, values: Iterable[str] | None) -> list[str]:
    ids = _note_ids(f"feedback: {name}", values)
    if len(set(ids)) != len(ids):
        raise InputError(f"feedback: {name} names a note twice")
    return ids


def feedback(
    conn: psycopg.Connection[Any],
    *,
    namespace: str = "default",
    helpful: Iterable[str] | None = None,
    unhelpful: Iterable[str] | None = None,
    weight: float = 1.0,
    pack_id: str | None = None,
) -> FeedbackResult:
    """Record which packed notes helped and which did not; the ``beta`` mode learns from it.

    Each judgement is stored in ``pgmem.feedback`` (note, its family, helpful or not,
    weight, pack, who and when; no text) and added to its family's running totals in
    ``pgmem.family_reliability``, which every later pack reads in its one stage-one
    statement. One statement, in the caller's transaction if there is one: an unknown
    note id raises :class:`pgmem.InputError` and records nothing.

    Parameters
    ----------
    conn : psycopg.Connection
        A connection of a ``pgmem_writer`` member (or the schema owner).
    namespace : str
        The namespace the notes belong to.
    helpful, unhelpful : list of str
        Note ids (``PackItem.note_id``) judged useful / not useful; at least one in
        all, no note in both, none twice.
    weight : float
        Weight of each judgement (default 1; 0 < weight <= 1000), e.g. a confidence.
    pack_id : str, optional
        The logged pack (``Pack.pack_id``) the notes were judged in.

    Returns
    -------
    FeedbackResult
        How many judgements were recorded and the updated totals of the families touched.
    """
    check_namespace(namespace)
    good = _unique_note_ids("helpful", helpful)
    bad = _unique_note_ids("unhelpful", unhelpful)
    if not good and not bad:
        raise InputError("feedback: give at least one helpful or unhelpful note id")
    both = sorted(set(good) & set(bad))
    if both:
        raise InputError(f"feedback: note {both[0]} is both helpful and unhelpful")
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight <= 1000:
        raise InputError(f"feedback: weight must be in (0, 1000], got {describe_value(weight)}")
    if pack_id is not None:
        pack_id = _uuid("feedback: pack_id", pack_id)
    arguments = {"namespace": namespace, "helpful": good, "unhelpful": bad, "weight": float(weight), "pack_id": pack_id}
    with database_errors("feedback"):
        rows = run(conn, "feedback", arguments).fetchall()
    return FeedbackResult(
        recorded=len(good) + len(bad),
        families={str(r["family"]): (float(r["helpful"]), float(r["unhelpful"])) for r in rows},
    )


def reset_feedback(conn: psycopg.Connection[Any], *, namespace: str, families: Sequence[str] | None = None) -> int:
    """Forget the feedback of ``namespace`` (every family, or only ``families``).

    Deletes the judgements and the families' totals, so the beta mode starts over.
    Runs the privileged ``pgmem.reset_feedback_v1``: the caller must own the schema or
    be a member of ``pgmem_admin``. Returns how many judgements were deleted.
    """
    check_namespace(namespace)
    selected = None if families is None else list(_strings("families", families, limit=MAX_FAMILIES))
    if selected is not None and not selected:
        raise InputError("reset_feedback: families must be None (all) or a non-empty list")
    with database_errors("reset feedback"):
        row = run(conn, "reset_feedback", {"namespace": namespace, "families": selected}).fetchone()
    return int(row["judgements_removed"]) if row else 0


def register_model(conn: psycopg.Connection[Any], embedder: Embedder | str | None = None) -> int:
    """Register an embedding model in the database and build its HNSW index.

    Every model gets an index on the shared notes table, so registering one is an
    administrative act: the caller must own the schema or be a member of
    ``pgmem_admin``. Writers then ingest with it into the namespaces they were
    granted; a writer naming an unregistered model gets a :class:`ConfigurationError`.
    Registering a registered model is a no-op.

    Parameters
    ----------
    conn : psycopg.Connection
        A connection of the schema owner or a ``pgmem_admin`` member.
    embedder : Embedder or str, optional
        The model (default: ``$PGMEM_EMBEDDER`` or the bundled MiniLM).

    Returns
    -------
    int
        The model's id in ``pgmem.embedding_models``.
    """
    model = resolve_embedder(embedder)
    with database_errors("register model"):
        row = run(conn, "register_model", {"model": model.name, "dimension": model.dimension}).fetchone()
    if row is None or row["model_id"] is None:
        raise DatabaseError("register model: pgmem.register_model_v1 returned nothing")
    return int(row["model_id"])


def _role_names(name: str, roles: Sequence[str]) -> list[str]:
    if isinstance(roles, str) or not isinstance(roles, Iterable):
        raise InputError(f"{name} must be a list of role names, got {describe_value(roles)}")
    names = list(_strings(name, roles))
    if not names:
        raise InputError(f"{name} must name at least one role")
    return names


def bind_family(conn: psycopg.Connection[Any], *, namespace: str, family: str, roles: Sequence[str]) -> int:
    """Bind provenance family ``family`` of ``namespace`` to the writer roles ``roles``.

    From then on the database refuses a note of that family (ingest or supersede) from
    any role that is not a member of a bound role, an admin or the schema owner: it
    raises :class:`pgmem.FamilyRightsError` (SQLSTATE PM006) and writes nothing of the
    batch. A family bound to no role is open to every writer of the namespace. Binding
    adds to the roles already bound. Runs ``pgmem.bind_family_v1``: the caller must own
    the schema or be a member of ``pgmem_admin``.

    Notes written under the family before the binding stay; the return value says how
    many there are, so they can be reviewed (``pgmem.store_families_v1``) or erased
    (:func:`forget`).

    Parameters
    ----------
    conn : psycopg.Connection
        A connection of the schema owner or a ``pgmem_admin`` member.
    namespace : str
        The namespace (it need not hold notes yet: bind before the first write).
    family : str
        The provenance family.
    roles : list of str
        Names of existing roles whose members may write the family.

    Returns
    -------
    int
        How many notes the family held when it was bound.
    """
    check_namespace(namespace)
    family = check_text("bind_family: family", family, max_chars=MAX_ID_CHARS)
    names = _role_names("bind_family: roles", roles)
    with database_errors("bind family"):
        row = run(conn, "bind_family", {"namespace": namespace, "family": family, "roles": names}).fetchone()
    return int(row["notes"]) if row else 0


def unbind_family(
    conn: psycopg.Connection[Any], *, namespace: str, family: str, roles: Sequence[str] | None = None
) -> int:
    """Take writer roles off family ``family`` of ``namespace`` (all of them when ``roles`` is None).

    A family left with no bound role is open to every writer again. Runs
    ``pgmem.unbind_family_v1`` (schema owner or ``pgmem_admin``). Returns how many
    bindings were removed.
    """
    check_namespace(namespace)
    family = check_text("unbind_family: family", family, max_chars=MAX_ID_CHARS)
    names = None if roles is None else _role_names("unbind_family: roles", roles)
    with database_errors("unbind family"):
        row = run(conn, "unbind_family", {"namespace": namespace, "family": family, "roles": names}).fetchone()
    return int(row["removed"]) if row else 0
