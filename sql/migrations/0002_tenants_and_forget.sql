-- Migration 0002: least-privilege roles, namespace isolation by row-level security,
-- and audited erasure (pgmem.forget_v1). Frozen: never edit a shipped migration.

-- Group roles (cluster-wide, NOLOGIN): grant them to your login roles.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgmem_reader') THEN
        CREATE ROLE pgmem_reader NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgmem_writer') THEN
        CREATE ROLE pgmem_writer NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgmem_admin') THEN
        CREATE ROLE pgmem_admin NOLOGIN;
    END IF;
END;
$$;

-- Which roles may use which namespace. The session setting pgmem.namespace picks one
-- namespace; row-level security shows its rows only if a role the session user is a
-- member of was granted that namespace, so SET pgmem.namespace cannot widen access.
CREATE TABLE pgmem.namespace_grants (
    role_name name NOT NULL,
    namespace text NOT NULL CHECK (namespace ~ '^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$'),
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, role_name)
);

-- A role sees only the grants of roles it is a member of (so no namespace names leak).
ALTER TABLE pgmem.namespace_grants ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_grants ON pgmem.namespace_grants TO pgmem_reader, pgmem_writer
    USING (pg_has_role(current_user, role_name, 'MEMBER'));
CREATE POLICY admin_all ON pgmem.namespace_grants TO pgmem_admin USING (true);

-- True when the current user may read and write namespace p_namespace: an admin, a
-- superuser, or a member of a role granted that namespace.
CREATE FUNCTION pgmem.may_use_namespace_v1(p_namespace text) RETURNS boolean
    LANGUAGE sql STABLE
    RETURN p_namespace IS NOT NULL AND (
        pg_has_role(current_user, 'pgmem_admin', 'MEMBER')
        OR EXISTS (SELECT 1 FROM pgmem.namespace_grants AS g
                   WHERE g.namespace = p_namespace
                     AND pg_has_role(current_user, g.role_name, 'MEMBER')));

-- The session's namespace, if the current user may use it (else NULL: no rows).
CREATE FUNCTION pgmem.session_namespace_v1() RETURNS text
    LANGUAGE sql STABLE
    RETURN CASE WHEN pgmem.may_use_namespace_v1(current_setting('pgmem.namespace', true))
                THEN current_setting('pgmem.namespace', true) END;

CREATE FUNCTION pgmem.grant_namespace_v1(p_role name, p_namespace text) RETURNS void
    LANGUAGE sql
    BEGIN ATOMIC
        INSERT INTO pgmem.namespace_grants (role_name, namespace) VALUES (p_role, p_namespace)
        ON CONFLICT DO NOTHING;
    END;

CREATE FUNCTION pgmem.revoke_namespace_v1(p_role name, p_namespace text) RETURNS void
    LANGUAGE sql
    BEGIN ATOMIC
        DELETE FROM pgmem.namespace_grants WHERE role_name = p_role AND namespace = p_namespace;
    END;

-- Row-level security on every table keyed by namespace. The schema owner (who ran the
-- migrations) and superusers are not subject to it; pgmem_admin sees everything.
ALTER TABLE pgmem.namespaces ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.lexeme_stats ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.notes ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.pack_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.pack_log_families ENABLE ROW LEVEL SECURITY;

CREATE POLICY namespace_isolation ON pgmem.namespaces TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.lexeme_stats TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.notes TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.pack_log TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.pack_log_families TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY admin_all ON pgmem.namespaces TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.lexeme_stats TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.notes TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.pack_log TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.pack_log_families TO pgmem_admin USING (true);

-- Statistics are maintained as the schema owner: writers insert notes, never touch
-- the statistics tables directly.
ALTER FUNCTION pgmem.count_new_notes_v1() SECURITY DEFINER SET search_path = pg_catalog, pgmem;

-- Binding a namespace runs as the caller (so row-level security decides which
-- namespaces a writer may create); only the HNSW index, DDL on a table the caller
-- does not own, is built by this owner-rights helper from the model registry alone.
CREATE FUNCTION pgmem.ensure_model_index_v1(p_model_id integer) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem
    AS $$
DECLARE
    v_model record;
    v_vector_schema name;
BEGIN
    SELECT model_id, dimension, index_type INTO STRICT v_model
    FROM pgmem.embedding_models WHERE model_id = p_model_id;
    -- The search path is pinned, so name pgvector's type and operator class by the
    -- schema the extension was installed in.
    SELECT e.extnamespace::regnamespace::name INTO STRICT v_vector_schema
    FROM pg_extension AS e WHERE e.extname = 'vector';
    -- Two sessions registering the same new model must not race on CREATE INDEX.
    PERFORM pg_advisory_xact_lock(hashtext('pgmem.embedding_model'), v_model.model_id);
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON pgmem.notes USING hnsw ((embedding::%I.%I(%s)) %I.%I) WHERE model_id = %s',
        'notes_embedding_hnsw_m' || v_model.model_id,
        v_vector_schema, v_model.index_type, v_model.dimension,
        v_vector_schema, v_model.index_type || '_cosine_ops',
        v_model.model_id);
