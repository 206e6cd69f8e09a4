"""Tests of pgmem.embeddings: the bundled MiniLM, the hashing fallback, the HTTP client.

The OpenAI-compatible client is exercised against a local ``http.server`` on
127.0.0.1; nothing here reaches the internet.
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
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

from pgmem.embeddings import (
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    default_embedder_spec,
    embed_unique,
    get_embedder,
    register_embedder,
    registered_kinds,
)
from pgmem.embeddings.minilm import TOKENIZER_DIR
from pgmem.errors import ConfigurationError, EmbeddingError, InputError

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


@dataclass
class Received:
    path: str
    headers: dict[str, str]
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


class _FakeHandler(BaseHTTPRequestHandler):
    server: FakeEmbeddingServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.received.append(Received(self.path, dict(self.headers), body))
            count = len(self.server.received)
        status, headers, payload = self.server.responder(body, count)
        self.send_response(status)
        for key, value in headers.items():
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
    np.testing.assert_allclose(vectors, vectors_for(texts), atol=1e-6)
    assert vectors.dtype == np.float32
    assert embedder.name == "openai:test-model"
    assert embedder.dimension == 8
    assert len(server.received) == 3  # the dimension came from the first response


def test_openai_discovers_the_dimension_with_one_probe(serve: Serve) -> None:
    server = serve(embeddings_reply)
    embedder = OpenAIEmbedder("m", base_url=server.base_url)
    assert embedder.dimension == 8
    assert embedder.dimension == 8
    assert len(server.received) == 1


def test_openai_retries_after_429(serve: Serve) -> None:
    def responder(body: Any, count: int) -> Reply:
        if count == 1:
            return error_reply(429, "slow down", **{"Retry-After": "0"})
        return embeddings_reply(body)

    server = serve(responder)
    embedder = OpenAIEmbedder("m", base_url=server.base_url, backoff=0.001)
    vectors = embedder.embed(["hello", "world"])
    assert len(server.received) == 2
    np.testing.assert_allclose(vectors, vectors_for(["hello", "world"]), atol=1e-6)


def test_openai_caps_a_long_retry_after(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    monkeypatch.setattr("pgmem.embeddings.openai_http.time.sleep", pauses.append)

    def responder(body: Any, count: int) -> Reply:
        if count == 1:
            return error_reply(503, "busy", **{"Retry-After": "86400"})
        return embeddings_reply(body)

    server = serve(responder)
    OpenAIEmbedder("m", base_url=server.base_url).embed(["x"])
    assert pauses == [60.0]


def test_openai_gives_up_after_max_retries(serve: Serve) -> None:
    server = serve(lambda body, count: error_reply(500, "internal failure"))
    embedder = OpenAIEmbedder("m", base_url=server.base_url, max_retries=2, backoff=0.001)
    with pytest.raises(EmbeddingError, match=r"HTTP 500.*internal failure.*after 3 attempts"):
        embedder.embed(["x"])
    assert len(server.received) == 3


def test_openai_does_not_retry_a_400(serve: Serve) -> None:
    server = serve(lambda body, count: error_reply(400, "bad input " + "x" * 5000))
    embedder = OpenAIEmbedder("m", base_url=server.base_url, backoff=0.001)
    with pytest.raises(EmbeddingError, match=r"HTTP 400.*bad input") as caught:
        embedder.embed(["x"])
    assert len(server.received) == 1
    assert len(str(caught.value)) < 600  # the body is excerpted, not dumped


def test_openai_rejects_a_wrong_dimension(serve: Serve) -> None:
    server = serve(embeddings_reply)
    embedder = OpenAIEmbedder("m", base_url=server.base_url, dimension=16)
    with pytest.raises(EmbeddingError, match="8-dimensional vectors, expected 16"):
        embedder.embed(["x"])


def test_openai_rejects_a_missing_vector(serve: Serve) -> None:
    def responder(body: Any, count: int) -> Reply:
        status, headers, payload = embeddings_reply(body)
        reply = json.loads(payload)
        reply["data"] = reply["data"][1:]
        return status, headers, json.dumps(reply).encode()

    server = serve(responder)
    embedder = OpenAIEmbedder("m", base_url=server.base_url)
    with pytest.raises(EmbeddingError, match=r"sent 2 texts.*got 1 vectors"):
        embedder.embed(["a", "b"])


def test_openai_rejects_non_finite_values(serve: Serve) -> None:
    reply = b'{"data": [{"index": 0, "embedding": [1.0, NaN, 0.5]}]}'
    server = serve(lambda body, count: (200, {}, reply))
    with pytest.raises(EmbeddingError, match="non-finite"):
        OpenAIEmbedder("m", base_url=server.base_url).embed(["a"])


def test_openai_sends_the_key_and_never_shows_it(serve: Serve) -> None:
    server = serve(lambda body, count: error_reply(401, "Incorrect API key provided: sk-secret"))
    embedder = OpenAIEmbedder("m", base_url=server.base_url, api_key="sk-secret")
    with pytest.raises(EmbeddingError, match="HTTP 401") as caught:
        embedder.embed(["x"])
    assert server.received[0].headers["Authorization"] == "Bearer sk-secret"
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
    assert server.received[0].headers["Authorization"] == "Bearer sk-from-env"
    assert server.received[0].body["model"] == "env-model"


def test_openai_without_a_key_sends_no_authorization(serve: Serve) -> None:
    server = serve(embeddings_reply)
    OpenAIEmbedder("m", base_url=server.base_url).embed(["x"])
    assert "Authorization" not in server.received[0].headers


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
    embedder = OpenAIEmbedder("m", base_url=f"http://127.0.0.1:{closed_port()}/v1", max_retries=1, backoff=0.001)
    with pytest.raises(EmbeddingError, match=r"failed.*after 2 attempts"):
        embedder.embed(["x"])


def test_openai_rejects_invalid_options() -> None:
    with pytest.raises(ConfigurationError, match="base_url"):
        OpenAIEmbedder("m", base_url="ftp://example.invalid")
    with pytest.raises(ConfigurationError, match="batch_size"):
        OpenAIEmbedder("m", batch_size=0)
    with pytest.raises(ConfigurationError, match="timeout"):
        OpenAIEmbedder("m", timeout=0)


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
