-- Migration 0027: stage one ranks the lexical top k from postings once, as deep as the
-- family cap's deepest spread (issue 12, session 26), the same rows. Frozen: never edit a
-- shipped migration.
--
-- pgmem.stage_one_v1, same signature, grants and rights (CREATE OR REPLACE): on the
-- postings route (small and mid-size namespaces, no row filter), while one provenance
-- family held more than family_candidates of the lexical top k, the whole ranking was run
-- again at 2k, 4k and 8k notes deep, and its cost is reading and summing every query
-- term's postings, whatever the depth: questions with common terms (dates, speakers' names)
-- in a crowded namespace paid it up to four times, which made stage one's p95. It is now
-- ranked once at 8k (k without a cap) and each spread reads a prefix of that ranking,
-- which is what a search that deep returns (the order is total: score, then note id).
-- 200 LoCoMo questions at 100k notes: 0 differing rows (docs/performance.md).

CREATE OR REPLACE FUNCTION pgmem.stage_one_v1(
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
    family_candidates integer DEFAULT 12,
    ef_search_notes bigint DEFAULT 200000
)
    RETURNS TABLE (
        note_id uuid,
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
        word_hashes bytea
    )
    -- Dense top-k through the model's HNSW index,
    -- lexical top-k by BM25 over the notes holding the rarest query terms (ranked from the
    -- postings, or bounded by them), the neighbours of the best of them, their union scored
    -- (weighted cosine + weighted normalised BM25 + bounded facet and link boosts), and the
    -- pool aggregates by window functions, with each note's write time and word hashes
    -- (NULL for notes written before migration 0016 and for text it does not hash). Rows
    -- come best base score first. With family_candidates, no provenance family puts more
    -- than that many notes ahead of other families' in the dense top k, nor in the
    -- lexical top k (searched again up to 8k deep while other families may be found).
    -- The pool aggregates come from the candidates' scores alone; the candidates' wide
    -- columns are carried once, from the fetch to the rows out.
    --
    --   SELECT * FROM pgmem.stage_one_v1('default', 'all-MiniLM-L6-v2-onnx-int8',
    --                                    '[0.01, ...]', 'Who founded the company?', k_dense => 30);
    LANGUAGE plpgsql STABLE
    -- Restored when the function returns, whatever it sets inside.
    SET hnsw.ef_search = 100
    -- Floats travel to the candidate search as text inside one jsonb: print them exactly.
    SET extra_float_digits = 3
    AS $function$