END;
$$;

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

    INSERT INTO pgmem.embedding_models (name, dimension) VALUES (p_model, p_dimension)
    ON CONFLICT (name, dimension) DO NOTHING;
    SELECT model_id INTO STRICT v_model_id
    FROM pgmem.embedding_models WHERE name = p_model AND dimension = p_dimension;
    PERFORM pgmem.ensure_model_index_v1(v_model_id);

    INSERT INTO pgmem.namespaces (namespace, model_id) VALUES (p_namespace, v_model_id)
    ON CONFLICT (namespace) DO NOTHING;
    -- A concurrent session may have bound the namespace first: check what won.
    RETURN pgmem.register_namespace_v1(p_namespace, p_model, p_dimension);
END;
$$;

-- Erasure: the one way notes leave the store. Deletes the notes (content and all)
-- and records who, when, what (ids, no content) and why.
CREATE TABLE pgmem.forget_audit (
    audit_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace text NOT NULL,
    scope text NOT NULL CHECK (scope IN ('notes', 'document', 'family')),
    selector text[] NOT NULL,
    reason text NOT NULL CHECK (btrim(reason) <> ''),
    requested_by name NOT NULL,
    forgotten_at timestamptz NOT NULL DEFAULT now(),
    notes_removed integer NOT NULL,
    note_ids uuid[] NOT NULL
);

CREATE OR REPLACE FUNCTION pgmem.reject_note_change_v1() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    -- pgmem.forget_v1 sets this flag for its own DELETE, inside its transaction.
    IF TG_OP = 'DELETE' AND current_setting('pgmem.forget_in_progress', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'pgmem notes are immutable: % on pgmem.notes is not allowed', TG_OP
        USING ERRCODE = 'PM001',
              HINT = 'Write a new note instead; removal is pgmem.forget (audited).';
END;
$$;

-- Keep the BM25 statistics in step with erasures.
CREATE FUNCTION pgmem.count_forgotten_notes_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem
    AS $$
BEGIN
    UPDATE pgmem.lexeme_stats AS s
    SET document_frequency = s.document_frequency - d.notes
    FROM (SELECT o.namespace, u.lexeme, count(*) AS notes
          FROM old_notes AS o, unnest(o.lexemes) AS u
          GROUP BY o.namespace, u.lexeme) AS d
    WHERE s.namespace = d.namespace AND s.lexeme = d.lexeme;

    UPDATE pgmem.namespaces AS s
    SET note_count = s.note_count - d.notes, lexeme_total = s.lexeme_total - d.lexemes
    FROM (SELECT namespace, count(*) AS notes, sum(lexeme_count) AS lexemes
          FROM old_notes GROUP BY namespace) AS d
    WHERE s.namespace = d.namespace;
    RETURN NULL;
END;
$$;

CREATE TRIGGER notes_count_forgotten AFTER DELETE ON pgmem.notes
    REFERENCING OLD TABLE AS old_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.count_forgotten_notes_v1();

CREATE FUNCTION pgmem.forget_v1(p_namespace text, p_scope text, p_selector text[], p_reason text)
    RETURNS TABLE (audit_id bigint, notes_removed integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem
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

    INSERT INTO pgmem.forget_audit (namespace, scope, selector, reason, requested_by, notes_removed, note_ids)
    VALUES (p_namespace, p_scope, p_selector, p_reason, session_user, cardinality(v_ids), v_ids)
    RETURNING forget_audit.audit_id INTO v_audit;
    RETURN QUERY SELECT v_audit, cardinality(v_ids);
END;
$$;

-- Least privilege. Readers read their namespace and may log packs; writers also
-- insert notes; admins also forget and manage namespace grants.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgmem FROM PUBLIC;
GRANT USAGE ON SCHEMA pgmem TO pgmem_reader, pgmem_writer, pgmem_admin;
GRANT pgmem_reader TO pgmem_writer;
GRANT pgmem_writer TO pgmem_admin;

GRANT SELECT ON pgmem.embedding_models, pgmem.namespaces, pgmem.lexeme_stats, pgmem.notes,
    pgmem.pack_log, pgmem.pack_log_families, pgmem.store_families_v1, pgmem.pack_degraded_rate_v1,
    pgmem.pack_variance_floor_rate_v1, pgmem.pack_entropy_distribution_v1,
    pgmem.family_regularizer_stats_v1 TO pgmem_reader;
GRANT INSERT ON pgmem.pack_log, pgmem.pack_log_families TO pgmem_reader;
GRANT EXECUTE ON FUNCTION pgmem.stage_one_v1, pgmem.compile_filter_v1, pgmem.filter_value_v1, pgmem.bm25_term_v1, pgmem.tsvector_token_count,
    pgmem.note_lexemes, pgmem.log_pack_v1, pgmem.may_use_namespace_v1, pgmem.session_namespace_v1
    TO pgmem_reader;

GRANT SELECT ON pgmem.namespace_grants TO pgmem_reader;

-- (The policies above, FOR ALL with USING only, are also the WITH CHECK of inserts:
-- a writer inserts only into the namespace its session may use.)
GRANT INSERT ON pgmem.notes, pgmem.namespaces, pgmem.embedding_models TO pgmem_writer;
GRANT EXECUTE ON FUNCTION pgmem.register_namespace_v1, pgmem.ensure_model_index_v1 TO pgmem_writer;

GRANT INSERT, DELETE ON pgmem.namespace_grants TO pgmem_admin;
GRANT SELECT ON pgmem.forget_audit TO pgmem_admin;
GRANT EXECUTE ON FUNCTION pgmem.forget_v1, pgmem.grant_namespace_v1, pgmem.revoke_namespace_v1
    TO pgmem_admin;
