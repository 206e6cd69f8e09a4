"""``pgmem bench --peers``: pgmem side by side with the PostgreSQL stores people use today.

One namespace holds every turn of the LoCoMo dev conversations (their turn ids made
unique as ``"<conversation>/<turn>"``) and, past them, recombined real sentences as
distractors (:func:`pgmem.eval.bench.recombined`), grown in place to each size. The peers
index exactly pgmem's notes — same texts, the same stored vectors read back from
``pgmem.notes`` — in tables of their own schemas on the same server, and get the question
vectors pgmem gets: no system embeds anything at query time (:class:`VectorLookup`). Every
question is asked of every system in one round, the order rotated from question to
question, so load on the machine falls on all of them alike; recall@8 is
:func:`pgmem.eval.metrics.evidence_recall` of the returned turn ids against the gold turns,
as ``pgmem eval`` computes it.

The peers are an optional extra (``pip install 'pgmem[peers]'``, pinned versions):

* LangChain — ``langchain_postgres.PGVectorStore`` on a ``PGEngine`` (SQLAlchemy async
  engine, psycopg 3), a ``tsvector`` column and its GIN index
  (``apply_hybrid_search_index``), an HNSW index (``apply_vector_index(HNSWIndex())``),
  hybrid search through ``HybridSearchConfig`` with ``reciprocal_rank_fusion``; and the
  same store's dense search alone.
* LlamaIndex — ``llama_index.vector_stores.postgres.PGVectorStore`` with
  ``hybrid_search=True`` and the HNSW settings of its docs, queried through a
  ``QueryFusionRetriever`` over a dense and a sparse retriever of one
  ``VectorStoreIndex`` (``num_queries=1``: no language model is called).

Each peer runs in the configuration its documentation shows and in the best one a small
sweep found on the smallest store (:data:`LANGCHAIN_SWEEP`, :data:`LLAMAINDEX_SWEEP`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from pgmem.api import ingest
from pgmem.embeddings import Embedder, embed_unique
from pgmem.errors import ConfigurationError
from pgmem.eval.bench import (
    format_size_axis,
    latency_plot,
    load_average,
    percentiles,
    real_sentences,
    recombined,
)
from pgmem.eval.datasets import load_locomo
from pgmem.eval.metrics import QuestionResult, evidence_recall
from pgmem.retrieval.pipeline import fetch_pool, finish_pack, prepare_pack
from pgmem.types import Span
from pgmem.validate import check_namespace

__all__ = [
    "LANGCHAIN_SWEEP",
    "LLAMAINDEX_SWEEP",
    "PEER_PACKAGES",
    "PeerQuestion",
    "StoredNote",
    "VectorLookup",
    "build_store",
    "interleave",
    "peer_versions",
    "recall_at",
    "stored_notes",
]

#: The packages of the ``peers`` extra, whose installed versions every report records.
PEER_PACKAGES = (
    "langchain-postgres",
    "langchain-core",
    "llama-index-vector-stores-postgres",
    "llama-index-core",
    "sqlalchemy",
    "psycopg",
    "asyncpg",
    "psycopg2-binary",
    "pgvector",
)
BUDGET = 8
#: Sweep of the LangChain hybrid search: (dense top-k, keyword top-k, RRF k).
LANGCHAIN_SWEEP = tuple((k, k, rrf) for k in (8, 16, 32, 64) for rrf in (60, 10))
#: Sweep of the LlamaIndex fusion: (top-k of each retriever, fusion mode).
LLAMAINDEX_SWEEP = tuple((k, mode) for k in (8, 16, 32, 64) for mode in ("reciprocal_rerank", "relative_score"))
#: What the docs show: LangChain's HybridSearchConfig defaults (4 + 4, RRF k 60); the
#: LlamaIndex Postgres notebook's fusion (5 + 5, relative score).
LANGCHAIN_DOCS = (4, 4, 60)
LLAMAINDEX_DOCS = (5, "relative_score")
#: The LlamaIndex Postgres notebook's HNSW settings.
LLAMAINDEX_HNSW = {
    "hnsw_m": 16,
    "hnsw_ef_construction": 64,
    "hnsw_ef_search": 40,
    "hnsw_dist_method": "vector_cosine_ops",
}


def peer_versions() -> dict[str, str | None]:
    """Installed version of each package of the ``peers`` extra (None when missing)."""
    versions: dict[str, str | None] = {}
    for package in PEER_PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def require_peers() -> None:
    """ConfigurationError naming ``--peers`` and the extra when the peers are not installed."""
    missing = [p for p in ("langchain-postgres", "llama-index-vector-stores-postgres") if peer_versions()[p] is None]
    if missing:
        raise ConfigurationError(
            f"--peers needs the 'peers' extra ({', '.join(missing)} missing): pip install 'pgmem[peers]'"
        )


# -- the store -------------------------------------------------------------------------


@dataclass(frozen=True)
class PeerQuestion:
    """A LoCoMo question (categories 1-4, with gold turns) asked of the shared namespace."""

    id: str
    question: str
    gold: tuple[str, ...]
    category: str


def locomo_store(path: Path) -> tuple[list[Span], list[PeerQuestion]]:
    """The LoCoMo dev turns with namespace-unique ids, and the questions with gold turns."""
    corpus = load_locomo(path)
    spans: list[Span] = []
    for namespace, turns in corpus.spans.items():
        conversation = namespace.removeprefix("locomo-")
        spans += [dataclasses.replace(s, external_id=f"{conversation}/{s.external_id}") for s in turns]
    questions = [
        PeerQuestion(
            id=q.id,
            question=q.question,
            gold=tuple(f"{q.namespace.removeprefix('locomo-')}/{g}" for g in q.gold),
            category=q.category,
        )
        for q in corpus.questions
        if not q.adversarial and q.gold
    ]
    return spans, questions


def spread(questions: Sequence[PeerQuestion], count: int) -> list[PeerQuestion]:
    """``count`` questions spread evenly over ``questions`` (all of them when fewer)."""
    if count >= len(questions):
        return list(questions)
    return [questions[i * len(questions) // count] for i in range(count)]


def _stored(conn: psycopg.Connection[Any], namespace: str) -> int:
    row = conn.execute("SELECT count(*) FROM pgmem.notes WHERE namespace = %s", (namespace,)).fetchone()
    return int(row[0]) if row else 0


def build_store(
    conn: psycopg.Connection[Any],
    namespace: str,
    size: int,
    real: Sequence[Span],
    distractors: Sequence[str],
    embedder: Embedder,
    *,
    batch: int = 2000,
) -> tuple[int, float]:
    """Grow ``namespace`` to ``size`` notes: the real turns first, then distractor sentences.

    Returns the notes added and the seconds spent. Spans are deterministic, so a second
    run reuses what the namespace holds (ingest skips spans already stored).
    """
    check_namespace(namespace)
    if size < len(real):
        raise ConfigurationError(
            f"--notes: {size} is below the {len(real)} LoCoMo dev turns the peers store starts with"
        )
    done = _stored(conn, namespace)
    started = time.perf_counter()
    if done < len(real):
        for first in range(0, len(real), batch):
            ingest(conn, list(real[first : first + batch]), namespace=namespace, embedder=embedder)
    count = max(size - len(real), 0)
    extra = [
        Span(document_id=f"distractor-{i}", text=text, start=0, end=len(text.encode("utf-8")), family=f"f{i % 50}")
        for i, text in enumerate(distractors[:count])
    ]
    have = max(_stored(conn, namespace) - len(real), 0)
    for first in range(have, count, batch):
        ingest(conn, extra[first : first + batch], namespace=namespace, embedder=embedder)
    added = _stored(conn, namespace) - done
    if added and conn.autocommit:
        conn.execute("VACUUM ANALYZE pgmem.notes")
    return added, time.perf_counter() - started


@dataclass(frozen=True)
class StoredNote:
    """A note as pgmem stored it: its id, turn id (or None), text and stored vector."""

    note_id: str
    external_id: str | None
    text: str
    vector: npt.NDArray[np.float32]


def stored_notes(conn: psycopg.Connection[Any], namespace: str) -> list[StoredNote]:
    """The namespace's notes with their stored vectors, in id order."""
    rows = conn.execute(
        "SELECT note_id::text, external_id, text, embedding::text FROM pgmem.notes WHERE namespace = %s"
        " ORDER BY note_id",
        (namespace,),
    ).fetchall()
    return [StoredNote(str(r[0]), r[1], str(r[2]), np.asarray(json.loads(r[3]), dtype=np.float32)) for r in rows]


