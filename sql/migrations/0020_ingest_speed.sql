-- Migration 0020: incremental ingest drops the foreign-key checks that can never fail,
-- and its link lookups no longer read GIN pending lists (issue 12). Frozen: never edit a
-- shipped migration.
--
-- A foreign key is checked row by row, by a query per inserted row. Measured on a 60k-note
-- store (docs/performance.md, "Incremental ingest, profiled"), these three cost about a
-- quarter of ingest's server time outside the HNSW insert, and none of them can fail:
--
-- * pgmem.lexeme_postings (namespace) -> pgmem.namespaces: checked once per posting,
--   about 13 per note. Postings are written only by the owner-rights trigger
--   notes_post_new, from notes just inserted (whose namespace notes_namespace_model has
--   checked), and deleted with their notes (notes_unpost_deleted); no role holds INSERT or
--   UPDATE on the table. The namespace row cannot go while its notes exist.
-- * pgmem.notes (namespace) -> pgmem.namespaces and pgmem.notes (model_id) ->
--   pgmem.embedding_models: implied by notes_namespace_model, (namespace, model_id) ->
--   pgmem.namespaces (namespace, model_id), whose model_id references
--   pgmem.embedding_models (namespaces_model_id_fkey). The same rows are refused, and
--   the same deletes of referenced rows.
--
-- The GIN indexes that ingest's link lookups read (pgmem.handle_holders_v1,
-- pgmem.entity_holders_v1: one lookup per distinct handle or entity of the batch, about
-- 1,500 per 1,000 notes) no longer keep a pending list (fastupdate off). With it, new
-- entries were appended to an unsorted list that every lookup reads whole until VACUUM or
-- the list's 4 MB limit (gin_pending_list_limit) merges it: after each batch every lookup
-- of the next read one more batch's entries, so the lookups cost more with every batch
-- (measured 0.03, 0.18, 0.41 ms per note over three batches into a 10k store). A note
-- adds about two entries to them (its entities and handles), written into the index
-- directly. The entries pending now are merged here.
--
-- Nothing written changes: the same notes, links, postings and statistics.

ALTER TABLE pgmem.lexeme_postings DROP CONSTRAINT lexeme_postings_namespace_fkey;
ALTER TABLE pgmem.notes DROP CONSTRAINT notes_namespace_fkey, DROP CONSTRAINT notes_model_id_fkey;

ALTER INDEX pgmem.notes_handles_gin SET (fastupdate = off);
ALTER INDEX pgmem.notes_entities_gin SET (fastupdate = off);
SELECT gin_clean_pending_list('pgmem.notes_handles_gin'), gin_clean_pending_list('pgmem.notes_entities_gin');
