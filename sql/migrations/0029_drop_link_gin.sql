-- Migration 0029: the GIN indexes on the notes' handles and entities go (issue 12).
-- Frozen: never edit a shipped migration.
--
-- Since migration 0028 ingest finds a rare key's holders in pgmem.link_keys, and no
-- pgmem statement reads pgmem.notes by handles or entities any more: no lookup, no
-- filter (the where grammar has neither column), no view. The two indexes were kept in
-- 0028 for a caller's own queries, yet every insert still paid for them (one GIN entry
-- per distinct handle and per entity, written at once: fastupdate off) and every bulk
-- load rebuilt them. Dropping them makes each ingested note and each bulk load cheaper
-- (docs/performance.md, "The notes' GIN indexes on handles and entities dropped").
-- A caller that searches notes by entity in its own SQL can create such an index again;
-- pgmem neither needs nor removes it (bulk_load drops and rebuilds every non-unique index
-- of pgmem.notes, a caller's own included).

DROP INDEX pgmem.notes_handles_gin;
DROP INDEX pgmem.notes_entities_gin;