class VectorLookup:
    """Text → the vector pgmem has for it: the peers' embedding model, with no model behind it.

    It holds the question vectors (the notes reach the peers with their stored vectors
    attached); a text it does not know is an error, so no peer can pay for (or skip) an
    embedding the others do not.
    """

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self._vectors: dict[str, list[float]] = {}

    def add(self, text: str, vector: npt.NDArray[np.floating[Any]]) -> None:
        if len(vector) != self.dimension:
            raise ConfigurationError(f"vector of {text[:40]!r} has {len(vector)} dimensions, not {self.dimension}")
        self._vectors[text] = [float(x) for x in vector]

    def __call__(self, text: str) -> list[float]:
        try:
            return self._vectors[text]
        except KeyError:
            raise ConfigurationError(f"no precomputed vector for {text[:60]!r}") from None


# -- the systems -------------------------------------------------------------------------

#: A system answers a question (its text and vector) with the turn ids of its top notes.
Search = Callable[[str, npt.NDArray[np.float32]], list[str]]


def pgmem_search(conn: psycopg.Connection[Any], namespace: str, embedder: Embedder) -> Search:
    """pgmem.pack (calibrated, budget 8) with the question's vector given: stage one, calibrate, pack."""

    def search(question: str, vector: npt.NDArray[np.float32]) -> list[str]:
        request = prepare_pack(question, namespace=namespace, budget=BUDGET, embedder=embedder)
        request = dataclasses.replace(request, query_vector=vector)
        items = finish_pack(request, fetch_pool(conn, request)).items
        return [item.external_id or item.note_id for item in items]

    return search


