"""LlamaIndex: a retriever over :func:`pgmem.pack`, a reader of notes, a writer of nodes.

Needs the ``llamaindex`` extra (``pip install 'pgmem[llamaindex]'``, llama-index-core).

>>> retriever = PgmemRetriever(conn, namespace="docs", budget=4)
>>> retriever.retrieve("Who founded Acme?")[0].node.metadata["citation"]
'acme.md[0:17]'

See docs/integrations/llamaindex.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import psycopg
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.readers.base import BaseReader
from llama_index.core.schema import (
    BaseNode,
    Document,
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)

from pgmem.api import ingest
from pgmem.embeddings import Embedder
from pgmem.errors import InputError
from pgmem.ingestion.enricher import Enricher
from pgmem.ingestion.split import SplitConfig
from pgmem.ingestion.writer import IngestResult
from pgmem.integrations._common import Packer, StoredNote, borrow, item_metadata, read_notes, text_spans
from pgmem.types import Pack, Span
from pgmem.validate import check_namespace, describe_value

__all__ = ["PgmemReader", "PgmemRetriever", "ingest_nodes", "nodes_to_spans", "pack_nodes"]

#: Metadata an LLM reads with a node's text (LlamaIndex prepends it to the content);
#: ids, scores and diagnostics stay out of the prompt and out of any re-embedding.
LLM_METADATA = ("citation", "family", "role", "source_ts", "context")


def _node(node_id: str, text: str, document_id: str, metadata: dict[str, Any]) -> TextNode:
    return TextNode(
        id_=node_id,
        text=text,
        metadata=metadata,
        excluded_llm_metadata_keys=[key for key in metadata if key not in LLM_METADATA],
        excluded_embed_metadata_keys=list(metadata),
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=document_id)},
    )


def pack_nodes(evidence: Pack) -> list[NodeWithScore]:
    """The notes of a pack as LlamaIndex nodes with scores, in pack order.

    Each node's id is the note id, its text the note's text, its source (``ref_doc_id``)
    the pgmem document id and its score the note's final score; its metadata holds the
    citation, family, role, every score and the pack's diagnostics.
    """
    return [
        NodeWithScore(
            node=_node(item.note_id, item.text, item.document_id, item_metadata(item, evidence)),
            score=item.final_score,
        )
        for item in evidence.items
    ]


class PgmemRetriever(BaseRetriever):
    """A LlamaIndex retriever whose nodes are a pgmem evidence pack.

    Parameters
    ----------
    connection : psycopg.Connection or psycopg_pool.ConnectionPool, optional
        For ``retrieve`` (and ``aretrieve`` without an ``async_connection``: the sync pack
        then runs in a worker thread).
    async_connection : psycopg.AsyncConnection or psycopg_pool.AsyncConnectionPool, optional
        For ``aretrieve`` (:func:`pgmem.aio.pack`).
    namespace : str
        The memory to read (default ``"default"``).
    budget : int
        Most notes per pack (default 8).
    pack_options : dict, optional
        Any other keyword of :func:`pgmem.pack` (``mode``, ``token_budget``, ``where``, ...).
    callback_manager, verbose
        As for any LlamaIndex retriever.
    """

    def __init__(
        self,
        connection: Any = None,
        *,
        async_connection: Any = None,
        namespace: str = "default",
        budget: int = 8,
        pack_options: Mapping[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self._packer = Packer(connection, async_connection, namespace, budget, dict(pack_options or {}))
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def pack(self, query: str) -> Pack:
        """The evidence pack behind :meth:`retrieve` (for its full diagnostics)."""
        return self._packer.pack(query)

    async def apack(self, query: str) -> Pack:
        """The evidence pack behind :meth:`aretrieve`."""
        return await self._packer.apack(query)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return pack_nodes(self.pack(query_bundle.query_str))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return pack_nodes(await self.apack(query_bundle.query_str))


def note_document(note: StoredNote) -> Document:
    """A stored note as a LlamaIndex Document: the note's text, its id, and its stored
    metadata with pgmem's fields (``note_id``, ``citation``, ``family``, ...) over it."""
    fields = note.to_dict()
    stored = fields.pop("metadata")
    del fields["text"]
    return Document(
        id_=note.note_id,
        text=note.text,
        metadata={**stored, **fields},
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=note.document_id)},
    )


