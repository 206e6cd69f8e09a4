-- Migration 0004: security and integrity, second pass (issue 9). Frozen: never edit a
-- shipped migration.
--
-- * Diagnostic views run with the caller's rights (row-level security applies).
-- * Namespace grants are kept by role OID: a role created later under a dropped
--   role's name inherits nothing.
-- * Forget is total: the delete trigger also removes the erased notes' feedback (and
--   recounts what was learned from it), the logged packs that packed or rejected them,
--   and lexeme statistics that dropped to zero.
-- * Writers write shared state only through checked paths: feedback through
--   column privileges and a policy that checks the note, namespaces without their
--   statistics, embedding models not at all (admins register them).
-- * Every owner-rights function searches pg_temp last.

-- Grants by role OID -----------------------------------------------------------------

ALTER TABLE pgmem.namespace_grants ADD COLUMN role_oid oid;
UPDATE pgmem.namespace_grants AS g SET role_oid = r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname = g.role_name;
-- Grants of roles that no longer exist were the hole itself: they go.
DELETE FROM pgmem.namespace_grants WHERE role_oid IS NULL;

DROP POLICY own_grants ON pgmem.namespace_grants;

-- True when the current user may read and write namespace p_namespace: an admin, a
-- superuser, or a member of a role granted that namespace. Grants name a role by OID;
-- the join to pg_roles skips grants whose role was dropped.
CREATE OR REPLACE FUNCTION pgmem.may_use_namespace_v1(p_namespace text) RETURNS boolean
    LANGUAGE sql STABLE
    RETURN p_namespace IS NOT NULL AND (
        pg_has_role(current_user, 'pgmem_admin', 'MEMBER')
        OR EXISTS (SELECT 1 FROM pgmem.namespace_grants AS g
                   JOIN pg_catalog.pg_roles AS r ON r.oid = g.role_oid
                   WHERE g.namespace = p_namespace
                     AND pg_has_role(current_user, r.oid, 'MEMBER')));

-- Grant role p_role the namespace p_namespace (admin). An unknown role is an error.
CREATE OR REPLACE FUNCTION pgmem.grant_namespace_v1(p_role name, p_namespace text) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    v_oid oid;
BEGIN
    SELECT r.oid INTO v_oid FROM pg_catalog.pg_roles AS r WHERE r.rolname = p_role;
    IF v_oid IS NULL THEN
        RAISE EXCEPTION 'grant_namespace: role % does not exist', p_role USING ERRCODE = '22023';
    END IF;
    INSERT INTO pgmem.namespace_grants (role_oid, namespace) VALUES (v_oid, p_namespace)
    ON CONFLICT DO NOTHING;
END;
$$;

-- Take namespace p_namespace back from role p_role (admin).
CREATE OR REPLACE FUNCTION pgmem.revoke_namespace_v1(p_role name, p_namespace text) RETURNS void
    LANGUAGE sql
    BEGIN ATOMIC
        DELETE FROM pgmem.namespace_grants AS g
        WHERE g.namespace = p_namespace
          AND g.role_oid = (SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname = p_role);
    END;

ALTER TABLE pgmem.namespace_grants DROP CONSTRAINT namespace_grants_pkey;
ALTER TABLE pgmem.namespace_grants DROP COLUMN role_name;
ALTER TABLE pgmem.namespace_grants ALTER COLUMN role_oid SET NOT NULL;
ALTER TABLE pgmem.namespace_grants ADD PRIMARY KEY (namespace, role_oid);

-- A role sees only the grants of roles it is a member of (no namespace names leak).
CREATE POLICY own_grants ON pgmem.namespace_grants TO pgmem_reader, pgmem_writer
    USING (EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r
                   WHERE r.oid = role_oid AND pg_has_role(current_user, r.oid, 'MEMBER')));

-- Grants by role name, for people: dropped roles do not appear.
CREATE VIEW pgmem.namespace_grants_v1 WITH (security_invoker = true) AS
SELECT g.namespace, r.rolname AS role_name, g.role_oid, g.granted_at
FROM pgmem.namespace_grants AS g
JOIN pg_catalog.pg_roles AS r ON r.oid = g.role_oid;

