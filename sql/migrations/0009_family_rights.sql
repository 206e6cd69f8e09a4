-- Migration 0009: provenance you can trust (issue 13). Frozen: never edit a shipped
-- migration.
--
-- * Family write rights: an admin binds a family of a namespace to writer roles
--   (pgmem.family_writers, by role OID); a note under a bound family is refused by the
--   database (SQLSTATE PM006) unless the writer is a member of a bound role, an admin
--   or the schema owner. Superseding a note of a bound family needs the same right.
-- * Per-(namespace, family) statistics (pgmem.family_stats: notes, first seen), kept by
--   triggers, read by stage one for the family alarm.
-- * Logged packs record each family's alarm, its inputs and the quarantine; the view
--   pgmem.family_alarms_v1 lists the alarms.

-- Family write rights -------------------------------------------------------------------

-- Which roles may write notes under a family of a namespace. A family with no row is
-- open to every writer of the namespace; a family with rows only to members of those
-- roles (and admins). Roles are kept by OID: a role created later under a dropped
-- role's name inherits nothing, and a family whose only bound role was dropped stays
-- closed (to everyone but admins).
CREATE TABLE pgmem.family_writers (
    namespace text NOT NULL CHECK (namespace ~ '^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$'),
    family text NOT NULL CHECK (family <> ''),
    role_oid oid NOT NULL,
    bound_by name NOT NULL DEFAULT session_user,
    bound_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, family, role_oid)
);

-- True when the current user may write notes of family p_family into p_namespace: the
-- family is bound to no role, or the user is a member of a bound role (that still
-- exists), an admin, or a member of the schema owner. Runs as the caller, so a reader
-- or writer sees only the bindings of its session namespace (row-level security),
-- which is the only namespace it can insert notes into.
CREATE FUNCTION pgmem.may_write_family_v1(p_namespace text, p_family text) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pgmem, pg_temp
    RETURN pg_has_role(current_user, 'pgmem_admin', 'MEMBER')
        OR pg_has_role(current_user, (SELECT s.nspowner FROM pg_catalog.pg_namespace AS s WHERE s.nspname = 'pgmem'),
                       'MEMBER')
        OR NOT EXISTS (SELECT 1 FROM pgmem.family_writers AS w
                       WHERE w.namespace = p_namespace AND w.family = p_family)
        OR EXISTS (SELECT 1 FROM pgmem.family_writers AS w
                   JOIN pg_catalog.pg_roles AS r ON r.oid = w.role_oid
                   WHERE w.namespace = p_namespace AND w.family = p_family
                     AND pg_has_role(current_user, r.oid, 'MEMBER'));

-- Refuse a statement that inserts a note under a family its writer may not write
-- (PM006, naming the first such family and namespace). Runs as the caller (not owner
-- rights): the right is the inserting role's, and only the caller's role can tell.
-- Writers hold no ALTER on pgmem.notes, so they cannot disable it.
CREATE FUNCTION pgmem.check_family_writers_v1() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
DECLARE
    v_refused record;
BEGIN
    SELECT d.namespace, d.family INTO v_refused
    FROM (SELECT DISTINCT namespace, family FROM new_notes) AS d
    WHERE NOT pgmem.may_write_family_v1(d.namespace, d.family)
    ORDER BY d.namespace, d.family
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'family % of namespace % is bound to other writer roles: % may not write under it',
            quote_literal(v_refused.family), quote_literal(v_refused.namespace), quote_ident(current_user::text)
            USING ERRCODE = 'PM006',
                  HINT = 'An admin binds writers with pgmem.bind_family(conn, namespace=..., family=..., roles=[...]).';
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER notes_check_family_writers AFTER INSERT ON pgmem.notes
    REFERENCING NEW TABLE AS new_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.check_family_writers_v1();

-- Bind family p_family of p_namespace to the roles p_roles (admin). Binding adds to the
-- roles already bound; an unknown role is an error and nothing is bound. Returns how
-- many notes the family already holds: they were written before the binding and are
-- not vouched for by it.
CREATE FUNCTION pgmem.bind_family_v1(p_namespace text, p_family text, p_roles name[]) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
DECLARE
    v_missing name;
