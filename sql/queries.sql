-- Named statements pgmem runs, loaded once by pgmem.db.queries. Each block starts
-- with a "-- name: NAME --" line; parameters are psycopg placeholders (%(name)s),
-- never string concatenation.

-- name: register_namespace --
SELECT pgmem.register_namespace_v1(%(namespace)s, %(model)s, %(dimension)s) AS model_id;

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
FROM STDIN;

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
-- reads (the family's notes in the namespace and its age, the namespace's size and
-- age), in one statement.
SELECT s.*,
       coalesce(r.helpful, 0) AS family_feedback_helpful,
       coalesce(r.unhelpful, 0) AS family_feedback_unhelpful,
       coalesce(t.feedback_helpful, 0) AS namespace_feedback_helpful,
       coalesce(t.feedback_unhelpful, 0) AS namespace_feedback_unhelpful,
       coalesce(fs.note_count, 0) AS family_namespace_count,
       extract(epoch FROM now() - fs.first_seen)::float8 AS family_age_seconds,
       coalesce(t.note_count, 0) AS namespace_note_count,
       extract(epoch FROM now() - t.created_at)::float8 AS namespace_age_seconds
FROM pgmem.stage_one_v1(
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
    neighbour_seeds => %(neighbour_seeds)s) AS s
LEFT JOIN pgmem.family_reliability AS r ON r.namespace = %(namespace)s AND r.family = s.family
LEFT JOIN pgmem.namespaces AS t ON t.namespace = %(namespace)s
LEFT JOIN pgmem.family_stats AS fs ON fs.namespace = %(namespace)s AND fs.family = s.family;

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
