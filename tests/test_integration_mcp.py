"""``pgmem mcp`` end to end: the server as a subprocess, the MCP SDK's own client."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from doc_examples import code_blocks, run_python_blocks
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from pgmem.cli import build_parser

TREE = Path(__file__).resolve().parent.parent
TOOLS = ["feedback", "forget", "pack", "recall", "remember"]


def _stdio(dsn: str, *args: str) -> StdioServerParameters:
    """``python -m pgmem.cli mcp`` of the tree under test, on ``dsn``."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "pgmem.cli", "mcp", "--dsn", dsn, "--embedder", "hashing", *args],
        env={"PYTHONPATH": str(TREE)},
    )


def _session(server: StdioServerParameters | str, body: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        async with Client(server, read_timeout_seconds=120) as client:
            await body(client)

    asyncio.run(main())


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: dict[str, Any] = result.structured_content
    return content


def refused(result: CallToolResult) -> str:
    assert result.is_error
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


def _as(dsn: str, role: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, user=role)


def test_every_tool_over_stdio_as_the_owner(dsn: str) -> None:
    async def body(client: Client) -> None:
        tools = (await client.list_tools()).tools
        assert sorted(tool.name for tool in tools) == TOOLS
        # The model cannot choose the memory: no tool takes a namespace.
        assert all("namespace" not in json.dumps(tool.input_schema) for tool in tools)

        text = "Ada Lovelace founded Acme Corp in Paris.\n\nAcme sells analytical engines."
        written = ok(await client.call_tool("remember", {"text": text, "family": "user", "source": "chat-1"}))
        assert written["new_notes"] == 2 and len(written["note_ids"]) == 2
        assert written["citations"][0].startswith("chat-1#") and written["citations"][0].endswith("[0:40]")
        again = ok(await client.call_tool("remember", {"text": text, "family": "user", "source": "chat-1"}))
        assert (again["new_notes"], again["already_known"], again["note_ids"]) == (0, 2, written["note_ids"])

        packed = ok(await client.call_tool("pack", {"question": "Who founded Acme Corp?", "budget": 1}))
        assert [note["text"] for note in packed["notes"]] == ["Ada Lovelace founded Acme Corp in Paris."]
        top = packed["notes"][0]
        assert top["citation"] == written["citations"][0] and top["family"] == "user"
        assert packed["pack_id"] is not None  # --log-packs

        note = ok(await client.call_tool("recall", {"note_id": top["note_id"]}))
        assert (note["text"], note["citation"]) == (top["text"], top["citation"])
        assert note["metadata"] == {"source": "chat-1"}

        judged = ok(await client.call_tool("feedback", {"helpful": [top["note_id"]], "pack_id": packed["pack_id"]}))
        assert judged == {"recorded": 1, "families": {"user": {"helpful": 1.0, "unhelpful": 0.0}}}

        erased = ok(await client.call_tool("forget", {"reason": "the user asked", "note_ids": [top["note_id"]]}))
        assert erased["notes_removed"] == 1
        assert "no note" in refused(await client.call_tool("recall", {"note_id": top["note_id"]}))

    _session(_stdio(dsn, "--namespace", "agent", "--log-packs"), body)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT namespace, count(*) FROM pgmem.notes GROUP BY 1").fetchall() == [("agent", 1)]
        assert conn.execute("SELECT reason FROM pgmem.forget_audit").fetchall() == [("the user asked",)]


def test_bad_inputs_come_back_as_tool_errors_with_pgmems_message(dsn: str) -> None:
    async def body(client: Client) -> None:
        call = client.call_tool
        assert refused(await call("remember", {"text": " ", "family": "user", "source": "s"})).endswith(
            "text must not be empty or whitespace only"
        )
        too_long = "x" * 65_537
        assert "text must be at most 65536 characters" in refused(
            await call("remember", {"text": too_long, "family": "user", "source": "s"})
        )
        assert "source_ts" in refused(
            await call("remember", {"text": "A fact.", "family": "user", "source": "s", "source_ts": "yesterday"})
        )
        assert refused(await call("pack", {"question": "q", "budget": 0})) == (
            "Error executing tool pack: budget must be a whole number in [1, 50], got 0"
        )
        assert "question must be at most 4096 characters" in refused(await call("pack", {"question": "q" * 5000}))
        assert "must be a UUID" in refused(await call("recall", {"note_id": "' OR 1=1 --"}))
        assert "give at least one helpful or unhelpful" in refused(await call("feedback", {}))
        unknown = "00000000-0000-0000-0000-000000000001"
        assert unknown in refused(await call("feedback", {"helpful": [unknown]}))
        assert "exactly one of note_ids, document_id or family" in refused(
            await call("forget", {"reason": "r", "document_id": "d", "family": "f"})
        )
        # The SDK checks types before pgmem sees them; that too is a tool error, not a crash.
        assert refused(await call("pack", {"question": ["not", "text"]}))

    _session(_stdio(dsn, "--namespace", "agent"), body)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgmem.notes").fetchone() == (0,)


def test_the_servers_role_and_namespace_bound_what_the_model_can_do(
    dsn: str, roles: dict[str, str], tenants: psycopg.Connection[Any]
) -> None:
    beta = tenants.execute("SELECT note_id::text FROM pgmem.notes WHERE namespace = 'b'").fetchone()
    alpha = tenants.execute("SELECT note_id::text FROM pgmem.notes WHERE namespace = 'a'").fetchone()
    assert alpha and beta

    async def as_writer(client: Client) -> None:
        packed = ok(await client.call_tool("pack", {"question": "What is the vault code?"}))
        assert [note["text"] for note in packed["notes"]] == ["Alpha tenant secret: the launch code is 1234."]
        assert "no note" in refused(await client.call_tool("recall", {"note_id": beta[0]}))
        ok(await client.call_tool("remember", {"text": "Alpha launches on Monday.", "family": "ops", "source": "s"}))
        message = refused(await client.call_tool("forget", {"reason": "r", "note_ids": [alpha[0]]}))
        assert message == (
            f"Error executing tool forget: forget is for admins: this server acts as database role"
            f" '{roles['writer']}', which may not erase notes (it needs pgmem_admin); nothing was erased"
        )

    async def as_reader(client: Client) -> None:
        assert ok(await client.call_tool("recall", {"note_id": alpha[0]}))["family"] == "fa"
        assert "permission denied" in refused(
            await client.call_tool("remember", {"text": "Readers write nothing.", "family": "x", "source": "s"})
        )

    async def as_admin(client: Client) -> None:
        erased = ok(await client.call_tool("forget", {"reason": "rotated", "family": "fa"}))
        assert erased["notes_removed"] == 1

    _session(_stdio(_as(dsn, roles["writer"]), "--namespace", "a"), as_writer)
    _session(_stdio(_as(dsn, roles["reader"]), "--namespace", "a"), as_reader)
    _session(_stdio(_as(dsn, roles["admin"]), "--namespace", "a"), as_admin)
    notes = tenants.execute("SELECT namespace, text FROM pgmem.notes ORDER BY 1, 2").fetchall()
    assert notes == [("a", "Alpha launches on Monday."), ("b", "Beta tenant secret: the vault code is 9876.")]


def test_a_wrong_dsn_fails_at_start_with_pgmems_message(dsn: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pgmem.cli", "mcp", "--dsn", _as(dsn, "no_such_role_here")],
        env={**os.environ, "PYTHONPATH": str(TREE)},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.startswith("pgmem: DatabaseError:") and "no_such_role_here" in run.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def http_server(dsn: str) -> Iterator[str]:
    """``pgmem mcp --transport http`` on a free port, stopped afterwards; yields its URL."""
    port = _free_port()
    command = ["mcp", "--dsn", dsn, "--embedder", "hashing", "--namespace", "web", "--transport", "http"]
    process = subprocess.Popen(
        [sys.executable, "-m", "pgmem.cli", *command, "--port", str(port)],
        env={**os.environ, "PYTHONPATH": str(TREE)},
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, "the HTTP server exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP server did not listen"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_every_tool_over_streamable_http(http_server: str, dsn: str) -> None:
    async def body(client: Client) -> None:
        assert sorted(tool.name for tool in (await client.list_tools()).tools) == TOOLS
        fact = {
            "text": "Grace Hopper wrote the first compiler.",
            "family": "wiki",
            "source": "https://example.org/hopper",
        }
        ok(await client.call_tool("remember", fact))
        packed = ok(await client.call_tool("pack", {"question": "Who wrote the first compiler?"}))
        assert packed["notes"][0]["text"] == "Grace Hopper wrote the first compiler."
        assert packed["notes"][0]["citation"].startswith("https://example.org/hopper#")
        assert ok(await client.call_tool("recall", {"note_id": packed["notes"][0]["note_id"]}))["family"] == "wiki"
        assert "budget must be" in refused(await client.call_tool("pack", {"question": "q", "budget": 51}))

    _session(http_server, body)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT namespace FROM pgmem.notes").fetchall() == [("web",)]


def test_the_docs_example_runs(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `pgmem` on PATH runs the tree under test, whatever is installed.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "pgmem"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{TREE}" exec "{sys.executable}" -m pgmem.cli "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PGMEM_DSN", dsn)
    monkeypatch.setenv("PGMEM_EMBEDDER", "hashing")
    run_python_blocks("integrations/mcp.md")
    assert capsys.readouterr().out.splitlines() == [
        str(TOOLS),
        "chat-42 Ada Lovelace founded Acme Corp in Paris in 1843.",
        "user",
        "True Error executing tool pack: budget must be a whole number in [1, 50], got 0",
    ]
    # The host configuration on the page is a command line `pgmem mcp` accepts.
    config = json.loads(code_blocks("integrations/mcp.md", "json")[0])["mcpServers"]["pgmem"]
    assert config["command"] == "pgmem"
    assert build_parser().parse_args(config["args"]).namespace == "assistant"
