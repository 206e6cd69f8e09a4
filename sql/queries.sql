-- Named statements pgmem runs, loaded once by pgmem.db.queries. Each block starts
-- with a "-- name: NAME --" line; parameters are psycopg placeholders (%(name)s),
-- never string concatenation.

-- name: register_namespace --
-- With the oid of the vector type the staging table's embedding column takes (resolved
-- as its CREATE resolves it): the write path copies vectors in their binary form.
SELECT pgmem.register_namespace_v1(%(namespace)s, %(model)s, %(dimension)s) AS model_id,
       'vector'::regtype::oid::integer AS vector_oid;

-- name: register_model --
SELECT pgmem.register_model_v1(%(model)s, %(dimension)s) AS model_id;

-- name: create_staging --
DROP TABLE IF EXISTS pg_temp.pgmem_staging;
CREATE TEMPORARY TABLE pgmem_staging (
    namespace text NOT NULL,
    note_id uuid NOT NULL,
    external_id text,
    document_id text NOT NULL,
    span_start integer NOT NULL,
    span_end integer NOT NULL,
    text text NOT NULL,
    context text NOT NULL,
    family text NOT NULL,
    role text NOT NULL,
    confidence real NOT NULL,
    source_ts timestamptz,
    model_id integer NOT NULL,
    embedding vector NOT NULL,
    entities jsonb NOT NULL,
    time_tags jsonb NOT NULL,
    keywords text[] NOT NULL,
    handles text[] NOT NULL,
    links uuid[] NOT NULL,
    metadata jsonb NOT NULL
) ON COMMIT DROP;

-- name: copy_staging --
COPY pgmem_staging (namespace, note_id, external_id, document_id, span_start, span_end, text,
                    context, family, role, confidence, source_ts, model_id, embedding, entities,
                    time_tags, keywords, handles, links, metadata)
FROM STDIN (FORMAT BINARY);

-- name: insert_from_staging --
-- Returns the ids written. A row whose span (or note id) is already taken is skipped
-- (DO NOTHING with no target: every unique index is an arbiter, so a concurrent
-- writer of the same span is skipped, never an error); the writer then checks each
-- skipped span holds exactly what it was given. Sorted so concurrent batches take
-- index locks in one order.
INSERT INTO pgmem.notes (namespace, note_id, external_id, document_id, span_start, span_end,
                         text, context, family, role, confidence, source_ts, model_id, embedding,
                         entities, time_tags, keywords, handles, links, metadata)
SELECT namespace, note_id, external_id, document_id, span_start, span_end, text, context,
       family, role, confidence, source_ts, model_id, embedding, entities, time_tags, keywords,
       handles, links, metadata
FROM pgmem_staging
ORDER BY namespace, note_id
ON CONFLICT DO NOTHING
RETURNING note_id::text;

-- name: drop_staging --
DROP TABLE pg_temp.pgmem_staging;

-- Bulk first load (pgmem.bulk_load, owner only) -----------------------------------------

-- name: bulk_load_owner --
-- Whether the caller owns pgmem.notes (or is a member of its owner, or a superuser).
SELECT pg_has_role(current_user, c.relowner, 'USAGE') AS is_owner, current_user::text AS current_user,
       c.relowner::regrole::text AS owner
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = 'pgmem' AND c.relname = 'notes';

-- name: bulk_load_lock --
-- The table to itself, or an error at once (55P03) if any session has it open.
LOCK TABLE pgmem.notes IN ACCESS EXCLUSIVE MODE NOWAIT;

-- name: bulk_load_namespace_used --
SELECT EXISTS (SELECT 1 FROM pgmem.notes WHERE namespace = %(namespace)s) AS used;

