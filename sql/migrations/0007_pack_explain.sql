-- Migration 0007: logged packs explainable from SQL alone. Frozen: never edit a shipped
-- migration.
--
-- * pgmem.pack_log_items / pgmem.pack_log_rejections: one row per packed note and per
--   rejection of a logged pack, with every score the packer used; deleted with their
--   pack (ON DELETE CASCADE), so forget and supersede, which delete the logged packs of
--   erased notes (count_forgotten_notes_v1), take them along.
-- * pgmem.log_pack_v2: the pack, its families, items and rejections from one JSON
--   document, in one statement (log_pack_v1 stays for older clients).
-- * pgmem.pack_explain_v1 ("why is this note in this pack") and
--   pgmem.pack_degraded_daily_v1 ("how often did calibration switch itself off"),
--   security_invoker, under the notes' namespace row-level security.

-- One row per packed note of a logged pack: why it ranks where it does.
-- final_score = normalized_score + regularizer; decayed_score is what the packer compared
-- after the overlap decay.
CREATE TABLE pgmem.pack_log_items (
    namespace text NOT NULL,
    pack_id uuid NOT NULL,
    rank integer NOT NULL CHECK (rank >= 1),
    note_id uuid NOT NULL,
    family text NOT NULL,
    role text NOT NULL,
    base_score double precision NOT NULL,
    normalized_score double precision NOT NULL,
    regularizer double precision NOT NULL,
    final_score double precision NOT NULL,
    decayed_score double precision NOT NULL,
    max_overlap double precision NOT NULL,
    dense_score double precision NOT NULL,
    lexical_score double precision NOT NULL,
    facet_boost double precision NOT NULL,
    link_boost double precision NOT NULL,
    PRIMARY KEY (namespace, pack_id, rank),
    FOREIGN KEY (namespace, pack_id) REFERENCES pgmem.pack_log (namespace, pack_id) ON DELETE CASCADE
);

-- One row per candidate the packer scanned and refused, in scan order, with the rule
-- that refused it (overlap, below_minimum, role_quota, family_cap, token_budget).
CREATE TABLE pgmem.pack_log_rejections (
    namespace text NOT NULL,
    pack_id uuid NOT NULL,
    scan_order integer NOT NULL CHECK (scan_order >= 1),
    note_id uuid NOT NULL,
    family text NOT NULL,
    role text NOT NULL,
    reason text NOT NULL,
    base_score double precision,
    regularizer double precision,
    final_score double precision NOT NULL,
    decayed_score double precision NOT NULL,
    max_overlap double precision NOT NULL,
    overlaps_note_id uuid,
    PRIMARY KEY (namespace, pack_id, scan_order),
    FOREIGN KEY (namespace, pack_id) REFERENCES pgmem.pack_log (namespace, pack_id) ON DELETE CASCADE
);

-- Persist one pack, its families, its packed items and its rejections from a JSON
-- document (one statement; row-level security checks every row as the caller).
CREATE FUNCTION pgmem.log_pack_v2(p_pack jsonb) RETURNS uuid
    LANGUAGE sql AS $$
    SELECT pgmem.log_pack_v1(p_pack);
    INSERT INTO pgmem.pack_log_items
    SELECT p_pack ->> 'namespace', (p_pack ->> 'pack_id')::uuid, i.*
    FROM jsonb_to_recordset(p_pack -> 'items') AS i (
        rank integer, note_id uuid, family text, role text, base_score float8, normalized_score float8,
        regularizer float8, final_score float8, decayed_score float8, max_overlap float8, dense_score float8,
        lexical_score float8, facet_boost float8, link_boost float8);
    INSERT INTO pgmem.pack_log_rejections
    SELECT p_pack ->> 'namespace', (p_pack ->> 'pack_id')::uuid, e.scan_order::integer, r.*
    FROM jsonb_array_elements(p_pack -> 'rejections') WITH ORDINALITY AS e (rejection, scan_order),
         jsonb_to_record(e.rejection) AS r (
             note_id uuid, family text, role text, reason text, base_score float8, regularizer float8,
             final_score float8, decayed_score float8, max_overlap float8, overlaps_note_id uuid);
    SELECT (p_pack ->> 'pack_id')::uuid;
