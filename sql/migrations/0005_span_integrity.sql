-- Migration 0005: one note per document span, offsets checked against the text, and
-- an explicit, audited supersede for writers; notes, namespace rows and feedback rows
-- can no longer be written with values that lie about who or when.
-- Frozen: never edit a shipped migration.

-- Stores written before this migration may hold two notes on one span (the bug this
-- fixes), or notes written by raw SQL whose offsets do not match their text or whose
-- model is not their namespace's. None is repaired silently: the migration stops and
-- says what to look at.
DO $$
DECLARE
    v_shared bigint;
    v_mismatched bigint;
    v_foreign_model bigint;
BEGIN
    SELECT count(*) INTO v_shared FROM (
        SELECT 1 FROM pgmem.notes
        GROUP BY namespace, document_id, span_start, span_end HAVING count(*) > 1) AS s;
    SELECT count(*) INTO v_mismatched FROM pgmem.notes
    WHERE span_end - span_start <> octet_length(convert_to(text, 'UTF8'));
    SELECT count(*) INTO v_foreign_model FROM pgmem.notes AS n JOIN pgmem.namespaces AS s USING (namespace)
    WHERE n.model_id <> s.model_id;
    IF v_shared > 0 OR v_mismatched > 0 OR v_foreign_model > 0 THEN
        RAISE EXCEPTION 'pgmem 0005: % document span(s) hold more than one note, % note(s) have offsets that do not match their text, % note(s) another model than their namespace',
            v_shared, v_mismatched, v_foreign_model
            USING ERRCODE = '23000',
                  HINT = 'Find them with the queries in docs/security.md ("Re-ingest and supersede"), remove the wrong notes with pgmem.forget_v1, then migrate again.';
    END IF;
END;
$$;

-- One note per (namespace, document, span): the key re-ingest and supersede are
-- decided on. Its prefix serves the previous/next-span lookups of stage one and
-- ingest, so it replaces notes_document.
CREATE UNIQUE INDEX notes_span ON pgmem.notes (namespace, document_id, span_start, span_end);
DROP INDEX pgmem.notes_document;

-- A note's offsets cover exactly its text's UTF-8 bytes, whoever inserts it.
ALTER TABLE pgmem.notes ADD CONSTRAINT notes_span_length
    CHECK (span_end - span_start = octet_length(convert_to(text, 'UTF8')));

-- A note's model is its namespace's model (stage one reads only those; a note of
-- another model would count in the BM25 statistics and never be found).
ALTER TABLE pgmem.namespaces ADD CONSTRAINT namespaces_model UNIQUE (namespace, model_id);
ALTER TABLE pgmem.notes ADD CONSTRAINT notes_namespace_model
    FOREIGN KEY (namespace, model_id) REFERENCES pgmem.namespaces (namespace, model_id);

-- Every model gets its HNSW index as soon as its row exists, whoever inserts it (not
-- only through register_namespace_v1): the index's dimension-typed expression is also
-- what refuses a note whose vector does not have its model's dimension.
CREATE FUNCTION pgmem.index_new_model_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
BEGIN
    PERFORM pgmem.ensure_model_index_v1(NEW.model_id);
    RETURN NULL;
END;
$$;

CREATE TRIGGER embedding_models_index AFTER INSERT ON pgmem.embedding_models
    FOR EACH ROW EXECUTE FUNCTION pgmem.index_new_model_v1();
REVOKE ALL ON FUNCTION pgmem.index_new_model_v1 FROM PUBLIC;

-- Supersede: a writer replaces the note on a span with a new one. The caller inserts
-- one request row per replaced note (ids and offsets, no content); row-level security
-- checks it as the caller, a trigger with owner rights deletes the old note, and a
-- deferred check makes sure the new note is there at commit. The rows stay as the
-- audit trail.
CREATE TABLE pgmem.supersede_audit (
    namespace text NOT NULL REFERENCES pgmem.namespaces (namespace),
    supersede_id bigint GENERATED ALWAYS AS IDENTITY,
    old_note_id uuid NOT NULL,
    -- The same id when only caller-given fields change (the id hashes span and text).
    new_note_id uuid NOT NULL,
    document_id text NOT NULL,
    span_start integer NOT NULL,
    span_end integer NOT NULL,
    reason text NOT NULL CHECK (btrim(reason) <> '' AND length(reason) <= 1000),
    requested_by name NOT NULL DEFAULT session_user,
    superseded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, supersede_id)
);
CREATE INDEX supersede_audit_old_note ON pgmem.supersede_audit (namespace, old_note_id);

