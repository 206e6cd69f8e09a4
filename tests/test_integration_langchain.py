"""The LangChain retriever and writer, with the real langchain-core."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from doc_examples import run_python_blocks
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

import pgmem
from pgmem.embeddings import HashingEmbedder
from pgmem.integrations.langchain import PgmemRetriever, documents_to_spans, ingest_documents

DOCUMENTS = [
    Document(page_content="Ada Lovelace founded Acme Corp in Paris.", metadata={"source": "history.md"}),
    Document(
        page_content="Acme sells analytical engines.\n\nThe Acme headquarters moved to Lyon in 1901.",
        metadata={"source": "products.md", "lang": "en"},
        id="products",
    ),
    Document(page_content="Bob Smith founded Widget Inc in Berlin.", metadata={"family": "widgets"}),
]


def _written(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    result = ingest_documents(conn, DOCUMENTS, namespace="lc", family="wiki", embedder=hashing)
    assert result.inserted == 4


def test_documents_become_spans_with_exact_offsets_ids_and_metadata() -> None:
    spans = documents_to_spans(DOCUMENTS[:2], family_key="source")
    assert [span.family for span in spans] == ["history.md", "products.md", "products.md"]
    history, products, moved = spans
    assert history.document_id.startswith("history.md#") and products.document_id == "products"
    body = DOCUMENTS[1].page_content.encode()
    for span in (products, moved):
        assert body[span.start : span.end].decode() == span.text
        assert span.metadata == {"source": "products.md", "lang": "en"}
    # The id of a document without one is a digest of its text: stable, and distinct per text.
    same = Document(page_content=DOCUMENTS[0].page_content, metadata={"source": "history.md"})
    other = Document(page_content="Ada Lovelace founded Acme Corp in Lyon.", metadata={"source": "history.md"})
    assert documents_to_spans([same], family="f")[0].document_id == history.document_id
    assert documents_to_spans([other], family="f")[0].document_id != history.document_id


def test_a_document_without_a_family_is_refused_and_nothing_is_written(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    with pytest.raises(pgmem.InputError, match=r"documents\[0\] has no family"):
        ingest_documents(conn, DOCUMENTS, namespace="lc", embedder=hashing)
    assert conn.execute("SELECT count(*) FROM pgmem.notes").fetchone() == (0,)
    with pytest.raises(pgmem.InputError, match=r"documents\[1\] must be a LangChain Document"):
        documents_to_spans([DOCUMENTS[0], "text"], family="f")  # type: ignore[list-item]
    with pytest.raises(pgmem.InputError, match=r"documents\[0\]: text must not be empty"):
        documents_to_spans([Document(page_content="  ")], family="f")


def test_the_retriever_returns_the_pack_as_cited_documents(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    _written(conn, hashing)
    retriever = PgmemRetriever(connection=conn, namespace="lc", budget=3, pack_options={"embedder": hashing})
    assert isinstance(retriever, BaseRetriever)
    documents = retriever.invoke("Who founded Acme Corp?")
    evidence = pgmem.pack(conn, "Who founded Acme Corp?", namespace="lc", budget=3, embedder=hashing)
    assert [d.id for d in documents] == [item.note_id for item in evidence.items]
    top, item = documents[0], evidence.items[0]
    assert top.page_content == item.text == "Ada Lovelace founded Acme Corp in Paris."
    meta = top.metadata
    assert meta["citation"] == str(item.citation) and meta["note_id"] == item.note_id
    assert (meta["family"], meta["role"], meta["rank"]) == ("wiki", item.role, 1)
    assert meta["scores"]["final"] == meta["score"] == item.final_score
    assert meta["scores"]["dense"] == item.dense_score and meta["scores"]["regularizer"] == item.regularizer
    assert meta["pack"]["namespace"] == "lc" and meta["pack"]["pool_size"] == evidence.diagnostics.pool_size
    assert meta["pack"]["degraded_reasons"] == list(evidence.diagnostics.degraded_reasons)
    assert meta["family_calibration"]["family"] == "wiki"


def test_the_async_retriever_runs_the_same_pack(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    _written(conn, hashing)
    retriever = PgmemRetriever(connection=conn, namespace="lc", budget=2, pack_options={"embedder": hashing})
    sync = retriever.invoke("Where is the Acme headquarters?")
    documents = asyncio.run(retriever.ainvoke("Where is the Acme headquarters?"))
    assert [d.id for d in documents] == [d.id for d in sync]
    assert documents[0].page_content == "The Acme headquarters moved to Lyon in 1901."


def test_the_retriever_reads_only_its_namespace_and_checks_its_options(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    _written(conn, hashing)
    other = PgmemRetriever(connection=conn, namespace="elsewhere", pack_options={"embedder": hashing})
    assert other.invoke("Who founded Acme Corp?") == []
    with pytest.raises(pgmem.ConfigurationError, match="pack_options has \\['namespace'\\]"):
        PgmemRetriever(connection=conn, pack_options={"namespace": "lc"})
    with pytest.raises(pgmem.ConfigurationError, match="needs a connection"):
        PgmemRetriever(namespace="lc")
    with pytest.raises(pgmem.ConfigurationError, match=r"budget must be in \[1, 1000\], got 0"):
        PgmemRetriever(connection=conn, namespace="lc", budget=0)
    with pytest.raises(pgmem.InputError, match="namespace must be"):
        PgmemRetriever(connection=conn, namespace="no spaces")
    with pytest.raises(pgmem.ConfigurationError, match=r"connection must be a psycopg\.Connection"):
        PgmemRetriever(connection="postgresql://", namespace="lc").invoke("q")
    retriever = PgmemRetriever(connection=conn, namespace="lc", pack_options={"embedder": hashing})
    with pytest.raises(pgmem.InputError, match="question must not be empty"):
        retriever.invoke(" ")


def test_a_connection_pool_serves_the_retriever(dsn: str, hashing: HashingEmbedder) -> None:
    from psycopg_pool import ConnectionPool

    with psycopg.connect(dsn, autocommit=True) as conn:
        _written(conn, hashing)
    with ConnectionPool(dsn, min_size=1, max_size=2, open=True) as pool:
        retriever = PgmemRetriever(connection=pool, namespace="lc", budget=1, pack_options={"embedder": hashing})
        assert retriever.invoke("Who founded Widget Inc?")[0].page_content == "Bob Smith founded Widget Inc in Berlin."


def test_the_docs_example_runs(dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PGMEM_DSN", dsn)
    example = run_python_blocks("integrations/langchain.md")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "3 new notes"
    assert lines[1].startswith("acme-history.md#")
    assert lines[1].endswith("Ada Lovelace founded Acme Corp in Paris in 1843.")
    assert lines[-2] == "Its headquarters moved to Lyon in 1901."
    assert lines[-1] == lines[1].split()[0]  # the async retriever's top citation
    assert example["found"][0].metadata["family"] == "acme-history.md"


def test_an_async_connection_serves_ainvoke(dsn: str, hashing: HashingEmbedder) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        _written(conn, hashing)
        expected = pgmem.pack(conn, "Who founded Widget Inc?", namespace="lc", budget=2, embedder=hashing)

    async def main() -> list[Document]:
        async with await psycopg.AsyncConnection.connect(dsn) as aconn:  # not autocommit: pgmem works either way
            retriever = PgmemRetriever(
                async_connection=aconn, namespace="lc", budget=2, pack_options={"embedder": hashing}
            )
            with pytest.raises(pgmem.ConfigurationError, match="no connection for sync calls"):
                retriever.invoke("Who founded Widget Inc?")
            return await retriever.ainvoke("Who founded Widget Inc?")

    documents = asyncio.run(main())
    assert [d.id for d in documents] == [item.note_id for item in expected.items]
    assert documents[0].metadata["scores"]["final"] == expected.items[0].final_score