#variable_conflict use_column
DECLARE
    v_model record;
    -- pgvector >= 0.8 can keep scanning HNSW until a filtered search fills k.
    v_iterative boolean := (SELECT string_to_array(e.extversion, '.')::integer[] >= '{0,8}'
                            FROM pg_extension AS e WHERE e.extname = 'vector');
    v_previous_scan text;
    v_vector_type text;
    -- The query's lexemes that occur in the namespace, rarest first, and their BM25 idf.
    v_terms text[];
    v_idf double precision[];
    -- The rarest of them, within lex_max_terms and lex_max_postings: they screen the
    -- lexical candidates (every query term still counts in each candidate's score).
    v_screen tsquery;
    v_screen_terms text[];
    v_screen_idf double precision[];
    -- The query terms outside the screen (they count in every score, screen no note).
    v_other_terms text[];
    v_other_idf double precision[];
    -- The screened notes that can reach the lexical top k, and the score at least k of
    -- them must reach for that bound to hold (NULL: none was left out).
    v_lexical_kept uuid[];
    v_lexical_floor double precision;
    v_lexical_screened integer;
    -- The postings of the screen terms and of the other query terms (summed df).
    v_screen_postings bigint;
    v_other_postings bigint;
    -- The lexical top k itself, best first, when it was ranked from postings alone; and the
    -- ranking the family cap spreads it from, and how deep that ranking went (2k, then 8k).
    v_lexical_top uuid[];
    v_lexical_ranked uuid[];
    v_depth integer;
    v_average_length double precision;
    v_entity_hints text[] := (SELECT coalesce(array_agg(DISTINCT lower(h)), '{}') FROM unnest(entity_hints) AS h);
    -- Which notes may be candidates: the namespace's model, the caller's roles and
    -- metadata filter (compiled from its allowlisted tree; it reads its values from $2).
    v_row_filter text;
    -- The lexical top-k search (SQL text, see step 3).
    v_ranked text;
    v_lexical text;
    -- The dense top k, nearest first; every candidate (dense, lexical, neighbours) once, and
    -- their cosines when the index's type is not the column's (NULL: computed in step 4).
    v_dense uuid[];
    v_candidates uuid[];
    v_cosines double precision[];
    -- The values the dynamic statements read (their $2).
    v_arguments jsonb;
    -- Whether the dense top k is ranked exactly (every note of the namespace) rather than
    -- through the HNSW index: decided from the namespace's size (step 3).
    v_exact_dense boolean;
    v_exact_setting text;
    -- How deep the dense and lexical searches go: k, then (with a family cap) 2k, 4k and
    -- 8k while the cap leaves fewer than k (the lexical search under a bound: 4k at once).
    v_fetch_dense integer := k_dense;
    v_fetch_lex integer := k_lex;
    v_found integer;
    -- What the last spread list said: ids within their family's cap, ids of families
    -- within it, the families above it.
    v_under integer;
    v_others integer;
    v_crowding text[];
    -- The families of the dense top k, nearest first.
    v_dense_families text[];
    -- The HNSW search breadth: ef_search, in proportion to the graph's size above
    -- ef_search_notes notes (step 3).
    v_ef_search integer := ef_search;
    -- The caller's plan_cache_mode, put back after the lexical top k from postings.
    v_plan_mode text;
    v_nestloop text;
    v_mergejoin text;
BEGIN
    IF k_dense < 1 OR k_lex < 0 THEN
        RAISE EXCEPTION 'stage_one_v1: k_dense must be >= 1 and k_lex >= 0, got % and %', k_dense, k_lex
            USING ERRCODE = '22023';
    END IF;
    IF family_candidates < 1 THEN
        RAISE EXCEPTION 'stage_one_v1: family_candidates must be >= 1 (or NULL: no cap), got %', family_candidates
            USING ERRCODE = '22023';
    END IF;
    IF ef_search_notes < 1 THEN
        RAISE EXCEPTION 'stage_one_v1: ef_search_notes must be >= 1 (or NULL: a fixed breadth), got %', ef_search_notes
            USING ERRCODE = '22023';
    END IF;

    SELECT n.model_id, m.name, m.dimension, m.index_type, n.note_count, n.lexeme_total
    INTO v_model
    FROM pgmem.namespaces AS n JOIN pgmem.embedding_models AS m USING (model_id)
    WHERE n.namespace = p_namespace;
    IF NOT FOUND THEN
        RETURN;  -- an unknown namespace holds no notes: an empty pool, not an error
    END IF;
    IF v_model.name <> p_model OR v_model.dimension <> vector_dims(p_query_embedding) THEN
        RAISE EXCEPTION 'namespace % was written with embedding model % (% dimensions), not % (% dimensions)',
            p_namespace, v_model.name, v_model.dimension, p_model, vector_dims(p_query_embedding)
            USING ERRCODE = 'PM002';
    END IF;

    -- Filtering by namespace (and role) needs the iterative scan to fill k; set for this
    -- statement and put back below (a function SET clause would fail on pgvector < 0.8).
    IF v_iterative THEN
        v_previous_scan := current_setting('hnsw.iterative_scan', true);
        PERFORM set_config('hnsw.iterative_scan', 'relaxed_order', true);
    END IF;
    v_vector_type := format('%s(%s)', v_model.index_type, v_model.dimension);
    v_average_length := greatest(v_model.lexeme_total::float8 / greatest(v_model.note_count, 1), 1);
    -- Below pgmem.exact_dense_notes notes (default 6,500: where the planner moved from the
    -- exact scan to HNSW while embeddings were stored out of line, before 0013, for a
    -- namespace alone in its table) the dense top k ranks every note exactly; above it
    -- the planner picks, as before. Not left to cost estimates in small namespaces: they
    -- follow the table's layout (rows kept whole, 0013, made HNSW look cheaper at 3,000
    -- notes) and HNSW is approximate.
    v_exact_setting := nullif(btrim(current_setting('pgmem.exact_dense_notes', true)), '');
    IF v_exact_setting !~ '^[0-9]{1,18}$' THEN
        RAISE EXCEPTION 'stage_one_v1: the setting pgmem.exact_dense_notes must be a note count (>= 0), got %',
            v_exact_setting USING ERRCODE = '22023';
    END IF;
    v_exact_dense := v_model.note_count < coalesce(v_exact_setting::bigint, 6500);
    IF NOT v_exact_dense THEN
        v_ef_search := pgmem.hnsw_breadth_v1(v_model.model_id, v_model.note_count, ef_search, ef_search_notes);
    END IF;

    -- 1. The query terms (static SQL: planned once per session), and those of them that
    -- screen the lexical candidates.
    SELECT coalesce(array_agg(t.lexeme ORDER BY t.df, t.lexeme), '{}'),
           coalesce(array_agg(t.idf ORDER BY t.df, t.lexeme), '{}'),
           string_agg('''' || replace(replace(t.lexeme, '\', '\\'), '''', '''''') || '''', ' | ')
               FILTER (WHERE t.position <= lex_max_terms AND t.postings <= lex_max_postings)::tsquery,
           array_agg(t.lexeme) FILTER (WHERE t.position <= lex_max_terms AND t.postings <= lex_max_postings),
           array_agg(t.idf) FILTER (WHERE t.position <= lex_max_terms AND t.postings <= lex_max_postings),
           array_agg(t.lexeme) FILTER (WHERE NOT (t.position <= lex_max_terms AND t.postings <= lex_max_postings)),
           array_agg(t.idf) FILTER (WHERE NOT (t.position <= lex_max_terms AND t.postings <= lex_max_postings)),
           coalesce(sum(t.df) FILTER (WHERE t.position <= lex_max_terms AND t.postings <= lex_max_postings), 0),
           coalesce(sum(t.df) FILTER (WHERE NOT (t.position <= lex_max_terms AND t.postings <= lex_max_postings)), 0)
    INTO v_terms, v_idf, v_screen, v_screen_terms, v_screen_idf, v_other_terms, v_other_idf, v_screen_postings,
         v_other_postings
    FROM (SELECT s.lexeme,
                 s.document_frequency AS df,
                 ln(1 + (v_model.note_count::float8 - s.document_frequency + 0.5) / (s.document_frequency + 0.5)) AS idf,
                 row_number() OVER w AS position,
                 sum(s.document_frequency) OVER w AS postings
          FROM (SELECT DISTINCT u.lexeme FROM unnest(to_tsvector('english', p_query)) AS u) AS q
          JOIN pgmem.lexeme_stats AS s ON s.namespace = p_namespace AND s.lexeme = q.lexeme
          WHERE s.document_frequency > 0
          WINDOW w AS (ORDER BY s.document_frequency, s.lexeme)) AS t;

    -- 2. The lexical top k from postings (static SQL). Without a role or metadata filter,
    -- when the other terms' postings are few enough (at most 4x the screen's, or at most
    -- lex_max_postings: few in any case, as in small namespaces asked long questions), it is
    -- ranked from the postings of every query term, no note visited; the scores are
    -- bm25_v1's bit for bit: the same terms summed in the same order (a tsvector's
    -- lexemes are in byte order, COLLATE "C"). Otherwise, without a row filter, the notes
    -- holding a screen term are ranked from the postings of every query term (joined to
    -- them before the sums: the common terms' postings of other notes are never summed);
    -- with one, a bound read from the screen terms' postings (pgmem.lexical_bound_v1)
    -- leaves out the screened notes that cannot reach the top k, and holds when the
    -- filter removes no note above it, which the candidate search checks.
    IF k_lex > 0 AND v_screen IS NOT NULL THEN
        IF roles IS NULL AND filter IS NULL AND v_other_postings <= greatest(4 * v_screen_postings, lex_max_postings) THEN
            -- Planned once per session: with its arrays' lengths known, a custom plan
            -- looks cheaper than the generic one (whose shape is the same: the postings
            -- of each query term by key), so it was planned again on every call.
            -- Ranked 2k deep (k without a cap): the cost is reading and summing the
            -- postings, whatever the depth, and the order is total (score, then id), so each
            -- spread reads a prefix of the ranking, which is what a search that deep
            -- returns. A family crowding the first k is mostly spread out by the next k; if
            -- not, it is ranked once more, as deep as the deepest spread (8k). Migration 0027:
            -- the search was run again at 2k, 4k and 8k while a family crowded the list.
            v_plan_mode := current_setting('plan_cache_mode');
            v_depth := CASE WHEN family_candidates IS NULL THEN v_fetch_lex ELSE 2 * v_fetch_lex END;
            <<ranking>>
            LOOP
                PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
                -- ARRAY(...) keeps its rows' order: no second sort of the ranked ids.
                v_lexical_ranked := ARRAY(
                    SELECT p.note_id
                    FROM unnest(v_terms, v_idf) AS q (lexeme, idf)
                    JOIN pgmem.lexeme_postings AS p ON p.namespace = p_namespace AND p.lexeme = q.lexeme
                    GROUP BY p.note_id
                    HAVING bool_or(p.lexeme = ANY (v_screen_terms))
                    ORDER BY sum(pgmem.bm25_term_v1(q.idf, p.term_frequency, bm25_k1, bm25_b, p.lexeme_count,
                                                    v_average_length) ORDER BY p.lexeme COLLATE "C") DESC, p.note_id
                    LIMIT v_depth);
                PERFORM set_config('plan_cache_mode', v_plan_mode, true);
                LOOP
                    v_lexical_top := v_lexical_ranked[1:v_fetch_lex];
                    EXIT ranking WHEN family_candidates IS NULL;
                    v_found := cardinality(v_lexical_top);
                    SELECT f.notes, f.under_cap, f.other_notes, f.crowding
                    INTO v_lexical_top, v_under, v_others, v_crowding
                    FROM pgmem.family_spread_v1(p_namespace, v_lexical_top, family_candidates, k_lex) AS f;
                    EXIT ranking WHEN v_under >= k_lex OR v_found < v_fetch_lex OR v_fetch_lex >= 8 * k_lex
                                      OR v_others >= pgmem.notes_outside_v1(p_namespace, v_crowding);
                    v_fetch_lex := 2 * v_fetch_lex;
                    EXIT WHEN v_fetch_lex > v_depth;
                END LOOP;
                v_depth := 8 * k_lex;
            END LOOP;
        ELSE
            v_fetch_lex := CASE WHEN family_candidates IS NULL THEN k_lex ELSE 4 * k_lex END;
            IF roles IS NULL AND filter IS NULL THEN
                -- No row filter: every screened note, ranked from the query terms'
                -- postings, no bound read (migration 0026): the ranking reads every query
                -- term's postings whatever it is given, so the bound's pruning saved
                -- little, and its completion of the best 2k partial scores (an index probe
                -- per note and other term) cost more: at a million notes it kept every
                -- screened note for 164 of 200 questions.
                SELECT coalesce(array_agg(DISTINCT p.note_id), '{}')
                INTO v_lexical_kept
                FROM pgmem.lexeme_postings AS p
                WHERE p.namespace = p_namespace AND p.lexeme = ANY (v_screen_terms);
                -- No note visited and no dynamic statement; the scores are bm25_v1's bit
                -- for bit, as above. The order and the family spread are the candidate
                -- search's below, whose rows they are. Planned once per session, and as a
                -- hash join of each term's postings (read in index order) to the kept
                -- notes: the planner otherwise probes the index once per kept note and
                -- term, which costs ~3 us a probe once the postings outgrow the cache
                -- (1M notes: 47 ms against 17 ms for the hash join, the same rows).
                v_plan_mode := current_setting('plan_cache_mode');
                v_nestloop := current_setting('enable_nestloop');
                v_mergejoin := current_setting('enable_mergejoin');
                PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
                PERFORM set_config('enable_nestloop', 'off', true);
                PERFORM set_config('enable_mergejoin', 'off', true);
                SELECT coalesce(array_agg(s.note_id ORDER BY s.score DESC, s.note_id), '{}')
                INTO v_lexical_top
                FROM (SELECT p.note_id,
                             sum(pgmem.bm25_term_v1(q.idf, p.term_frequency, bm25_k1, bm25_b, p.lexeme_count,
                                                    v_average_length) ORDER BY p.lexeme COLLATE "C") AS score
                      FROM pgmem.lexeme_postings AS p
                      JOIN unnest(v_terms, v_idf) AS q (lexeme, idf) ON q.lexeme = p.lexeme
                      JOIN unnest(v_lexical_kept) AS k (note_id) ON k.note_id = p.note_id
                      WHERE p.namespace = p_namespace AND p.lexeme = ANY (v_terms)
                      GROUP BY p.note_id
                      ORDER BY score DESC, p.note_id
                      LIMIT v_fetch_lex) AS s;
                PERFORM set_config('enable_mergejoin', v_mergejoin, true);
                PERFORM set_config('enable_nestloop', v_nestloop, true);
                PERFORM set_config('plan_cache_mode', v_plan_mode, true);
                SELECT f.notes INTO v_lexical_top
                FROM pgmem.family_spread_v1(p_namespace, v_lexical_top, family_candidates, k_lex) AS f;
                v_lexical_kept := NULL;
            ELSE
                SELECT l.kept_notes, l.score_floor, l.screened_notes
                INTO v_lexical_kept, v_lexical_floor, v_lexical_screened
                FROM pgmem.lexical_bound_v1(p_namespace, v_screen_terms, v_screen_idf, coalesce(v_other_terms, '{}'),
                                            coalesce(v_other_idf, '{}'), v_fetch_lex, bm25_k1, bm25_b, v_average_length) AS l;
                -- Notes fetched by key cost more each than a bitmap scan of the screened ones:
                -- when the bound leaves out less than half, the search of every screened
                -- note (the same rows) is the cheaper one.
                IF cardinality(v_lexical_kept) * 2 > v_lexical_screened THEN
                    v_lexical_kept := NULL;
                    v_lexical_floor := NULL;
                END IF;
            END IF;
        END IF;
    END IF;

    -- 3. The candidates: dense top-k through the model's HNSW index, lexical top-k by
    -- BM25 over the screened notes, and the neighbours the best of them pull in. The dense
    -- top k is a dynamic statement: its SQL depends on the model (the index is partial on
    -- it, over a dimension-typed expression), on the filter's shape and on v_exact_dense:
    -- the exact ranking orders by the distance plus 0 (the same order), which no index
    -- matches, so the planner cannot use HNSW for it. $1 is the namespace (the
    -- distribution key: Citus routes on namespace = $1); every other value is a named
    -- field of one jsonb, $2.
    v_row_filter := format(
        'n.model_id = %s AND (($2 ->> ''roles'') IS NULL OR n.role = ANY (($2 ->> ''roles'')::text[])) AND (%s)',
        v_model.model_id,
        CASE WHEN filter IS NULL THEN 'true' ELSE pgmem.compile_filter_v1(filter, '$2', ARRAY['filter']) END);
    v_arguments := jsonb_build_object(
        'query_embedding', p_query_embedding::text,
        'k_lex', v_fetch_lex, 'k_lex_kept', k_lex,
        'family_candidates', family_candidates, 'neighbour_seeds', neighbour_seeds,
        'roles', roles::text, 'filter', filter, 'screen', v_screen::text,
        'terms', v_terms::text, 'idf', v_idf::text, 'bm25_k1', bm25_k1::text, 'bm25_b', bm25_b::text,
        'average_length', v_average_length::text,
        'lexical_kept', v_lexical_kept::text, 'lexical_floor', v_lexical_floor::text,
        'lexical_top', v_lexical_top::text);
    -- Exact and unfiltered on a vector index, it is static SQL (planned once per session):
    -- the plain column orders like its dimension-typed cast.
    LOOP
        -- ef_search must be at least k for HNSW to return k rows (local to this call), and
        -- at most pgvector's 1000: deeper searches (k_dense above 125 with a crowding
        -- family) rely on the iterative scan, which goes on past ef_search.
        PERFORM set_config('hnsw.ef_search', least(greatest(v_ef_search, v_fetch_dense), 1000)::text, true);
        IF v_exact_dense AND filter IS NULL AND v_model.index_type = 'vector' THEN
            IF family_candidates IS NULL THEN
                v_dense := ARRAY(
                    SELECT n.note_id
                    FROM pgmem.notes AS n
                    WHERE n.namespace = p_namespace AND n.model_id = v_model.model_id
                      AND (roles IS NULL OR n.role = ANY (roles))
                    ORDER BY (n.embedding <=> p_query_embedding) + 0
                    LIMIT k_dense);
            ELSE
                -- One exact ranking as deep as the deepest search (every note is read
                -- anyway): the loop ends after it. The nearest k first, with their families:
                -- when no family holds more than family_candidates of them, every one is
                -- within its family's cap, so they are the spread list's first k as they
                -- stand, and the ranking need not go deeper (sorting 8k notes by family
                -- cost more than reading them).
                v_fetch_dense := 8 * k_dense;
                SELECT coalesce(array_agg(t.note_id ORDER BY t.distance, t.note_id), '{}'),
                       coalesce(array_agg(t.family ORDER BY t.distance, t.note_id), '{}')
                INTO v_dense, v_dense_families
                FROM (SELECT n.note_id, n.family, (n.embedding <=> p_query_embedding) + 0 AS distance
                      FROM pgmem.notes AS n
                      WHERE n.namespace = p_namespace AND n.model_id = v_model.model_id
                        AND (roles IS NULL OR n.role = ANY (roles))
                      ORDER BY (n.embedding <=> p_query_embedding) + 0, n.note_id
                      LIMIT k_dense) AS t;
                IF (SELECT max(f.held) FROM (SELECT count(*) AS held FROM unnest(v_dense_families) AS d (family)
                                             GROUP BY d.family) AS f) > family_candidates THEN
                    -- A family holds more: the nearest 8k spread, at most family_candidates
                    -- of a family ahead of the rest (families compared bytewise: the same
                    -- partitions, a cheaper sort).
                    v_dense := ARRAY(
                        SELECT c.note_id
                        FROM (SELECT t.note_id, t.distance,
                                     row_number() OVER (PARTITION BY t.family COLLATE "C"
                                                        ORDER BY t.distance, t.note_id) AS taken
                              FROM (SELECT n.note_id, n.family, (n.embedding <=> p_query_embedding) + 0 AS distance
                                    FROM pgmem.notes AS n
                                    WHERE n.namespace = p_namespace AND n.model_id = v_model.model_id
                                      AND (roles IS NULL OR n.role = ANY (roles))
                                    ORDER BY (n.embedding <=> p_query_embedding) + 0, n.note_id
                                    LIMIT v_fetch_dense) AS t) AS c
                        ORDER BY c.taken > family_candidates, c.distance, c.note_id
                        LIMIT k_dense);
                END IF;
            END IF;
        ELSIF family_candidates IS NULL THEN
            EXECUTE format($dense$
            SELECT ARRAY(
                SELECT n.note_id
                FROM pgmem.notes AS n
                WHERE n.namespace = $1 AND %1$s
                ORDER BY (n.embedding::%2$s <=> ($2 ->> 'query_embedding')::%2$s)%3$s
                LIMIT ($2 ->> 'k_dense')::integer)
            $dense$, v_row_filter, v_vector_type, CASE WHEN v_exact_dense THEN ' + 0' ELSE '' END)
            INTO v_dense
            USING p_namespace, v_arguments || jsonb_build_object('k_dense', k_dense);
        ELSE
            IF v_exact_dense THEN
                v_fetch_dense := 8 * k_dense;  -- one exact ranking, as deep as the deepest search
            END IF;
            -- The nearest notes with their families, nearest first (ties by note id).
            EXECUTE format($dense$
            SELECT coalesce(array_agg(t.note_id ORDER BY t.distance, t.note_id), '{}'),
                   coalesce(array_agg(t.family ORDER BY t.distance, t.note_id), '{}')
            FROM (SELECT n.note_id, n.family,
                         (n.embedding::%2$s <=> ($2 ->> 'query_embedding')::%2$s)%3$s AS distance
                  FROM pgmem.notes AS n
                  WHERE n.namespace = $1 AND %1$s
                  ORDER BY (n.embedding::%2$s <=> ($2 ->> 'query_embedding')::%2$s)%3$s
                  LIMIT ($2 ->> 'k_dense')::integer) AS t
            $dense$, v_row_filter, v_vector_type, CASE WHEN v_exact_dense THEN ' + 0' ELSE '' END)
            INTO v_dense, v_dense_families
            USING p_namespace, v_arguments || jsonb_build_object('k_dense', v_fetch_dense);
            v_found := cardinality(v_dense);
            IF (SELECT coalesce(max(f.held), 0) FROM (SELECT count(*) AS held FROM unnest(v_dense_families) AS d (family)
                                                      GROUP BY d.family) AS f) <= family_candidates THEN
                -- No family above the cap: every note is within it, the list stands.
                v_dense := v_dense[1:k_dense];
                v_under := v_found;
                v_others := v_found;
                v_crowding := '{}';
            ELSE
                -- Spread (static SQL): at most family_candidates of a family ahead.
                SELECT coalesce((array_agg(c.note_id ORDER BY c.taken > family_candidates, c.position))[1:k_dense], '{}'),
                       count(*) FILTER (WHERE c.taken <= family_candidates),
                       count(*) FILTER (WHERE c.held <= family_candidates),
                       coalesce(array_agg(DISTINCT c.family) FILTER (WHERE c.held > family_candidates), '{}')
                INTO v_dense, v_under, v_others, v_crowding
                FROM (SELECT d.note_id, d.family, d.position,
                             row_number() OVER (PARTITION BY d.family ORDER BY d.position) AS taken,
                             count(*) OVER (PARTITION BY d.family) AS held
                      FROM unnest(v_dense, v_dense_families) WITH ORDINALITY AS d (note_id, family, position)) AS c;
            END IF;
        END IF;
        EXIT WHEN family_candidates IS NULL;
        -- Deeper while fewer than k are within their family's cap, the search was not
        -- exhausted, and the namespace holds notes of other families it has not found.
        EXIT WHEN v_under >= k_dense OR v_found < v_fetch_dense OR v_fetch_dense >= 8 * k_dense
                  OR v_others >= pgmem.notes_outside_v1(p_namespace, v_crowding);
        v_fetch_dense := 2 * v_fetch_dense;
    END LOOP;

    IF v_iterative THEN
        PERFORM set_config('hnsw.iterative_scan', coalesce(v_previous_scan, 'off'), true);
    END IF;

    -- The usual call (no metadata filter, the lexical top k already ranked from postings or
    -- empty, a vector index) takes the neighbours and the union by static SQL, planned
    -- once per session; its cosines are computed in step 4, in the column's own type. The
    -- best few dense and lexical candidates bring their neighbours along: the previous and
    -- next span of their document, and the notes they link to; neighbours pass the same
    -- model, role and metadata filters as every candidate.
    IF filter IS NULL AND v_model.index_type = 'vector'
       AND (v_lexical_top IS NOT NULL OR v_screen IS NULL OR k_lex = 0) THEN
        v_candidates := ARRAY(
            WITH
            seeds AS (
                (SELECT d.note_id FROM unnest(v_dense) AS d (note_id) LIMIT neighbour_seeds)
                UNION
                (SELECT l.note_id FROM unnest(v_lexical_top) AS l (note_id) LIMIT neighbour_seeds)
            ),
            neighbours AS (
                SELECT nb.note_id
                FROM seeds AS sd
                JOIN pgmem.notes AS s ON s.namespace = p_namespace AND s.note_id = sd.note_id
                CROSS JOIN LATERAL (
                    (SELECT n.note_id FROM pgmem.notes AS n
                     WHERE n.namespace = p_namespace AND n.document_id = s.document_id
                       AND n.span_start < s.span_start AND n.model_id = v_model.model_id
                       AND (roles IS NULL OR n.role = ANY (roles))
                     ORDER BY n.span_start DESC LIMIT 1)
                    UNION ALL
                    (SELECT n.note_id FROM pgmem.notes AS n
                     WHERE n.namespace = p_namespace AND n.document_id = s.document_id
                       AND n.span_start > s.span_start AND n.model_id = v_model.model_id
                       AND (roles IS NULL OR n.role = ANY (roles))
                     ORDER BY n.span_start LIMIT 1)
                    UNION ALL
                    (SELECT n.note_id FROM unnest(s.links) AS l (target)
                     JOIN pgmem.notes AS n ON n.namespace = p_namespace AND n.note_id = l.target
                     WHERE n.model_id = v_model.model_id AND (roles IS NULL OR n.role = ANY (roles)))
                ) AS nb
                WHERE neighbour_seeds > 0
            )
            SELECT c.note_id
            FROM (SELECT d.note_id FROM unnest(v_dense) AS d (note_id)
                  UNION SELECT l.note_id FROM unnest(v_lexical_top) AS l (note_id)
                  UNION SELECT nb.note_id FROM neighbours AS nb) AS c
            ORDER BY c.note_id);
    ELSE
        -- The lexical top k (by pgmem.bm25_v1, best first), by the cheapest search that returns
        -- it: among the kept notes alone when no role or metadata filter can remove any (every
        -- note of a namespace is its model's); among the kept notes, checked against the
        -- floor, with the search of every screened note as the fallback when the filter
        -- removed too many; the search of every screened note when there is no bound.
        v_ranked := $ranked$
            SELECT n.note_id, score.bm25
            FROM pgmem.notes AS n
            CROSS JOIN LATERAL pgmem.bm25_v1(n.lexemes, n.lexeme_count, ($2 ->> 'terms')::text[],
                                             ($2 ->> 'idf')::float8[], ($2 ->> 'bm25_k1')::float8,
                                             ($2 ->> 'bm25_b')::float8, ($2 ->> 'average_length')::float8) AS score
            WHERE n.namespace = $1 AND %2$s AND %1$s
            ORDER BY score.bm25 DESC, n.note_id
            LIMIT ($2 ->> 'k_lex')::integer
        $ranked$;
        v_lexical := format(
            CASE
                WHEN v_lexical_top IS NOT NULL THEN $lexical$
        lexical_found AS (SELECT t.note_id FROM unnest(($2 ->> 'lexical_top')::uuid[]) WITH ORDINALITY AS t (note_id, rank)
                          ORDER BY t.rank),$lexical$
                WHEN v_lexical_kept IS NULL THEN $lexical$
        lexical_found AS (%2$s),$lexical$
                WHEN roles IS NULL AND filter IS NULL THEN $lexical$
        lexical_found AS (%1$s),$lexical$
                ELSE $lexical$
        lexical_kept AS MATERIALIZED (%1$s),
        lexical_bound AS (
            SELECT ($2 ->> 'lexical_floor') IS NULL OR count(*) >= ($2 ->> 'k_lex')::integer AS held
            FROM lexical_kept AS k
            WHERE k.bm25 >= ($2 ->> 'lexical_floor')::float8 OR ($2 ->> 'lexical_floor') IS NULL
        ),
        lexical_found AS (
            (SELECT k.note_id FROM lexical_kept AS k WHERE (SELECT b.held FROM lexical_bound AS b))
            UNION ALL
            (SELECT s.note_id FROM (%2$s) AS s WHERE NOT (SELECT b.held FROM lexical_bound AS b))
        ),$lexical$
            END,
            format(v_ranked, v_row_filter, $$n.note_id = ANY (($2 ->> 'lexical_kept')::uuid[])$$),
            format(v_ranked, v_row_filter,
                   $$($2 ->> 'k_lex')::integer > 0 AND n.lexemes @@ ($2 ->> 'screen')::tsquery$$));
        EXECUTE format($candidates$
        WITH %3$s
        -- The lexical top k, best first (thinned to family_candidates per family when set).
        lexical AS (
            SELECT c.note_id
            FROM pgmem.family_spread_v1($1, ARRAY(SELECT f.note_id FROM lexical_found AS f),
                                        ($2 ->> 'family_candidates')::integer,
                                        ($2 ->> 'k_lex_kept')::integer) AS s
            CROSS JOIN LATERAL unnest(s.notes) WITH ORDINALITY AS c (note_id, position)
            ORDER BY c.position
        ),
        dense AS (SELECT d.note_id FROM unnest(($2 ->> 'dense')::uuid[]) AS d (note_id)),
        -- The best few dense and lexical candidates bring their neighbours along: the
        -- previous and next span of their document, and the notes they link to.
        seeds AS (
            (SELECT d.note_id FROM dense AS d LIMIT ($2 ->> 'neighbour_seeds')::integer)
            UNION
            (SELECT l.note_id FROM lexical AS l LIMIT ($2 ->> 'neighbour_seeds')::integer)
        ),
        neighbours AS MATERIALIZED (
            SELECT nb.note_id
            FROM seeds AS sd
            JOIN pgmem.notes AS s ON s.namespace = $1 AND s.note_id = sd.note_id
            CROSS JOIN LATERAL (
                -- Neighbours pass the same model, role and metadata filters as every candidate.
                (SELECT n.note_id FROM pgmem.notes AS n
                 WHERE n.namespace = $1 AND n.document_id = s.document_id
                   AND n.span_start < s.span_start AND %1$s
                 ORDER BY n.span_start DESC LIMIT 1)
                UNION ALL
                (SELECT n.note_id FROM pgmem.notes AS n
                 WHERE n.namespace = $1 AND n.document_id = s.document_id
                   AND n.span_start > s.span_start AND %1$s
                 ORDER BY n.span_start LIMIT 1)
                UNION ALL
                (SELECT n.note_id FROM unnest(s.links) AS l (target)
                 JOIN pgmem.notes AS n ON n.namespace = $1 AND n.note_id = l.target
                 WHERE %1$s)
            ) AS nb
            WHERE ($2 ->> 'neighbour_seeds')::integer > 0
        )
        -- Each candidate once, fetched by key, with its cosine in the index's own type.
        SELECT array_agg(n.note_id), array_agg(1 - (n.embedding::%2$s <=> ($2 ->> 'query_embedding')::%2$s))
        FROM pgmem.notes AS n
        WHERE n.namespace = $1
          AND n.note_id = ANY (ARRAY(SELECT d.note_id FROM dense AS d
                                     UNION SELECT l.note_id FROM lexical AS l
                                     UNION SELECT nb.note_id FROM neighbours AS nb))
        $candidates$, v_row_filter, v_vector_type, v_lexical)
        INTO v_candidates, v_cosines
        USING p_namespace, v_arguments || jsonb_build_object('dense', v_dense::text);
    END IF;

    -- 4. Scores, boosts and pool aggregates of the candidates (static SQL: planned once
    -- per session). Each boost is computed once per candidate, and only when its hints
    -- are given. The candidates are fetched once, with the columns the rows return; the
    -- scores, boosts and aggregates are computed on narrow rows (note, family, scores) and
    -- joined to them at the end: each wide row is copied once into the fetch and once into
    -- the final sort instead of into every step. Rows come best base score first.
    RETURN QUERY
    WITH
    scored AS (
        SELECT n.note_id, n.external_id, n.document_id, n.span_start, n.span_end, n.text, n.context,
               n.family, n.role, n.confidence, n.source_ts, n.entities, n.time_tags, n.keywords,
               n.handles, n.links, n.created_at, n.word_hashes,
               CASE WHEN v_cosines IS NULL THEN 1 - (n.embedding <=> p_query_embedding) ELSE c.cosine END AS cosine,
               coalesce(score.bm25, 0) AS bm25
        FROM unnest(v_candidates, v_cosines) AS c (note_id, cosine)
        JOIN pgmem.notes AS n ON n.namespace = p_namespace AND n.note_id = c.note_id
        CROSS JOIN LATERAL pgmem.bm25_v1(n.lexemes, n.lexeme_count, v_terms, v_idf, bm25_k1, bm25_b,
                                         v_average_length) AS score
    ),
    -- Entity hints: the share of hints matched, each weighted by the best confidence of a
    -- tag with its text (summed in text order); one pass over the candidates' tags.
    entity_matches AS (
        SELECT m.note_id, sum(m.best ORDER BY m.tag) AS matched
        FROM (SELECT s.note_id, lower(e.value ->> 'text') AS tag, max((e.value ->> 'confidence')::float8) AS best
              FROM scored AS s
              CROSS JOIN LATERAL jsonb_array_elements(s.entities) AS e
              WHERE cardinality(v_entity_hints) > 0 AND lower(e.value ->> 'text') = ANY (v_entity_hints)
              GROUP BY s.note_id, lower(e.value ->> 'text')) AS m
        GROUP BY m.note_id
    ),
    -- Relevance (weighted cosine + weighted normalised BM25) and the facet boosts, on
    -- narrow rows; the best BM25 of the pool read once.
    boosted AS MATERIALIZED (
        SELECT s.note_id, s.document_id, s.family, s.confidence, s.links, s.cosine,
               coalesce(s.bm25 / nullif(best.bm25, 0), 0) AS lexical,
               dense_weight * s.cosine
                   + lexical_weight * coalesce(s.bm25 / nullif(best.bm25, 0), 0) AS relevance,
               entity_boost * coalesce(em.matched / nullif(cardinality(v_entity_hints), 0), 0) AS boost_entity,
               -- time hint: the best-confidence time tag overlapping it, else the source time
               time_boost * CASE
                   WHEN time_from IS NULL AND time_to IS NULL THEN 0
                   ELSE coalesce((
                       SELECT max((t.value ->> 'confidence')::float8)
                       FROM jsonb_array_elements(s.time_tags) AS t
                       WHERE (t.value ->> 'end')::timestamptz > coalesce(time_from, '-infinity')
                         AND (t.value ->> 'start')::timestamptz < coalesce(time_to, 'infinity')
                   ), CASE WHEN s.source_ts >= coalesce(time_from, '-infinity')
                            AND s.source_ts < coalesce(time_to, 'infinity') THEN 0.5 ELSE 0 END)
               END AS boost_time,
               keyword_boost * CASE WHEN cardinality(keyword_hints) > 0
                   THEN coalesce((SELECT count(*)::float8 / nullif(cardinality(keyword_hints), 0)
                                  FROM unnest(keyword_hints) AS k WHERE k = ANY (s.keywords)), 0)
                   ELSE 0 END AS boost_keyword,
               handle_boost * CASE WHEN cardinality(handle_hints) > 0
                   THEN coalesce((SELECT count(*)::float8 / nullif(cardinality(handle_hints), 0)
                                  FROM unnest(handle_hints) AS h WHERE h = ANY (s.handles)), 0)
                   ELSE 0 END AS boost_handle
        FROM scored AS s
        CROSS JOIN (SELECT max(m.bm25) AS bm25 FROM scored AS m) AS best
        LEFT JOIN entity_matches AS em ON em.note_id = s.note_id
    ),
    -- The link boost follows links within a document (previous/next span), both ways
    -- since links are written one way (notes are immutable). Links between documents
    -- (shared rare handles or entities) only pull neighbours into the pool: as a boost
    -- they cost 5.5 points of recall on MultiHop-RAG and gained nothing on LoCoMo.
    linked AS (
        SELECT a.note_id, max(b.relevance) AS best_link
        FROM boosted AS a
        JOIN boosted AS b ON b.document_id = a.document_id AND b.note_id <> a.note_id
        WHERE link_weight > 0 AND (b.note_id = ANY (a.links) OR a.note_id = ANY (b.links))
        GROUP BY a.note_id
    ),
    based AS MATERIALIZED (
        SELECT b.note_id, b.family, b.confidence, b.cosine, b.lexical, b.boost_entity, b.boost_time,
               b.boost_keyword, b.boost_handle,
               b.boost_entity + b.boost_time + b.boost_keyword + b.boost_handle AS facet_boost,
               link_weight * coalesce(l.best_link, 0) AS link_boost,
               b.relevance + (b.boost_entity + b.boost_time + b.boost_keyword + b.boost_handle)
                   + link_weight * coalesce(l.best_link, 0) AS base_score
        FROM boosted AS b
        LEFT JOIN linked AS l ON l.note_id = b.note_id
    ),
    -- The pool aggregates: per family, then over the pool (the entropy
    -- H = -avg over rows of ln(m_f / N) = -sum_f (m_f / N) ln(m_f / N)).
    families AS (
        SELECT b.family, count(*) AS family_count, sum(b.base_score) AS family_score_sum,
               avg(b.confidence::float8) AS family_mean_confidence
        FROM based AS b
        GROUP BY b.family
    ),
    pool AS MATERIALIZED (
        SELECT count(*) AS pool_size, avg(b.base_score) AS pool_mean, var_pop(b.base_score) AS pool_variance,
               greatest(-avg(ln(f.family_count::float8 / (SELECT count(*) FROM based AS c))), 0) AS pool_entropy
        FROM based AS b
        JOIN families AS f ON f.family = b.family
    )
    SELECT s.note_id, s.external_id, s.document_id, s.span_start, s.span_end, s.text,
           s.context, s.family, s.role, s.confidence::float8, s.source_ts,
           b.cosine, b.lexical, b.facet_boost, b.link_boost, b.base_score,
           p.pool_size::integer, p.pool_mean, p.pool_variance, p.pool_entropy,
           f.family_count::integer, f.family_score_sum, f.family_mean_confidence,
           b.boost_entity, b.boost_time, b.boost_keyword, b.boost_handle, s.created_at, s.word_hashes
    FROM based AS b
    JOIN families AS f ON f.family = b.family
    JOIN scored AS s ON s.note_id = b.note_id
    CROSS JOIN pool AS p
    ORDER BY b.base_score DESC, b.note_id;
END;
$function$;