-- Delete the notes the inserted requests replace (owner rights: writers hold no DELETE
-- privilege). Row-level security has already checked each request as its caller; this
-- only refuses a request whose note is not (or no longer) on the span it names.
CREATE FUNCTION pgmem.supersede_notes_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
DECLARE
    v_missing record;
    v_requested integer;
    v_deleted integer;
BEGIN
    SELECT r.namespace, r.old_note_id, r.document_id, r.span_start, r.span_end INTO v_missing
    FROM requests AS r
    WHERE NOT EXISTS (SELECT 1 FROM pgmem.notes AS n
                      WHERE n.namespace = r.namespace AND n.note_id = r.old_note_id
                        AND n.document_id = r.document_id AND n.span_start = r.span_start
                        AND n.span_end = r.span_end)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'supersede: namespace % holds no note % on span %[%:%]', v_missing.namespace,
            v_missing.old_note_id, v_missing.document_id, v_missing.span_start, v_missing.span_end
            USING ERRCODE = 'PM003';
    END IF;
    SELECT count(*) INTO v_requested FROM requests;

    PERFORM set_config('pgmem.forget_in_progress', 'on', true);
    DELETE FROM pgmem.notes AS n
    USING requests AS r
    WHERE n.namespace = r.namespace AND n.note_id = r.old_note_id;
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    PERFORM set_config('pgmem.forget_in_progress', 'off', true);

    IF v_deleted <> v_requested THEN
        RAISE EXCEPTION 'supersede: % request(s) but % note(s) deleted (a note requested twice, or superseded concurrently)',
            v_requested, v_deleted
            USING ERRCODE = 'PM003';
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER supersede_audit_delete AFTER INSERT ON pgmem.supersede_audit
    REFERENCING NEW TABLE AS requests
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.supersede_notes_v1();

-- At commit, every replaced note must have its replacement on the same span: the
-- request path replaces notes, it never merely erases them (that is forget, for admins).
CREATE FUNCTION pgmem.check_supersede_replaced_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgmem.notes AS n
                   WHERE n.namespace = NEW.namespace AND n.note_id = NEW.new_note_id
                     AND n.document_id = NEW.document_id AND n.span_start = NEW.span_start
                     AND n.span_end = NEW.span_end) THEN
        RAISE EXCEPTION 'supersede: note % of namespace % was removed but its replacement % is not on span %[%:%]',
            NEW.old_note_id, NEW.namespace, NEW.new_note_id, NEW.document_id, NEW.span_start, NEW.span_end
            USING ERRCODE = 'PM005';
    END IF;
    RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER supersede_audit_replaced AFTER INSERT ON pgmem.supersede_audit
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION pgmem.check_supersede_replaced_v1();

-- Readers and writers see their session namespace's supersedes (provenance: why a
-- cited note was replaced), admins all. A request is accepted only in the session's
-- namespace and for a note the caller can see on the very span it names, for every
-- role subject to row-level security (admins included).
ALTER TABLE pgmem.supersede_audit ENABLE ROW LEVEL SECURITY;
CREATE POLICY namespace_isolation ON pgmem.supersede_audit TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY admin_all ON pgmem.supersede_audit TO pgmem_admin USING (true);
CREATE POLICY supersede_request ON pgmem.supersede_audit AS RESTRICTIVE FOR INSERT TO PUBLIC
    WITH CHECK (
        namespace = (SELECT pgmem.session_namespace_v1())
        AND EXISTS (SELECT 1 FROM pgmem.notes AS n
                    WHERE n.namespace = supersede_audit.namespace
                      AND n.note_id = supersede_audit.old_note_id
                      AND n.document_id = supersede_audit.document_id
                      AND n.span_start = supersede_audit.span_start
                      AND n.span_end = supersede_audit.span_end));

REVOKE ALL ON FUNCTION pgmem.supersede_notes_v1, pgmem.check_supersede_replaced_v1 FROM PUBLIC;
GRANT SELECT ON pgmem.supersede_audit TO pgmem_reader;
-- Who and when come from the column defaults: no role but the owner may set them.
GRANT INSERT (namespace, old_note_id, new_note_id, document_id, span_start, span_end, reason)
    ON pgmem.supersede_audit TO pgmem_writer;

-- When a note was written comes from its default, never from the inserting writer:
-- column privileges instead of table-wide INSERT. (Namespace rows, feedback and
-- embedding models were closed the same way by 0004.)
REVOKE INSERT ON pgmem.notes FROM pgmem_writer;
GRANT INSERT (namespace, note_id, external_id, document_id, span_start, span_end, text, context, family,
              role, confidence, source_ts, model_id, embedding, entities, time_tags, keywords, handles,
              links, metadata)
    ON pgmem.notes TO pgmem_writer;
