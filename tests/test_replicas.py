"""Read replicas: a primary and a streaming hot standby started from the embedded binaries."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import make_spans
from replication import ReplicatedCluster

import pgmem

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parent.parent / "docs" / "replicas.md"


def _namespace() -> str:
    return f"r{uuid.uuid4().hex[:10]}"


@pytest.fixture
def memory(replicated: ReplicatedCluster) -> Iterator[pgmem.ReplicaSet]:
    with pgmem.ReplicaSet(replicated.primary.dsn("pgmem"), [replicated.standby.dsn("pgmem")]) as replica_set:
        yield replica_set


@pytest.fixture
def standby_conn(replicated: ReplicatedCluster) -> Iterator[psycopg.Connection[Any]]:
    with pgmem.connect(replicated.standby.dsn("pgmem"), migrate=False) as conn:
        yield conn


def test_a_note_written_on_the_primary_is_packed_on_the_standby(
    memory: pgmem.ReplicaSet, standby_conn: psycopg.Connection[Any]
) -> None:
    namespace = _namespace()
    text = "The standby replays the lighthouse keeper's log of 1893."
    memory.ingest(make_spans([text]), namespace=namespace, embedder="hashing")

    evidence = memory.pack("lighthouse keeper log", namespace=namespace, embedder="hashing")

    assert memory.last_route == "standby 0" and memory.skipped == []
    assert [item.text for item in evidence.items] == [text]
    # The standby itself holds the note: replay, not a fallback, served it.
    row = standby_conn.execute("SELECT count(*) FROM pgmem.notes WHERE namespace = %s", (namespace,)).fetchone()
    assert row == (1,)


def test_logging_a_pack_on_a_standby_is_refused_and_routed_to_the_primary(
    memory: pgmem.ReplicaSet, standby_conn: psycopg.Connection[Any]
) -> None:
    namespace = _namespace()
    memory.ingest(make_spans(["Logged packs are written to pgmem.pack_log."]), namespace=namespace, embedder="hashing")
    memory.pack("pack log", namespace=namespace, embedder="hashing")  # waits for replay

    with pytest.raises(pgmem.DatabaseError, match=r"^log pack: this connection is read-only .*needs the primary"):
        pgmem.pack(standby_conn, "pack log", namespace=namespace, embedder="hashing", log=True)
    with pytest.raises(pgmem.DatabaseError, match=r"read-only .*needs the primary"):
        pgmem.ingest(standby_conn, make_spans(["A write on a standby."]), namespace=namespace, embedder="hashing")

    logged = memory.pack("pack log", namespace=namespace, embedder="hashing", log=True)
    assert memory.last_route == "primary" and logged.pack_id is not None
    row = memory.primary.execute("SELECT namespace FROM pgmem.pack_log WHERE pack_id = %s", (logged.pack_id,))
    assert row.fetchone() == (namespace,)


def test_read_your_writes_waits_for_replay_else_reads_the_primary(
    replicated: ReplicatedCluster, memory: pgmem.ReplicaSet, standby_conn: psycopg.Connection[Any]
) -> None:
    namespace = _namespace()
    first, second = "Replay lag: the first note.", "Replay lag: the second note, written while replay is paused."
    memory.ingest(make_spans([first], document_id="d1"), namespace=namespace, embedder="hashing")
    memory.pack("replay lag note", namespace=namespace, embedder="hashing")
    assert memory.last_route == "standby 0"

    standby_conn.execute("SELECT pg_wal_replay_pause()")
    try:
        memory.ingest(make_spans([second], document_id="d2"), namespace=namespace, embedder="hashing")
        memory.replay_timeout = 0.3

        fresh = memory.pack("replay lag note", namespace=namespace, embedder="hashing")
        assert memory.last_route == "primary"
        assert len(memory.skipped) == 1
        assert re.fullmatch(r"standby 0: has not replayed [0-9A-F]+/[0-9A-F]+ after 0.3 s", memory.skipped[0])
        assert {item.text for item in fresh.items} == {first, second}

        memory.read_your_writes = False
        stale = memory.pack("replay lag note", namespace=namespace, embedder="hashing")
        assert memory.last_route == "standby 0"
        assert [item.text for item in stale.items] == [first]
    finally:
        standby_conn.execute("SELECT pg_wal_replay_resume()")


def test_packs_survive_a_standby_restart_and_outage(replicated: ReplicatedCluster, memory: pgmem.ReplicaSet) -> None:
    namespace = _namespace()
    text = "Restarts of a hot standby do not lose packs."
    memory.ingest(make_spans([text]), namespace=namespace, embedder="hashing")
    assert [i.text for i in memory.pack("standby restarts", namespace=namespace, embedder="hashing").items] == [text]
    assert memory.last_route == "standby 0"

    # The open connection dies with the restart: the set reconnects to the same standby.
    replicated.standby.restart()
    evidence = memory.pack("standby restarts", namespace=namespace, embedder="hashing")
    assert memory.last_route == "standby 0" and [item.text for item in evidence.items] == [text]

    replicated.standby.stop()
    try:
        evidence = memory.pack("standby restarts", namespace=namespace, embedder="hashing")
        assert memory.last_route == "primary" and [item.text for item in evidence.items] == [text]
        assert len(memory.skipped) == 1 and memory.skipped[0].startswith("standby 0: ")

        memory.fallback = "error"
        with pytest.raises(pgmem.DatabaseError, match=r"^pack: no standby could serve it \(standby 0: "):
            memory.pack("standby restarts", namespace=namespace, embedder="hashing")
    finally:
        replicated.standby.start()
        replicated.wait_until_streaming()
    memory.fallback = "primary"
    memory.pack("standby restarts", namespace=namespace, embedder="hashing")
    assert memory.last_route == "standby 0"


def test_bad_input_is_not_retried_on_another_server(memory: pgmem.ReplicaSet) -> None:
    with pytest.raises(pgmem.InputError, match="question"):
        memory.pack("", namespace=_namespace(), embedder="hashing")
    assert memory.skipped == []


def test_a_primary_given_as_a_standby_is_skipped(replicated: ReplicatedCluster) -> None:
    primary = replicated.primary.dsn("pgmem")
    with pgmem.ReplicaSet(primary, [primary]) as memory:
        memory.pack("anything", namespace=_namespace(), embedder="hashing")
        assert memory.last_route == "primary"
        assert memory.skipped == ["standby 0: standby 0 is not a hot standby (pg_is_in_recovery() is false)"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"standbys": "host=a"}, "standbys must be a list of DSN strings"),
        ({"fallback": "never"}, "fallback must be 'primary' or 'error'"),
        ({"connect_timeout": 1}, r"connect_timeout must be an integer >= 2"),
        ({"replay_timeout": 0}, "replay_timeout"),
        ({"namespace": "bad name"}, "namespace"),
        ({"standbys": ["host='unterminated"]}, "primary and standbys must be libpq DSNs"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"primary": "host=p", "standbys": ["host=s"], **kwargs}
    with pytest.raises(pgmem.PgmemError, match=message):
        pgmem.ReplicaSet(**arguments)


def test_the_docs_example_runs(replicated: ReplicatedCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.DOTALL)
    assert blocks, "docs/replicas.md has no python example"
    monkeypatch.setenv("PRIMARY_DSN", replicated.primary.dsn("pgmem"))
    monkeypatch.setenv("STANDBY_DSN", replicated.standby.dsn("pgmem"))
    scope: dict[str, Any] = {}
    exec(compile(blocks[0], str(DOCS), "exec"), scope)
    assert scope["memory"].last_route == "standby 0"
    assert scope["evidence"].items[0].text == "The primary takes writes; hot standbys serve packs."
