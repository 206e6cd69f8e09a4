-- Migration 0028: ingest finds a rare key's holders in a B-tree of link keys instead of
-- the notes' GIN indexes (issue 12). Frozen: never edit a shipped migration.
--
-- Ingest links a new note to the notes sharing a rare handle or entity: for each distinct
-- key of a batch, pgmem.handle_holders_v1 / pgmem.entity_holders_v1 return up to p_limit
-- notes holding it. They searched pgmem.notes through its GIN indexes (a bitmap of the
-- key's posting list, then the heap rows), which cost 0.17-0.40 ms per note at a million
-- notes, batch after batch (docs/performance.md, session 32): about a tenth of a note's
-- ingest. pgmem.link_keys holds one row per (note, distinct handle) and (note, distinct
-- entity text), the key as its SHA-256 (entity texts have no length limit a B-tree entry
-- could take), written and deleted with the notes by owner-rights statement triggers as
-- the lexeme postings are; a lookup is one index probe, 0.02-0.04 ms per note there.
--
-- The functions keep their signatures, rights and results: a key's holders are the notes
-- of the namespace whose handles hold it, or one of whose entities has it as its "text"
-- (any confidence), as the GIN containment tests matched; for a rare key (at most
-- p_limit - 1 holders) all of them, for a common one p_limit of them, which ingest only
-- counts. The GIN indexes stay (a caller's own queries may use them).
--
-- Readers see their namespace's keys (the notes' policy), as its notes' entities and
-- handles; no role writes them but the triggers. Erasure reaches them: a forgotten,
-- superseded or compacted note's keys go with it.

CREATE TABLE pgmem.link_keys (
    namespace text NOT NULL,
    kind "char" NOT NULL CHECK (kind IN ('e', 'h')),
    digest bytea NOT NULL,
    note_id uuid NOT NULL,
    PRIMARY KEY (namespace, kind, digest, note_id)
);

ALTER TABLE pgmem.link_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY namespace_isolation ON pgmem.link_keys TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY admin_all ON pgmem.link_keys TO pgmem_admin USING (true);
GRANT SELECT ON pgmem.link_keys TO pgmem_reader;

-- A note's link keys: each distinct handle ('h') and entity text ('e'), hashed.
CREATE FUNCTION pgmem.note_link_keys_v1(p_entities jsonb, p_handles text[])
    RETURNS TABLE (kind "char", digest bytea)
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT DISTINCT k.kind, k.digest
    FROM (SELECT 'e'::"char" AS kind, sha256(convert_to(e.value ->> 'text', 'UTF8')) AS digest
          FROM jsonb_array_elements(p_entities) AS e
          WHERE jsonb_typeof(e.value -> 'text') = 'string'
          UNION ALL
          SELECT 'h'::"char", sha256(convert_to(h.handle, 'UTF8'))
          FROM unnest(p_handles) AS h (handle)
          WHERE h.handle IS NOT NULL) AS k;
$$;

-- Trigger: the link keys of the notes a statement inserted, in key order.
CREATE FUNCTION pgmem.key_new_notes_v1() RETURNS trigger
    -- Runs with owner rights: no role writes link keys.
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
BEGIN
    INSERT INTO pgmem.link_keys (namespace, kind, digest, note_id)
    SELECT n.namespace, k.kind, k.digest, n.note_id
    FROM new_notes AS n, pgmem.note_link_keys_v1(n.entities, n.handles) AS k
    ORDER BY n.namespace, k.kind, k.digest, n.note_id;
    RETURN NULL;
END;
$$;

-- Trigger: the link keys of deleted notes go with them (found by their full key).
CREATE FUNCTION pgmem.unkey_deleted_notes_v1() RETURNS trigger
    -- Forget, supersede and compaction delete notes: no key of an erased note stays.
    -- Runs with owner rights.
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
BEGIN
    DELETE FROM pgmem.link_keys AS l
    USING old_notes AS o, pgmem.note_link_keys_v1(o.entities, o.handles) AS k
    WHERE l.namespace = o.namespace AND l.kind = k.kind AND l.digest = k.digest AND l.note_id = o.note_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER notes_key_new AFTER INSERT ON pgmem.notes
    REFERENCING NEW TABLE AS new_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.key_new_notes_v1();
CREATE TRIGGER notes_unkey_deleted AFTER DELETE ON pgmem.notes
    REFERENCING OLD TABLE AS old_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.unkey_deleted_notes_v1();

REVOKE ALL ON FUNCTION pgmem.note_link_keys_v1, pgmem.key_new_notes_v1, pgmem.unkey_deleted_notes_v1
    FROM PUBLIC;

-- The keys of the notes stored so far.
INSERT INTO pgmem.link_keys (namespace, kind, digest, note_id)
SELECT n.namespace, k.kind, k.digest, n.note_id
FROM pgmem.notes AS n, pgmem.note_link_keys_v1(n.entities, n.handles) AS k
ORDER BY n.namespace, k.kind, k.digest, n.note_id;
ANALYZE pgmem.link_keys;

-- Up to p_limit notes of p_namespace holding each key of one kind ('h' handle, 'e' entity).
CREATE FUNCTION pgmem.key_holders_v1(p_namespace text, p_kind "char", p_keys text[], p_limit integer)
    RETURNS TABLE (key text, note_id uuid)
    -- One probe of pgmem.link_keys' primary key per key. No ORDER BY: a rare key's
    -- holders are all returned, and which holders of a common key come back does not
    -- matter. A key that comes from unnest() cannot be estimated: the sequential scan is
    -- kept off.
    LANGUAGE sql STABLE
    SET enable_seqscan = off
    AS $$
    SELECT k.key, h.note_id
    FROM unnest(p_keys) AS k (key)
    CROSS JOIN LATERAL (
        SELECT l.note_id FROM pgmem.link_keys AS l
        WHERE l.namespace = p_namespace AND l.kind = p_kind AND l.digest = sha256(convert_to(k.key, 'UTF8'))
        LIMIT p_limit
    ) AS h;
$$;

-- Up to p_limit notes of p_namespace holding each handle.
CREATE OR REPLACE FUNCTION pgmem.handle_holders_v1(p_namespace text, p_keys text[], p_limit integer)
    RETURNS TABLE (key text, note_id uuid)
    LANGUAGE sql STABLE
    AS $$
    SELECT h.key, h.note_id FROM pgmem.key_holders_v1(p_namespace, 'h', p_keys, p_limit) AS h;
$$;

-- Up to p_limit notes of p_namespace holding each entity text.
CREATE OR REPLACE FUNCTION pgmem.entity_holders_v1(p_namespace text, p_keys text[], p_limit integer)
    RETURNS TABLE (key text, note_id uuid)
    LANGUAGE sql STABLE
    AS $$
    SELECT h.key, h.note_id FROM pgmem.key_holders_v1(p_namespace, 'e', p_keys, p_limit) AS h;
$$;

REVOKE ALL ON FUNCTION pgmem.key_holders_v1 FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgmem.key_holders_v1 TO pgmem_writer;
