"""AsyncCompactor: the sync compactor's decisions, notes and telemetry rows, awaited on
psycopg.AsyncConnection (any row factory, inside the caller's transaction or not)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row, namedtuple_row, tuple_row
from test_compaction import CONTINUE, FIRE, MESSAGES, STUCK, ScriptedChat, cited_summary, events, make, refs_in

from pgmem.compaction import AsyncChatModel, AsyncCompactor, ChatResult, Compactor, Gates
from pgmem.embeddings import HashingEmbedder
from pgmem.errors import ChatError, InputError

FACTORIES = {"tuple": tuple_row, "dict": dict_row, "namedtuple": namedtuple_row}
BAD = "Canberra is the capital [#deadbeef]."
MORE = [
    {"role": "assistant", "content": "Searching the population of Canberra now."},
    {"role": "tool", "tool_call_id": "call_2", "name": "search", "content": "Canberra has 467,000 inhabitants. " * 70},
]
TRAJECTORY = "trajectory-1"


class AsyncScriptedChat:
    """ScriptedChat, awaited: the same script, the same recorded calls."""

    model = "scripted"

    def __init__(self, replies: Sequence[Any]) -> None:
        self.sync = ScriptedChat(replies)
        self.calls = self.sync.calls

    async def complete(self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None) -> ChatResult:
        await asyncio.sleep(0)
        return self.sync.complete(messages, max_tokens=max_tokens)


SCRIPT = [CONTINUE, FIRE, cited_summary, STUCK, BAD, cited_summary]


def scenario_sync(compactor: Compactor) -> list[Any]:
    """Probe (continue), probe (fire) and compaction, two recalls, a stuck hint, a manual compaction."""
    out: list[Any] = [compactor.step(MESSAGES), compactor.step(MESSAGES)]
    live = out[-1]
    ref = refs_in(live)[0]
    call = {"id": "r1", "function": {"name": "recall", "arguments": json.dumps({"note_ids": [ref]})}}
    out.append(compactor.handle_tool_call(call))
    out.append(compactor.recall(query="Canberra capital", limit=3))
    out.append(compactor.step([*live, *MORE]))
    out.append(compactor.compact([*live, *MORE]))
    return out


async def scenario_async(compactor: AsyncCompactor) -> list[Any]:
    out: list[Any] = [await compactor.step(MESSAGES), await compactor.step(MESSAGES)]
    live = out[-1]
    ref = refs_in(live)[0]
    call = {"id": "r1", "function": {"name": "recall", "arguments": json.dumps({"note_ids": [ref]})}}
    out.append(await compactor.handle_tool_call(call))
    out.append(await compactor.recall(query="Canberra capital", limit=3))
    out.append(await compactor.step([*live, *MORE]))
    out.append(await compactor.compact([*live, *MORE]))
    return out


def stored(conn: psycopg.Connection[Any]) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
    """Telemetry rows (without id, time and measured latency) and every note, comparable across databases."""
    rows = [{k: v for k, v in row.items() if k not in ("event_id", "logged_at", "latency_ms")} for row in events(conn)]
    notes = conn.execute(
        "SELECT note_id, document_id, span_start, span_end, text, family, context, metadata, links"
        " FROM pgmem.notes ORDER BY note_id"
    ).fetchall()
    return rows, notes


@pytest.mark.parametrize("factory", ["tuple", "namedtuple"])
def test_async_compactor_equals_the_sync_one(
    conn: psycopg.Connection[Any], other_dsn: str, hashing: HashingEmbedder, factory: str
) -> None:
    sync_chat = ScriptedChat(SCRIPT)
    expected = scenario_sync(make(conn, sync_chat, hashing, trajectory_id=TRAJECTORY))
    assert expected[1][2]["role"] == "assistant" and expected[4][-1]["role"] == "user"  # compacted, then the hint
    assert "No archived note" not in expected[2]["content"] and expected[3]  # recalled by ref and by query

    async def main() -> list[Any]:
        async with await psycopg.AsyncConnection.connect(
            other_dsn, autocommit=True, row_factory=FACTORIES[factory]
        ) as aconn:
            chat = AsyncScriptedChat(SCRIPT)
            assert isinstance(chat, AsyncChatModel)
            compactor = AsyncCompactor(
                aconn, chat, "agent-1", gates=Gates(min_round=1), context_window=100_000,
                embedder=hashing, trajectory_id=TRAJECTORY,
            )  # fmt: skip
            got = await scenario_async(compactor)
            assert chat.calls == sync_chat.calls
            assert compactor.tools == [t for t in compactor.tools if t["function"]["name"] == "recall"]
            return got

    assert asyncio.run(main()) == expected
    with psycopg.connect(other_dsn, autocommit=True) as other:
        assert stored(other) == stored(conn)


def test_async_compactor_inside_the_callers_transaction(other_dsn: str, hashing: HashingEmbedder) -> None:
    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(other_dsn, row_factory=dict_row) as aconn:
            compactor = AsyncCompactor(aconn, AsyncScriptedChat([cited_summary]), "agent-1", embedder=hashing)
            await compactor.compact(MESSAGES)
            assert aconn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            cursor = await aconn.execute("SELECT count(*) AS n FROM pgmem.notes")
            assert await cursor.fetchone() == {"n": 4}  # three archived messages and the summary
            await aconn.rollback()
            cursor = await aconn.execute("SELECT count(*) AS n FROM pgmem.compaction_log")
            assert await cursor.fetchone() == {"n": 0}

    asyncio.run(main())


def test_async_errors_are_the_sync_ones(other_dsn: str, hashing: HashingEmbedder) -> None:
    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(other_dsn, autocommit=True) as aconn:
            compactor = AsyncCompactor(aconn, AsyncScriptedChat([ChatError("down")]), "agent-1", embedder=hashing)
            with pytest.raises(ChatError):
                await compactor.compact(MESSAGES)
            # The archive is written before the summary call failed: nothing lost.
            cursor = await aconn.execute("SELECT count(*) FROM pgmem.notes")
            assert await cursor.fetchone() == (3,)
            with pytest.raises(InputError, match="recall needs"):
                await compactor.recall()
            with pytest.raises(InputError, match="reason"):
                await compactor.compact(MESSAGES, reason="whim")

    asyncio.run(main())