BEGIN
    IF coalesce(cardinality(p_roles), 0) = 0 THEN
        RAISE EXCEPTION 'bind_family: roles must name at least one role' USING ERRCODE = '22023';
    END IF;
    SELECT u.role INTO v_missing
    FROM unnest(p_roles) AS u (role)
    WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.rolname = u.role)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'bind_family: role % does not exist', quote_ident(v_missing) USING ERRCODE = '22023';
    END IF;
    INSERT INTO pgmem.family_writers (namespace, family, role_oid)
    SELECT p_namespace, p_family, r.oid
    FROM pg_catalog.pg_roles AS r
    WHERE r.rolname = ANY (p_roles)
    ORDER BY r.oid
    ON CONFLICT DO NOTHING;
    RETURN coalesce((SELECT s.note_count FROM pgmem.family_stats AS s
                     WHERE s.namespace = p_namespace AND s.family = p_family), 0);
END;
$$;

-- Take roles p_roles (NULL: every role) off family p_family of p_namespace (admin).
-- Returns how many bindings were removed; a family left with none is open again.
CREATE FUNCTION pgmem.unbind_family_v1(p_namespace text, p_family text, p_roles name[]) RETURNS integer
    LANGUAGE sql
    SET search_path = pg_catalog, pgmem, pg_temp
    BEGIN ATOMIC
        WITH gone AS (
            DELETE FROM pgmem.family_writers AS w
            WHERE w.namespace = p_namespace AND w.family = p_family
              AND (p_roles IS NULL
                   OR w.role_oid IN (SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname = ANY (p_roles)))
            RETURNING 1
        )
        SELECT count(*)::integer FROM gone;
    END;

-- Bindings by role name, for people (a dropped role shows as NULL: its family stays closed).
CREATE VIEW pgmem.family_writers_v1 WITH (security_invoker = true) AS
SELECT w.namespace, w.family, r.rolname AS role_name, w.role_oid, w.bound_by, w.bound_at
FROM pgmem.family_writers AS w
LEFT JOIN pg_catalog.pg_roles AS r ON r.oid = w.role_oid;

-- Readers and writers see the bindings of their session namespace (a writer must know
-- which families it may not write), admins all; only admins bind.
ALTER TABLE pgmem.family_writers ENABLE ROW LEVEL SECURITY;
CREATE POLICY namespace_isolation ON pgmem.family_writers TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY admin_all ON pgmem.family_writers TO pgmem_admin USING (true);

-- Superseding deletes the replaced note: an unbound writer must not erase a bound
-- family's notes by "replacing" them with its own. Checked as the caller.
CREATE POLICY supersede_family_right ON pgmem.supersede_audit AS RESTRICTIVE FOR INSERT TO PUBLIC
    WITH CHECK (
        pgmem.may_write_family_v1(namespace, (SELECT n.family FROM pgmem.notes AS n
                                              WHERE n.namespace = supersede_audit.namespace
                                                AND n.note_id = supersede_audit.old_note_id)));

-- Per-family statistics for the family alarm -------------------------------------------------

-- How many notes each family of a namespace holds and when it was first written; kept
-- by triggers (owner rights) only. A family forgotten to its last note loses its row,
-- so a family that reappears is new again.
CREATE TABLE pgmem.family_stats (
    namespace text NOT NULL,
    family text NOT NULL,
    note_count bigint NOT NULL CHECK (note_count >= 0),
    first_seen timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, family)
);

INSERT INTO pgmem.family_stats (namespace, family, note_count, first_seen)
SELECT namespace, family, count(*), min(created_at) FROM pgmem.notes GROUP BY namespace, family;