-- Delete the grants of dropped roles (admin; hygiene: they grant nothing already).
CREATE FUNCTION pgmem.prune_grants_v1() RETURNS integer
    LANGUAGE sql
    BEGIN ATOMIC
        WITH gone AS (
            DELETE FROM pgmem.namespace_grants AS g
            WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.oid = g.role_oid)
            RETURNING 1
        )
        SELECT count(*)::integer FROM gone;
    END;

-- Views under the caller's rights ------------------------------------------------------

ALTER VIEW pgmem.pack_degraded_rate_v1 SET (security_invoker = true);
ALTER VIEW pgmem.pack_variance_floor_rate_v1 SET (security_invoker = true);
ALTER VIEW pgmem.pack_entropy_distribution_v1 SET (security_invoker = true);
ALTER VIEW pgmem.family_regularizer_stats_v1 SET (security_invoker = true);
ALTER VIEW pgmem.store_families_v1 SET (security_invoker = true);

-- Statistics nobody but pgmem writes -----------------------------------------------------

ALTER TABLE pgmem.namespaces
    ADD CONSTRAINT namespaces_statistics_check
    CHECK (note_count >= 0 AND lexeme_total >= 0 AND feedback_helpful >= 0 AND feedback_unhelpful >= 0);

-- Writers bind a namespace to a model; its statistics start at zero and are kept by
-- the triggers (owner rights) alone.
REVOKE INSERT ON pgmem.namespaces FROM pgmem_writer;
GRANT INSERT (namespace, model_id) ON pgmem.namespaces TO pgmem_writer;

