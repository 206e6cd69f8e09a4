-- Migration 0021: incremental ingest drops the foreign-key checks that can never fail
-- (issue 12). Frozen: never edit a shipped migration.
--
-- A foreign key is checked row by row, by a query per inserted row. Measured on a 60k-note
-- store (docs/performance.md, "Incremental ingest, profiled"), these three cost about a
-- quarter of ingest's server time outside the HNSW insert, and none of them can fail:
--
-- * pgmem.lexeme_postings (namespace) -> pgmem.namespaces: checked once per posting,
--   about 17 per note. Postings are written only by the owner-rights trigger
--   notes_post_new, from notes just inserted (whose namespace notes_namespace_model has
--   checked), and deleted with their notes (notes_unpost_deleted); no role holds INSERT or
--   UPDATE on the table. The namespace row cannot go while its notes exist.
-- * pgmem.notes (namespace) -> pgmem.namespaces and pgmem.notes (model_id) ->
--   pgmem.embedding_models: implied by notes_namespace_model, (namespace, model_id) ->
--   pgmem.namespaces (namespace, model_id), whose model_id references
--   pgmem.embedding_models (namespaces_model_id_fkey). The same rows are refused, and
--   the same deletes of referenced rows.
--
-- Nothing written changes: the same notes, postings and statistics.

ALTER TABLE pgmem.lexeme_postings DROP CONSTRAINT lexeme_postings_namespace_fkey;
ALTER TABLE pgmem.notes DROP CONSTRAINT notes_namespace_fkey, DROP CONSTRAINT notes_model_id_fkey;
