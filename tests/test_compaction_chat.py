"""OpenAIChat against a fake OpenAI-compatible server on loopback, and token counting."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import FakeChatServer as FakeServer
from helpers import chat_reply as reply

from pgmem import ConfigurationError, PgmemError
from pgmem.compaction import AsyncChatModel, AsyncOpenAIChat, ChatModel, OpenAIChat
from pgmem.compaction.chat import PLACEHOLDER_API_KEY
from pgmem.compaction.tokens import MESSAGE_OVERHEAD, REPLY_PRIMING, TokenCounter
from pgmem.errors import ChatError
from pgmem.retrieval.packer import count_tokens

TOKENIZER = Path(__file__).parent.parent / "pgmem" / "models" / "all-MiniLM-L6-v2-tokenizer" / "tokenizer.json"


def error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.close()


MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def test_completion_text_usage_and_request(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGMEM_CHAT_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.script.append((200, reply("hello"), {}))
    chat = OpenAIChat(base_url=server.url, model="fake-model")
    result = chat.complete(MESSAGES, max_tokens=7)
    chat.close()
    assert isinstance(chat, ChatModel)
    assert (result.text, result.prompt_tokens, result.completion_tokens, result.model) == ("hello", 11, 3, "fake-model")
    assert result.latency_ms > 0
    sent = server.requests[0]
    assert sent["model"] == "fake-model" and sent["messages"] == MESSAGES and sent["max_tokens"] == 7
    assert server.keys[0] == f"Bearer {PLACEHOLDER_API_KEY}"


def test_api_key_from_environment_in_order(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("PGMEM_CHAT_API_KEY", "sk-pgmem")
    OpenAIChat(base_url=server.url, model="m").complete(MESSAGES)
    monkeypatch.delenv("PGMEM_CHAT_API_KEY")
    OpenAIChat(base_url=server.url, model="m").complete(MESSAGES)
    assert server.keys == ["Bearer sk-pgmem", "Bearer sk-openai"]


def test_missing_usage_falls_back_to_the_counter(server: FakeServer) -> None:
    server.script.append((200, reply("two words", usage=False), {}))
    result = OpenAIChat(base_url=server.url, model="m").complete(MESSAGES)
    assert result.prompt_tokens == TokenCounter().messages(MESSAGES)
    assert result.completion_tokens == count_tokens("two words")


@pytest.mark.parametrize("status", [500, 429])
def test_retries_on_server_errors_and_rate_limits(server: FakeServer, status: int) -> None:
    fast = {"retry-after-ms": "5"}
    server.script += [(status, error("busy"), fast), (status, error("busy"), fast), (200, reply("done"), {})]
    result = OpenAIChat(base_url=server.url, model="m", max_retries=2).complete(MESSAGES)
    assert result.text == "done" and len(server.requests) == 3


def test_retries_exhausted_is_one_chat_error(server: FakeServer) -> None:
    server.script += [(500, error("boom"), {"retry-after-ms": "5"})] * 2
    with pytest.raises(ChatError) as info:
        OpenAIChat(base_url=server.url, model="m", max_retries=1).complete(MESSAGES)
    assert server.url in str(info.value) and "'m'" in str(info.value)
    assert isinstance(info.value, PgmemError) and info.value.__cause__ is not None


def test_bad_model_is_a_clear_error(server: FakeServer) -> None:
    server.script.append((404, error("model 'nope' not found"), {}))
    with pytest.raises(ChatError, match=r"model 'nope' at http://127\.0\.0\.1.*NotFoundError.*not found"):
        OpenAIChat(base_url=server.url, model="nope").complete(MESSAGES)
    assert len(server.requests) == 1


def test_unreachable_url_is_a_clear_error() -> None:
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(ChatError, match=rf"model 'm' at {url} failed: APIConnectionError"):
        OpenAIChat(base_url=url, model="m", max_retries=0, timeout=2).complete(MESSAGES)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"base_url": "localhost:8080"}, "base_url"),
        ({"model": " "}, "model"),
        ({"timeout": 0}, "timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"temperature": 3.0}, "temperature"),
    ],
)
def test_bad_configuration_names_the_parameter(kwargs: dict[str, Any], name: str) -> None:
    args: dict[str, Any] = {"base_url": "http://127.0.0.1:1/v1", "model": "m"}
    args.update(kwargs)
    with pytest.raises(ConfigurationError, match=name):
        OpenAIChat(**args)


def test_max_tokens_must_be_positive(server: FakeServer) -> None:
    with pytest.raises(ConfigurationError, match="max_tokens"):
        OpenAIChat(base_url=server.url, model="m").complete(MESSAGES, max_tokens=0)


# --- token counting --------------------------------------------------------------------


def test_estimate_counts_text_plus_documented_overhead() -> None:
    counter = TokenCounter()
    assert not counter.exact
    expected = sum(count_tokens(f"{m['role']}\n{m['content']}") + MESSAGE_OVERHEAD for m in MESSAGES) + REPLY_PRIMING
    assert counter.messages(MESSAGES) == expected
    assert counter.text("") == 0


def test_tool_calls_and_ids_are_counted() -> None:
    counter = TokenCounter()
    plain = {"role": "assistant", "content": ""}
    call = {
        **plain,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}],
    }
    assert counter.message(call) > counter.message(plain)
    assert counter.message({"role": "tool", "tool_call_id": "call_1", "content": "r"}) > counter.message(
        {"role": "tool", "content": "r"}
    )


def test_exact_count_with_a_tokenizer_json() -> None:
    counter = TokenCounter(TOKENIZER, message_overhead=0, reply_priming=0)
    assert counter.exact
    long_text = "hello world " * 200  # past the file's 128-token truncation and padding
    assert counter.text(long_text) == 400
    assert counter.message({"role": "user", "content": "hello world"}) == 3  # user, hello, world


def test_bad_tokenizer_paths(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="tokenizer_json"):
        TokenCounter(tmp_path / "missing.json")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    with pytest.raises(ConfigurationError, match="tokenizer_json"):
        TokenCounter(bad)
    with pytest.raises(ConfigurationError, match="message_overhead"):
        TokenCounter(message_overhead=-1)


def test_async_chat_sends_the_same_request_and_raises_the_same_error(server: FakeServer) -> None:
    fast = {"retry-after-ms": "5"}
    server.script += [(200, reply("hello"), {}), (500, error("boom"), fast), (500, error("boom"), fast)]

    async def main() -> tuple[Any, ...]:
        chat = AsyncOpenAIChat(base_url=server.url, model="fake-model", max_retries=1)
        result = await chat.complete(MESSAGES, max_tokens=7)
        with pytest.raises(ChatError) as info:
            await chat.complete(MESSAGES)
        await chat.close()
        assert isinstance(chat, AsyncChatModel)
        return result, str(info.value)

    result, message = asyncio.run(main())
    assert (result.text, result.prompt_tokens, result.completion_tokens, result.model) == ("hello", 11, 3, "fake-model")
    sent = server.requests[0]
    assert sent["model"] == "fake-model" and sent["messages"] == MESSAGES and sent["max_tokens"] == 7
    assert "fake-model" in message and server.url in message and len(server.requests) == 3
    with pytest.raises(ConfigurationError, match="temperature"):
        AsyncOpenAIChat(base_url=server.url, model="m", temperature=3)
