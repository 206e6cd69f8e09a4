-- Migration 0022: the pack's stage-one statement planned once per session (issue 12,
-- session `score`). Frozen: never edit a shipped migration.
--
-- The pack sends one statement, unprepared (a server-side prepare would cost a round trip
-- and breaks behind transaction poolers): stage_one_v1's rows joined to the feedback,
-- family and namespace statistics. Its parse, its plan (joins included) and those joins
-- cost ~0.6-0.8 ms of server CPU per pack on top of the function (10k LoCoMo store). The
-- same statement inside a PL/pgSQL function is planned once per session: ~0.2 ms less
-- server CPU per pack (1.04-1.05x for the statement at 10k and on the demo store, 1.01x
-- at 205k notes; docs/performance.md).
--
-- * pgmem.stage_one_pool_v1, new: stage_one_v1's arguments, its rows in its order with
--   the columns the statement added (ages, bound family, feedback totals, family and
--   namespace statistics) and the note id as text (the client keeps ids as strings).
--   Caller's rights; readers may execute it. stage_one_v1 is unchanged.
--
-- Nothing else changes: no table, no row, no other function.

-- Stage one's rows for a pack: stage_one_v1's, with the feedback and statistics it reads.
CREATE OR REPLACE FUNCTION pgmem.stage_one_pool_v1(
    p_namespace text,
    p_model text,
    p_query_embedding vector,
    p_query text,
    k_dense integer DEFAULT 50,
    k_lex integer DEFAULT 50,
    ef_search integer DEFAULT 100,
    lex_max_terms integer DEFAULT 8,
    lex_max_postings bigint DEFAULT 5000,
    bm25_k1 double precision DEFAULT 1.2,
    bm25_b double precision DEFAULT 0.75,
    dense_weight double precision DEFAULT 0.7,
    lexical_weight double precision DEFAULT 0.3,
    entity_hints text[] DEFAULT '{}',
    entity_boost double precision DEFAULT 0.05,
    time_from timestamptz DEFAULT NULL,
    time_to timestamptz DEFAULT NULL,
    time_boost double precision DEFAULT 0.05,
    keyword_hints text[] DEFAULT '{}',
    keyword_boost double precision DEFAULT 0.05,
    handle_hints text[] DEFAULT '{}',
    handle_boost double precision DEFAULT 0.05,
    link_weight double precision DEFAULT 0.3,
    roles text[] DEFAULT NULL,
    filter jsonb DEFAULT NULL,
    neighbour_seeds integer DEFAULT 10,
    family_candidates integer DEFAULT 12
)
    RETURNS TABLE (
        note_id text,
        external_id text,
        document_id text,
        span_start integer,
        span_end integer,
        text text,
        context text,
        family text,
        role text,
        confidence double precision,
        source_ts timestamptz,
        dense_score double precision,
        lexical_score double precision,
        facet_boost double precision,
        link_boost double precision,
        base_score double precision,
        pool_size integer,
        pool_mean double precision,
        pool_variance double precision,
        pool_entropy double precision,
        family_count integer,
        family_score_sum double precision,
        family_mean_confidence double precision,
        boost_entity double precision,
        boost_time double precision,
        boost_keyword double precision,
        boost_handle double precision,
        created_at timestamptz,
        word_hashes bytea,
        note_age_seconds double precision,
        family_bound boolean,
        family_feedback_helpful double precision,
        family_feedback_unhelpful double precision,
        namespace_feedback_helpful double precision,
        namespace_feedback_unhelpful double precision,
        family_namespace_count bigint,
        family_age_seconds double precision,
        namespace_note_count bigint,
        namespace_age_seconds double precision
    )
    -- The arguments are stage_one_v1's, passed on unchanged; its rows come in its order,
    -- each with: its age (the burst gate on collusion), whether its family is bound to
    -- writer roles (the bound families read once, an init plan), its family's feedback
    -- totals and note count and age in the namespace, the namespace's feedback totals,
    -- size and age. The pack's one statement calls this function rather than joining
    -- these itself: a statement sent unprepared is planned on every pack (joins
    -- included), a PL/pgSQL function's statement once per session. Caller's rights: the
    -- caller's row-level security applies to every table read.
    --
    --   SELECT * FROM pgmem.stage_one_pool_v1('default', 'all-MiniLM-L6-v2-onnx-int8',
    --                                         '[0.01, ...]', 'Who founded the company?');
    LANGUAGE plpgsql STABLE
    AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT s.note_id::text AS note_id, s.external_id, s.document_id, s.span_start, s.span_end, s.text,
           s.context, s.family, s.role, s.confidence, s.source_ts, s.dense_score, s.lexical_score,
           s.facet_boost, s.link_boost, s.base_score, s.pool_size, s.pool_mean, s.pool_variance,
           s.pool_entropy, s.family_count, s.family_score_sum, s.family_mean_confidence, s.boost_entity,
           s.boost_time, s.boost_keyword, s.boost_handle, s.created_at, s.word_hashes,
           extract(epoch FROM now() - s.created_at)::float8 AS note_age_seconds,
           s.family = ANY (ARRAY(SELECT w.family FROM pgmem.family_writers AS w
                                 WHERE w.namespace = p_namespace)) AS family_bound,
           coalesce(r.helpful, 0) AS family_feedback_helpful,
           coalesce(r.unhelpful, 0) AS family_feedback_unhelpful,
           coalesce(t.feedback_helpful, 0) AS namespace_feedback_helpful,
           coalesce(t.feedback_unhelpful, 0) AS namespace_feedback_unhelpful,
           coalesce(fs.note_count, 0) AS family_namespace_count,
           extract(epoch FROM now() - fs.first_seen)::float8 AS family_age_seconds,
           coalesce(t.note_count, 0) AS namespace_note_count,
           extract(epoch FROM now() - t.created_at)::float8 AS namespace_age_seconds
    FROM pgmem.stage_one_v1(
        p_namespace, p_model, p_query_embedding, p_query,
        k_dense => k_dense, k_lex => k_lex, ef_search => ef_search,
        lex_max_terms => lex_max_terms, lex_max_postings => lex_max_postings,
        bm25_k1 => bm25_k1, bm25_b => bm25_b,
        dense_weight => dense_weight, lexical_weight => lexical_weight,
        entity_hints => entity_hints, entity_boost => entity_boost,
        time_from => time_from, time_to => time_to, time_boost => time_boost,
        keyword_hints => keyword_hints, keyword_boost => keyword_boost,
        handle_hints => handle_hints, handle_boost => handle_boost,
        link_weight => link_weight, roles => roles, filter => filter,
        neighbour_seeds => neighbour_seeds, family_candidates => family_candidates) AS s
    LEFT JOIN pgmem.family_reliability AS r ON r.namespace = p_namespace AND r.family = s.family
    LEFT JOIN pgmem.namespaces AS t ON t.namespace = p_namespace
    LEFT JOIN pgmem.family_stats AS fs ON fs.namespace = p_namespace AND fs.family = s.family;
END;
$function$;

REVOKE ALL ON FUNCTION pgmem.stage_one_pool_v1 FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgmem.stage_one_pool_v1 TO pgmem_reader;