-- Recompute a namespace's statistics from its notes and feedback (admin): the repair
-- for statistics that went wrong however they did.
CREATE FUNCTION pgmem.recount_namespace_v1(p_namespace text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
BEGIN
    PERFORM 1 FROM pgmem.namespaces WHERE namespace = p_namespace FOR UPDATE;
    DELETE FROM pgmem.lexeme_stats WHERE namespace = p_namespace;
    INSERT INTO pgmem.lexeme_stats (namespace, lexeme, document_frequency)
    SELECT p_namespace, u.lexeme, count(*)
    FROM pgmem.notes AS n, unnest(n.lexemes) AS u
    WHERE n.namespace = p_namespace
    GROUP BY u.lexeme;

    DELETE FROM pgmem.family_reliability WHERE namespace = p_namespace;
    INSERT INTO pgmem.family_reliability (namespace, family, helpful, unhelpful)
    SELECT p_namespace, f.family,
           coalesce(sum(f.weight) FILTER (WHERE f.helpful), 0),
           coalesce(sum(f.weight) FILTER (WHERE NOT f.helpful), 0)
    FROM pgmem.feedback AS f WHERE f.namespace = p_namespace
    GROUP BY f.family;

    UPDATE pgmem.namespaces AS s
    SET note_count = c.notes, lexeme_total = c.lexemes,
        feedback_helpful = r.helpful, feedback_unhelpful = r.unhelpful
    FROM (SELECT count(*) AS notes, coalesce(sum(lexeme_count), 0) AS lexemes
          FROM pgmem.notes WHERE namespace = p_namespace) AS c,
         (SELECT coalesce(sum(helpful), 0) AS helpful, coalesce(sum(unhelpful), 0) AS unhelpful
          FROM pgmem.family_reliability WHERE namespace = p_namespace) AS r
    WHERE s.namespace = p_namespace;
END;
$$;

-- Embedding models: registered by admins only -------------------------------------------

-- Every registered model gets an HNSW index on the shared notes table, so registering
-- one is an administrative act, not something any writer may do at will.
REVOKE INSERT ON pgmem.embedding_models FROM pgmem_writer;
REVOKE EXECUTE ON FUNCTION pgmem.ensure_model_index_v1 FROM pgmem_writer;
GRANT INSERT ON pgmem.embedding_models TO pgmem_admin;
GRANT EXECUTE ON FUNCTION pgmem.ensure_model_index_v1 TO pgmem_admin;

-- Register embedding model p_model of p_dimension dimensions and build its HNSW index
-- (admin or owner). Returns its id; registering a registered model is a no-op.
CREATE FUNCTION pgmem.register_model_v1(p_model text, p_dimension integer) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    v_model_id integer;
BEGIN
    SELECT model_id INTO v_model_id FROM pgmem.embedding_models WHERE name = p_model AND dimension = p_dimension;
    IF NOT has_table_privilege(current_user, 'pgmem.embedding_models', 'INSERT') THEN
        IF v_model_id IS NULL THEN
            RAISE EXCEPTION 'embedding model % (% dimensions) is not registered in this database', p_model, p_dimension
                USING ERRCODE = 'PM004',
                      HINT = 'An admin (pgmem_admin) registers it once: pgmem.register_model(conn, embedder).';
        END IF;
        RETURN v_model_id;
    END IF;
    INSERT INTO pgmem.embedding_models (name, dimension) VALUES (p_model, p_dimension)
    ON CONFLICT (name, dimension) DO NOTHING;
    SELECT model_id INTO STRICT v_model_id
    FROM pgmem.embedding_models WHERE name = p_model AND dimension = p_dimension;
    PERFORM pgmem.ensure_model_index_v1(v_model_id);
    RETURN v_model_id;
END;
$$;

-- Bind a namespace to an embedding model, registering the model first if the caller
-- may (admins, the owner); raises PM002 if the namespace already uses another model or
-- dimension, PM004 if a writer names a model no admin registered.
CREATE OR REPLACE FUNCTION pgmem.register_namespace_v1(p_namespace text, p_model text, p_dimension integer)
    RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    v_model_id integer;
    v_bound record;
BEGIN
    SELECT m.model_id, m.name, m.dimension INTO v_bound
    FROM pgmem.namespaces AS n JOIN pgmem.embedding_models AS m USING (model_id)
    WHERE n.namespace = p_namespace;
    IF FOUND THEN
        IF v_bound.name <> p_model OR v_bound.dimension <> p_dimension THEN
            RAISE EXCEPTION 'namespace % was written with embedding model % (% dimensions), not % (% dimensions)',
                p_namespace, v_bound.name, v_bound.dimension, p_model, p_dimension
                USING ERRCODE = 'PM002';
        END IF;
        RETURN v_bound.model_id;
    END IF;

    SELECT model_id INTO v_model_id FROM pgmem.embedding_models WHERE name = p_model AND dimension = p_dimension;
    IF v_model_id IS NULL THEN
        v_model_id := pgmem.register_model_v1(p_model, p_dimension);
    END IF;

    INSERT INTO pgmem.namespaces (namespace, model_id) VALUES (p_namespace, v_model_id)
    ON CONFLICT (namespace) DO NOTHING;
    -- A concurrent session may have bound the namespace first: check what won.
    RETURN pgmem.register_namespace_v1(p_namespace, p_model, p_dimension);
END;
$$;

-- Feedback: only about notes that exist, under their own family, signed by the session ---

-- given_by and given_at come from their defaults (session_user, now()): no writer may
-- sign a judgement with someone else's name or date it.
REVOKE INSERT ON pgmem.feedback FROM pgmem_writer;
GRANT INSERT (namespace, note_id, family, helpful, weight, pack_id) ON pgmem.feedback TO pgmem_writer;

-- Checked as the writer (so row-level security on notes and pack_log applies): the note
-- is one the writer can see, the family is the note's, a pack id names a logged pack.
CREATE POLICY feedback_names_a_note ON pgmem.feedback AS RESTRICTIVE FOR INSERT
    TO pgmem_reader, pgmem_writer
    WITH CHECK (
        EXISTS (SELECT 1 FROM pgmem.notes AS n
                WHERE n.namespace = feedback.namespace AND n.note_id = feedback.note_id
                  AND n.family = feedback.family)
        AND (pack_id IS NULL OR EXISTS (SELECT 1 FROM pgmem.pack_log AS l
                                        WHERE l.namespace = feedback.namespace AND l.pack_id = feedback.pack_id)));

-- Forget is total ---------------------------------------------------------------------------

ALTER TABLE pgmem.forget_audit ADD COLUMN feedback_removed integer NOT NULL DEFAULT 0;
ALTER TABLE pgmem.forget_audit ADD COLUMN packs_removed integer NOT NULL DEFAULT 0;

-- After notes are deleted (forget, supersede): every row derived from them goes or is
-- recounted. Lexeme statistics lose the notes' lexemes (rows at zero are deleted, so no
-- word of the erased text stays readable); feedback on the notes is deleted and the
-- families' learned reliability recounted from what remains; logged packs that packed
-- or rejected a deleted note are deleted with their family rows (their question may
-- be about the erased text). The counts go to pgmem.forget_erasure for forget_v1.
CREATE OR REPLACE FUNCTION pgmem.count_forgotten_notes_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
DECLARE
    v_feedback integer;
    v_packs integer;
