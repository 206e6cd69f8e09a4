-- Distribute pgmem's tables over a Citus cluster by namespace (docs/citus.md).
--
-- Run on the coordinator, once, after `pgmem migrate` installed the schema there (with
-- the citus and vector extensions created first, so Citus propagates the schema, types
-- and functions to the workers). Every table of one namespace lands in one colocation
-- group: all rows of a namespace, in every table, live on the same worker, so a pack,
-- an ingest or an erasure of one namespace is a single-node (router) transaction.
--
-- pgmem's bookkeeping triggers (BM25 statistics, supersede, erasure) are statement-level
-- with transition tables; Citus creates triggers on distributed tables only with
-- citus.enable_unsafe_triggers (see docs/citus.md for what that means and what was not
-- verified).
SET citus.enable_unsafe_triggers TO on;

BEGIN;

-- Global: the embedding models every namespace is bound to, replicated to every node.
SELECT create_reference_table('pgmem.embedding_models');

-- The anchor of the colocation group: one row per namespace.
SELECT create_distributed_table('pgmem.namespaces', 'namespace');

-- Everything else of a namespace goes where its namespace row is. Referenced tables
-- before the tables whose foreign keys point at them.
SELECT create_distributed_table('pgmem.notes', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.lexeme_stats', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.lexeme_postings', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.link_keys', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.feedback', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.family_reliability', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.supersede_audit', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.pack_log', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.pack_log_families', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.pack_log_items', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.pack_log_rejections', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.namespace_grants', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.forget_audit', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.compaction_log', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.family_writers', 'namespace', colocate_with => 'pgmem.namespaces');
SELECT create_distributed_table('pgmem.family_stats', 'namespace', colocate_with => 'pgmem.namespaces');

-- Calls of the form SELECT f(namespace, ...) run whole on the namespace's worker (one
-- round trip from the coordinator) instead of statement by statement.
SELECT create_distributed_function('pgmem.forget_v1(text, text, text[], text)', 'p_namespace',
                                   colocate_with => 'pgmem.namespaces');
SELECT create_distributed_function('pgmem.feedback_v1(text, uuid[], uuid[], double precision, uuid)', 'p_namespace',
                                   colocate_with => 'pgmem.namespaces');
SELECT create_distributed_function('pgmem.reset_feedback_v1(text, text[])', 'p_namespace',
                                   colocate_with => 'pgmem.namespaces');
SELECT create_distributed_function('pgmem.recount_namespace_v1(text)', 'p_namespace',
                                   colocate_with => 'pgmem.namespaces');
-- The pack's one statement (since migration 0022): SELECT s.* FROM stage_one_pool_v1(...).
SELECT create_distributed_function(
    'pgmem.stage_one_pool_v1(text, text, vector, text, integer, integer, integer, integer, bigint, double precision,'
    ' double precision, double precision, double precision, text[], double precision, timestamptz, timestamptz,'
    ' double precision, text[], double precision, text[], double precision, double precision, text[], jsonb,'
    ' integer, integer)',
    'p_namespace', colocate_with => 'pgmem.namespaces');

COMMIT;
