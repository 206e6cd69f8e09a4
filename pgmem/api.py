"""The public operations (sync driver): ingest spans, pack evidence for a question.

Each operation is its pure pieces composed around the I/O on a psycopg connection:
the pack is :mod:`pgmem.retrieval.pipeline` (prepare → one statement → finish), the
small operations are :mod:`pgmem.operations` (arguments → one statement → result).
:mod:`pgmem.aio` composes the same pieces on an async connection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg

from pgmem.db.queries import fetch
from pgmem.db.steps import drive
from pgmem.embeddings import Embedder, resolve_embedder
from pgmem.ingestion.bulk import BulkLoadResult, bulk_load_steps
from pgmem.ingestion.enricher import Enricher
from pgmem.ingestion.writer import IngestResult, check_reason
from pgmem.ingestion.writer import write as write_spans
from pgmem.operations import (
    MAX_FAMILIES,
    MAX_REASON_CHARS,
    FeedbackResult,
    ForgetResult,
    bind_family_result,
    bind_family_statement,
    feedback_result,
    feedback_statement,
    forget_result,
    forget_statement,
    register_model_result,
    register_model_statement,
    reset_feedback_result,
    reset_feedback_statement,
    unbind_family_result,
    unbind_family_statement,
)
from pgmem.params import CalibrationParams, Mode, PackParams, StageOneParams
from pgmem.retrieval.pipeline import (
    MAX_HINT_CHARS,
    MAX_HINTS,
    MAX_QUERY_CHARS,
    Stopwatch,
    build_hints,
    embed_question,
    fetch_pool,
    finish_pack,
    log_pack,
    prepare_pack,
)
from pgmem.retrieval.rerank import Reranker
from pgmem.types import Pack, Span

__all__ = [
    "MAX_FAMILIES",
    "MAX_HINTS",
    "MAX_HINT_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_REASON_CHARS",
    "FeedbackResult",
    "ForgetResult",
    "build_hints",
    "feedback",
    "forget",
    "ingest",
    "pack",
    "register_model",
    "reset_feedback",
    "supersede",
]


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
    return drive(
        conn,
        write_spans(
            spans,
            namespace=namespace,
            embedder=resolve_embedder(embedder),
            enricher=enricher,
            progress=progress,
        ),
    )


def bulk_load(
    conn: psycopg.Connection[Any],
    spans: Iterable[Span],
    *,
    namespace: str = "default",
    embedder: Embedder | str | None = None,
    enricher: Enricher | None = None,
    progress: Callable[[int], None] | None = None,
    maintenance_work_mem: int | None = None,
    enrich_workers: int = 0,
) -> BulkLoadResult:
    """First load of a new namespace: :func:`ingest`'s notes, the table's indexes built once.

    Writes exactly what one ``ingest(conn, spans, namespace=...)`` call would (the same
    notes, links, lexeme postings, BM25 and family statistics, family-rights check and
    first-load ANALYZE: the insert triggers run once, on one statement), but first drops
    the indexes of ``pgmem.notes`` that a load would update row by row — the HNSW index
    of the namespace's model, the GIN indexes and the external-id index — and builds
    them again at the end, with ``maintenance_work_mem`` raised (for this transaction
    only) to what an in-memory HNSW build of the load needs. Spans are validated,
    enriched and embedded in chunks, so the iterable may be a generator of millions.

    Everything is one transaction (a savepoint if ``conn`` is already in one): a bad
    span, a conflict or an interruption leaves nothing written and every index as it
    was. For its duration the load holds ``pgmem.notes`` exclusively, so readers and
    writers of *every* namespace wait for it; it is meant for the first load of a
    store, or for a maintenance window.

    Who may run it: the owner of ``pgmem.notes`` (the role that ran the migrations, or
    a member of it, or a superuser) — dropping and building the indexes every namespace
    shares is DDL. Writers and admins use :func:`ingest`.

    Parameters
    ----------
    conn : psycopg.Connection
        A connection of the tables' owner to a migrated database.
    spans : iterable of Span
        The spans to write (as for :func:`ingest`; repeats of one span are written once).
    namespace : str
        A namespace that holds no notes yet (created and bound to the embedder's model).
    embedder : Embedder or str, optional
        The embedding model (default: ``$PGMEM_EMBEDDER`` or the bundled MiniLM).
    enricher : Enricher, optional
        Replaces the default rule-based enricher.
    progress : callable, optional
        Called with the number of spans embedded after each chunk.
    maintenance_work_mem : int, optional
        Bytes for the index builds (1 MiB to 1 TiB). Default: the HNSW graph's estimate
        (``notes * (4 * dimension + 400) * 1.25``) when that exceeds the server's setting.
    enrich_workers : int, optional
        Processes that enrich spans beside this one (0 to 64; default 0: enrichment runs
        here). The enricher is pure Python, so on a machine with cores to spare a load
        whose vectors come precomputed or from a remote model spends most of its client
        time enriching: each worker takes a share of every part of the load (the same
        facets, in order). Workers start with ``spawn``: the enricher must pickle, and a
        script that calls this must guard its entry point with ``if __name__ ==
        "__main__":`` (docs/performance.md measures what it gains).

    Returns
    -------
    BulkLoadResult
        Note ids in input order, the count written, and the seconds of each phase and
        of each index build.

    Raises
    ------
    InputError
        A span is invalid (named), two spans give one document span different
        content, or ``namespace`` already holds notes.
    ConfigurationError
        ``maintenance_work_mem`` or ``enrich_workers`` is out of range, or the enricher
        does not pickle while ``enrich_workers`` asks for workers.
    DatabaseError
        The caller does not own ``pgmem.notes``, or another session has it open.
    EmbeddingMismatchError
        The namespace is bound to another model.
    """
    return drive(
        conn,
        bulk_load_steps(
            spans,
            namespace=namespace,
            embedder=resolve_embedder(embedder),
            enricher=enricher,
            progress=progress,
            maintenance_work_mem=maintenance_work_mem,
            enrich_workers=enrich_workers,
        ),
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
    return drive(
        conn,
        write_spans(
            spans,
            namespace=namespace,
            embedder=resolve_embedder(embedder),
            enricher=enricher,
            progress=progress,
            supersede_reason=check_reason(reason),
        ),
    )


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
    reranker: Reranker | None = None,
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
        Persist the pack and its diagnostics — the pack, its families, each packed
        note's and each rejection's scores — to ``pgmem.pack_log`` and its companion
        tables, explainable from SQL through ``pgmem.pack_explain_v1``. It costs one
        more statement (the outputs exist only after stage one returns; see
        docs/architecture.md), in the caller's transaction if there is one; the
        returned pack carries its ``pack_id``.
    reranker : Reranker, optional
        A re-ranker of your own (any object with ``score(question, texts)`` returning
        one float per text, :class:`pgmem.Reranker`; a cross-encoder, for instance). It
        scores pgmem's best ``PackParams.rerank_top`` candidates (default 16) and their
        pick order becomes a mix of pgmem's and its own (``PackParams.rerank_weight``,
        default 0.25); quotas, caps, the quarantine and the overlap rules still apply,
        and ``diagnostics.rerank`` lists its scores and which notes it moved. Off by
        default. A re-ranker that raises or returns unusable scores raises
        :class:`pgmem.RerankError` (nothing is packed or logged).
    timeout : float, optional
        Seconds stage one may run (0 < timeout <= 86,400); past it the statement is cancelled and
        :class:`pgmem.DatabaseError` says so (inside a transaction, the transaction is
        then aborted, as after any failed statement). Server-side limits still apply.

    Returns
    -------
    Pack
        ``items`` in pack order and ``diagnostics`` explaining them.
    """
    request = prepare_pack(
        question,
        budget=budget,
        namespace=namespace,
        mode=mode,
        token_budget=token_budget,
        roles=roles,
        role_quotas=role_quotas,
        family_cap=family_cap,
        entities=entities,
        time_range=time_range,
        keywords=keywords,
        handles=handles,
        where=where,
        derive_hints=derive_hints,
        stage_one=stage_one,
        calibration=calibration,
        packing=packing,
        embedder=embedder,
        log=log,
        timeout=timeout,
        reranker=reranker,
    )
    clock = Stopwatch(request.started)
    request = embed_question(request)
    clock.lap("embed")
    pool = fetch_pool(conn, request)
    clock.lap("stage_one")
    evidence = finish_pack(request, pool, clock.laps)
    return log_pack(conn, evidence) if request.log else evidence


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
    return forget_result(
        fetch(
            conn,
            forget_statement(
                namespace=namespace, reason=reason, note_ids=note_ids, document_id=document_id, family=family
            ),
        )
    )


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
    statement = feedback_statement(
        namespace=namespace, helpful=helpful, unhelpful=unhelpful, weight=weight, pack_id=pack_id
    )
    return feedback_result(statement, fetch(conn, statement))


def reset_feedback(conn: psycopg.Connection[Any], *, namespace: str, families: Sequence[str] | None = None) -> int:
    """Forget the feedback of ``namespace`` (every family, or only ``families``).

    Deletes the judgements and the families' totals, so the beta mode starts over.
    Runs the privileged ``pgmem.reset_feedback_v1``: the caller must own the schema or
    be a member of ``pgmem_admin``. Returns how many judgements were deleted.
    """
    return reset_feedback_result(fetch(conn, reset_feedback_statement(namespace=namespace, families=families)))


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
    return register_model_result(fetch(conn, register_model_statement(resolve_embedder(embedder))))


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
    return bind_family_result(fetch(conn, bind_family_statement(namespace=namespace, family=family, roles=roles)))


def unbind_family(
    conn: psycopg.Connection[Any], *, namespace: str, family: str, roles: Sequence[str] | None = None
) -> int:
    """Take writer roles off family ``family`` of ``namespace`` (all of them when ``roles`` is None).

    A family left with no bound role is open to every writer again. Runs
    ``pgmem.unbind_family_v1`` (schema owner or ``pgmem_admin``). Returns how many
    bindings were removed.
    """
    return unbind_family_result(fetch(conn, unbind_family_statement(namespace=namespace, family=family, roles=roles)))
