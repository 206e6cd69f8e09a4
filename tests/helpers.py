"""Small builders shared by the tests."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pgmem
from pgmem.db.resources import migration_function
from pgmem.ingestion.enricher import RuleEnricher


def make_spans(texts: list[str], *, document_id: str = "doc", family: str = "f", **fields: Any) -> list[pgmem.Span]:
    """Spans laid end to end in one document (offsets exact, one byte between them)."""
    spans = []
    position = 0
    for text in texts:
        size = len(text.encode("utf-8"))
        spans.append(
            pgmem.Span(
                document_id=document_id,
                text=text,
                start=position,
                end=position + size,
                family=family,
                **fields,
            )
        )
        position += size + 1
    return spans


class FailingEnricher(RuleEnricher):
    """The rule enricher, raising on a span whose text holds FAIL (it pickles: a worker
    process of a bulk load imports it from here)."""

    def enrich(self, span: Any) -> Any:
        if "FAIL" in span.text:
            raise ValueError(f"the enricher failed on {span.text!r} in process {os.getpid()}")
        return super().enrich(span)


class PidEnricher(RuleEnricher):
    """The rule enricher, writing the enriching process's id as the context."""

    def enrich(self, span: Any) -> Any:
        return dataclasses.replace(super().enrich(span), context=str(os.getpid()))


def as_role(dsn: str, role: str, namespace: str | None) -> psycopg.Connection[Any]:
    """A connection bound to ``namespace`` (as pgmem.connect does) acting as ``role``."""
    connection = pgmem.connect(dsn, namespace=namespace, migrate=False)
    connection.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
    return connection


def assert_refused(conn: psycopg.Connection[Any], *statements: str) -> None:
    """Each of ``statements`` fails on ``conn`` for want of privilege (rolled back after each)."""
    for statement in statements:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)
        conn.rollback()


def stats_are_consistent(conn: psycopg.Connection[Any]) -> None:
    """The BM25 statistics and postings equal a recount from the notes (no row left at zero)."""
    stored = {
        (ns, lex): df
        for ns, lex, df in conn.execute("SELECT namespace, lexeme, document_frequency FROM pgmem.lexeme_stats")
    }
    recomputed = {
        (ns, lex): df
        for ns, lex, df in conn.execute(
            "SELECT n.namespace, u.lexeme, count(*) FROM pgmem.notes AS n, unnest(n.lexemes) AS u GROUP BY 1, 2"
        )
    }
    assert stored == recomputed
    postings = "SELECT namespace, lexeme, note_id, term_frequency, lexeme_count FROM pgmem.lexeme_postings"
    recounted = (
        "SELECT n.namespace, u.lexeme, n.note_id, coalesce(cardinality(u.positions), 1), n.lexeme_count"
        " FROM pgmem.notes AS n, unnest(n.lexemes) AS u"
    )
    assert sorted(conn.execute(postings).fetchall()) == sorted(conn.execute(recounted).fetchall())
    for namespace, count, total in conn.execute("SELECT namespace, note_count, lexeme_total FROM pgmem.namespaces"):
        row = conn.execute(
            "SELECT count(*), coalesce(sum(lexeme_count), 0) FROM pgmem.notes WHERE namespace = %s", (namespace,)
        ).fetchone()
        assert row == (count, total)


def chat_reply(text: str, usage: bool = True, model: str = "fake-model") -> dict[str, Any]:
    """An OpenAI ``chat.completion`` body answering ``text``."""
    body: dict[str, Any] = {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
    }
    if usage:
        body["usage"] = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    return body


class FakeChatServer:
    """An OpenAI-compatible /v1/chat/completions on loopback.

    Replies come from ``script`` ((status, body, headers) triples, in order); once it is
    empty, from ``respond(request) -> text`` if given, else "ok".
    """

    def __init__(self, respond: Callable[[dict[str, Any]], str] | None = None) -> None:
        self.script: list[tuple[int, dict[str, Any], dict[str, str]]] = []
        self.requests: list[dict[str, Any]] = []
        self.keys: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                request = json.loads(self.rfile.read(length))
                server.requests.append(request)
                server.keys.append(self.headers.get("authorization"))
                if server.script:
                    status, body, headers = server.script.pop(0)
                else:
                    status, body, headers = 200, chat_reply(respond(request) if respond else "ok"), {}
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def stage_one_call(schema: str, *, family_cap: bool = True) -> str:
    """A call of ``schema``'s stage_one_v1 with the ``stage_one`` statement's arguments
    (queries.sql: its stage_one_pool_v1 passes them on unchanged); without the
    ``family_candidates`` argument for a function older than migration 0018, and without
    ``ef_search_notes`` (migration 0025) for any but the current one (schema pgmem)."""
    queries = (Path(__file__).resolve().parents[1] / "sql" / "queries.sql").read_text(encoding="utf-8")
    start = queries.index("FROM pgmem.stage_one_pool_v1(") + len("FROM pgmem.stage_one_pool_v1(")
    arguments = queries[start : queries.index(") AS s;\n", start)]
    if not family_cap:
        arguments = arguments.replace(", family_candidates => %(family_candidates)s", "")
    if schema != "pgmem":
        arguments = arguments.replace(",\n    ef_search_notes => %(ef_search_notes)s", "")
    return f"SELECT * FROM {schema}.stage_one_v1({arguments})"


def stage_one_as_of(migration: str, schema: str) -> str:
    """stage_one_v1 as the migration numbered ``migration`` defined it (its frozen file in
    sql/migrations/), created in ``schema`` instead of pgmem."""
    definition = migration_function(migration, "pgmem.stage_one_v1")
    return re.sub(r"^CREATE (OR REPLACE )?FUNCTION pgmem\.", f"CREATE FUNCTION {schema}.", definition)