-- name: bulk_load_deferred_indexes --
-- The indexes a load would update row by row, with their definitions: every
-- non-unique index of pgmem.notes except the HNSW indexes of other models (their
-- partial predicate skips the namespace's rows). Unique indexes stay: they refuse
-- duplicates as the load goes.
SELECT c.relname::text AS name, pg_get_indexdef(i.indexrelid) AS definition
FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
WHERE i.indrelid = 'pgmem.notes'::regclass AND NOT i.indisunique
  AND (c.relname NOT LIKE 'notes\_embedding\_hnsw\_m%%' OR c.relname = 'notes_embedding_hnsw_m' || %(model_id)s)
ORDER BY c.relname;

-- name: bulk_load_staging_keys --
-- Each staged note's rare-key candidates ('h ' || handle, 'e ' || entity text).
ALTER TABLE pg_temp.pgmem_staging ADD COLUMN link_keys text[] NOT NULL DEFAULT '{}';

-- name: bulk_load_copy --
COPY pgmem_staging (namespace, note_id, external_id, document_id, span_start, span_end, text,
                    context, family, role, confidence, source_ts, model_id, embedding, entities,
                    time_tags, keywords, handles, links, metadata, link_keys)
FROM STDIN (FORMAT BINARY);

-- name: bulk_load_insert --
-- The staged notes with the links pgmem.ingest gives one batch (previous and next span
-- of the document by start then note id; then the max_links lowest note ids sharing a
-- key held by at most rare notes, those not already linked), written in
-- one statement: the insert triggers (statistics, postings, family rights, the first
-- load's ANALYZE) run once, on all of them, as for one pgmem.ingest call.
WITH local AS (
    SELECT note_id, array_remove(ARRAY[lag(note_id) OVER w, lead(note_id) OVER w], NULL) AS links
    FROM pgmem_staging
    WINDOW w AS (PARTITION BY document_id ORDER BY span_start, note_id)
), keyed AS (
    SELECT s.note_id, k.key FROM pgmem_staging AS s, unnest(s.link_keys) AS k (key)
), holders AS (
    SELECT key, array_agg(note_id) AS notes FROM keyed GROUP BY key HAVING count(*) <= %(rare)s
), partners AS (
    SELECT k.note_id, (array_agg(DISTINCT p.note_id ORDER BY p.note_id))[1:%(max_links)s] AS notes
    FROM keyed AS k JOIN holders AS h USING (key), unnest(h.notes) AS p (note_id)
    WHERE p.note_id <> k.note_id
    GROUP BY k.note_id
), written AS (
    INSERT INTO pgmem.notes (namespace, note_id, external_id, document_id, span_start, span_end,
                             text, context, family, role, confidence, source_ts, model_id, embedding,
                             entities, time_tags, keywords, handles, links, metadata)
    SELECT s.namespace, s.note_id, s.external_id, s.document_id, s.span_start, s.span_end, s.text,
           s.context, s.family, s.role, s.confidence, s.source_ts, s.model_id, s.embedding,
           s.entities, s.time_tags, s.keywords, s.handles,
           l.links || ARRAY(SELECT u.id FROM unnest(pa.notes) WITH ORDINALITY AS u (id, position)
                            WHERE u.id <> ALL (l.links) ORDER BY u.position),
           s.metadata
    FROM pgmem_staging AS s
    JOIN local AS l ON l.note_id = s.note_id
    LEFT JOIN partners AS pa ON pa.note_id = s.note_id
    RETURNING 1
)
SELECT count(*) AS inserted FROM written;

-- name: bulk_load_memory --
SELECT pg_size_bytes(current_setting('maintenance_work_mem')) AS bytes;

-- name: bulk_load_set_memory --
-- For the rest of the load's transaction only.
SELECT set_config('maintenance_work_mem', %(setting)s, true) AS setting;

-- name: bulk_load_memory_setting --
SELECT current_setting('maintenance_work_mem') AS setting;

-- name: bulk_load_analyze --
ANALYZE pgmem.notes, pgmem.lexeme_stats, pgmem.lexeme_postings;

-- name: stored_spans --
-- The note stored on each given span of the namespace (one indexed lookup per span
-- through notes_span), with what re-ingest compares: a digest of its text and the
-- caller-given fields.
SELECT n.document_id, n.span_start, n.span_end, n.note_id::text AS note_id,
       sha256(convert_to(n.text, 'UTF8')) AS text_sha256, n.family, n.source_ts, n.metadata,
       n.external_id, n.context, n.role, n.confidence
FROM unnest(%(document_ids)s::text[], %(starts)s::integer[], %(ends)s::integer[])
     AS s (document_id, span_start, span_end)
JOIN pgmem.notes AS n
  ON n.namespace = %(namespace)s AND n.document_id = s.document_id
 AND n.span_start = s.span_start AND n.span_end = s.span_end;

-- name: request_supersede --
-- One audited request per replaced note; the table's trigger deletes the old notes
-- (row-level security checks each request as the caller first).
INSERT INTO pgmem.supersede_audit (namespace, old_note_id, new_note_id, document_id, span_start,
                                   span_end, reason)
SELECT %(namespace)s, r.old_note_id, r.new_note_id, r.document_id, r.span_start, r.span_end, %(reason)s
FROM unnest(%(old_note_ids)s::uuid[], %(new_note_ids)s::uuid[], %(document_ids)s::text[],
            %(starts)s::integer[], %(ends)s::integer[])
     AS r (old_note_id, new_note_id, document_id, span_start, span_end)
ORDER BY r.old_note_id;

-- name: document_neighbours --
-- Existing notes of the batch's documents, for previous/next local links.
SELECT document_id, span_start, note_id
FROM pgmem.notes
WHERE namespace = %(namespace)s AND document_id = ANY (%(document_ids)s);

-- name: handle_holders --
-- Up to %(limit)s stored notes carrying each handle (enough to tell rare from common).
SELECT key, note_id FROM pgmem.handle_holders_v1(%(namespace)s, %(keys)s::text[], %(limit)s);

-- name: entity_holders --
SELECT key, note_id FROM pgmem.entity_holders_v1(%(namespace)s, %(keys)s::text[], %(limit)s);

-- name: stage_one --
-- The candidates and pool aggregates of stage_one_v1, plus the feedback the beta mode
-- reads (each candidate's family totals and the namespace's) and what the family alarm
-- reads (the family's notes in the namespace and its age, whether it is bound to writer
-- roles, the namespace's size and age, each note's age: the burst gate on collusion), in
-- one statement: pgmem.stage_one_pool_v1 joins them to stage_one_v1's rows (a function:
-- its statement is planned once per session, this one on every pack). The note id comes
-- as text: the pool keeps ids as strings, and psycopg's binary uuid loader builds a
-- uuid.UUID in Python for each row, which str() then formats again.
SELECT s.*
FROM pgmem.stage_one_pool_v1(
    %(namespace)s, %(model)s, %(query_embedding)s::vector, %(query)s,
    k_dense => %(k_dense)s, k_lex => %(k_lex)s, ef_search => %(ef_search)s,
    lex_max_terms => %(lex_max_terms)s, lex_max_postings => %(lex_max_postings)s,
    bm25_k1 => %(bm25_k1)s, bm25_b => %(bm25_b)s,
    dense_weight => %(dense_weight)s, lexical_weight => %(lexical_weight)s,
    entity_hints => %(entity_hints)s::text[], entity_boost => %(entity_boost)s,
    time_from => %(time_from)s::timestamptz, time_to => %(time_to)s::timestamptz,
    time_boost => %(time_boost)s,
    keyword_hints => %(keyword_hints)s::text[], keyword_boost => %(keyword_boost)s,
    handle_hints => %(handle_hints)s::text[], handle_boost => %(handle_boost)s,
    link_weight => %(link_weight)s, roles => %(roles)s::text[], filter => %(filter)s::jsonb,
    neighbour_seeds => %(neighbour_seeds)s, family_candidates => %(family_candidates)s,
    ef_search_notes => %(ef_search_notes)s) AS s;

-- name: feedback --
SELECT family, helpful, unhelpful
FROM pgmem.feedback_v1(%(namespace)s, %(helpful)s::uuid[], %(unhelpful)s::uuid[], %(weight)s, %(pack_id)s::uuid);

-- name: reset_feedback --
SELECT pgmem.reset_feedback_v1(%(namespace)s, %(families)s::text[]) AS judgements_removed;

-- name: log_pack --
-- Persist a pack with its families, packed items and rejections (one statement).
SELECT pgmem.log_pack_v2(%(pack)s::jsonb) AS pack_id;

-- name: namespace_model --
SELECT m.name, m.dimension
FROM pgmem.namespaces AS n JOIN pgmem.embedding_models AS m USING (model_id)
WHERE n.namespace = %(namespace)s;

-- name: forget --
SELECT audit_id, notes_removed FROM pgmem.forget_v1(%(namespace)s, %(scope)s, %(selector)s::text[], %(reason)s);

-- name: recall_notes --
-- Archived notes named by full ids (low = high) or citation-ref prefixes (an id range),
-- through the primary key; row-level security keeps them to the session's namespace.
SELECT DISTINCT n.note_id, n.text, n.family, n.context, n.metadata, n.document_id, n.span_start
FROM unnest(%(lows)s::uuid[], %(highs)s::uuid[]) AS r (low, high)
JOIN pgmem.notes AS n ON n.namespace = %(namespace)s AND n.note_id BETWEEN r.low AND r.high
ORDER BY n.document_id, n.span_start, n.note_id;

-- name: log_compaction_event --
-- One probe or compaction of pgmem.compaction (event id, author and time are defaults).
INSERT INTO pgmem.compaction_log (namespace, trajectory_id, generation, round, kind, policy, rebuild, reason,
                                  fired, gates, prompt_tokens, raw_verdict, predicates, tokens_before,
                                  tokens_after, probe_prompt_tokens, probe_completion_tokens,
                                  summary_prompt_tokens, summary_completion_tokens, latency_ms, model,
                                  archived, summary_note_id, citations)
VALUES (%(namespace)s, %(trajectory_id)s, %(generation)s, %(round)s, %(kind)s, %(policy)s, %(rebuild)s,
        %(reason)s, %(fired)s, %(gates)s, %(prompt_tokens)s, %(raw_verdict)s, %(predicates)s,
        %(tokens_before)s, %(tokens_after)s, %(probe_prompt_tokens)s, %(probe_completion_tokens)s,
        %(summary_prompt_tokens)s, %(summary_completion_tokens)s, %(latency_ms)s, %(model)s, %(archived)s,
        %(summary_note_id)s, %(citations)s);

-- name: archived_messages --
-- A compaction archive (one document per trajectory): the end of its last span (the next
-- message starts after it; NULL when empty) and the notes already archived for the given
-- message digests, in document order (re-archiving is a no-op; the completeness check).
SELECT e.archive_end, n.note_id, n.metadata ->> 'digest' AS digest
FROM (SELECT max(span_end) AS archive_end FROM pgmem.notes
      WHERE namespace = %(namespace)s AND document_id = %(document_id)s) AS e
LEFT JOIN pgmem.notes AS n
       ON n.namespace = %(namespace)s AND n.document_id = %(document_id)s
      AND n.metadata ->> 'digest' = ANY (%(digests)s::text[])
ORDER BY n.span_start;

-- name: lock_archive --
-- One archiver per compaction archive at a time (until the end of the transaction): the
-- next message's offset is read under it.
SELECT pg_advisory_xact_lock(hashtextextended(%(namespace)s || '/' || %(document_id)s, 0));

-- name: read_notes --
-- Notes of a namespace named by id or by document, in document order (the integrations'
-- recall and readers); row-level security keeps a bound session to its namespace.
SELECT note_id::text AS note_id, external_id, document_id, span_start, span_end, text, context, family, role,
       confidence, source_ts, metadata
FROM pgmem.notes
WHERE namespace = %(namespace)s
  AND (note_id = ANY (%(note_ids)s::uuid[]) OR document_id = ANY (%(document_ids)s::text[]))
ORDER BY document_id, span_start, note_id
LIMIT %(limit)s;

-- name: session_role --
-- The role a session acts as, and whether it may erase notes (pgmem.forget_v1: owner or admin).
SELECT current_user::text AS role,
       has_function_privilege('pgmem.forget_v1(text, text, text[], text)', 'EXECUTE') AS may_forget;

-- name: bind_family --
SELECT pgmem.bind_family_v1(%(namespace)s, %(family)s, %(roles)s::name[]) AS notes;

-- name: unbind_family --
SELECT pgmem.unbind_family_v1(%(namespace)s, %(family)s, %(roles)s::name[]) AS removed;