def sqlalchemy_url(conn: psycopg.Connection[Any], driver: str) -> str:
    """The URL of ``conn``'s database for SQLAlchemy's ``postgresql+<driver>`` dialect."""
    info = conn.info
    password = info.password or ""
    auth = quote(info.user, safe="") + (":" + quote(password, safe="") if password else "")
    if info.host.startswith("/"):  # a Unix socket directory
        return f"postgresql+{driver}://{auth}@/{quote(info.dbname, safe='')}?host={quote(info.host)}&port={info.port}"
    return f"postgresql+{driver}://{auth}@{info.host}:{info.port}/{quote(info.dbname, safe='')}"


def _table_name(namespace: str) -> str:
    return "ns_" + re.sub(r"[^a-z0-9_]", "_", namespace.lower())


def _exists(conn: psycopg.Connection[Any], schema: str, table: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s)", (f'"{schema}"."{table}"',)).fetchone()
    return row is not None and row[0] is not None


def _existing_ids(conn: psycopg.Connection[Any], schema: str, table: str, column: str) -> frozenset[str]:
    if not _exists(conn, schema, table):
        return frozenset()
    query = sql.SQL("SELECT {}::text FROM {}.{}").format(
        sql.Identifier(column), sql.Identifier(schema), sql.Identifier(table)
    )
    return frozenset(str(row[0]) for row in conn.execute(query).fetchall())


