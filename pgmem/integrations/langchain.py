"""LangChain: a retriever over :func:`pgmem.pack` and a writer of LangChain documents.

Needs the ``langchain`` extra (``pip install 'pgmem[langchain]'``, langchain-core).

>>> retriever = PgmemRetriever(connection=conn, namespace="docs", budget=4)
>>> retriever.invoke("Who founded Acme?")[0].metadata["citation"]
'acme.md[0:17]'

See docs/integrations/langchain.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import psycopg
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, model_validator

from pgmem.api import ingest
from pgmem.embeddings import Embedder
from pgmem.errors import InputError
from pgmem.ingestion.enricher import Enricher
from pgmem.ingestion.split import SplitConfig
from pgmem.ingestion.writer import IngestResult
from pgmem.integrations._common import Packer, content_id, item_metadata, text_spans
from pgmem.types import Pack, Span
from pgmem.validate import describe_value

__all__ = ["PgmemRetriever", "documents_to_spans", "ingest_documents", "pack_documents"]


def pack_documents(evidence: Pack) -> list[Document]:
    """The notes of a pack as LangChain documents, in pack order.

    ``page_content`` is the note's text and ``id`` its note id; ``metadata`` holds the
    citation, note id, family, role, every score and the pack's diagnostics (see
    :func:`pgmem.integrations._common.item_metadata`).
    """
    return [
        Document(page_content=item.text, id=item.note_id, metadata=item_metadata(item, evidence))
        for item in evidence.items
    ]


class PgmemRetriever(BaseRetriever):
    """A LangChain retriever whose documents are a pgmem evidence pack.

    Each call runs :func:`pgmem.pack` once: stage one in one SQL statement, then the
    family calibration and the greedy packer. Documents come back in pack order.

    Parameters
    ----------
    connection : psycopg.Connection or psycopg_pool.ConnectionPool
        For ``invoke``/``get_relevant_documents`` (and for ``ainvoke`` when no
        ``async_connection`` is given: the sync pack then runs in a worker thread).
    async_connection : psycopg.AsyncConnection or psycopg_pool.AsyncConnectionPool, optional
        For ``ainvoke``: the pack runs on it without a thread (:func:`pgmem.aio.pack`).
    namespace : str
        The memory to read (default ``"default"``).
    budget : int
        Most notes per pack (default 8).
    pack_options : dict
        Any other keyword of :func:`pgmem.pack` (``mode``, ``token_budget``, ``where``,
        ``roles``, ``embedder``, ``log``, ``timeout``, ...).
    """

    connection: Any = None
    async_connection: Any = None
    namespace: str = "default"
    budget: int = 8
    pack_options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> PgmemRetriever:
        self._packer()
        return self

    def _packer(self) -> Packer:
        # Built from the fields at each call: a pydantic model's fields may be reassigned.
        return Packer(self.connection, self.async_connection, self.namespace, self.budget, self.pack_options)

    def pack(self, query: str) -> Pack:
        """The evidence pack behind :meth:`invoke` (for its full diagnostics)."""
        return self._packer().pack(query)

    async def apack(self, query: str) -> Pack:
        """The evidence pack behind :meth:`ainvoke`."""
        return await self._packer().apack(query)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return pack_documents(self.pack(query))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return pack_documents(await self.apack(query))


def _family(document: Document, family: str | None, family_key: str) -> Any:
    return family if family is not None else document.metadata.get(family_key)


def documents_to_spans(
    documents: Iterable[Document],
    *,
    family: str | None = None,
    family_key: str = "family",
    split: SplitConfig | None = None,
) -> list[Span]:
    """LangChain documents as pgmem spans, each document cut by pgmem's splitter.

    A document's id (``Document.id``) is its pgmem document id; without one, the id is
    its ``metadata["source"]`` followed by a digest of its text (so re-adding the same
    text is a no-op and two pages of one source do not collide). Its family is
    ``family``, else ``metadata[family_key]``; a document with neither is an
    :class:`pgmem.InputError`. Every span carries the document's metadata.
    """
    if isinstance(documents, Document) or not isinstance(documents, Iterable):
        raise InputError(f"documents must be a list of LangChain Documents, got {describe_value(documents)}")
    split = split or SplitConfig()
    spans: list[Span] = []
    for index, document in enumerate(documents):
        if not isinstance(document, Document):
            raise InputError(f"documents[{index}] must be a LangChain Document, got {type(document).__name__}")
        source = document.metadata.get("source")
        text = document.page_content
        document_id = document.id or content_id(text, source if isinstance(source, str) else None)
        spans += text_spans(
            f"documents[{index}]",
            text,
            document_id=document_id,
            family=_family(document, family, family_key),
            metadata=document.metadata,
            split=split,
        )
    return spans


def ingest_documents(
    conn: psycopg.Connection[Any],
    documents: Iterable[Document],
    *,
    namespace: str = "default",
    family: str | None = None,
    family_key: str = "family",
    split: SplitConfig | None = None,
    embedder: Embedder | str | None = None,
    enricher: Enricher | None = None,
    progress: Callable[[int], None] | None = None,
) -> IngestResult:
    """Write LangChain documents into ``namespace`` as notes (:func:`documents_to_spans`,
    then :func:`pgmem.ingest`: one transaction, nothing written if a document is bad)."""
    spans = documents_to_spans(documents, family=family, family_key=family_key, split=split)
    return ingest(conn, spans, namespace=namespace, embedder=embedder, enricher=enricher, progress=progress)