$$;

-- Why is this note in this pack (or not): every packed note and every rejection of
-- each logged pack, with its scores, its family's calibration and the pack's mode,
-- degraded state and parameters. Filter on pack_id and note_id.
CREATE VIEW pgmem.pack_explain_v1 WITH (security_invoker = true) AS
SELECT l.namespace, l.pack_id, l.created_at, l.query, l.mode, l.degraded, l.degraded_reasons,
       e.outcome, e.rank, e.reason, e.note_id, e.family, e.role,
       e.base_score, e.normalized_score, e.regularizer, e.final_score, e.decayed_score,
       e.max_overlap, e.overlaps_note_id,
       f.count AS family_pool_count, f.z AS family_z, f.shrunk_z AS family_shrunk_z,
       f.reliability AS family_reliability, f.uncertainty AS family_uncertainty,
       f.variance_floor_dominated AS family_variance_floor_dominated,
       f.feedback_reliability AS family_feedback_reliability,
       l.pool_size, l.pool_mean, l.pool_variance, l.entropy, l.parameters
FROM pgmem.pack_log AS l
JOIN (
    SELECT namespace, pack_id, 'packed' AS outcome, rank, NULL::text AS reason, note_id, family, role,
           base_score, normalized_score, regularizer, final_score, decayed_score, max_overlap,
           NULL::uuid AS overlaps_note_id
    FROM pgmem.pack_log_items
    UNION ALL
    SELECT namespace, pack_id, 'rejected', NULL::integer, reason, note_id, family, role,
           base_score, final_score - regularizer, regularizer, final_score, decayed_score, max_overlap,
           overlaps_note_id
    FROM pgmem.pack_log_rejections
) AS e USING (namespace, pack_id)
LEFT JOIN pgmem.pack_log_families AS f
    ON f.namespace = e.namespace AND f.pack_id = e.pack_id AND f.family = e.family;

-- How often calibration switched itself off, per day, mode and reason ('any' counts
-- the degraded packs); pack_degraded_rate_v1 gives the same over all time.
CREATE VIEW pgmem.pack_degraded_daily_v1 WITH (security_invoker = true) AS
WITH days AS (
    SELECT namespace, mode, date_trunc('day', created_at) AS day, count(*) AS packs
    FROM pgmem.pack_log GROUP BY 1, 2, 3
), reasons AS (
    SELECT namespace, mode, date_trunc('day', created_at) AS day, 'any' AS reason,
           count(*) FILTER (WHERE degraded) AS degraded_packs
    FROM pgmem.pack_log GROUP BY 1, 2, 3
    UNION ALL
    SELECT l.namespace, l.mode, date_trunc('day', l.created_at), r.reason, count(*)
    FROM pgmem.pack_log AS l, unnest(l.degraded_reasons) AS r (reason)
    GROUP BY 1, 2, 3, 4
)
SELECT d.namespace, d.mode, d.day, r.reason, d.packs, r.degraded_packs,
       r.degraded_packs::float8 / d.packs AS rate
FROM days AS d JOIN reasons AS r USING (namespace, mode, day);

-- Same row-level security as the notes: a reader sees (and logs) its namespace only.
ALTER TABLE pgmem.pack_log_items ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.pack_log_rejections ENABLE ROW LEVEL SECURITY;
CREATE POLICY namespace_isolation ON pgmem.pack_log_items TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.pack_log_rejections TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY admin_all ON pgmem.pack_log_items TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.pack_log_rejections TO pgmem_admin USING (true);

REVOKE ALL ON FUNCTION pgmem.log_pack_v2 FROM PUBLIC;
GRANT SELECT, INSERT ON pgmem.pack_log_items, pgmem.pack_log_rejections TO pgmem_reader;
GRANT SELECT ON pgmem.pack_explain_v1, pgmem.pack_degraded_daily_v1 TO pgmem_reader;
GRANT EXECUTE ON FUNCTION pgmem.log_pack_v2 TO pgmem_reader;