class LangChainPeer:
    """``langchain_postgres.PGVectorStore`` over one table of schema ``peers_langchain``."""

    SCHEMA = "peers_langchain"

    def __init__(self, conn: psycopg.Connection[Any], namespace: str, lookup: VectorLookup) -> None:
        from langchain_core.embeddings import Embeddings
        from langchain_postgres import PGEngine, PGVectorStore
        from langchain_postgres.v2.hybrid_search_config import HybridSearchConfig, reciprocal_rank_fusion

        class Lookup(Embeddings):
            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                return [lookup(text) for text in texts]

            def embed_query(self, text: str) -> list[float]:
                return lookup(text)

        self.conn = conn
        self.table = _table_name(namespace)
        self._config_type = HybridSearchConfig
        self._rrf = reciprocal_rank_fusion
        self.config = HybridSearchConfig(tsv_column="content_tsv", fusion_function=reciprocal_rank_fusion)
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.SCHEMA)))
        self.engine = PGEngine.from_connection_string(url=sqlalchemy_url(conn, "psycopg"))
        if not _exists(conn, self.SCHEMA, self.table):
            self.engine.init_vectorstore_table(
                table_name=self.table,
                vector_size=lookup.dimension,
                schema_name=self.SCHEMA,
                hybrid_search_config=self.config,
            )
        self.store = PGVectorStore.create_sync(
            engine=self.engine,
            embedding_service=Lookup(),
            table_name=self.table,
            schema_name=self.SCHEMA,
            hybrid_search_config=self.config,
        )

    def sync(self, notes: Sequence[StoredNote]) -> int:
        """Add the notes the table does not hold yet (with pgmem's vectors); returns how many."""
        from langchain_postgres.v2.indexes import HNSWIndex

        have = _existing_ids(self.conn, self.SCHEMA, self.table, "langchain_id")
        new = [n for n in notes if n.note_id not in have]
        for first in range(0, len(new), 1000):
            chunk = new[first : first + 1000]
            self.store.add_embeddings(
                texts=[n.text for n in chunk],
                embeddings=[[float(x) for x in n.vector] for n in chunk],
                metadatas=[{"external_id": n.external_id or n.note_id} for n in chunk],
                ids=[n.note_id for n in chunk],
            )
        if not have:  # as the docs do: load, then build the indexes
            self.store.apply_vector_index(HNSWIndex())
            self.store.apply_hybrid_search_index()
        self.conn.execute(sql.SQL("ANALYZE {}.{}").format(sql.Identifier(self.SCHEMA), sql.Identifier(self.table)))
        return len(new)

    def hybrid(self, dense_k: int, keyword_k: int, rrf_k: int) -> Search:
        """Hybrid search, RRF of the dense top ``dense_k`` and the keyword top ``keyword_k``."""
        base = self._config_type(
            tsv_column="content_tsv",
            fusion_function=self._rrf,
            fusion_function_parameters={"rrf_k": rrf_k},
            primary_top_k=dense_k,
            secondary_top_k=keyword_k,
        )

        def search(question: str, vector: npt.NDArray[np.float32]) -> list[str]:
            # A fresh config per question: similarity_search writes the question into the
            # config it is given (fts_query) and keeps it for every later call otherwise.
            config = dataclasses.replace(base, fusion_function_parameters=dict(base.fusion_function_parameters))
            documents = self.store.similarity_search(question, k=BUDGET, hybrid_search_config=config)
            return [str(d.metadata["external_id"]) for d in documents]

        return search

    def dense(self) -> Search:
        """The same store's dense search alone (top 8 by cosine distance, HNSW)."""

        def search(question: str, vector: npt.NDArray[np.float32]) -> list[str]:
            documents = self.store.similarity_search_by_vector(
                [float(x) for x in vector], k=BUDGET, hybrid_search_config=None
            )
            return [str(d.metadata["external_id"]) for d in documents]

        return search

    def close(self) -> None:
        self.engine._run_as_sync(self.engine.close())


class LlamaIndexPeer:
    """``llama_index.vector_stores.postgres.PGVectorStore`` over one table of schema ``peers_llamaindex``."""

    SCHEMA = "peers_llamaindex"

    def __init__(self, conn: psycopg.Connection[Any], namespace: str, lookup: VectorLookup) -> None:
        from llama_index.core import VectorStoreIndex
        from llama_index.core.embeddings import BaseEmbedding
        from llama_index.vector_stores.postgres import PGVectorStore

        class Lookup(BaseEmbedding):
            def _get_query_embedding(self, query: str) -> list[float]:
                return lookup(query)

            async def _aget_query_embedding(self, query: str) -> list[float]:
                return lookup(query)

            def _get_text_embedding(self, text: str) -> list[float]:
                return lookup(text)

        self.conn = conn
        self.table = _table_name(namespace)
        self.store = PGVectorStore.from_params(
            connection_string=sqlalchemy_url(conn, "psycopg2"),
            async_connection_string=sqlalchemy_url(conn, "asyncpg"),
            table_name=self.table,
            schema_name=self.SCHEMA,
            embed_dim=lookup.dimension,
            hybrid_search=True,
            text_search_config="english",
            hnsw_kwargs=dict(LLAMAINDEX_HNSW),
        )
        self.index = VectorStoreIndex.from_vector_store(self.store, embed_model=Lookup())

    def sync(self, notes: Sequence[StoredNote]) -> int:
        """Add the notes the table does not hold yet (with pgmem's vectors); returns how many."""
        from llama_index.core.schema import TextNode

        self.store._initialize()  # creates the schema, table and indexes the first time
        table = "data_" + self.table
        have = _existing_ids(self.conn, self.SCHEMA, table, "node_id")
        new = [n for n in notes if n.note_id not in have]
        for first in range(0, len(new), 1000):
            self.store.add(
                [
                    TextNode(
                        id_=n.note_id,
                        text=n.text,
                        embedding=[float(x) for x in n.vector],
                        metadata={"external_id": n.external_id or n.note_id},
                    )
                    for n in new[first : first + 1000]
                ]
            )
        self.conn.execute(sql.SQL("ANALYZE {}.{}").format(sql.Identifier(self.SCHEMA), sql.Identifier(table)))
        return len(new)

    def fusion(self, top_k: int, mode: str) -> Search:
        """QueryFusionRetriever of a dense and a sparse retriever (``top_k`` each), top 8 fused."""
        from llama_index.core.llms import MockLLM
        from llama_index.core.retrievers import QueryFusionRetriever
        from llama_index.core.retrievers.fusion_retriever import FUSION_MODES
        from llama_index.core.schema import QueryBundle

        retriever = QueryFusionRetriever(
            [
                self.index.as_retriever(vector_store_query_mode="default", similarity_top_k=top_k),
                self.index.as_retriever(vector_store_query_mode="sparse", similarity_top_k=top_k),
            ],
            llm=MockLLM(),  # never called: num_queries=1 generates no extra query
            similarity_top_k=BUDGET,
            num_queries=1,
            mode=FUSION_MODES(mode),
            use_async=False,
        )

        def search(question: str, vector: npt.NDArray[np.float32]) -> list[str]:
            nodes = retriever.retrieve(QueryBundle(query_str=question, embedding=[float(x) for x in vector]))
            return [str(n.node.metadata["external_id"]) for n in nodes]

        return search

    def close(self) -> None:
        if self.store._engine is not None:
            self.store._engine.dispose()


