-- Migration 0024: logged packs say which families were newcomers (issue 13, spread
-- attacks). Frozen: never edit a shipped migration.
--
-- The calibrator holds the notes of newcomer families past the pool's best one
-- (CalibrationParams.newcomer_share; pgmem/retrieval/alarm.py newcomers()): families not
-- bound to writer roles, first written after the namespace's first load and recently,
-- with far fewer notes than the pool's established families. No table or function of
-- stage one changes.
--
-- * pgmem.pack_log_families gains newcomer (NULL in packs logged before this migration).
-- * pgmem.log_pack_v1 (and so log_pack_v2, which calls it), same signature and JSON
--   document: it also reads the families' "newcomer" key (NULL when a document does not
--   carry it).
-- * pgmem.family_alarms_v1 shows it, and lists newcomer families as well as alarmed ones;
--   a view's columns cannot be inserted by CREATE OR REPLACE, so it is dropped and
--   created again with its grant.

ALTER TABLE pgmem.pack_log_families
    ADD COLUMN newcomer boolean;

-- Persist one pack and its family diagnostics from a JSON document (one statement).
CREATE OR REPLACE FUNCTION pgmem.log_pack_v1(p_pack jsonb) RETURNS uuid
    LANGUAGE sql AS $$
    WITH pack AS (
        INSERT INTO pgmem.pack_log (namespace, pack_id, query, mode, embedding_model, degraded,
                                    degraded_reasons, pool_size, pool_mean, pool_variance, entropy,
                                    note_ids, parameters, hints, rejections, timings_ms)
        SELECT p_pack ->> 'namespace', (p_pack ->> 'pack_id')::uuid, p_pack ->> 'query',
               p_pack ->> 'mode', p_pack ->> 'embedding_model', (p_pack ->> 'degraded')::boolean,
               ARRAY(SELECT jsonb_array_elements_text(p_pack -> 'degraded_reasons')),
               (p_pack ->> 'pool_size')::integer, (p_pack ->> 'pool_mean')::float8,
               (p_pack ->> 'pool_variance')::float8, (p_pack ->> 'entropy')::float8,
               ARRAY(SELECT jsonb_array_elements_text(p_pack -> 'note_ids'))::uuid[],
               p_pack -> 'parameters', p_pack -> 'hints', p_pack -> 'rejections',
               p_pack -> 'timings_ms'
        RETURNING namespace, pack_id
    ), families AS (
        INSERT INTO pgmem.pack_log_families (
            namespace, pack_id, family, count, score_sum, mean_confidence, expected_sum, expected_variance,
            z, shrunk_z, corroboration, reliability, uncertainty, regularizer, variance_floor_dominated,
            feedback_helpful, feedback_unhelpful, feedback_reliability, feedback_z, namespace_count, pool_share,
            namespace_share, newness, duplicate_density, question_echo, alarm_score, alarm_threshold, alarmed,
            quarantined, collusion, colluding, burst_span, burst_lateness, bound, question_restatement, newcomer)
        SELECT pack.namespace, pack.pack_id, f.*
        FROM pack, jsonb_to_recordset(p_pack -> 'families') AS f (
            family text, count integer, score_sum float8, mean_confidence float8,
            expected_sum float8, expected_variance float8, z float8, shrunk_z float8,
            corroboration float8, reliability float8, uncertainty float8, regularizer float8,
            variance_floor_dominated boolean, feedback_helpful float8, feedback_unhelpful float8,
            feedback_reliability float8, feedback_z float8, namespace_count bigint, pool_share float8,
            namespace_share float8, newness float8, duplicate_density float8, question_echo float8,
            alarm_score float8, alarm_threshold float8, alarmed boolean, quarantined boolean,
            collusion float8, colluding boolean, burst_span float8, burst_lateness float8,
            bound boolean, question_restatement float8, newcomer boolean)
    )
    SELECT pack_id FROM pack;
$$;

DROP VIEW pgmem.family_alarms_v1;

-- Every family alarm raised in a logged pack, and every newcomer family: which family, in
-- which pack, how the score was made up (collusion and colluding NULL in packs logged
-- before migration 0015, the burst gate's burst_span, burst_lateness and bound before
-- 0017, question_restatement before 0021, newcomer before 0024), and whether the family
-- was quarantined.
CREATE VIEW pgmem.family_alarms_v1 WITH (security_invoker = true) AS
SELECT f.namespace, f.pack_id, l.created_at, l.mode, l.query, f.family, f.count, f.namespace_count,
       f.z, f.pool_share, f.namespace_share, f.newness, f.duplicate_density, f.question_echo,
       f.question_restatement, f.collusion, f.burst_span, f.burst_lateness, f.bound, f.alarm_score, f.alarm_threshold, f.colluding,
       f.quarantined, f.regularizer, f.alarmed, f.newcomer
FROM pgmem.pack_log_families AS f
JOIN pgmem.pack_log AS l USING (namespace, pack_id)
WHERE f.alarmed OR f.newcomer;

GRANT SELECT ON pgmem.family_alarms_v1 TO pgmem_reader;