BEGIN
    UPDATE pgmem.lexeme_stats AS s
    SET document_frequency = s.document_frequency - d.notes
    FROM (SELECT o.namespace, u.lexeme, count(*) AS notes
          FROM old_notes AS o, unnest(o.lexemes) AS u
          GROUP BY o.namespace, u.lexeme) AS d
    WHERE s.namespace = d.namespace AND s.lexeme = d.lexeme;
    -- A second statement: one statement cannot delete the rows it just updated.
    DELETE FROM pgmem.lexeme_stats AS s
    WHERE s.document_frequency <= 0
      AND (s.namespace, s.lexeme) IN (SELECT o.namespace, u.lexeme FROM old_notes AS o, unnest(o.lexemes) AS u);

    UPDATE pgmem.namespaces AS s
    SET note_count = s.note_count - d.notes, lexeme_total = s.lexeme_total - d.lexemes
    FROM (SELECT namespace, count(*) AS notes, sum(lexeme_count) AS lexemes
          FROM old_notes GROUP BY namespace) AS d
    WHERE s.namespace = d.namespace;

    -- Feedback on the deleted notes, and the families' totals recounted from the rest
    -- (summing what remains, not subtracting: no floating-point residue below zero).
    WITH removed AS (
        DELETE FROM pgmem.feedback AS f
        USING old_notes AS o
        WHERE f.namespace = o.namespace AND f.note_id = o.note_id
        RETURNING f.namespace, f.family
    ), touched AS (
        SELECT DISTINCT namespace, family FROM removed
    ), recounted AS (
        UPDATE pgmem.family_reliability AS r
        SET helpful = coalesce((SELECT sum(f.weight) FROM pgmem.feedback AS f
                                WHERE f.namespace = r.namespace AND f.family = r.family AND f.helpful
                                  AND NOT EXISTS (SELECT 1 FROM old_notes AS o
                                                  WHERE o.namespace = f.namespace AND o.note_id = f.note_id)), 0),
            unhelpful = coalesce((SELECT sum(f.weight) FROM pgmem.feedback AS f
                                  WHERE f.namespace = r.namespace AND f.family = r.family AND NOT f.helpful
                                    AND NOT EXISTS (SELECT 1 FROM old_notes AS o
                                                    WHERE o.namespace = f.namespace AND o.note_id = f.note_id)), 0),
            updated_at = now()
        FROM touched AS t
        WHERE r.namespace = t.namespace AND r.family = t.family
        RETURNING r.namespace
    )
    SELECT count(*) INTO v_feedback FROM removed;
    DELETE FROM pgmem.family_reliability AS r
    WHERE r.helpful = 0 AND r.unhelpful = 0
      AND r.namespace IN (SELECT DISTINCT namespace FROM old_notes);
    UPDATE pgmem.namespaces AS s
    SET feedback_helpful = t.helpful, feedback_unhelpful = t.unhelpful
    FROM (SELECT d.namespace, coalesce(sum(r.helpful), 0) AS helpful, coalesce(sum(r.unhelpful), 0) AS unhelpful
          FROM (SELECT DISTINCT namespace FROM old_notes) AS d
          LEFT JOIN pgmem.family_reliability AS r ON r.namespace = d.namespace
          GROUP BY d.namespace) AS t
    WHERE s.namespace = t.namespace;

    -- Logged packs that packed or rejected a deleted note.
    WITH doomed AS (
        SELECT l.namespace, l.pack_id
        FROM pgmem.pack_log AS l
        WHERE l.namespace IN (SELECT DISTINCT namespace FROM old_notes)
          AND (EXISTS (SELECT 1 FROM old_notes AS o
                       WHERE o.namespace = l.namespace AND o.note_id = ANY (l.note_ids))
               OR EXISTS (SELECT 1 FROM jsonb_array_elements(l.rejections) AS j (rejection)
                          JOIN old_notes AS o ON o.namespace = l.namespace
                          WHERE o.note_id::text IN (j.rejection ->> 'note_id', j.rejection ->> 'overlaps_note_id')))
    ), families AS (
        DELETE FROM pgmem.pack_log_families AS f USING doomed AS d
        WHERE f.namespace = d.namespace AND f.pack_id = d.pack_id
    ), packs AS (
        DELETE FROM pgmem.pack_log AS l USING doomed AS d
        WHERE l.namespace = d.namespace AND l.pack_id = d.pack_id
        RETURNING 1
    )
    SELECT count(*) INTO v_packs FROM packs;

    PERFORM set_config('pgmem.forget_feedback_removed',
                       (coalesce(nullif(current_setting('pgmem.forget_feedback_removed', true), ''), '0')::integer
                        + v_feedback)::text, true);
    PERFORM set_config('pgmem.forget_packs_removed',
                       (coalesce(nullif(current_setting('pgmem.forget_packs_removed', true), ''), '0')::integer
                        + v_packs)::text, true);
    RETURN NULL;