class PgmemReader(BaseReader):
    """Reads notes back as LlamaIndex Documents, by note id or by source document.

    Parameters
    ----------
    connection : psycopg.Connection or psycopg_pool.ConnectionPool
        Row-level security applies to its role (docs/security.md).
    namespace : str
        The memory to read (default ``"default"``).
    """

    def __init__(self, connection: Any, *, namespace: str = "default") -> None:
        self._connection = connection
        self._namespace = check_namespace(namespace)

    def load_data(
        self, note_ids: Sequence[str] | None = None, document_ids: Sequence[str] | None = None
    ) -> list[Document]:
        """The notes with these ids and the notes of these documents, in document order."""
        if not note_ids and not document_ids:
            raise InputError("load_data needs note_ids or document_ids")
        with borrow(self._connection) as conn:
            notes = read_notes(
                conn, namespace=self._namespace, note_ids=note_ids or (), document_ids=document_ids or ()
            )
        return [note_document(note) for note in notes]


def nodes_to_spans(
    nodes: Iterable[BaseNode],
    *,
    family: str | None = None,
    family_key: str = "family",
    split: SplitConfig | None = None,
) -> list[Span]:
    """LlamaIndex nodes (Documents or chunks) as pgmem spans, each cut by pgmem's splitter.

    Each node is a pgmem document of its own, with the node id as document id (set
    ``id_`` on a Document to make re-adding it a no-op; LlamaIndex ids are random
    otherwise). A chunk's ``ref_doc_id`` and character range go into the metadata.
    Its family is ``family``, else ``metadata[family_key]``; a node with neither is an
    :class:`pgmem.InputError`.
    """
    if isinstance(nodes, BaseNode) or not isinstance(nodes, Iterable):
        raise InputError(f"nodes must be a list of LlamaIndex nodes, got {describe_value(nodes)}")
    split = split or SplitConfig()
    spans: list[Span] = []
    for index, node in enumerate(nodes):
        if not isinstance(node, BaseNode):
            raise InputError(f"nodes[{index}] must be a LlamaIndex node or Document, got {type(node).__name__}")
        metadata = dict(node.metadata)
        source = node.source_node
        if source is not None and source.node_id != node.node_id:
            metadata["ref_doc_id"] = source.node_id
        for key in ("start_char_idx", "end_char_idx"):
            if getattr(node, key, None) is not None:
                metadata[key] = getattr(node, key)
        spans += text_spans(
            f"nodes[{index}]",
            node.get_content(metadata_mode=MetadataMode.NONE),
            document_id=node.node_id,
            family=family if family is not None else node.metadata.get(family_key),
            metadata=metadata,
            split=split,
        )
    return spans


def ingest_nodes(
    conn: psycopg.Connection[Any],
    nodes: Iterable[BaseNode],
    *,
    namespace: str = "default",
    family: str | None = None,
    family_key: str = "family",
    split: SplitConfig | None = None,
    embedder: Embedder | str | None = None,
    enricher: Enricher | None = None,
    progress: Callable[[int], None] | None = None,
) -> IngestResult:
    """Write LlamaIndex nodes into ``namespace`` as notes (:func:`nodes_to_spans`, then
    :func:`pgmem.ingest`: one transaction, nothing written if a node is bad)."""
    check_namespace(namespace)
    spans = nodes_to_spans(nodes, family=family, family_key=family_key, split=split)
    return ingest(conn, spans, namespace=namespace, embedder=embedder, enricher=enricher, progress=progress)