# -- the comparison ----------------------------------------------------------------------


@dataclass
class Timed:
    """One system's answers and latencies (ms), question by question."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    latency_ms: list[float] = field(default_factory=list)


def interleave(
    systems: Mapping[str, Search],
    questions: Sequence[PeerQuestion],
    vectors: Mapping[str, npt.NDArray[np.float32]],
    *,
    warmup: int = 20,
) -> dict[str, Timed]:
    """Every question asked of every system, the order rotated by one system per question.

    The first ``warmup`` questions are asked once untimed (caches, plans, connections).
    """
    names = list(systems)
    if not names:
        raise ConfigurationError("no system to compare")
    for question in questions[:warmup]:
        for name in names:
            systems[name](question.question, vectors[question.id])
    timed = {name: Timed() for name in names}
    for i, question in enumerate(questions):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            started = time.perf_counter()
            answer = systems[name](question.question, vectors[question.id])
            timed[name].latency_ms.append((time.perf_counter() - started) * 1000)
            timed[name].answers[question.id] = answer
    return timed


def recall_at(questions: Sequence[PeerQuestion], answers: Mapping[str, Sequence[str]], budget: int = BUDGET) -> float:
    """Mean gold-turn recall (percent) of the first ``budget`` answers, as ``pgmem eval`` computes it."""
    values = []
    for q in questions:
        result = QuestionResult(
            question_id=q.id,
            category=q.category,
            gold=q.gold,
            packed=tuple(answers[q.id][:budget]),
            packed_texts=(),
            answers=(),
        )
        value = evidence_recall(result)
        if value is not None:
            values.append(value)
    return round(100 * float(np.mean(values)), 1) if values else float("nan")


def question_vectors(embedder: Embedder, questions: Sequence[PeerQuestion]) -> dict[str, npt.NDArray[np.float32]]:
    vectors = embed_unique(embedder, [q.question for q in questions])
    return {q.id: np.asarray(v, dtype=np.float32) for q, v in zip(questions, vectors, strict=True)}


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b > 0 else None


def _sweep(
    candidates: Mapping[str, Search], questions: Sequence[PeerQuestion], vectors: Mapping[str, Any]
) -> tuple[str, dict[str, float]]:
    """Recall@8 of each candidate configuration (untimed); the best one's name (first on ties)."""
    recalls = {}
    for name, search in candidates.items():
        answers = {q.id: search(q.question, vectors[q.id]) for q in questions}
        recalls[name] = recall_at(questions, answers)
    best = max(recalls, key=lambda name: recalls[name])
    return best, recalls