END;
$$;

-- Forgets run before this migration left derived rows behind: clear them now, so
-- forget is total for every erasure ever made.
DELETE FROM pgmem.lexeme_stats WHERE document_frequency <= 0;
DELETE FROM pgmem.feedback AS f
WHERE NOT EXISTS (SELECT 1 FROM pgmem.notes AS n WHERE n.namespace = f.namespace AND n.note_id = f.note_id);
WITH orphaned AS (
    SELECT l.namespace, l.pack_id
    FROM pgmem.pack_log AS l
    WHERE EXISTS (SELECT 1 FROM unnest(l.note_ids) AS i (note_id)
                  WHERE NOT EXISTS (SELECT 1 FROM pgmem.notes AS n
                                    WHERE n.namespace = l.namespace AND n.note_id = i.note_id))
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(l.rejections) AS j (rejection)
                  CROSS JOIN LATERAL (VALUES (j.rejection ->> 'note_id'), (j.rejection ->> 'overlaps_note_id'))
                      AS r (note_id)
                  WHERE r.note_id IS NOT NULL
                    AND NOT EXISTS (SELECT 1 FROM pgmem.notes AS n
                                    WHERE n.namespace = l.namespace AND n.note_id::text = r.note_id))
), families AS (
    DELETE FROM pgmem.pack_log_families AS f USING orphaned AS o
    WHERE f.namespace = o.namespace AND f.pack_id = o.pack_id
)
DELETE FROM pgmem.pack_log AS l USING orphaned AS o
WHERE l.namespace = o.namespace AND l.pack_id = o.pack_id;
-- What was learned from the deleted feedback goes with it (totals summed anew).
DELETE FROM pgmem.family_reliability;
INSERT INTO pgmem.family_reliability (namespace, family, helpful, unhelpful)
SELECT namespace, family,
       coalesce(sum(weight) FILTER (WHERE helpful), 0), coalesce(sum(weight) FILTER (WHERE NOT helpful), 0)
FROM pgmem.feedback GROUP BY namespace, family;
UPDATE pgmem.namespaces AS s
SET feedback_helpful = t.helpful, feedback_unhelpful = t.unhelpful
FROM (SELECT n.namespace, coalesce(sum(r.helpful), 0) AS helpful, coalesce(sum(r.unhelpful), 0) AS unhelpful
      FROM pgmem.namespaces AS n LEFT JOIN pgmem.family_reliability AS r USING (namespace)
      GROUP BY n.namespace) AS t
WHERE s.namespace = t.namespace;

