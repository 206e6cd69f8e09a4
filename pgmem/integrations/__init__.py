"""Adapters to the frameworks agents already use; each needs its optional extra.

* :mod:`pgmem.integrations.langchain` (``pip install 'pgmem[langchain]'``): a LangChain
  retriever over :func:`pgmem.pack` and a writer of LangChain documents.
* :mod:`pgmem.integrations.llamaindex` (``pip install 'pgmem[llamaindex]'``): a
  LlamaIndex retriever, a reader of notes as documents and a writer of nodes.
* :mod:`pgmem.integrations.mcp` (``pip install 'pgmem[mcp]'``): the ``pgmem mcp``
  server (tools remember, pack, recall, forget, feedback over stdio or HTTP).

Nothing here is imported by ``import pgmem``: a framework is loaded only when its
module is. See docs/integrations/.
"""
