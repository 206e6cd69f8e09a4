"""Reliability: concurrent writers and readers, failing batches, crashes, lost servers.

The concurrency tests use the session's database (``dsn``); the crash and
stopped-server tests start a PostgreSQL of their own in a temporary folder, because
they kill or stop it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import make_spans
from psycopg import sql

import pgmem
from pgmem.embeddings import HashingEmbedder

#: Longest any thread, server command or polling loop in this file may take.
TIMEOUT = 60.0

WORDS = ("amber", "basalt", "cobalt", "dune", "ember", "fjord", "granite", "harbor", "indigo", "juniper")


def _spans(prefix: str, count: int, *, family: str, marker: str = "", per_document: int = 100) -> list[pgmem.Span]:
    """``count`` distinct spans, ``per_document`` to a document, each containing ``marker``."""
    spans: list[pgmem.Span] = []
    for first in range(0, count, per_document):
        texts = [
            f"{marker} Report {prefix} {i}: the {WORDS[i % 10]} widget shipped to customer {i} in Paris.".strip()
            for i in range(first, min(first + per_document, count))
        ]
        spans.extend(make_spans(texts, document_id=f"{prefix}-doc-{first // per_document}", family=family))
    return spans


def _scalar(conn: psycopg.Connection[Any], query: str, params: Sequence[Any] | None = None) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def _run_threads(targets: Sequence[Callable[[], None]]) -> list[BaseException]:
    """Run each target in a thread; return the exceptions they raised."""
    errors: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:  # reported to the test, not swallowed
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(target,), daemon=True) for target in targets]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + TIMEOUT
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), f"a thread did not finish within {TIMEOUT} s"
    return errors


# --- what "the store is consistent" means ---------------------------------------------


@contextmanager
def _planner(conn: psycopg.Connection[Any], **settings: str) -> Iterator[None]:
    """Session planner settings for the block, reset afterwards."""
    for name, value in settings.items():
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    try:
        yield
    finally:
        for name in settings:
            conn.execute(sql.SQL("RESET {}").format(sql.Identifier(*name.split("."))))


SEQUENTIAL = {
    "enable_seqscan": "on",
    "enable_indexscan": "off",
    "enable_indexonlyscan": "off",
    "enable_bitmapscan": "off",
}
INDEX = {"enable_seqscan": "off", "enable_indexscan": "on", "enable_indexonlyscan": "on", "enable_bitmapscan": "off"}
BITMAP = {"enable_seqscan": "off", "enable_indexscan": "off", "enable_indexonlyscan": "off", "enable_bitmapscan": "on"}


def _rows(
    conn: psycopg.Connection[Any],
    settings: dict[str, str],
    index: str | None,
    query: sql.Composed | sql.SQL,
    params: Any,
) -> list[tuple[Any, ...]]:
    """The rows of ``query`` under ``settings``, after checking the plan reads ``index`` (None: no index)."""
    with _planner(conn, **settings):
        plan = "\n".join(str(row[0]) for row in conn.execute(sql.SQL("EXPLAIN ") + query, params))
        if index is None:
            assert "Seq Scan on notes" in plan and "Index" not in plan, plan[:800]
        else:
            assert f" {index} " in f" {plan} ".replace("\n", " "), plan[:800]
        return list(conn.execute(query, params))


def assert_store_consistent(conn: psycopg.Connection[Any]) -> None:
    """Index scans return what sequential scans return; the statistics match the notes.

    amcheck is not in the embedded build, so each index is compared with the heap:
    the primary key (every key found, a full index-ordered scan), the span index,
    the GIN tsvector index (a few lexemes), and each HNSW index (top-k through the
    index has k rows, all of them live rows of that model).
    """
    conn.execute("ANALYZE pgmem.notes")  # planner statistics, so the forced plans are the intended ones
    truth = _rows(conn, SEQUENTIAL, None, sql.SQL("SELECT namespace, note_id, document_id FROM pgmem.notes"), ())
    keys = sorted((namespace, note_id) for namespace, note_id, _ in truth)
    spans_truth = _rows(
        conn, SEQUENTIAL, None, sql.SQL("SELECT namespace, document_id, span_start, span_end FROM pgmem.notes"), ()
    )
    assert len(set(keys)) == len(keys), "duplicate (namespace, note_id) in the heap"

    # Sorting switched off: reading the primary key in order is the only plan left.
    ordered = _rows(
        conn,
        {**INDEX, "enable_sort": "off", "enable_incremental_sort": "off"},
        "notes_pkey",
        sql.SQL("SELECT namespace, note_id FROM pgmem.notes ORDER BY namespace, note_id"),
        (),
    )
    assert sorted(ordered) == keys
    for namespace in sorted({k[0] for k in keys}):
        wanted = sorted(note_id for ns, note_id in keys if ns == namespace)
        found: list[tuple[Any, ...]] = []
        for start in range(0, len(wanted), 50):  # small lists: a key lookup is the only sensible plan
            found += _rows(
                conn,
                INDEX,
                "notes_pkey",
                sql.SQL("SELECT note_id FROM pgmem.notes WHERE namespace = %s AND note_id = ANY (%s::uuid[])"),
                (namespace, wanted[start : start + 50]),
            )
        assert sorted(row[0] for row in found) == wanted
        spans = [span for span in spans_truth if span[0] == namespace]
        by_document = _rows(
            conn,
            # Key lookups, span by span (as ingest's stored_spans runs at any real size).
            {**INDEX, "enable_hashjoin": "off", "enable_mergejoin": "off"},
            "notes_span",
            sql.SQL(
                "SELECT n.note_id FROM unnest(%s::text[], %s::integer[], %s::integer[]) AS s (document_id, start, stop)"
                " JOIN pgmem.notes AS n ON n.namespace = %s AND n.document_id = s.document_id"
                " AND n.span_start = s.start AND n.span_end = s.stop"
            ),
            ([d for _, d, _, _ in spans], [a for _, _, a, _ in spans], [b for _, _, _, b in spans], namespace),
        )
        assert sorted(row[0] for row in by_document) == wanted

    # GIN: the rarest, a middling and the commonest lexeme, plus one no note has.
    lexemes = [row[0] for row in conn.execute("SELECT lexeme FROM pgmem.lexeme_stats ORDER BY document_frequency, 1")]
    probes = sorted({*lexemes[:1], *lexemes[len(lexemes) // 2 : len(lexemes) // 2 + 1], *lexemes[-1:], "qqnolexeme"})
    lexical = sql.SQL("SELECT note_id FROM pgmem.notes WHERE lexemes @@ to_tsquery('simple', quote_literal(%s))")
    for lexeme in probes:
        expected = sorted(row[0] for row in _rows(conn, SEQUENTIAL, None, lexical, (lexeme,)))
        assert sorted(row[0] for row in _rows(conn, BITMAP, "notes_lexemes_gin", lexical, (lexeme,))) == expected

    # HNSW: one index per model; approximate, so the index top-k must be k live rows.
    models = list(conn.execute("SELECT model_id, dimension FROM pgmem.embedding_models ORDER BY model_id"))
    for model_id, dimension in models:
        live = {row[0] for row in conn.execute("SELECT note_id FROM pgmem.notes WHERE model_id = %s", (model_id,))}
        probe_vectors = [
            row[0]
            for row in conn.execute(
                "SELECT embedding::text FROM pgmem.notes WHERE model_id = %s ORDER BY note_id LIMIT 3", (model_id,)
            )
        ]
        k = min(10, len(live))
        nearest = sql.SQL(
            "SELECT note_id FROM pgmem.notes WHERE model_id = {model}"
            " ORDER BY embedding::vector({dim}) <=> %s::vector({dim}) LIMIT {k}"
        ).format(model=sql.Literal(model_id), dim=sql.Literal(dimension), k=sql.Literal(k))
        for vector in probe_vectors:
            exact = _rows(conn, SEQUENTIAL, None, nearest, (vector,))
            assert len(exact) == k
            # As stage one searches: breadth >= k, and iterative scans so dead entries
            # (e.g. of a batch that never committed) cannot starve the top-k.
            with _planner(conn, **{"hnsw.ef_search": "100", "hnsw.iterative_scan": "relaxed_order"}):
                approximate = _rows(conn, INDEX, f"notes_embedding_hnsw_m{model_id}", nearest, (vector,))
            found = [row[0] for row in approximate]
            assert len(found) == k and len(set(found)) == k and set(found) <= live

    # The running BM25 statistics equal a recount from the notes.
    stats = set(conn.execute("SELECT namespace, lexeme, document_frequency FROM pgmem.lexeme_stats"))
    recount = set(
        conn.execute(
            "SELECT n.namespace, u.lexeme, count(*) FROM pgmem.notes AS n, unnest(n.lexemes) AS u GROUP BY 1, 2"
        )
    )
    assert {s for s in stats if s[2] > 0} == recount
    totals = list(
        conn.execute(
            "SELECT s.namespace, s.note_count, s.lexeme_total,"
            " (SELECT count(*) FROM pgmem.notes AS n WHERE n.namespace = s.namespace),"
            " (SELECT coalesce(sum(lexeme_count), 0) FROM pgmem.notes AS n WHERE n.namespace = s.namespace)"
            " FROM pgmem.namespaces AS s"
        )
    )
    for namespace, note_count, lexeme_total, counted, summed in totals:
        assert (note_count, lexeme_total) == (counted, summed), namespace


def _snapshot(conn: psycopg.Connection[Any]) -> dict[str, list[str]]:
    """Every row of every table in the pgmem schema (as text), and the schema's indexes."""
    tables = [row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'pgmem' ORDER BY 1")]
    snapshot = {
        table: [
            str(row[0])
            for row in conn.execute(
                sql.SQL("SELECT t::text FROM pgmem.{} AS t ORDER BY 1").format(sql.Identifier(table))
            )
        ]
        for table in tables
    }
    snapshot["(indexes)"] = [
        str(row[0]) for row in conn.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = 'pgmem' ORDER BY 1")
    ]
    return snapshot


# --- concurrency ----------------------------------------------------------------------


def _ingest_concurrently(
    dsn: str, batches: Sequence[list[pgmem.Span]], namespace: str, embedder: HashingEmbedder
) -> list[pgmem.IngestResult]:
    """Each batch ingested on a connection of its own, all starting together."""
    barrier = threading.Barrier(len(batches), timeout=TIMEOUT)
    results: dict[int, pgmem.IngestResult] = {}

    def writer(slot: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            barrier.wait()
            results[slot] = pgmem.ingest(conn, batches[slot], namespace=namespace, embedder=embedder)

    errors = _run_threads([partial(writer, slot) for slot in range(len(batches))])
    assert errors == []
    return [results[slot] for slot in range(len(batches))]


def test_concurrent_ingest_of_the_same_spans_writes_each_note_once(dsn: str, hashing: HashingEmbedder) -> None:
    spans = _spans("twin", 1000, family="twin")
    rounds = [
        # Identical batches into a namespace (and a model) neither has seen yet.
        [spans[:400], spans[:400]],
        # Overlapping batches: each also carries notes the other has, and stored ones.
        [spans[200:700], spans[500:1000]],
    ]
    with psycopg.connect(dsn, autocommit=True) as check:
        for batches in rounds:
            before = _scalar(check, "SELECT count(*) FROM pgmem.notes")
            results = _ingest_concurrently(dsn, batches, "twins", hashing)
            after = _scalar(check, "SELECT count(*) FROM pgmem.notes")
            assert sum(result.inserted for result in results) == after - before
            for result, batch in zip(results, batches, strict=True):
                assert result.inserted + result.skipped == len(batch)
            new = {note_id for result in results for note_id in result.note_ids}
            rows = check.execute("SELECT note_id FROM pgmem.notes WHERE note_id = ANY (%s::uuid[])", (list(new),))
            stored = {str(row[0]) for row in rows}
            assert stored == new
        assert _scalar(check, "SELECT count(*) FROM pgmem.notes") == 1000
        assert_store_consistent(check)


def test_packs_during_ingest_see_each_batch_entirely_or_not_at_all(dsn: str, hashing: HashingEmbedder) -> None:
    # Every note of batch i carries the word markers[i]; a question made of all the
    # markers with k_lex >= all batches together puts every visible batch note in the
    # pool, so the pool's family counts show exactly what the pack's snapshot saw.
    names = ("alpha", "bravo", "charlie", "delta")
    size = 250
    markers = [f"qzx{name}" for name in names]
    batches = [_spans(name, size, family=f"batch-{name}", marker=markers[i]) for i, name in enumerate(names)]
    # Every note of a batch in the pool: no family cap on the candidate searches.
    stage_one = pgmem.StageOneParams(k_dense=10, k_lex=size * len(names), family_candidates=None)
    question = " ".join(markers)
    with psycopg.connect(dsn, autocommit=True) as seed:
        pgmem.ingest(seed, _spans("seed", 50, family="seed"), namespace="live", embedder=hashing)

    written = threading.Event()
    observations: list[tuple[int, ...]] = []

    def observe(conn: psycopg.Connection[Any]) -> None:
        evidence = pgmem.pack(conn, question, namespace="live", stage_one=stage_one, budget=1, embedder=hashing)
        counts = {family.family: family.count for family in evidence.diagnostics.families}
        observations.append(tuple(counts.get(f"batch-{name}", 0) for name in names))

    def writer() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                for batch in batches:
                    assert pgmem.ingest(conn, batch, namespace="live", embedder=hashing).inserted == size
        finally:
            written.set()

    def packer() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not written.is_set():
                observe(conn)
            observe(conn)

    assert _run_threads([writer, packer]) == []
    assert observations[-1] == (size,) * len(names)
    for seen in observations:
        # Each batch is all there or absent, and (batches commit in order) only a
        # prefix of them can be visible.
        assert set(seen) <= {0, size}, seen
        visible = [count == size for count in seen]
        assert visible == sorted(visible, reverse=True), seen


def test_uncommitted_batch_is_invisible_to_packs(dsn: str, hashing: HashingEmbedder) -> None:
    batch = _spans("pending", 40, family="pending", marker="qzxpending")
    whole_family = pgmem.StageOneParams(family_candidates=None)  # all 40 in the pool, or none
    with psycopg.connect(dsn, autocommit=True) as reader, psycopg.connect(dsn, autocommit=True) as writer:
        pgmem.ingest(writer, _spans("seed", 20, family="seed"), namespace="live", embedder=hashing)

        def pending_in_pool() -> int:
            evidence = pgmem.pack(
                reader, "qzxpending widget", namespace="live", budget=1, embedder=hashing, stage_one=whole_family
            )
            return sum(f.count for f in evidence.diagnostics.families if f.family == "pending")

        with writer.transaction():
            assert pgmem.ingest(writer, batch, namespace="live", embedder=hashing).inserted == 40
            # Written and its statistics updated, but not committed: nothing shows.
            assert _scalar(writer, "SELECT count(*) FROM pgmem.notes WHERE family = 'pending'") == 40
            assert pending_in_pool() == 0
            assert _scalar(reader, "SELECT count(*) FROM pgmem.notes WHERE family = 'pending'") == 0
        assert pending_in_pool() == 40
        assert_store_consistent(reader)


# --- failing batches ------------------------------------------------------------------


def _refuse_text(conn: psycopg.Connection[Any], text: str) -> None:
    """Make the database refuse one note text mid-INSERT (pgmem itself validated it)."""
    conn.execute(
        sql.SQL("ALTER TABLE pgmem.notes ADD CONSTRAINT refuse_one_text CHECK (text <> {})").format(sql.Literal(text))
    )


def test_failing_first_batch_of_a_namespace_leaves_every_table_unchanged(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    pgmem.ingest(conn, _spans("kept", 30, family="kept"), namespace="kept", embedder=hashing)
    spans = _spans("doomed", 300, family="doomed")
    _refuse_text(conn, spans[-1].text)
    before = _snapshot(conn)
    # One span fails a CHECK constraint during the INSERT, after the namespace and the
    # model (another dimension: a new HNSW index) were written.
    with pytest.raises(pgmem.DatabaseError, match="ingest: PostgreSQL refused it \\(23514"):
        pgmem.ingest(conn, spans, namespace="doomed", embedder=HashingEmbedder(dimension=64))
    assert _snapshot(conn) == before
    assert pgmem.pack(conn, "widget shipped", namespace="kept", embedder=hashing).items


def test_failing_batch_in_a_used_namespace_leaves_every_table_unchanged(
    dsn: str, conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    pgmem.ingest(conn, _spans("kept", 200, family="kept"), namespace="kept", embedder=hashing)
    before = _snapshot(conn)
    # The notes go in, then the statistics trigger cannot get its lock in time.
    with psycopg.connect(dsn) as blocker:
        blocker.execute("LOCK TABLE pgmem.lexeme_stats IN SHARE MODE")
        conn.execute("SET lock_timeout = '200ms'")
        with pytest.raises(pgmem.DatabaseError, match="lock timeout"):
            pgmem.ingest(conn, _spans("doomed", 300, family="doomed"), namespace="kept", embedder=hashing)
        conn.execute("RESET lock_timeout")
        blocker.rollback()
    assert _snapshot(conn) == before
    assert_store_consistent(conn)


def test_failing_batch_inside_a_caller_transaction_rolls_back_only_itself(
    dsn: str, conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    pgmem.ingest(conn, _spans("kept", 50, family="kept"), namespace="kept", embedder=hashing)
    good = _spans("good", 20, family="good")
    bad = _spans("doomed", 100, family="doomed")
    _refuse_text(conn, bad[50].text)
    before = _snapshot(conn)
    with psycopg.connect(dsn) as caller:  # not autocommit: pgmem writes in savepoints
        first = pgmem.ingest(caller, good, namespace="kept", embedder=hashing)
        with pytest.raises(pgmem.DatabaseError):
            pgmem.ingest(caller, bad, namespace="kept", embedder=hashing)
        # The caller's transaction is still usable and its own work still commits.
        assert pgmem.pack(caller, "widget shipped", namespace="kept", embedder=hashing).items
        caller.commit()
    after = _snapshot(conn)
    assert after["notes"] != before["notes"]
    stored = {str(row[0]) for row in conn.execute("SELECT note_id FROM pgmem.notes WHERE family <> 'kept'")}
    assert stored == set(first.note_ids)
    assert after["embedding_models"] == before["embedding_models"]
    assert after["(indexes)"] == before["(indexes)"]
    assert_store_consistent(conn)


# --- a server of our own, to stop or kill -----------------------------------------------


@dataclass
class OwnServer:
    """A PostgreSQL of this test's own, driven through pgserver's binaries."""

    base: Path
    bin: Path
    user: str | None  # the system user the server runs as (pgserver's, when we are root)

    @property
    def pgdata(self) -> Path:
        return self.base / "pgdata"

    def dsn(self, database: str = "postgres") -> str:
        return psycopg.conninfo.make_conninfo(host=str(self.pgdata), dbname=database, user="postgres")

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), "-D", str(self.pgdata), *args]
        result = subprocess.run(command, user=self.user, capture_output=True, text=True, timeout=TIMEOUT, check=False)
        if result.returncode != 0:
            log = self.pgdata / "log"
            raise AssertionError(
                f"{program} failed: {result.stderr}\n{log.read_text() if log.exists() else ''}"[-4000:]
            )

    def init(self) -> None:
        self._run("initdb", "--auth=trust", "--encoding=utf8", "-U", "postgres", "--no-sync")

    def start(self) -> None:
        # Unix socket in the data folder, no TCP; -w waits for crash recovery too.
        self._run(
            "pg_ctl",
            "-w",
            "-t",
            str(int(TIMEOUT)),
            "-o",
            f'-h "" -k {self.pgdata}',
            "-l",
            str(self.pgdata / "log"),
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-w", "-t", str(int(TIMEOUT)), "-m", mode, "stop")

    def postmaster_pid(self) -> int | None:
        pid_file = self.pgdata / "postmaster.pid"
        if not pid_file.exists():
            return None
        pid = int(pid_file.read_text().split("\n", 1)[0])
        return pid if _alive(pid) else None

    def kill(self) -> None:
        """SIGKILL the postmaster, then every process it had started: a crash, nothing flushed."""
        import psutil  # type: ignore[import-untyped]  # pgserver's dependency

        pid = self.postmaster_pid()
        assert pid is not None, "the server is not running"
        postmaster = psutil.Process(pid)
        children = postmaster.children(recursive=True)
        os.kill(pid, signal.SIGKILL)
        for child in children:
            with suppress(psutil.NoSuchProcess):
                child.send_signal(signal.SIGKILL)
        _, alive = psutil.wait_procs([postmaster, *children], timeout=TIMEOUT)
        assert not alive, f"processes survived SIGKILL: {alive}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def own_server() -> Iterator[OwnServer]:
    """A fresh, started server with a migrated ``pgmem`` database; always stopped and removed."""
    pytest.importorskip("pgserver")
    from pgserver._commands import POSTGRES_BIN_PATH

    # Short, traversable path: the unix socket lives in the data folder.
    base = Path(tempfile.mkdtemp(prefix="pgmem-rel-", dir="/tmp"))
    server = OwnServer(base=base, bin=POSTGRES_BIN_PATH, user=None)
    try:
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root; pgserver has a user for it
            import pwd

            from pgserver.utils import ensure_user_exists

            server.user = "pgserver"
            ensure_user_exists(server.user)
            base.chmod(0o755)
            server.pgdata.mkdir()
            entry = pwd.getpwnam(server.user)
            os.chown(server.pgdata, entry.pw_uid, entry.pw_gid)
        server.init()
        server.start()
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE pgmem")
        pgmem.migrate(server.dsn("pgmem"))
        yield server
    finally:
        pid = server.postmaster_pid()
        if pid is not None:
            try:
                server.stop("immediate")
            except (AssertionError, subprocess.TimeoutExpired):
                server.kill()
        shutil.rmtree(base, ignore_errors=True)


# --- crashes --------------------------------------------------------------------------


@pytest.mark.slow
def test_crash_during_large_ingest_keeps_batch_all_or_nothing_and_indexes_consistent(
    hashing: HashingEmbedder,
) -> None:
    size = 20_000
    with own_server() as server:
        dsn = server.dsn("pgmem")
        with psycopg.connect(dsn, autocommit=True) as conn:
            base = pgmem.ingest(conn, _spans("base", 200, family="base"), namespace="crash", embedder=hashing)
            heap_before = int(_scalar(conn, "SELECT pg_relation_size('pgmem.notes')"))

        batch = _spans("big", size, family="big", marker="qzxbig")
        outcome: dict[str, Any] = {}

        def ingest_batch() -> None:
            try:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    outcome["result"] = pgmem.ingest(conn, batch, namespace="crash", embedder=hashing)
            except BaseException as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=ingest_batch, daemon=True)
        thread.start()
        try:
            # Kill once the batch's INSERT into pgmem.notes has put at least 1 MB of
            # uncommitted rows (and their index entries) on disk.
            deadline = time.monotonic() + TIMEOUT
            with psycopg.connect(dsn, autocommit=True) as monitor:
                while True:
                    assert thread.is_alive(), f"the ingest ended before the crash: {outcome}"
                    assert time.monotonic() < deadline, "the batch's INSERT never got under way"
                    inserting = _scalar(
                        monitor,
                        "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
                        " AND state = 'active' AND query LIKE '%INSERT INTO pgmem.notes%'",
                    )
                    grown = int(_scalar(monitor, "SELECT pg_relation_size('pgmem.notes')")) - heap_before
                    if inserting and grown >= 1 << 20:
                        break
                    time.sleep(0.05)
            server.kill()
        finally:
            thread.join(TIMEOUT)
        assert not thread.is_alive()
        if "error" in outcome:
            assert isinstance(outcome["error"], pgmem.DatabaseError), repr(outcome["error"])

        server.start()
        assert "automatic recovery in progress" in (server.pgdata / "log").read_text()
        with psycopg.connect(dsn, autocommit=True) as conn:
            present = _scalar(conn, "SELECT count(*) FROM pgmem.notes WHERE family = 'big'")
            if "result" in outcome:  # committed before the kill: it must have survived
                assert present == size
            assert present in (0, size)
            stored_base = _scalar(
                conn, "SELECT count(*) FROM pgmem.notes WHERE note_id = ANY (%s::uuid[])", (list(base.note_ids),)
            )
            assert stored_base == len(base.note_ids)
            assert_store_consistent(conn)

            evidence = pgmem.pack(conn, "Which widget shipped to customer 7?", namespace="crash", embedder=hashing)
            assert evidence.items
            if present == 0:
                assert all(item.family == "base" for item in evidence.items)
            # The crashed batch's note ids are free to be written (no ghost keys).
            again = pgmem.ingest(conn, batch[:300], namespace="crash", embedder=hashing)
            assert again.inserted == (300 if present == 0 else 0)
            assert_store_consistent(conn)


# --- an unreachable database ------------------------------------------------------------


def test_connect_to_a_missing_server_raises_database_error(tmp_path: Path) -> None:
    # A unix socket folder where no server listens.
    dsn = psycopg.conninfo.make_conninfo(host=str(tmp_path), dbname="pgmem", connect_timeout="5")
    with pytest.raises(pgmem.DatabaseError, match="connect: the database is unreachable"):
        pgmem.connect(dsn)
    with pytest.raises(pgmem.DatabaseError, match="unreachable"):
        pgmem.connect(dsn, migrate=True)


def test_an_empty_dsn_is_libpqs_default_not_the_embedded_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # libpq's defaults point at a socket folder where no server listens: an empty DSN
    # must try exactly that (as psycopg.connect("") does), never start a server.
    monkeypatch.setenv("PGHOST", str(tmp_path))
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "5")
    monkeypatch.setenv("PGMEM_HOME", str(tmp_path / "would-be-embedded"))
    with pytest.raises(pgmem.DatabaseError, match="connect: the database is unreachable"):
        pgmem.connect("")
    assert not (tmp_path / "would-be-embedded").exists()


def test_migrate_against_a_missing_server_raises_database_error(tmp_path: Path) -> None:
    dsn = psycopg.conninfo.make_conninfo(host=str(tmp_path), dbname="pgmem", connect_timeout="5")
    with pytest.raises(pgmem.DatabaseError, match="migrate: the database is unreachable"):
        pgmem.migrate(dsn)


def test_pack_and_ingest_on_a_stopped_server_raise_database_error(hashing: HashingEmbedder) -> None:
    with own_server() as server:
        conn = pgmem.connect(server.dsn("pgmem"))
        try:
            pgmem.ingest(conn, _spans("gone", 20, family="gone"), namespace="gone", embedder=hashing)
            assert pgmem.pack(conn, "widget shipped", namespace="gone", embedder=hashing).items
            server.stop("fast")
            with pytest.raises(pgmem.DatabaseError, match="pack: the database is unreachable"):
                pgmem.pack(conn, "widget shipped", namespace="gone", embedder=hashing)
            with pytest.raises(pgmem.DatabaseError, match="ingest: the database is unreachable"):
                pgmem.ingest(conn, _spans("more", 5, family="gone"), namespace="gone", embedder=hashing)
        finally:
            conn.close()
        with pytest.raises(pgmem.DatabaseError, match="unreachable"):
            pgmem.connect(server.dsn("pgmem"))
