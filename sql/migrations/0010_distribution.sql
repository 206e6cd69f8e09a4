-- Migration 0010: every key of a per-namespace table includes the namespace, so the
-- tables can be distributed by namespace (Citus; docs/citus.md). Frozen: never edit a
-- shipped migration.
--
-- * pgmem.forget_audit: primary key (namespace, audit_id) instead of (audit_id). Every
--   other unique key and foreign key already led with the namespace; the reference
--   (global) table is pgmem.embedding_models.

-- An erasure's audit row lives on its namespace's shard: keyed by namespace first.
ALTER TABLE pgmem.forget_audit DROP CONSTRAINT forget_audit_pkey;
ALTER TABLE pgmem.forget_audit ADD CONSTRAINT forget_audit_pkey PRIMARY KEY (namespace, audit_id);
