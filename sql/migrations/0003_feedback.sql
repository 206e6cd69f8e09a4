-- Migration 0003: feedback on packed notes and the per-family Beta reliability it
-- builds (the `beta` mode, DESIGN §3.6); rare-key lookups of ingest planned on the GIN
-- indexes. Frozen: never edit a shipped migration.

-- Namespace totals of the feedback, so stage one reads the base rate in O(1).
ALTER TABLE pgmem.namespaces
    ADD COLUMN feedback_helpful double precision NOT NULL DEFAULT 0,
    ADD COLUMN feedback_unhelpful double precision NOT NULL DEFAULT 0;

-- Packs logged from now on also keep what the beta mode read, per family.
ALTER TABLE pgmem.pack_log_families
    ADD COLUMN feedback_helpful double precision,
    ADD COLUMN feedback_unhelpful double precision,
    ADD COLUMN feedback_reliability double precision,
    ADD COLUMN feedback_z double precision;

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
        INSERT INTO pgmem.pack_log_families
        SELECT pack.namespace, pack.pack_id, f.*
        FROM pack, jsonb_to_recordset(p_pack -> 'families') AS f (
            family text, count integer, score_sum float8, mean_confidence float8,
            expected_sum float8, expected_variance float8, z float8, shrunk_z float8,
            corroboration float8, reliability float8, uncertainty float8, regularizer float8,
            variance_floor_dominated boolean, feedback_helpful float8, feedback_unhelpful float8,
            feedback_reliability float8, feedback_z float8)
    )
    SELECT pack_id FROM pack;
$$;

-- Every judgement ever given: which note of which family was (not) useful, how much
-- it weighs, and the pack it was judged in (if logged). Ids and labels only, no text.
CREATE TABLE pgmem.feedback (
    namespace text NOT NULL REFERENCES pgmem.namespaces (namespace),
    feedback_id bigint GENERATED ALWAYS AS IDENTITY,
    note_id uuid NOT NULL,
    family text NOT NULL,
    helpful boolean NOT NULL,
    weight double precision NOT NULL CHECK (weight > 0 AND weight <= 1000),
    pack_id uuid,
    given_by name NOT NULL DEFAULT session_user,
    given_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, feedback_id)
);
CREATE INDEX feedback_family ON pgmem.feedback (namespace, family);

-- Summed feedback weight per family: the Beta posterior's evidence. Kept by a trigger.
CREATE TABLE pgmem.family_reliability (
    namespace text NOT NULL REFERENCES pgmem.namespaces (namespace),
    family text NOT NULL,
    helpful double precision NOT NULL DEFAULT 0 CHECK (helpful >= 0),
    unhelpful double precision NOT NULL DEFAULT 0 CHECK (unhelpful >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, family)
);

CREATE FUNCTION pgmem.count_feedback_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem
    AS $$
BEGIN
    INSERT INTO pgmem.family_reliability AS r (namespace, family, helpful, unhelpful)
    SELECT namespace, family,
           coalesce(sum(weight) FILTER (WHERE helpful), 0),
           coalesce(sum(weight) FILTER (WHERE NOT helpful), 0)
    FROM new_feedback GROUP BY namespace, family
    ON CONFLICT (namespace, family) DO UPDATE
    SET helpful = r.helpful + excluded.helpful,
        unhelpful = r.unhelpful + excluded.unhelpful,
        updated_at = now();

    UPDATE pgmem.namespaces AS s
    SET feedback_helpful = s.feedback_helpful + d.helpful,
        feedback_unhelpful = s.feedback_unhelpful + d.unhelpful
    FROM (SELECT namespace,
                 coalesce(sum(weight) FILTER (WHERE helpful), 0) AS helpful,
                 coalesce(sum(weight) FILTER (WHERE NOT helpful), 0) AS unhelpful
          FROM new_feedback GROUP BY namespace) AS d
    WHERE s.namespace = d.namespace;
    RETURN NULL;
END;
$$;

CREATE TRIGGER feedback_count AFTER INSERT ON pgmem.feedback
    REFERENCING NEW TABLE AS new_feedback
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.count_feedback_v1();

-- Record feedback on notes of p_namespace in one statement. Every id must name a note
-- of the namespace (else SQLSTATE PM003 and nothing is written); a note may not be
-- both helpful and unhelpful in one call. Returns the updated families.
CREATE FUNCTION pgmem.feedback_v1(
    p_namespace text, p_helpful uuid[], p_unhelpful uuid[], p_weight double precision, p_pack_id uuid)
    RETURNS TABLE (family text, helpful double precision, unhelpful double precision)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_unknown uuid[];
    v_both uuid[];