def run_peers(
    conn: psycopg.Connection[Any],
    sizes: Sequence[int],
    real: Sequence[Span],
    questions: Sequence[PeerQuestion],
    distractors: Sequence[str],
    embedder: Embedder,
    *,
    namespace: str,
    sweep: bool = True,
    warmup: int = 20,
    report: Callable[[dict[str, Any]], None] = lambda so_far: None,
) -> dict[str, Any]:
    """The comparison at each of ``sizes``: one dict per size, and the configurations used.

    ``report`` gets the result so far after each size.
    """
    if not sizes or list(sizes) != sorted(set(sizes)):
        raise ConfigurationError(f"--notes must be increasing note counts, got {list(sizes)}")
    if not questions:
        raise ConfigurationError("--questions: no LoCoMo question with gold turns to ask")
    vectors = question_vectors(embedder, questions)
    lookup = VectorLookup(embedder.dimension)
    for q in questions:
        lookup.add(q.question, vectors[q.id])
    langchain_best, llamaindex_best = (16, 16, 60), (16, "reciprocal_rerank")
    configurations: dict[str, Any] = {}
    points = []
    lc = LangChainPeer(conn, namespace, lookup)
    li = LlamaIndexPeer(conn, namespace, lookup)
    try:
        for index, size in enumerate(sizes):
            added, ingest_seconds = build_store(conn, namespace, size, real, distractors, embedder)
            notes = stored_notes(conn, namespace)
            tick = time.perf_counter()
            lc_added = lc.sync(notes)
            lc_seconds = time.perf_counter() - tick
            tick = time.perf_counter()
            li_added = li.sync(notes)
            li_seconds = time.perf_counter() - tick
            point: dict[str, Any] = {
                "notes": len(notes),
                "questions": len(questions),
                "ingest": {
                    "pgmem": {"added": added, "seconds": round(ingest_seconds, 1)},
                    "langchain": {"added": lc_added, "seconds": round(lc_seconds, 1)},
                    "llamaindex": {"added": li_added, "seconds": round(li_seconds, 1)},
                },
            }
            if sweep and index == 0:
                name, recalls = _sweep(
                    {f"langchain-hybrid {d}+{k} rrf_k {r}": lc.hybrid(d, k, r) for d, k, r in LANGCHAIN_SWEEP},
                    questions,
                    vectors,
                )
                langchain_best = LANGCHAIN_SWEEP[list(recalls).index(name)]
                configurations["langchain_sweep_recall"] = recalls
                name, recalls = _sweep(
                    {f"llamaindex-fusion {k}+{k} {m}": li.fusion(k, m) for k, m in LLAMAINDEX_SWEEP},
                    questions,
                    vectors,
                )
                llamaindex_best = LLAMAINDEX_SWEEP[list(recalls).index(name)]
                configurations["llamaindex_sweep_recall"] = recalls
            configurations.update(
                {
                    "langchain-hybrid (docs)": "HybridSearchConfig(fusion_function=reciprocal_rank_fusion):"
                    f" dense top {LANGCHAIN_DOCS[0]} + keyword top {LANGCHAIN_DOCS[1]}, rrf_k {LANGCHAIN_DOCS[2]}, k=8",
                    "langchain-hybrid (best)": f"dense top {langchain_best[0]} + keyword top {langchain_best[1]},"
                    f" rrf_k {langchain_best[2]}, k=8",
                    "langchain-dense": "similarity_search_by_vector, k=8 (HNSW m 16, ef_construction 64, ef_search 40)",
                    "llamaindex-fusion (docs)": f"QueryFusionRetriever dense {LLAMAINDEX_DOCS[0]} + sparse"
                    f" {LLAMAINDEX_DOCS[0]}, mode {LLAMAINDEX_DOCS[1]}, num_queries=1, top 8",
                    "llamaindex-fusion (best)": f"QueryFusionRetriever dense {llamaindex_best[0]} + sparse"
                    f" {llamaindex_best[0]}, mode {llamaindex_best[1]}, num_queries=1, top 8",
                }
            )
            systems: dict[str, Search] = {
                "pgmem": pgmem_search(conn, namespace, embedder),
                "langchain-hybrid (docs)": lc.hybrid(*LANGCHAIN_DOCS),
                "langchain-hybrid (best)": lc.hybrid(*langchain_best),
                "langchain-dense": lc.dense(),
                "llamaindex-fusion (docs)": li.fusion(*LLAMAINDEX_DOCS),
                "llamaindex-fusion (best)": li.fusion(*llamaindex_best),
            }
            timed = interleave(systems, questions, vectors, warmup=warmup)
            pgmem_latency = percentiles(timed["pgmem"].latency_ms)
            results = {}
            for name, run in timed.items():
                latency = percentiles(run.latency_ms)
                results[name] = {
                    "recall_at_8": recall_at(questions, run.answers),
                    "latency_ms": latency,
                    "pgmem_over_system": {q: _ratio(pgmem_latency[q], latency[q]) for q in ("p50", "p95", "p99")},
                }
            point["systems"] = results
            point["load_average"] = load_average()
            points.append(point)
            report({"configurations": configurations, "points": points})
    finally:
        lc.close()
        li.close()
    return {"configurations": configurations, "points": points}