CREATE FUNCTION pgmem.count_family_notes_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- Sorted, so concurrent writers lock statistics rows in one order (no deadlock).
        INSERT INTO pgmem.family_stats AS s (namespace, family, note_count)
        SELECT namespace, family, count(*) FROM new_notes
        GROUP BY namespace, family ORDER BY namespace, family
        ON CONFLICT (namespace, family) DO UPDATE SET note_count = s.note_count + excluded.note_count;
    ELSE
        UPDATE pgmem.family_stats AS s
        SET note_count = s.note_count - d.notes
        FROM (SELECT namespace, family, count(*) AS notes FROM old_notes GROUP BY namespace, family) AS d
        WHERE s.namespace = d.namespace AND s.family = d.family;
        DELETE FROM pgmem.family_stats AS s
        WHERE s.note_count <= 0 AND (s.namespace, s.family) IN (SELECT namespace, family FROM old_notes);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER notes_count_families AFTER INSERT ON pgmem.notes
    REFERENCING NEW TABLE AS new_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.count_family_notes_v1();
CREATE TRIGGER notes_uncount_families AFTER DELETE ON pgmem.notes
    REFERENCING OLD TABLE AS old_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.count_family_notes_v1();

ALTER TABLE pgmem.family_stats ENABLE ROW LEVEL SECURITY;
CREATE POLICY namespace_isolation ON pgmem.family_stats TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY admin_all ON pgmem.family_stats TO pgmem_admin USING (true);

-- The alarm in logged packs ------------------------------------------------------------------

-- What the family alarm read and decided (NULL in packs logged before migration 0009).
ALTER TABLE pgmem.pack_log_families
    ADD COLUMN namespace_count bigint,
    ADD COLUMN pool_share double precision,
    ADD COLUMN namespace_share double precision,
    ADD COLUMN newness double precision,
    ADD COLUMN duplicate_density double precision,
    ADD COLUMN question_echo double precision,
    ADD COLUMN alarm_score double precision,
    ADD COLUMN alarm_threshold double precision,
    ADD COLUMN alarmed boolean,
    ADD COLUMN quarantined boolean;

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
            quarantined)
        SELECT pack.namespace, pack.pack_id, f.*
        FROM pack, jsonb_to_recordset(p_pack -> 'families') AS f (
            family text, count integer, score_sum float8, mean_confidence float8,
            expected_sum float8, expected_variance float8, z float8, shrunk_z float8,
            corroboration float8, reliability float8, uncertainty float8, regularizer float8,
            variance_floor_dominated boolean, feedback_helpful float8, feedback_unhelpful float8,
            feedback_reliability float8, feedback_z float8, namespace_count bigint, pool_share float8,
            namespace_share float8, newness float8, duplicate_density float8, question_echo float8,
            alarm_score float8, alarm_threshold float8, alarmed boolean, quarantined boolean)
    )
    SELECT pack_id FROM pack;
$$;

-- Every family alarm raised in a logged pack: which family, in which pack, how the score
-- was made up, and whether the family was quarantined.
CREATE VIEW pgmem.family_alarms_v1 WITH (security_invoker = true) AS
SELECT f.namespace, f.pack_id, l.created_at, l.mode, l.query, f.family, f.count, f.namespace_count,
       f.z, f.pool_share, f.namespace_share, f.newness, f.duplicate_density, f.question_echo,
       f.alarm_score, f.alarm_threshold, f.quarantined, f.regularizer
FROM pgmem.pack_log_families AS f
JOIN pgmem.pack_log AS l USING (namespace, pack_id)
WHERE f.alarmed;

-- Least privilege for what this migration added.
REVOKE ALL ON FUNCTION pgmem.may_write_family_v1, pgmem.check_family_writers_v1, pgmem.bind_family_v1,
    pgmem.unbind_family_v1, pgmem.count_family_notes_v1 FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgmem.may_write_family_v1, pgmem.check_family_writers_v1 TO pgmem_reader;
GRANT EXECUTE ON FUNCTION pgmem.bind_family_v1, pgmem.unbind_family_v1 TO pgmem_admin;
GRANT SELECT ON pgmem.family_writers, pgmem.family_writers_v1, pgmem.family_stats, pgmem.family_alarms_v1
    TO pgmem_reader;
GRANT INSERT, DELETE ON pgmem.family_writers TO pgmem_admin;
