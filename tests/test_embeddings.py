"""Tests of pgmem.embeddings: the bundled MiniLM, the hashing fallback, the HTTP client.

The OpenAI-compatible client is exercised against a local ``http.server`` on
127.0.0.1; nothing here reaches the internet.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from minilm_golden import RECORDED, SENTENCES

from pgmem.embeddings import (
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    aembed_unique,
    default_embedder_spec,
    embed_unique,
    get_embedder,
    register_embedder,
    registered_kinds,
)
from pgmem.embeddings.minilm import TOKENIZER_DIR
from pgmem.errors import ConfigurationError, EmbeddingError, InputError
from pgmem.openai_client import PLACEHOLDER_API_KEY

ENVIRONMENT = (
    "PGMEM_EMBEDDER",
    "PGMEM_OPENAI_BASE_URL",
    "OPENAI_BASE_URL",
    "PGMEM_OPENAI_API_KEY",
    "OPENAI_API_KEY",
)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's real OpenAI settings must not leak into these tests.
    for variable in ENVIRONMENT:
        monkeypatch.delenv(variable, raising=False)


def cosine(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- MiniLM -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    embedder = get_embedder(None)
    assert isinstance(embedder, MiniLMEmbedder)
    return embedder


def test_minilm_shape_dtype_and_unit_rows(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(["The cat sat on the mat.", "", "Paris is the capital of France."])
    assert minilm.name == "all-MiniLM-L6-v2-onnx-int8"
    assert minilm.dimension == 384
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)


def test_minilm_paraphrases_are_closer_than_unrelated_sentences(minilm: MiniLMEmbedder) -> None:
    cat, cat_paraphrase, earnings, earnings_paraphrase = minilm.embed(
        [
            "The cat sat on the mat.",
            "A cat was sitting on the rug.",
            "The company's quarterly profits rose by five percent.",
            "Earnings for the firm grew 5% this quarter.",
        ]
    )
    assert cosine(cat, cat_paraphrase) > cosine(cat, earnings) + 0.3
    assert cosine(earnings, earnings_paraphrase) > cosine(earnings, cat_paraphrase) + 0.3


def test_minilm_single_text_equals_its_row_in_a_padded_batch(minilm: MiniLMEmbedder) -> None:
    short = "Rust is a systems language."
    batch = [
        short,
        "The Justice Department is focused on the deals Google makes with Apple, Samsung and"
        " Mozilla to ensure it is the default search engine on practically every platform.",
        "ok",
    ]
    together = minilm.embed(batch)
    for row, text in enumerate(batch):
        alone = minilm.embed([text])[0]
        assert cosine(alone, together[row]) > 0.9999


def test_minilm_vectors_are_the_recorded_ones_batched_and_single(minilm: MiniLMEmbedder) -> None:
    # Recorded from the implementation before the single-question path (tests/minilm_golden.py).
    recorded = np.load(RECORDED)
    batched = minilm.embed(list(SENTENCES))
    single = np.stack([minilm.embed([text])[0] for text in SENTENCES])
    np.testing.assert_allclose(batched, recorded["batched"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(single, recorded["single"], rtol=0, atol=1e-6)
    # The read path's call: one distinct question through embed_unique.
    for row, text in enumerate(SENTENCES[:4]):
        np.testing.assert_allclose(embed_unique(minilm, [text, text])[1], recorded["single"][row], rtol=0, atol=1e-6)


def test_minilm_restores_order_across_sorted_batches() -> None:
    embedder = MiniLMEmbedder(batch_size=2)
    texts = [
        "a much longer sentence about the history of the Roman empire and its roads",
        "short",
        "a medium sentence about bread",
        "",
        "another fairly long sentence about electric cars and their batteries",
    ]
    batched = embedder.embed(texts)
    for row, text in enumerate(texts):
        assert cosine(embedder.embed([text])[0], batched[row]) > 0.9999


def test_minilm_concurrent_calls_agree_with_serial(minilm: MiniLMEmbedder) -> None:
    texts = [f"note number {index} about topic {index % 3}" for index in range(12)]
    expected = minilm.embed(texts)
    results: list[npt.NDArray[np.float32]] = [np.empty(0, dtype=np.float32)] * 4

    def work(slot: int) -> None:
        results[slot] = minilm.embed(texts)

    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-5)


def test_minilm_tampered_tokenizer_is_refused(tmp_path: Path) -> None:
    for source in TOKENIZER_DIR.iterdir():
        shutil.copy(source, tmp_path / source.name)
    intact = MiniLMEmbedder(tokenizer_dir=tmp_path)
    assert intact.embed(["hello"]).shape == (1, 384)

    vocab = tmp_path / "vocab.txt"
    data = bytearray(vocab.read_bytes())
    data[100] ^= 0x01
    vocab.write_bytes(bytes(data))
    tampered = MiniLMEmbedder(tokenizer_dir=tmp_path)
    with pytest.raises(EmbeddingError, match=r"vocab\.txt.*07eced375cec144d"):
        tampered.embed(["hello"])


def test_minilm_tampered_model_is_refused(tmp_path: Path) -> None:
    fake_model = tmp_path / "model.onnx"
    fake_model.write_bytes(b"not an onnx model")
    with pytest.raises(EmbeddingError, match=r"model\.onnx.*expected 8199be6f"):
        MiniLMEmbedder(model_path=fake_model).load()


def test_minilm_rejects_invalid_options() -> None:
    with pytest.raises(ConfigurationError, match="batch_size"):
        MiniLMEmbedder(batch_size=0)
    with pytest.raises(ConfigurationError, match="max_tokens"):
        MiniLMEmbedder(max_tokens=1000)


# --- embed_unique -------------------------------------------------------------------


class CountingEmbedder:
    """A fake model that records every text it is asked to embed."""

    name = "counting"
    dimension = 4

    def __init__(self, output: Callable[[list[str]], Any] | None = None) -> None:
        self.seen: list[str] = []
        self.calls = 0
        self._output = output

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        self.seen.extend(texts)
        if self._output is not None:
            return self._output(list(texts))
        return np.array(
            [[len(text) + 1.0, float(sum(map(ord, text))), 1.0, 0.0] for text in texts],
            dtype=np.float32,
        )


def test_embed_unique_calls_the_model_once_per_distinct_text() -> None:
    fake = CountingEmbedder()
    texts = ["alpha", "beta", "alpha", "gamma", "beta", "alpha"]
    vectors = embed_unique(fake, texts)
    assert fake.calls == 1
    assert fake.seen == ["alpha", "beta", "gamma"]
    assert vectors.shape == (6, 4)
    assert vectors.dtype == np.float32
    np.testing.assert_array_equal(vectors[0], vectors[2])
    np.testing.assert_array_equal(vectors[0], vectors[5])
    np.testing.assert_array_equal(vectors[1], vectors[4])
    assert not np.allclose(vectors[0], vectors[1])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_embed_unique_of_nothing_calls_nothing() -> None:
    fake = CountingEmbedder()
    assert embed_unique(fake, []).shape == (0, 4)
    assert fake.calls == 0


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (lambda texts: np.ones((len(texts) + 1, 4)), r"shape \(3, 4\) for 2 distinct"),
        (lambda texts: np.ones((len(texts), 3)), r"expected \(2, 4\) \(dimension 4\)"),
        (lambda texts: [[1.0] * 4 for _ in texts], "returned list"),
        (lambda texts: np.array([[1.0, 0, 0, 0], [np.nan, 0, 0, 0]]), "non-finite.*#1"),
        (lambda texts: np.array([[1.0, 0, 0, 0], [0.0, 0, 0, 0]]), "zero vector.*#1"),
        (lambda texts: np.ones((len(texts), 4), dtype=np.int64), "dtype int64"),
    ],
)
def test_embed_unique_rejects_bad_embedder_output(output: Callable[[list[str]], Any], message: str) -> None:
    with pytest.raises(EmbeddingError, match="'counting'.*" + message):
        embed_unique(CountingEmbedder(output), ["one", "two", "one"])


def test_embed_unique_rejects_a_bare_string() -> None:
    with pytest.raises(InputError, match="single string"):
        embed_unique(CountingEmbedder(), "not a list")
    with pytest.raises(InputError, match=r"texts\[1\] must be a str"):
        embed_unique(CountingEmbedder(), ["fine", 3])  # type: ignore[list-item]


# --- hashing ------------------------------------------------------------------------


def test_hashing_is_deterministic_across_instances() -> None:
    texts = ["Deterministic vectors, please.", "Zweiter Satz über Straßen", ""]
    first = HashingEmbedder().embed(texts)
    second = HashingEmbedder().embed(texts)
    np.testing.assert_array_equal(first, second)
    assert first.shape == (3, 384)
    assert first.dtype == np.float32
    assert HashingEmbedder().name == "hashing-v1-384"
    assert HashingEmbedder(64).name == "hashing-v1-64"


def test_hashing_vectors_are_stable_across_processes() -> None:
    # Pinned values: str hash() salting or a changed scheme would break stored vectors.
    vector = HashingEmbedder(16).embed(["the cat sat"])[0]
    pinned = [
        0.0, -0.502944, 0.0, -0.125736, 0.251472, 0.0, 0.0, 0.125736,
        0.0, 0.502944, -0.125736, 0.125736, 0.0, 0.502944, 0.0, 0.338625,
    ]  # fmt: skip
    np.testing.assert_allclose(vector, pinned, atol=1e-6)
    # Case, spacing and punctuation do not change the words.
    np.testing.assert_array_equal(vector, HashingEmbedder(16).embed(["The  CAT sat!"])[0])


def test_hashing_similar_texts_are_closer_than_unrelated() -> None:
    embedder = HashingEmbedder()
    cat, cats, stocks = embedder.embed(
        [
            "the cat sat on the mat",
            "the cats were sitting on the mat",
            "stock markets fell sharply in Tokyo",
        ]
    )
    assert cosine(cat, cats) > cosine(cat, stocks) + 0.2


def test_hashing_empty_text_gives_a_fixed_unit_vector() -> None:
    embedder = HashingEmbedder(32)
    empty, blank, punctuation = embedder.embed(["", "   \n\t", "?!"])
    np.testing.assert_allclose(np.linalg.norm(empty), 1.0, atol=1e-6)
    np.testing.assert_array_equal(empty, blank)
    np.testing.assert_array_equal(empty, punctuation)


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=5))
def test_hashing_rows_are_always_finite_unit_vectors(texts: list[str]) -> None:
    vectors = HashingEmbedder(48).embed(texts)
    assert vectors.shape == (len(texts), 48)
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_hashing_rejects_a_bad_dimension() -> None:
    with pytest.raises(ConfigurationError, match="dimension"):
        HashingEmbedder(1)


# --- OpenAI-compatible HTTP ---------------------------------------------------------

Reply = tuple[int, dict[str, str], bytes]
#: Tells the client to retry after 5 ms instead of its 0.5 s backoff, so tests stay quick.
FAST_RETRY = {"retry-after-ms": "5"}


@dataclass
class Received:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any


class FakeEmbeddingServer(ThreadingHTTPServer):
    """Answers POST /v1/embeddings with whatever ``responder`` returns."""

    def __init__(self, responder: Callable[[Any, int], Reply]) -> None:
        super().__init__(("127.0.0.1", 0), _FakeHandler)
        self.responder = responder
        self.received: list[Received] = []
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out has hung up before the slow answer; that is the test.
        pass


class _FakeHandler(BaseHTTPRequestHandler):
    server: FakeEmbeddingServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            headers = {key.lower(): value for key, value in self.headers.items()}
            self.server.received.append(Received(self.path, headers, body))
            count = len(self.server.received)
        status, reply_headers, payload = self.server.responder(body, count)
        self.send_response(status)
        for key, value in reply_headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


SERVER_MODEL = HashingEmbedder(8)


def vectors_for(texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """What the fake server's model returns, so the client's output can be checked."""
    return SERVER_MODEL.embed(texts)


def embeddings_reply(body: Any, _count: int = 0) -> Reply:
    # Returned in reverse order: the client must sort by "index".
    vectors = vectors_for(body["input"]) * 3.0  # not unit length: the client normalises
    data = [
        {"object": "embedding", "index": index, "embedding": vectors[index].tolist()}
        for index in reversed(range(len(vectors)))
    ]
    return 200, {"Content-Type": "application/json"}, json.dumps({"data": data}).encode()


def error_reply(status: int, text: str = "nope", **headers: str) -> Reply:
    return status, headers, json.dumps({"error": {"message": text}}).encode()


def fail_first(reply: Reply, times: int = 1) -> Callable[[Any, int], Reply]:
    """A responder that answers ``reply`` to the first ``times`` requests, then embeds."""
    return lambda body, count: reply if count <= times else embeddings_reply(body)


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[Any, int], Reply]], FakeEmbeddingServer]]:
    started: list[tuple[FakeEmbeddingServer, threading.Thread]] = []

    def start(responder: Callable[[Any, int], Reply]) -> FakeEmbeddingServer:
        server = FakeEmbeddingServer(responder)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        started.append((server, thread))
        return server

    yield start
    for server, thread in started:
        server.shutdown()
        server.server_close()
        thread.join()


Serve = Callable[[Callable[[Any, int], Reply]], FakeEmbeddingServer]


def test_openai_batches_and_restores_order(serve: Serve) -> None:
    server = serve(embeddings_reply)
    embedder = OpenAIEmbedder("test-model", base_url=server.base_url, batch_size=2)
    texts = ["one", "two two", "three three three", "four", "five five"]
    vectors = embedder.embed(texts)
    assert [r.body["input"] for r in server.received] == [
        ["one", "two two"],
        ["three three three", "four"],
        ["five five"],
    ]
    assert all(r.path == "/v1/embeddings" for r in server.received)
    assert all(r.body["model"] == "test-model" for r in server.received)
    # Floats, not the client's default base64, which local servers rarely speak.
    assert all(r.body["encoding_format"] == "float" for r in server.received)
    np.testing.assert_allclose(vectors, vectors_for(texts), atol=1e-6)
    assert vectors.dtype == np.float32
    assert embedder.name == "openai:test-model"
    assert embedder.dimension == 8
    assert len(server.received) == 3  # the dimension came from the first response
    embedder.close()


def test_openai_discovers_the_dimension_with_one_probe(serve: Serve) -> None:
    server = serve(embeddings_reply)
    embedder = OpenAIEmbedder("m", base_url=server.base_url)
    assert embedder.dimension == 8
    assert embedder.dimension == 8
    assert len(server.received) == 1


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_openai_retries_rate_limits_and_server_errors(serve: Serve, status: int) -> None:
    server = serve(fail_first(error_reply(status, "slow down", **FAST_RETRY), times=2))
    embedder = OpenAIEmbedder("m", base_url=server.base_url, max_retries=2)
    vectors = embedder.embed(["hello", "world"])
    assert len(server.received) == 3
    assert [r.headers["x-stainless-retry-count"] for r in server.received] == ["0", "1", "2"]
    np.testing.assert_allclose(vectors, vectors_for(["hello", "world"]), atol=1e-6)


def test_openai_does_not_wait_a_day_for_retry_after(serve: Serve) -> None:
    # A pause longer than two minutes would look like a hang: fail at once instead.
    server = serve(fail_first(error_reply(503, "busy", **{"Retry-After": "86400"})))
    with pytest.raises(EmbeddingError, match=r"InternalServerError: HTTP 503.*busy") as caught:
        OpenAIEmbedder("m", base_url=server.base_url).embed(["x"])
    assert len(server.received) == 1
    assert "attempts" not in str(caught.value)


def test_openai_gives_up_after_max_retries(serve: Serve) -> None:
    server = serve(lambda body, count: error_reply(500, "internal failure", **FAST_RETRY))
    embedder = OpenAIEmbedder("m", base_url=server.base_url, max_retries=2)
    with pytest.raises(EmbeddingError, match=r"HTTP 500.*internal failure.*after 3 attempts") as caught:
        embedder.embed(["x"])
    assert len(server.received) == 3
    assert caught.value.__cause__ is not None


def test_openai_does_not_retry_a_400(serve: Serve) -> None:
    server = serve(lambda body, count: error_reply(400, "bad input " + "x" * 5000))
    embedder = OpenAIEmbedder("m", base_url=server.base_url)
    with pytest.raises(EmbeddingError, match=r"'openai:m'.*/v1/embeddings.*HTTP 400.*bad input") as caught:
        embedder.embed(["x"])
    assert len(server.received) == 1
    assert len(str(caught.value)) < 600  # the body is excerpted, not dumped


def slow_first(delay: float) -> Callable[[Any, int], Reply]:
    def responder(body: Any, count: int) -> Reply:
        if count == 1:
            time.sleep(delay)
        return embeddings_reply(body)

    return responder


def test_openai_retries_a_timeout(serve: Serve) -> None:
    server = serve(slow_first(1.0))
    embedder = OpenAIEmbedder("m", base_url=server.base_url, timeout=0.2, max_retries=1)
    np.testing.assert_allclose(embedder.embed(["late"]), vectors_for(["late"]), atol=1e-6)
    assert len(server.received) == 2


def test_openai_timeout_without_retries_is_an_embedding_error(serve: Serve) -> None:
    server = serve(slow_first(1.0))
    embedder = OpenAIEmbedder("m", base_url=server.base_url, timeout=0.2, max_retries=0)
    with pytest.raises(EmbeddingError, match=r"'openai:m'.*APITimeoutError: Request timed out"):
        embedder.embed(["late"])
    assert len(server.received) == 1


def test_openai_rejects_a_wrong_dimension(serve: Serve) -> None:
    server = serve(embeddings_reply)
    embedder = OpenAIEmbedder("m", base_url=server.base_url, dimension=16)
    with pytest.raises(EmbeddingError, match="8-dimensional vectors, expected 16"):
        embedder.embed(["x"])


def test_openai_rejects_a_dimension_that_changes(serve: Serve) -> None:
    def responder(body: Any, count: int) -> Reply:
        width = 8 if count == 1 else 5
        data = [{"index": i, "embedding": [1.0] * width} for i in range(len(body["input"]))]
        return 200, {}, json.dumps({"data": data}).encode()

    embedder = OpenAIEmbedder("m", base_url=serve(responder).base_url)
    assert embedder.embed(["a"]).shape == (1, 8)
    with pytest.raises(EmbeddingError, match="5-dimensional vectors, expected 8"):
        embedder.embed(["b"])


def without_first_item(body: Any, count: int) -> Reply:
    status, headers, payload = embeddings_reply(body)
    reply = json.loads(payload)
    reply["data"] = reply["data"][1:]
    return status, headers, json.dumps(reply).encode()


@pytest.mark.parametrize(
    ("responder", "message"),
    [
        (without_first_item, r"sent 2 texts.*got 1 vectors"),
        (lambda body, count: (200, {}, b"<html>gateway</html>"), r"is not JSON: <html>gateway</html>"),
        (lambda body, count: (200, {}, b'{"object": "list"}'), r"has no 'data' list"),
        (
            lambda body, count: (
                200,
                {},
                b'{"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [2]}]}',
            ),
            "repeats index 0",
        ),
        (lambda body, count: (200, {}, b'{"data": [{"index": 5, "embedding": [1]}, {}]}'), "invalid index 5"),
        (
            lambda body, count: (200, {}, b'{"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1}]}'),
            "not a list of numbers",
        ),
    ],
)
def test_openai_rejects_malformed_responses(serve: Serve, responder: Callable[[Any, int], Reply], message: str) -> None:
    server = serve(responder)
    with pytest.raises(EmbeddingError, match=r"'openai:m'.*" + message):
        OpenAIEmbedder("m", base_url=server.base_url).embed(["a", "b"])
    assert len(server.received) == 1  # a malformed answer is not retried


def test_openai_rejects_non_finite_values(serve: Serve) -> None:
    reply = b'{"data": [{"index": 0, "embedding": [1.0, NaN, 0.5]}]}'
    server = serve(lambda body, count: (200, {}, reply))
    with pytest.raises(EmbeddingError, match="non-finite"):
        OpenAIEmbedder("m", base_url=server.base_url).embed(["a"])


def test_openai_sends_the_key_and_never_shows_it(serve: Serve) -> None:
    server = serve(lambda body, count: error_reply(401, "Incorrect API key provided: sk-secret"))
    embedder = OpenAIEmbedder("m", base_url=server.base_url, api_key="sk-secret")
    with pytest.raises(EmbeddingError, match=r"AuthenticationError: HTTP 401.*\[api key\]") as caught:
        embedder.embed(["x"])
    assert server.received[0].headers["authorization"] == "Bearer sk-secret"
    assert "sk-secret" not in str(caught.value)
    assert "sk-secret" not in repr(embedder)


def test_openai_reads_url_and_key_from_the_environment(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    server = serve(embeddings_reply)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/ignored")
    monkeypatch.setenv("PGMEM_OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    embedder = get_embedder("openai:env-model")
    assert isinstance(embedder, OpenAIEmbedder)
    embedder.embed(["x"])
    assert server.received[0].headers["authorization"] == "Bearer sk-from-env"
    assert server.received[0].body["model"] == "env-model"


def test_openai_without_a_key_sends_the_placeholder(serve: Serve) -> None:
    server = serve(embeddings_reply)
    OpenAIEmbedder("m", base_url=server.base_url).embed(["x"])
    assert server.received[0].headers["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"


def test_embed_unique_needs_no_dimension_probe(serve: Serve) -> None:
    server = serve(embeddings_reply)
    embedder = OpenAIEmbedder("m", base_url=server.base_url)
    vectors = embed_unique(embedder, ["a", "b", "a"])
    assert vectors.shape == (3, 8)
    assert [r.body["input"] for r in server.received] == [["a", "b"]]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_openai_retries_connection_errors_then_fails() -> None:
    embedder = OpenAIEmbedder("m", base_url=f"http://127.0.0.1:{closed_port()}/v1", max_retries=1)
    with pytest.raises(EmbeddingError, match=r"APIConnectionError.*after 2 attempts"):
        embedder.embed(["x"])


def test_openai_rejects_invalid_options() -> None:
    with pytest.raises(ConfigurationError, match="OpenAIEmbedder base_url"):
        OpenAIEmbedder("m", base_url="ftp://example.invalid")
    with pytest.raises(ConfigurationError, match="OpenAIEmbedder batch_size"):
        OpenAIEmbedder("m", batch_size=0)
    with pytest.raises(ConfigurationError, match="OpenAIEmbedder timeout"):
        OpenAIEmbedder("m", timeout=0)
    with pytest.raises(ConfigurationError, match="OpenAIEmbedder max_retries"):
        OpenAIEmbedder("m", max_retries=-1)


# --- OpenAI-compatible HTTP from asyncio ----------------------------------------------


def test_openai_aembed_equals_embed_and_batches(serve: Serve) -> None:
    server = serve(embeddings_reply)
    embedder = OpenAIEmbedder("m", base_url=server.base_url, batch_size=2)
    texts = ["one", "two", "three"]

    async def main() -> npt.NDArray[np.float32]:
        try:
            return await embedder.aembed(texts)
        finally:
            await embedder.aclose()

    vectors = asyncio.run(main())
    assert [r.body["input"] for r in server.received] == [["one", "two"], ["three"]]
    np.testing.assert_allclose(vectors, embedder.embed(texts), atol=1e-7)
    assert vectors.dtype == np.float32


def test_openai_aembed_lets_the_loop_run_while_it_waits_and_works_on_a_second_loop(serve: Serve) -> None:
    # The server answers only once another task on the event loop has seen the request
    # arrive: a client that blocked the loop while waiting would never let that task run.
    released = threading.Event()
    answered_after_release: list[bool] = []

    def responder(body: Any, count: int) -> Reply:
        answered_after_release.append(released.wait(timeout=10))
        return embeddings_reply(body)

    server = serve(responder)
    embedder = OpenAIEmbedder("m", base_url=server.base_url)

    async def release_once_received() -> None:
        while len(server.received) < len(answered_after_release) + 1:
            await asyncio.sleep(0.005)
        released.set()

    async def main() -> npt.NDArray[np.float32]:
        released.clear()
        vectors, _ = await asyncio.gather(embedder.aembed(["slow"]), release_once_received())
        await embedder.aclose()
        return vectors

    first = asyncio.run(main())
    second = asyncio.run(main())  # a new loop gets its own client
    assert answered_after_release == [True, True]
    np.testing.assert_allclose(first, second, atol=1e-7)


def test_openai_aembed_probes_the_dimension_without_blocking(serve: Serve) -> None:
    server = serve(embeddings_reply)
    embedder = OpenAIEmbedder("m", base_url=server.base_url)

    async def main() -> npt.NDArray[np.float32]:
        empty = await embedder.aembed([])
        await embedder.aclose()
        return empty

    assert asyncio.run(main()).shape == (0, 8)
    assert [r.body["input"] for r in server.received] == [["dimension probe"]]


def test_openai_aembed_retries_and_maps_errors(serve: Serve) -> None:
    retried = serve(fail_first(error_reply(429, "slow down", **FAST_RETRY)))
    refused = serve(lambda body, count: error_reply(400, "bad input"))

    async def main() -> None:
        ok = OpenAIEmbedder("m", base_url=retried.base_url, max_retries=1)
        np.testing.assert_allclose(await ok.aembed(["x"]), vectors_for(["x"]), atol=1e-6)
        await ok.aclose()
        bad = OpenAIEmbedder("m", base_url=refused.base_url, dimension=8)
        try:
            with pytest.raises(EmbeddingError, match=r"'openai:m'.*BadRequestError: HTTP 400.*bad input"):
                await bad.aembed(["x"])
        finally:
            await bad.aclose()

    asyncio.run(main())
    assert len(retried.received) == 2 and len(refused.received) == 1


def test_aembed_unique_awaits_aembed_once_per_distinct_text(serve: Serve) -> None:
    server = serve(embeddings_reply)
    embedder = OpenAIEmbedder("m", base_url=server.base_url)

    async def main() -> npt.NDArray[np.float32]:
        vectors = await aembed_unique(embedder, ["a", "b", "a"])
        await embedder.aclose()
        return vectors

    vectors = asyncio.run(main())
    assert [r.body["input"] for r in server.received] == [["a", "b"]]
    np.testing.assert_array_equal(vectors[0], vectors[2])
    np.testing.assert_allclose(vectors, embed_unique(HashingEmbedder(8), ["a", "b", "a"]), atol=1e-6)


def test_aembed_unique_runs_a_sync_embedder_off_the_loop() -> None:
    threads: list[threading.Thread] = []

    class ThreadNoting(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> Any:
            threads.append(threading.current_thread())
            return super().embed(texts)

    fake = ThreadNoting()
    vectors = asyncio.run(aembed_unique(fake, ["x", "y", "x"]))
    np.testing.assert_array_equal(vectors, embed_unique(CountingEmbedder(), ["x", "y", "x"]))
    assert fake.seen == ["x", "y"] and threads[0] is not threading.main_thread()
    assert asyncio.run(aembed_unique(fake, [])).shape == (0, 4)
    with pytest.raises(EmbeddingError, match=r"'counting'.*zero vector"):
        asyncio.run(aembed_unique(CountingEmbedder(lambda texts: np.zeros((len(texts), 4))), ["z"]))
    with pytest.raises(InputError, match="single string"):
        asyncio.run(aembed_unique(fake, "not a list"))


# --- get_embedder -------------------------------------------------------------------


def test_get_embedder_specs(minilm: MiniLMEmbedder) -> None:
    assert get_embedder(None) is minilm
    assert get_embedder("default") is minilm
    assert get_embedder(" MiniLM ") is minilm
    hashing = get_embedder("hashing")
    assert isinstance(hashing, HashingEmbedder)
    assert hashing.dimension == 384
    assert get_embedder("hashing:64").dimension == 64
    openai = get_embedder("openai")
    assert isinstance(openai, OpenAIEmbedder)
    assert openai.name == "openai:text-embedding-3-small"
    assert openai.endpoint == "https://api.openai.com/v1/embeddings"
    # On Python 3.11 isinstance() reads every protocol member, so an OpenAIEmbedder
    # without a known dimension would send a probe; give it one here.
    for embedder in (minilm, hashing, OpenAIEmbedder("m", dimension=8)):
        assert isinstance(embedder, Embedder)


def test_get_embedder_returns_an_embedder_unchanged_without_probing() -> None:
    offline = OpenAIEmbedder("m", base_url=f"http://127.0.0.1:{closed_port()}/v1")
    assert get_embedder(offline) is offline
    fake = CountingEmbedder()
    assert get_embedder(fake) is fake


def test_get_embedder_reads_an_objects_members_without_running_them() -> None:
    # A class defining every member answers for its instances; an
    # object holding some as instance attributes is checked one by one, each time.
    class Lazy:
        name = "lazy"

        @property
        def dimension(self) -> int:
            raise AssertionError("the dimension was read")

        def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
            raise AssertionError("embedded")

    lazy = Lazy()
    assert get_embedder(lazy) is lazy  # type: ignore[arg-type]
    assert get_embedder(lazy) is lazy  # type: ignore[arg-type]
    whole, partial = ConstantEmbedder(4), ConstantEmbedder(4)
    del partial.dimension
    assert get_embedder(whole) is whole
    with pytest.raises(ConfigurationError, match="got ConstantEmbedder"):
        get_embedder(partial)
    assert get_embedder(whole) is whole


@pytest.mark.parametrize("spec", ["bert", "hashing:abc", "minilm:large", ""])
def test_get_embedder_rejects_unknown_specs(spec: str) -> None:
    with pytest.raises(ConfigurationError, match=r"hashing:<dimension>|whole number"):
        get_embedder(spec)


def test_get_embedder_rejects_other_objects() -> None:
    with pytest.raises(ConfigurationError, match="got int"):
        get_embedder(3)  # type: ignore[arg-type]


class ConstantEmbedder:
    """A third-party embedder: every text gets the same unit vector of ``dimension``."""

    def __init__(self, dimension: int) -> None:
        self.name = f"constant-{dimension}"
        self.dimension = dimension

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.full((len(texts), self.dimension), 1.0 / np.sqrt(self.dimension), dtype=np.float32)


@pytest.fixture
def registry_snapshot() -> Iterator[None]:
    from pgmem.embeddings import registry

    saved = dict(registry._registry)
    yield
    with registry._lock:
        registry._registry.clear()
        registry._registry.update(saved)
        registry._from_spec.cache_clear()


def constant_from_option(option: str) -> ConstantEmbedder:
    if option and not option.isdigit():
        raise ConfigurationError(f"constant dimension must be digits, got {option!r}")
    return ConstantEmbedder(int(option or "3"))


@pytest.mark.usefixtures("registry_snapshot")
def test_a_third_party_embedder_registers_and_resolves() -> None:
    register_embedder("constant", constant_from_option, option="<dimension>")
    assert "constant" in registered_kinds()
    three = get_embedder("constant")
    assert isinstance(three, ConstantEmbedder) and three.dimension == 3
    assert get_embedder(" Constant:5 ").dimension == 5
    assert get_embedder("constant") is three  # one instance per spec
    assert embed_unique(three, ["a", "b"]).shape == (2, 3)
    with pytest.raises(ConfigurationError, match="constant dimension must be digits"):
        get_embedder("constant:x")
    with pytest.raises(ConfigurationError, match="'constant:<dimension>'"):
        get_embedder("nothing-registered")


@pytest.mark.usefixtures("registry_snapshot")
def test_registering_refuses_shadowing_and_bad_kinds() -> None:
    with pytest.raises(ConfigurationError, match="'openai' is already registered"):
        register_embedder("openai", constant_from_option)
    assert isinstance(get_embedder("openai:m"), OpenAIEmbedder)
    for kind in ("default", "Has Space", "with:colon", ""):
        with pytest.raises(ConfigurationError, match="embedder kind must match"):
            register_embedder(kind, constant_from_option)
    with pytest.raises(ConfigurationError, match="must be callable"):
        register_embedder("broken", "not a factory")  # type: ignore[arg-type]
    # A kind without an option refuses one; replacing drops the cached instance.
    register_embedder("constant", lambda option: ConstantEmbedder(3))
    with pytest.raises(ConfigurationError, match="unknown embedder spec 'constant:4'"):
        get_embedder("constant:4")
    first = get_embedder("constant")
    register_embedder("constant", lambda option: ConstantEmbedder(7), replace=True)
    assert first.dimension == 3 and get_embedder("constant").dimension == 7


def test_the_contract_and_registry_import_no_implementation() -> None:
    import ast

    import pgmem.embeddings.base
    import pgmem.embeddings.registry

    implementations = {"pgmem.embeddings.hashing", "pgmem.embeddings.minilm", "pgmem.embeddings.openai_http"}
    for module in (pgmem.embeddings.base, pgmem.embeddings.registry):
        tree = ast.parse(Path(module.__file__ or "").read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert not imported & implementations, module.__name__


def test_default_embedder_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_embedder_spec() == "minilm"
    monkeypatch.setenv("PGMEM_EMBEDDER", "hashing:128")
    assert default_embedder_spec() == "hashing:128"
    monkeypatch.setenv("PGMEM_EMBEDDER", " ")
    assert default_embedder_spec() == "minilm"


def test_the_cache_answers_repeated_texts_without_the_model() -> None:
    from pgmem.embeddings import CachedEmbedder, HashingEmbedder

    model = HashingEmbedder()
    cached = CachedEmbedder(model, max_entries=2)
    first = cached.embed(["a b", "c d", "a b"])
    assert (cached.hits, cached.misses) == (1, 2)
    assert np.array_equal(first, embed_unique(model, ["a b", "c d", "a b"]))
    assert cached.name == model.name and cached.dimension == model.dimension
    cached.embed(["c d"])
    assert (cached.hits, cached.misses) == (2, 2)
    cached.embed(["e f"])  # evicts "a b", the least recently used
    cached.embed(["a b"])
    assert cached.misses == 4
    assert cached.embed([]).shape == (0, model.dimension)
    with pytest.raises(ConfigurationError, match="max_entries"):
        CachedEmbedder(model, max_entries=0)