def _print_point(console: Any, point: dict[str, Any]) -> None:
    ingest_figures = ", ".join(f"{name} +{v['added']:,} in {v['seconds']} s" for name, v in point["ingest"].items())
    console.print(f"[bold]{point['notes']:,} notes[/bold], {point['questions']} questions ({ingest_figures})")
    console.print(f"  {'system':<26} {'recall@8':>8} {'p50':>8} {'p95':>8} {'p99':>8}   pgmem / system (p50, p95, p99)")
    for name, row in point["systems"].items():
        latency, ratio = row["latency_ms"], row["pgmem_over_system"]
        console.print(
            f"  {name:<26} {row['recall_at_8']:>8.1f} {latency['p50']:>8.2f} {latency['p95']:>8.2f}"
            f" {latency['p99']:>8.2f}   {ratio['p50']}×, {ratio['p95']}×, {ratio['p99']}×"
        )


def plot_peers(points: Sequence[dict[str, Any]], path: Path) -> Path:
    """Left: p50 (solid) and p95 (dashed) of every system against store size, recall in the
    legend. Right: pgmem's p50 over each peer's, the figure that load on the machine moves least."""
    figure, (latency, ratio) = latency_plot(11.0, 4.6, panels=2)
    notes = [point["notes"] for point in points]
    for number, name in enumerate(points[0]["systems"]):
        colour = f"C{number}"
        recalls = "/".join(f"{point['systems'][name]['recall_at_8']:.1f}" for point in points)
        for quantile, style in (("p50", "-o"), ("p95", "--o")):
            values = [point["systems"][name]["latency_ms"][quantile] for point in points]
            label = f"{name} (recall@8 {recalls})" if quantile == "p50" else None
            latency.plot(notes, values, style, color=colour, label=label, markersize=4)
        if name != "pgmem":
            ratios = [point["systems"][name]["pgmem_over_system"]["p50"] for point in points]
            ratio.plot(notes, ratios, "-o", color=colour, label=name, markersize=4)
    ratio.axhline(1.0, color="black", linewidth=0.8)
    format_size_axis(
        latency,
        ylabel="ms per question, p50 solid / p95 dashed",
        title="same server, vectors and questions, interleaved",
        legend_size=7,
    )
    format_size_axis(ratio, ylabel="pgmem p50 ÷ system p50", title="how many times slower pgmem is", legend_size=7)
    figure.savefig(path, dpi=120)
    return path


def peers_command(
    args: Any,
    console: Any,
    conn: psycopg.Connection[Any],
    sizes: Sequence[int],
    embedder: Embedder,
    save: Callable[[dict[str, Any]], None] = lambda result: None,
) -> dict[str, Any]:
    """``pgmem bench --peers``: the comparison, printed and saved (``save``) after each size."""
    require_peers()
    data = Path(args.data_dir)
    real, questions = locomo_store(data / "locomo" / "locomo_dev5.json")
    sentences, _ = real_sentences(data)
    distractors = recombined(sentences, max(max(sizes) - len(real), 0))
    chosen = spread(questions, args.questions)
    versions = peer_versions()

    def report(so_far: dict[str, Any]) -> None:
        _print_point(console, so_far["points"][-1])
        save({**so_far, "versions": versions})

    result = run_peers(
        conn,
        sizes,
        real,
        chosen,
        distractors,
        embedder,
        namespace=f"{args.namespace}-peers",
        sweep=not args.no_sweep,
        report=report,
    )
    return {**result, "versions": versions}
