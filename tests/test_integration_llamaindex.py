"""The LlamaIndex retriever, reader and writer, with the real llama-index-core."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from doc_examples import run_python_blocks
from llama_index.core import Document
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeRelationship, TextNode

import pgmem
from pgmem.embeddings import HashingEmbedder
from pgmem.integrations.llamaindex import PgmemReader, PgmemRetriever, ingest_nodes, nodes_to_spans

DOCUMENTS = [
    Document(id_="history", text="Ada Lovelace founded Acme Corp in Paris.", metadata={"family": "wiki"}),
    Document(
        id_="products",
        text="Acme sells analytical engines.\n\nThe Acme headquarters moved to Lyon in 1901.",
        metadata={"family": "catalogue", "lang": "en"},
    ),
]


def _written(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    assert ingest_nodes(conn, DOCUMENTS, namespace="li", embedder=hashing).inserted == 3


def test_the_retriever_returns_the_pack_as_nodes_with_scores(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    _written(conn, hashing)
    retriever = PgmemRetriever(conn, namespace="li", budget=3, pack_options={"embedder": hashing})
    assert isinstance(retriever, BaseRetriever)
    hits = retriever.retrieve("Who founded Acme Corp?")
    evidence = pgmem.pack(conn, "Who founded Acme Corp?", namespace="li", budget=3, embedder=hashing)
    assert [hit.node.node_id for hit in hits] == [item.note_id for item in evidence.items]
    assert [hit.score for hit in hits] == [item.final_score for item in evidence.items]
    top, item = hits[0].node, evidence.items[0]
    assert top.get_content() == item.text == "Ada Lovelace founded Acme Corp in Paris."
    assert top.ref_doc_id == "history"
    meta = top.metadata
    assert (meta["citation"], meta["family"], meta["role"]) == (str(item.citation), "wiki", item.role)
    assert meta["scores"]["lexical"] == item.lexical_score
    assert meta["pack"]["pool_size"] == evidence.diagnostics.pool_size
    assert meta["family_calibration"]["family"] == "wiki"
    # The LLM reads the citation with the text, not the scores or diagnostics.
    prompt = top.get_content(metadata_mode=MetadataMode.LLM)
    assert "history[0:40]" in prompt and "pool_size" not in prompt
    assert top.get_content(metadata_mode=MetadataMode.EMBED) == item.text


def test_the_async_retriever_runs_the_same_pack(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    _written(conn, hashing)
    retriever = PgmemRetriever(conn, namespace="li", budget=2, pack_options={"embedder": hashing})
    hits = asyncio.run(retriever.aretrieve("Where is the Acme headquarters?"))
    sync = retriever.retrieve("Where is the Acme headquarters?")
    assert [h.node.node_id for h in hits] == [h.node.node_id for h in sync]
    assert hits[0].node.get_content() == "The Acme headquarters moved to Lyon in 1901."


def test_the_retriever_checks_its_options(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(pgmem.ConfigurationError, match=r"pack_options has \['budget'\]"):
        PgmemRetriever(conn, pack_options={"budget": 3})
    with pytest.raises(pgmem.ConfigurationError, match="needs a connection"):
        PgmemRetriever()
    with pytest.raises(pgmem.ConfigurationError, match="no connection for sync calls"):
        PgmemRetriever(async_connection=object()).retrieve("question")


def test_chunked_nodes_are_written_with_their_source_and_read_back(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    text = "First sentence about the archive. " * 30 + "\n\nThe vault opens at nine."
    chunks = SentenceSplitter(chunk_size=64, chunk_overlap=0).get_nodes_from_documents(
        [Document(id_="archive", text=text, metadata={"family": "ops"})]
    )
    assert len(chunks) > 2
    spans = nodes_to_spans(chunks)
    assert {span.document_id for span in spans} == {chunk.node_id for chunk in chunks}
    for span in spans:
        assert span.metadata is not None and span.metadata["ref_doc_id"] == "archive"
        assert span.family == "ops"
    result = ingest_nodes(conn, chunks, namespace="li", embedder=hashing)
    assert result.inserted == len(spans)

    reader = PgmemReader(conn, namespace="li")
    last = chunks[-1]
    documents = reader.load_data(document_ids=[last.node_id])
    assert "".join(d.text for d in documents).endswith("The vault opens at nine.")
    assert documents[0].metadata["ref_doc_id"] == "archive"
    assert documents[0].metadata["citation"].startswith(f"{last.node_id}[")
    assert documents[0].relationships[NodeRelationship.SOURCE].node_id == last.node_id
    by_id = reader.load_data(note_ids=[result.note_ids[0], "00000000-0000-0000-0000-000000000000"])
    assert [d.id_ for d in by_id] == [result.note_ids[0]]
    # Another namespace holds none of them.
    assert PgmemReader(conn, namespace="other").load_data(note_ids=list(result.note_ids)) == []
    with pytest.raises(pgmem.InputError, match=r"note_ids\[0\] must be a UUID"):
        reader.load_data(note_ids=["not-an-id"])
    with pytest.raises(pgmem.InputError, match="needs note_ids or document_ids"):
        reader.load_data()


def test_bad_nodes_are_refused_and_nothing_is_written(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    nameless = TextNode(text="A note with no family.")
    with pytest.raises(pgmem.InputError, match=r"nodes\[1\] has no family"):
        ingest_nodes(conn, [DOCUMENTS[0], nameless], namespace="li", embedder=hashing)
    assert conn.execute("SELECT count(*) FROM pgmem.notes").fetchone() == (0,)
    with pytest.raises(pgmem.InputError, match=r"nodes\[0\] must be a LlamaIndex node"):
        nodes_to_spans(["text"], family="f")  # type: ignore[list-item]
    with pytest.raises(pgmem.InputError, match=r"nodes\[0\]: text must not be empty"):
        nodes_to_spans([TextNode(text="")], family="f")


def test_the_docs_example_runs(dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PGMEM_DSN", dsn)
    example = run_python_blocks("integrations/llamaindex.md")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "3 new notes"
    assert lines[1].startswith("acme-history[0:48] wiki ")
    assert lines[1].endswith("Ada Lovelace founded Acme Corp in Paris in 1843.")
    assert lines[-2] == "Its headquarters moved to Lyon in 1901."
    assert lines[-1] == "['acme-products[0:35]', 'acme-products[37:76]']"
    assert example["found"][0].node.ref_doc_id == "acme-history"


def test_an_async_pool_serves_aretrieve(dsn: str, hashing: HashingEmbedder) -> None:
    from psycopg_pool import AsyncConnectionPool

    with psycopg.connect(dsn, autocommit=True) as conn:
        _written(conn, hashing)
        expected = pgmem.pack(conn, "Who founded Acme Corp?", namespace="li", budget=2, embedder=hashing)

    async def main() -> list[list[str]]:
        async with AsyncConnectionPool(dsn, min_size=1, max_size=2, kwargs={"autocommit": True}, open=False) as pool:
            retriever = PgmemRetriever(
                async_connection=pool, namespace="li", budget=2, pack_options={"embedder": hashing}
            )
            results = await asyncio.gather(*(retriever.aretrieve("Who founded Acme Corp?") for _ in range(3)))
            return [[hit.node.node_id for hit in hits] for hits in results]

    assert asyncio.run(main()) == [[item.note_id for item in expected.items]] * 3