BEGIN
    SELECT array_agg(DISTINCT h ORDER BY h) INTO v_both
    FROM unnest(p_helpful) AS h WHERE h = ANY (p_unhelpful);
    IF v_both IS NOT NULL THEN
        RAISE EXCEPTION 'note % is both helpful and unhelpful', v_both[1] USING ERRCODE = '22023';
    END IF;
    SELECT array_agg(DISTINCT i ORDER BY i) INTO v_unknown
    FROM unnest(coalesce(p_helpful, '{}') || coalesce(p_unhelpful, '{}')) AS i
    WHERE NOT EXISTS (SELECT 1 FROM pgmem.notes AS n WHERE n.namespace = p_namespace AND n.note_id = i);
    IF v_unknown IS NOT NULL THEN
        RAISE EXCEPTION '% note id(s) are not notes of namespace %: %',
            cardinality(v_unknown), p_namespace, array_to_string(v_unknown[1:5], ', ')
            USING ERRCODE = 'PM003';
    END IF;

    INSERT INTO pgmem.feedback (namespace, note_id, family, helpful, weight, pack_id)
    SELECT n.namespace, n.note_id, n.family, j.helpful, p_weight, p_pack_id
    FROM (SELECT DISTINCT i AS note_id, true AS helpful FROM unnest(p_helpful) AS i
          UNION ALL
          SELECT DISTINCT i, false FROM unnest(p_unhelpful) AS i) AS j
    JOIN pgmem.notes AS n ON n.namespace = p_namespace AND n.note_id = j.note_id
    ORDER BY n.note_id;

    RETURN QUERY
    SELECT r.family, r.helpful, r.unhelpful FROM pgmem.family_reliability AS r
    WHERE r.namespace = p_namespace
      AND r.family IN (SELECT n.family FROM pgmem.notes AS n
                       WHERE n.namespace = p_namespace
                         AND n.note_id = ANY (coalesce(p_helpful, '{}') || coalesce(p_unhelpful, '{}')))
    ORDER BY r.family;
END;
$$;

-- Start a namespace's learned reliability over (all families, or the given ones):
-- deletes their feedback and totals. Admin only, like forget.
CREATE FUNCTION pgmem.reset_feedback_v1(p_namespace text, p_families text[])
    RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem
    AS $$
DECLARE
    v_removed integer;
BEGIN
    DELETE FROM pgmem.feedback AS f
    WHERE f.namespace = p_namespace AND (p_families IS NULL OR f.family = ANY (p_families));
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    DELETE FROM pgmem.family_reliability AS r
    WHERE r.namespace = p_namespace AND (p_families IS NULL OR r.family = ANY (p_families));
    UPDATE pgmem.namespaces AS s
    SET feedback_helpful = coalesce(t.helpful, 0), feedback_unhelpful = coalesce(t.unhelpful, 0)
    FROM (SELECT sum(r.helpful) AS helpful, sum(r.unhelpful) AS unhelpful
          FROM pgmem.family_reliability AS r WHERE r.namespace = p_namespace) AS t
    WHERE s.namespace = p_namespace;
    RETURN v_removed;
END;
$$;

-- Up to p_limit notes of p_namespace holding each handle / entity text: enough for
-- ingest to tell a rare key (linked) from a common one. A key that comes from unnest()
-- cannot be estimated, and the planner then walks the primary key or the table with a
-- row-by-row filter (about 0.4 s per key at a million notes, so ingest slowed down as
-- the store grew); these settings leave it the GIN bitmap scans, whose cost is the
-- key's posting list (a few ms). No ORDER BY: a rare key's holders are all returned,
-- and which holders of a common key come back does not matter.
CREATE FUNCTION pgmem.handle_holders_v1(p_namespace text, p_keys text[], p_limit integer)
    RETURNS TABLE (key text, note_id uuid)
    LANGUAGE sql STABLE
    SET enable_seqscan = off
    SET enable_indexscan = off
    AS $$
    SELECT k.key, n.note_id
    FROM unnest(p_keys) AS k (key)
    CROSS JOIN LATERAL (
        SELECT m.note_id FROM pgmem.notes AS m
        WHERE m.namespace = p_namespace AND m.handles @> ARRAY[k.key]
        LIMIT p_limit
    ) AS n;
$$;

CREATE FUNCTION pgmem.entity_holders_v1(p_namespace text, p_keys text[], p_limit integer)
    RETURNS TABLE (key text, note_id uuid)
    LANGUAGE sql STABLE
    SET enable_seqscan = off
    SET enable_indexscan = off
    AS $$
    SELECT k.key, n.note_id
    FROM unnest(p_keys) AS k (key)
    CROSS JOIN LATERAL (
        SELECT m.note_id FROM pgmem.notes AS m
        WHERE m.namespace = p_namespace
          AND m.entities @> jsonb_build_array(jsonb_build_object('text', k.key))
        LIMIT p_limit
    ) AS n;
$$;

ALTER TABLE pgmem.feedback ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.family_reliability ENABLE ROW LEVEL SECURITY;
CREATE POLICY namespace_isolation ON pgmem.feedback TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.family_reliability TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY admin_all ON pgmem.feedback TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.family_reliability TO pgmem_admin USING (true);

-- Readers read the learned reliability (stage one joins it); writers give feedback.
REVOKE ALL ON FUNCTION pgmem.count_feedback_v1, pgmem.feedback_v1, pgmem.reset_feedback_v1,
    pgmem.handle_holders_v1, pgmem.entity_holders_v1 FROM PUBLIC;
GRANT SELECT ON pgmem.feedback, pgmem.family_reliability TO pgmem_reader;
GRANT INSERT ON pgmem.feedback TO pgmem_writer;
GRANT EXECUTE ON FUNCTION pgmem.feedback_v1, pgmem.handle_holders_v1, pgmem.entity_holders_v1 TO pgmem_writer;
GRANT EXECUTE ON FUNCTION pgmem.reset_feedback_v1 TO pgmem_admin;