-- Erasure: the one way notes leave the store. Deletes the notes (content and all),
-- which deletes or recounts every row derived from them (count_forgotten_notes_v1),
-- and records who, when, what (ids, no content), why and how much went with them.
CREATE OR REPLACE FUNCTION pgmem.forget_v1(p_namespace text, p_scope text, p_selector text[], p_reason text)
    RETURNS TABLE (audit_id bigint, notes_removed integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
DECLARE
    v_ids uuid[];
    v_audit bigint;
BEGIN
    IF p_scope NOT IN ('notes', 'document', 'family') THEN
        RAISE EXCEPTION 'forget: scope must be notes, document or family, got %', p_scope
            USING ERRCODE = '22023';
    END IF;
    IF coalesce(cardinality(p_selector), 0) = 0 THEN
        RAISE EXCEPTION 'forget: the selector must name at least one %', p_scope USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'forget: a reason is required' USING ERRCODE = '22023';
    END IF;

    PERFORM set_config('pgmem.forget_feedback_removed', '0', true);
    PERFORM set_config('pgmem.forget_packs_removed', '0', true);
    PERFORM set_config('pgmem.forget_in_progress', 'on', true);
    WITH gone AS (
        DELETE FROM pgmem.notes AS n
        WHERE n.namespace = p_namespace
          AND CASE p_scope
                  WHEN 'notes' THEN n.note_id = ANY (p_selector::uuid[])
                  WHEN 'document' THEN n.document_id = ANY (p_selector)
                  ELSE n.family = ANY (p_selector)
              END
        RETURNING n.note_id
    )
    SELECT coalesce(array_agg(note_id ORDER BY note_id), '{}') INTO v_ids FROM gone;
    PERFORM set_config('pgmem.forget_in_progress', 'off', true);

    INSERT INTO pgmem.forget_audit (namespace, scope, selector, reason, requested_by, notes_removed, note_ids,
                                    feedback_removed, packs_removed)
    VALUES (p_namespace, p_scope, p_selector, p_reason, session_user, cardinality(v_ids), v_ids,
            current_setting('pgmem.forget_feedback_removed')::integer,
            current_setting('pgmem.forget_packs_removed')::integer)
    RETURNING forget_audit.audit_id INTO v_audit;
    RETURN QUERY SELECT v_audit, cardinality(v_ids);
END;
$$;

-- Owner-rights functions search pg_temp last ------------------------------------------------

-- Unless it is named, pg_temp is searched first for tables: a caller could shadow a
-- table an owner-rights function reads with a temporary one of the same name.
ALTER FUNCTION pgmem.count_new_notes_v1() SET search_path = pg_catalog, pgmem, pg_temp;
ALTER FUNCTION pgmem.ensure_model_index_v1(integer) SET search_path = pg_catalog, pgmem, pg_temp;
ALTER FUNCTION pgmem.count_feedback_v1() SET search_path = pg_catalog, pgmem, pg_temp;
ALTER FUNCTION pgmem.reset_feedback_v1(text, text[]) SET search_path = pg_catalog, pgmem, pg_temp;

-- Filters: a date alone is UTC too ---------------------------------------------------------

-- The SQL expression turning a text value expression into a column's type. A date,
-- or a time without an offset, means UTC whatever the session's time zone (an offset
-- counts only after a time of day: the "-08" ending "2023-05-08" is the day).
CREATE OR REPLACE FUNCTION pgmem.filter_value_v1(expression text, value_type text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE value_type
        WHEN 'timestamptz' THEN format(
            'CASE WHEN %1$s ~ ''[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)$'''
            ' THEN (%1$s)::timestamptz ELSE (%1$s)::timestamp AT TIME ZONE ''UTC'' END', expression)
        WHEN 'real' THEN format('(%s)::real', expression)
        ELSE format('(%s)::text', expression)
    END;

-- The group roles of this database ---------------------------------------------------------

-- The name of this database's pgmem group role of kind p_kind (reader, writer, admin).
-- pgmem.migrate installs the roles under a prefix (default pgmem): databases of one
-- cluster that must not share administrators use different prefixes.
CREATE FUNCTION pgmem.group_role_v1(p_kind text) RETURNS name
    LANGUAGE sql IMMUTABLE
    RETURN CASE p_kind WHEN 'reader' THEN 'pgmem_reader'::name
                       WHEN 'writer' THEN 'pgmem_writer'::name
                       WHEN 'admin' THEN 'pgmem_admin'::name END;

-- Least privilege for what this migration added.
REVOKE ALL ON FUNCTION pgmem.prune_grants_v1, pgmem.recount_namespace_v1, pgmem.register_model_v1,
    pgmem.group_role_v1 FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgmem.group_role_v1 TO pgmem_reader;
GRANT SELECT ON pgmem.namespace_grants_v1 TO pgmem_reader;
GRANT EXECUTE ON FUNCTION pgmem.register_model_v1 TO pgmem_writer;
GRANT EXECUTE ON FUNCTION pgmem.prune_grants_v1, pgmem.recount_namespace_v1 TO pgmem_admin;
GRANT DELETE ON pgmem.namespace_grants TO pgmem_admin;
