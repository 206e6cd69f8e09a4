-- pgmem: the current schema, in full, each object written once in its final form.
--
-- pgmem.migrate applies this file to a fresh database in one step and stamps it at the
-- head alembic revision; an existing database is upgraded instead by replaying the
-- frozen migrations in sql/migrations/ (named by the revisions in alembic/versions/).
-- Both roads must end in the same schema: tests/test_migrations.py builds one database
-- from this file and one from the migration chain and compares them through catalog
-- queries (tests/schema_catalog.py: columns, constraints, indexes, function
-- definitions and settings, triggers, views, policies, grants, comments, ...), and
-- checks that the comparison sees each kind of change. Change this file and add a
-- migration together; never edit a migration that has shipped.
--
-- The file reads top-down, grouped by kind: extensions, schema and group roles; types;
-- the functions table definitions call; tables; indexes; functions; triggers; views;
-- row-level security; role memberships and grants. Every statement refers only to
-- objects above it (PL/pgSQL bodies are checked when they run, not here).

-- == Extensions, schema and group roles ==

CREATE EXTENSION IF NOT EXISTS vector;

CREATE SCHEMA IF NOT EXISTS pgmem;

-- Group roles (cluster-wide, NOLOGIN): grant them to your login roles. Created here,
-- before anything names them (policies do); their privileges are in the last section.
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

-- == Types ==

-- pgmem defines no types of its own: the embedding column is pgvector's vector, and
-- structured values are jsonb checked by constraints.

-- == Functions that table definitions call ==

-- Generated columns of pgmem.notes are computed by these, so they precede the tables.

-- Length of a tsvector in tokens: the total count of lexeme occurrences (for BM25).
CREATE FUNCTION pgmem.tsvector_token_count(value tsvector) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (SELECT coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)::integer
            FROM unnest(value) AS u);

-- The lexical text of a note: its context descriptor, then its span text.
CREATE FUNCTION pgmem.note_lexemes(context text, body text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN to_tsvector('english'::regconfig, coalesce(context, '') || ' ' || coalesce(body, ''));

-- == Tables ==

-- The embedding models notes were written with. A namespace is bound to one model;
-- packing with another model or dimension is refused (SQLSTATE PM002).
CREATE TABLE pgmem.embedding_models (
    model_id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL CHECK (name <> ''),
    dimension integer NOT NULL CHECK (dimension BETWEEN 1 AND 4000),
    -- pgvector's HNSW indexes vector up to 2,000 dimensions and halfvec up to 4,000.
    index_type text NOT NULL GENERATED ALWAYS AS (
        CASE WHEN dimension <= 2000 THEN 'vector' ELSE 'halfvec' END
    ) STORED,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (name, dimension)
);

-- One row per namespace (an isolated memory: one agent, user or tenant), with the
-- running statistics BM25 needs (note count and summed lexeme count).
CREATE TABLE pgmem.namespaces (
    namespace text PRIMARY KEY CHECK (namespace ~ '^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$'),
    model_id integer NOT NULL REFERENCES pgmem.embedding_models (model_id),
    note_count bigint NOT NULL DEFAULT 0,
    lexeme_total bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- Namespace totals of the feedback, so stage one reads the base rate in O(1).
    feedback_helpful double precision NOT NULL DEFAULT 0,
    feedback_unhelpful double precision NOT NULL DEFAULT 0,
    CONSTRAINT namespaces_statistics_check
        CHECK (note_count >= 0 AND lexeme_total >= 0 AND feedback_helpful >= 0 AND feedback_unhelpful >= 0),
    -- A note's model is its namespace's model (notes_namespace_model refers to this key).
    CONSTRAINT namespaces_model UNIQUE (namespace, model_id)
);

-- Document frequency of every lexeme per namespace: lets stage one screen lexical
-- candidates with the rarest query terms only, so its cost stays bounded as N grows.
CREATE TABLE pgmem.lexeme_stats (
    namespace text NOT NULL REFERENCES pgmem.namespaces (namespace),
    lexeme text NOT NULL,
    document_frequency bigint NOT NULL CHECK (document_frequency >= 0),
    PRIMARY KEY (namespace, lexeme)
);

-- Immutable atomic notes. Every unique key starts with the namespace, so the table
-- can be distributed by namespace. The HNSW indexes are per embedding model (partial,
-- on a dimension-typed expression): pgmem.ensure_model_index_v1 creates each when its
-- model is registered. The namespace and the model are checked by one foreign key,
-- notes_namespace_model (a key on each alone would be implied by it, and checked again
-- for every note written).
CREATE TABLE pgmem.notes (
    namespace text NOT NULL,
    note_id uuid NOT NULL,
    external_id text,
    document_id text NOT NULL CHECK (document_id <> ''),
    span_start integer NOT NULL CHECK (span_start >= 0),
    span_end integer NOT NULL,
    text text NOT NULL CHECK (text <> ''),
    context text NOT NULL DEFAULT '',
    family text NOT NULL CHECK (family <> ''),
    role text NOT NULL CHECK (role IN ('fact', 'event', 'definition', 'procedure', 'claim',
                                        'dialogue', 'summary', 'other')),
    confidence real NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    source_ts timestamptz,
    model_id integer NOT NULL,
    embedding vector NOT NULL,
    entities jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(entities) = 'array'),
    time_tags jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(time_tags) = 'array'),
    keywords text[] NOT NULL DEFAULT '{}',
    handles text[] NOT NULL DEFAULT '{}',
    links uuid[] NOT NULL DEFAULT '{}',
    metadata jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
    created_at timestamptz NOT NULL DEFAULT now(),
    lexemes tsvector GENERATED ALWAYS AS (pgmem.note_lexemes(context, text)) STORED,
    lexeme_count integer GENERATED ALWAYS AS (
        pgmem.tsvector_token_count(pgmem.note_lexemes(context, text))
    ) STORED,
    -- The note's distinct words as 64-bit hashes (pgmem.word_hashes_v1), set by the
    -- notes_word_hashes trigger from the text; NULL for notes written before migration
    -- 0016 and for text it does not hash (the read path tokenises those).
    word_hashes bytea,
    PRIMARY KEY (namespace, note_id),
    CHECK (span_end > span_start),
    -- A note's offsets cover exactly its text's UTF-8 bytes, whoever inserts it.
    CONSTRAINT notes_span_length CHECK (span_end - span_start = octet_length(convert_to(text, 'UTF8'))),
    -- A note's model is its namespace's model (stage one reads only those; a note of
    -- another model would count in the BM25 statistics and never be found).
    CONSTRAINT notes_namespace_model
        FOREIGN KEY (namespace, model_id) REFERENCES pgmem.namespaces (namespace, model_id)
)
-- Rows up to a page are kept whole: a 384-dimension note (about 2.3 kB) would otherwise
-- have its embedding moved out of line, and the exact dense scan read it from TOAST.
WITH (toast_tuple_target = 8160);

-- Which roles may use which namespace. The session setting pgmem.namespace picks one
-- namespace; row-level security shows its rows only if a role the session user is a
-- member of was granted that namespace, so SET pgmem.namespace cannot widen access.
-- Roles are named by OID: a role created later under a dropped role's name inherits
-- nothing.
CREATE TABLE pgmem.namespace_grants (
    namespace text NOT NULL CHECK (namespace ~ '^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$'),
    granted_at timestamptz NOT NULL DEFAULT now(),
    role_oid oid NOT NULL,
    PRIMARY KEY (namespace, role_oid)
);

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

-- Logged packs (pgmem.pack(..., log=True)): one row per pack; below, one row per pool
-- family, per packed note and per rejected candidate.
CREATE TABLE pgmem.pack_log (
    namespace text NOT NULL,
    pack_id uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    query text NOT NULL,
    mode text NOT NULL,
    embedding_model text NOT NULL,
    degraded boolean NOT NULL,
    degraded_reasons text[] NOT NULL,
    pool_size integer NOT NULL,
    pool_mean double precision NOT NULL,
    pool_variance double precision NOT NULL,
    entropy double precision NOT NULL,
    note_ids uuid[] NOT NULL,
    parameters jsonb NOT NULL,
    hints jsonb NOT NULL,
    rejections jsonb NOT NULL,
    timings_ms jsonb NOT NULL,
    PRIMARY KEY (namespace, pack_id)
);

-- What calibration and the family alarm read and decided for each family of a logged
-- pool (feedback columns NULL in packs logged before migration 0003, alarm columns
-- before 0009, collusion columns before 0015, burst gate columns before 0017).
CREATE TABLE pgmem.pack_log_families (
    namespace text NOT NULL,
    pack_id uuid NOT NULL,
    family text NOT NULL,
    count integer NOT NULL,
    score_sum double precision NOT NULL,
    mean_confidence double precision NOT NULL,
    expected_sum double precision NOT NULL,
    expected_variance double precision NOT NULL,
    z double precision NOT NULL,
    shrunk_z double precision NOT NULL,
    corroboration double precision NOT NULL,
    reliability double precision NOT NULL,
    uncertainty double precision NOT NULL,
    regularizer double precision NOT NULL,
    variance_floor_dominated boolean NOT NULL,
    -- What the beta mode read (NULL in packs logged before migration 0003).
    feedback_helpful double precision,
    feedback_unhelpful double precision,
    feedback_reliability double precision,
    feedback_z double precision,
    -- What the family alarm read and decided.
    namespace_count bigint,
    pool_share double precision,
    namespace_share double precision,
    newness double precision,
    duplicate_density double precision,
    question_echo double precision,
    alarm_score double precision,
    alarm_threshold double precision,
    alarmed boolean,
    quarantined boolean,
    -- The alarm's collusion input (same-family near-copies across documents, in [0, 1])
    -- and whether it alone reached the threshold (capped at collusion_cap, no refill).
    collusion double precision,
    colluding boolean,
    -- The burst gate on collusion: the write-time span of the family's closest group of
    -- colluding notes, seconds from the namespace's creation to its first note, and
    -- whether the family was bound to writer roles (exempt).
    burst_span double precision,
    burst_lateness double precision,
    bound boolean,
    -- How nearly the family's most question-like note restated the question (echo ** 4 *
    -- precision; NULL in packs logged before migration 0021).
    question_restatement double precision,
    -- Whether the family was a newcomer (unbound, written late and recently, far smaller
    -- than the pool's established families: its notes past the pool's best newcomer note
    -- were held; NULL in packs logged before migration 0024).
    newcomer boolean,
    PRIMARY KEY (namespace, pack_id, family),
    FOREIGN KEY (namespace, pack_id) REFERENCES pgmem.pack_log (namespace, pack_id)
);

-- One row per note a logged pack packed, in rank order, with every score that put it there.
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

-- Feedback on packed notes builds the per-family Beta reliability of the `beta` mode
-- (DESIGN §3.6). Every judgement ever given: which note of which family was (not)
-- useful, how much it weighs, and the pack it was judged in (if logged). Ids and
-- labels only, no text.
CREATE TABLE pgmem.feedback (
    namespace text NOT NULL REFERENCES pgmem.namespaces (namespace),
    feedback_id bigint GENERATED ALWAYS AS IDENTITY,
    note_id uuid NOT NULL,
    family text NOT NULL,
    helpful boolean NOT NULL,
    weight double precision NOT NULL CHECK (weight > 0 AND weight <= 1000),
    pack_id uuid,
    given_by name NOT NULL DEFAULT session_user,
    given_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, feedback_id)
);

-- Summed feedback weight per family: the Beta posterior's evidence. Kept by a trigger.
CREATE TABLE pgmem.family_reliability (
    namespace text NOT NULL REFERENCES pgmem.namespaces (namespace),
    family text NOT NULL,
    helpful double precision NOT NULL DEFAULT 0 CHECK (helpful >= 0),
    unhelpful double precision NOT NULL DEFAULT 0 CHECK (unhelpful >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, family)
);

-- Erasure: the one way notes leave the store (pgmem.forget_v1). The audit keeps who,
-- when, what (ids, no content), why and how much went with the notes. Keyed by
-- namespace like every per-namespace table (docs/citus.md).
CREATE TABLE pgmem.forget_audit (
    audit_id bigint GENERATED ALWAYS AS IDENTITY,
    namespace text NOT NULL,
    scope text NOT NULL CHECK (scope IN ('notes', 'document', 'family')),
    selector text[] NOT NULL,
    reason text NOT NULL CHECK (btrim(reason) <> ''),
    requested_by name NOT NULL,
    forgotten_at timestamptz NOT NULL DEFAULT now(),
    notes_removed integer NOT NULL,
    note_ids uuid[] NOT NULL,
    feedback_removed integer NOT NULL DEFAULT 0,
    packs_removed integer NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, audit_id)
);

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

-- Context compaction telemetry (pgmem.compaction, DESIGN §4). One row per rubric probe
-- and per compaction of an agent trajectory: the gate values, the raw verdict and its
-- parsed predicates with their evidence, whether it fired and why, tokens before and
-- after, what the probe and summary calls cost. Written by pgmem.compaction.Compactor
-- (INSERT as a writer of the namespace); never updated.
CREATE TABLE pgmem.compaction_log (
    namespace text NOT NULL,
    event_id bigint GENERATED ALWAYS AS IDENTITY,
    trajectory_id text NOT NULL CHECK (length(trajectory_id) BETWEEN 1 AND 512),
    generation integer NOT NULL CHECK (generation >= 0),
    round integer NOT NULL CHECK (round >= 0),
    kind text NOT NULL CHECK (kind IN ('probe', 'compaction')),
    policy text NOT NULL,
    rebuild text NOT NULL CHECK (rebuild IN ('pgmem', 'reset')),
    reason text CHECK (reason IN ('rubric', 'backstop', 'fixed', 'tool', 'manual')),
    fired boolean NOT NULL,
    gates jsonb NOT NULL DEFAULT '{}',
    prompt_tokens integer NOT NULL CHECK (prompt_tokens >= 0),
    raw_verdict text,
    predicates jsonb,
    tokens_before integer CHECK (tokens_before >= 0),
    tokens_after integer CHECK (tokens_after >= 0),
    probe_prompt_tokens integer NOT NULL DEFAULT 0 CHECK (probe_prompt_tokens >= 0),
    probe_completion_tokens integer NOT NULL DEFAULT 0 CHECK (probe_completion_tokens >= 0),
    summary_prompt_tokens integer NOT NULL DEFAULT 0 CHECK (summary_prompt_tokens >= 0),
    summary_completion_tokens integer NOT NULL DEFAULT 0 CHECK (summary_completion_tokens >= 0),
    latency_ms double precision NOT NULL DEFAULT 0 CHECK (latency_ms >= 0),
    model text,
    archived integer NOT NULL DEFAULT 0 CHECK (archived >= 0),
    summary_note_id uuid,
    citations jsonb,
    logged_by name NOT NULL DEFAULT session_user,
    logged_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, event_id),
    CHECK (kind = 'probe' OR (fired AND reason IS NOT NULL))
);

-- Postings of the notes' lexemes: which notes of a namespace hold a lexeme, how often
-- (positions in the tsvector, as pgmem.bm25_v1 counts them), and the note's length.
-- Readers see their namespace's rows (the notes' policy); only the triggers below
-- (owner rights) write them, from notes just written (whose namespace their foreign key
-- checked) and deleted with their notes: no foreign key here, whose check would run for
-- every posting (about 13 per note) and could never fail.
CREATE TABLE pgmem.lexeme_postings (
    namespace text NOT NULL,
    lexeme text NOT NULL,
    note_id uuid NOT NULL,
    term_frequency integer NOT NULL CHECK (term_frequency >= 1),
    lexeme_count integer NOT NULL CHECK (lexeme_count >= 0),
    -- Covering: the screen reads (note, count, length) without visiting the table.
    PRIMARY KEY (namespace, lexeme, note_id) INCLUDE (term_frequency, lexeme_count)
);

-- Link keys: which notes of a namespace hold a handle ('h') or an entity text ('e'), the
-- key as its SHA-256; ingest's rare-key lookups probe it (pgmem.handle_holders_v1,
-- pgmem.entity_holders_v1). Readers see their namespace's rows (the notes' policy); only
-- the triggers below (owner rights) write them.
CREATE TABLE pgmem.link_keys (
    namespace text NOT NULL,
    kind "char" NOT NULL CHECK (kind IN ('e', 'h')),
    digest bytea NOT NULL,
    note_id uuid NOT NULL,
    PRIMARY KEY (namespace, kind, digest, note_id)
);

-- == Indexes ==

-- Lexical search: the GIN index on each note's tsvector.
CREATE INDEX notes_lexemes_gin ON pgmem.notes USING gin (lexemes);
-- Notes by the caller's own id.
CREATE INDEX notes_external_id ON pgmem.notes (namespace, external_id)
    WHERE external_id IS NOT NULL;
-- (No index on handles or entities: ingest finds a rare key's holders in
-- pgmem.link_keys, migrations 0028-0029.)
-- One note per (namespace, document, span): the key re-ingest and supersede are
-- decided on. Its prefix serves the previous/next-span lookups of stage one and
-- ingest.
CREATE UNIQUE INDEX notes_span ON pgmem.notes (namespace, document_id, span_start, span_end);
-- Logged packs by time, feedback by family, supersedes by replaced note, telemetry by
-- trajectory.
CREATE INDEX pack_log_created ON pgmem.pack_log (namespace, created_at);
CREATE INDEX feedback_family ON pgmem.feedback (namespace, family);
CREATE INDEX supersede_audit_old_note ON pgmem.supersede_audit (namespace, old_note_id);
CREATE INDEX compaction_log_trajectory ON pgmem.compaction_log (namespace, trajectory_id, generation);

-- == Functions ==

-- Scoring and filtering helpers of stage one ---------------------------------------------

-- BM25 weight of one query term in one note.
CREATE FUNCTION pgmem.bm25_term_v1(
    idf double precision,
    tf double precision,
    k1 double precision,
    b double precision,
    length double precision,
    average_length double precision
) RETURNS double precision
    -- Okapi BM25: idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average_length)).
    -- A plain expression, so the planner inlines it; bm25_v1 sums it over the query terms
    -- a note contains.
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average_length));

-- BM25 of one note for the query terms (terms and idf in the same order).
CREATE FUNCTION pgmem.bm25_v1(
    lexemes tsvector,
    lexeme_count integer,
    terms text[],
    idf double precision[],
    k1 double precision,
    b double precision,
    average_length double precision
) RETURNS TABLE (bm25 double precision)
    -- The sum of bm25_term_v1 over the note's lexemes that are query terms; NULL when none
    -- is. A set-returning SQL function so that the planner inlines it (as a LATERAL
    -- subquery).
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT sum(pgmem.bm25_term_v1(idf[array_position(terms, u.lexeme)], coalesce(cardinality(u.positions), 1),
                                  k1, b, lexeme_count, average_length))
    FROM unnest(ts_filter(setweight(setweight(lexemes, 'D'), 'A', terms), '{a}')) AS u
$$;

-- The SQL expression turning a text value expression into a column's type.
CREATE FUNCTION pgmem.filter_value_v1(expression text, value_type text) RETURNS text
    -- A date, or a time without an offset, means UTC whatever the session's time zone (an
    -- offset counts only after a time of day: the "-08" ending "2023-05-08" is the day).
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE value_type
        WHEN 'timestamptz' THEN format(
            'CASE WHEN %1$s ~ ''[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)$'''
            ' THEN (%1$s)::timestamptz ELSE (%1$s)::timestamp AT TIME ZONE ''UTC'' END', expression)
        WHEN 'real' THEN format('(%s)::real', expression)
        ELSE format('(%s)::text', expression)
    END;

-- Compile a metadata filter tree into a boolean SQL expression over the notes alias n.
CREATE FUNCTION pgmem.compile_filter_v1(
    node jsonb,
    p_param text DEFAULT '$1',
    path text[] DEFAULT '{}',
    depth integer DEFAULT 0
) RETURNS text
    -- The tree is built and allowlisted by pgmem.retrieval.filters from the caller's
    -- `where` text. Second line of defence: operators and columns come from fixed lists
    -- here, and no caller string becomes SQL text at all: every value (and metadata key)
    -- is read at run time from the tree itself, passed as the bind parameter named by
    -- p_param, through a path this function builds from array positions and fixed keys.
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    v_op text := node ->> 'op';
    v_column text;
    v_type text;
    v_value text;
    v_parts text[];
BEGIN
    IF depth > 32 OR jsonb_typeof(node) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'filter: malformed or too deeply nested node' USING ERRCODE = '22023';
    END IF;
    IF p_param !~ '^\$[0-9]{1,3}$' THEN
        RAISE EXCEPTION 'filter: p_param must name a bind parameter such as $1' USING ERRCODE = '22023';
    END IF;
    IF v_op IN ('and', 'or') THEN
        SELECT array_agg('(' || pgmem.compile_filter_v1(a.value, p_param,
                                                         path || ARRAY['args', (a.position - 1)::text],
                                                         depth + 1) || ')' ORDER BY a.position)
        INTO v_parts FROM jsonb_array_elements(node -> 'args') WITH ORDINALITY AS a (value, position);
        IF coalesce(cardinality(v_parts), 0) = 0 THEN
            RAISE EXCEPTION 'filter: % needs operands', v_op USING ERRCODE = '22023';
        END IF;
        RETURN array_to_string(v_parts, CASE v_op WHEN 'and' THEN ' AND ' ELSE ' OR ' END);
    ELSIF v_op = 'not' THEN
        RETURN 'NOT (' || pgmem.compile_filter_v1(node -> 'arg', p_param, path || ARRAY['arg'], depth + 1) || ')';
    END IF;

    IF node -> 'column' ? 'metadata' THEN
        IF jsonb_typeof(node -> 'column' -> 'metadata') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'filter: a metadata key must be a string' USING ERRCODE = '22023';
        END IF;
        v_column := format('(n.metadata ->> (%s #>> %L))', p_param, path || ARRAY['column', 'metadata']);
        v_type := 'text';
    ELSE
        CASE node -> 'column' ->> 'name'
            WHEN 'role' THEN v_column := 'n.role'; v_type := 'text';
            WHEN 'family' THEN v_column := 'n.family'; v_type := 'text';
            WHEN 'document_id' THEN v_column := 'n.document_id'; v_type := 'text';
            WHEN 'external_id' THEN v_column := 'n.external_id'; v_type := 'text';
            WHEN 'context' THEN v_column := 'n.context'; v_type := 'text';
            WHEN 'source_ts' THEN v_column := 'n.source_ts'; v_type := 'timestamptz';
            WHEN 'created_at' THEN v_column := 'n.created_at'; v_type := 'timestamptz';
            -- real, like the column: a double value would never equal a stored 0.3.
            WHEN 'confidence' THEN v_column := 'n.confidence'; v_type := 'real';
            ELSE
                RAISE EXCEPTION 'filter: column % is not filterable', node -> 'column' USING ERRCODE = '22023';
        END CASE;
    END IF;

    CASE v_op
        WHEN '=', '!=', '<', '<=', '>', '>=' THEN
            IF jsonb_typeof(node -> 'value') NOT IN ('string', 'number', 'boolean') THEN
                RAISE EXCEPTION 'filter: % needs a scalar value', v_op USING ERRCODE = '22023';
            END IF;
            v_value := pgmem.filter_value_v1(format('(%s #>> %L)', p_param, path || ARRAY['value']), v_type);
            RETURN format('%s %s %s', v_column, CASE v_op WHEN '!=' THEN '<>' ELSE v_op END, v_value);
        WHEN 'in' THEN
            IF jsonb_typeof(node -> 'values') IS DISTINCT FROM 'array' THEN
                RAISE EXCEPTION 'filter: in needs a list of values' USING ERRCODE = '22023';
            END IF;
            RETURN format('%s = ANY (ARRAY(SELECT %s FROM jsonb_array_elements_text(%s #> %L) AS v (value)))',
                          v_column, pgmem.filter_value_v1('v.value', v_type), p_param, path || ARRAY['values']);
        WHEN 'is_null' THEN
            RETURN v_column || ' IS NULL';
        WHEN 'is_not_null' THEN
            RETURN v_column || ' IS NOT NULL';
        WHEN 'like', 'ilike' THEN
            IF v_type <> 'text' OR jsonb_typeof(node -> 'value') IS DISTINCT FROM 'string' THEN
                RAISE EXCEPTION 'filter: % applies to text columns and patterns only', v_op USING ERRCODE = '22023';
            END IF;
            RETURN format('%s %s (%s #>> %L)', v_column, CASE v_op WHEN 'like' THEN 'LIKE' ELSE 'ILIKE' END,
                          p_param, path || ARRAY['value']);
        ELSE
            RAISE EXCEPTION 'filter: operator % is not allowed', v_op USING ERRCODE = '22023';
    END CASE;
END;
$$;

-- Access rules (row-level security and the checked functions call these) -----------------

-- The name of this database's pgmem group role of kind p_kind (reader, writer, admin).
CREATE FUNCTION pgmem.group_role_v1(p_kind text) RETURNS name
    -- pgmem.migrate installs the roles under a prefix (default pgmem): databases of one
    -- cluster that must not share administrators use different prefixes.
    LANGUAGE sql IMMUTABLE
    RETURN CASE p_kind WHEN 'reader' THEN 'pgmem_reader'::name
                       WHEN 'writer' THEN 'pgmem_writer'::name
                       WHEN 'admin' THEN 'pgmem_admin'::name END;

-- True when the current user may read and write namespace p_namespace.
CREATE FUNCTION pgmem.may_use_namespace_v1(p_namespace text) RETURNS boolean
    -- An admin, a superuser, or a member of a role granted that namespace. Grants name a
    -- role by OID; the join to pg_roles skips grants whose role was dropped.
    LANGUAGE sql STABLE
    RETURN p_namespace IS NOT NULL AND (
        pg_has_role(current_user, 'pgmem_admin', 'MEMBER')
        OR EXISTS (SELECT 1 FROM pgmem.namespace_grants AS g
                   JOIN pg_catalog.pg_roles AS r ON r.oid = g.role_oid
                   WHERE g.namespace = p_namespace
                     AND pg_has_role(current_user, r.oid, 'MEMBER')));

-- The session's namespace, if the current user may use it (else NULL: no rows).
CREATE FUNCTION pgmem.session_namespace_v1() RETURNS text
    LANGUAGE sql STABLE
    RETURN CASE WHEN pgmem.may_use_namespace_v1(current_setting('pgmem.namespace', true))
                THEN current_setting('pgmem.namespace', true) END;

-- True when the current user may write notes of family p_family into p_namespace.
CREATE FUNCTION pgmem.may_write_family_v1(p_namespace text, p_family text) RETURNS boolean
    -- The family is bound to no role, or the user is a member of a bound role (that still
    -- exists), an admin, or a member of the schema owner. Runs as the caller, so a reader
    -- or writer sees only the bindings of its session namespace (row-level security),
    -- which is the only namespace it can insert notes into.
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

-- Embedding models and namespaces --------------------------------------------------------

-- Build the HNSW index of embedding model p_model_id on pgmem.notes (owner rights).
CREATE FUNCTION pgmem.ensure_model_index_v1(p_model_id integer) RETURNS void
    -- Binding a namespace runs as the caller (so row-level security decides which
    -- namespaces a writer may create); only the HNSW index, DDL on a table the caller
    -- does not own, is built by this owner-rights helper from the model registry alone.
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
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

-- Register embedding model p_model of p_dimension dimensions (admin or owner); returns its id.
CREATE FUNCTION pgmem.register_model_v1(p_model text, p_dimension integer) RETURNS integer
    -- Builds its HNSW index; registering a registered model is a no-op. A caller who may
    -- not register gets the id of a registered model, else PM004.
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

-- Bind a namespace to an embedding model, registering the model first if the caller may.
CREATE FUNCTION pgmem.register_namespace_v1(p_namespace text, p_model text, p_dimension integer)
    RETURNS integer
    -- Admins and the owner may register; raises PM002 if the namespace already uses
    -- another model or dimension, PM004 if a writer names a model no admin registered.
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

-- The read path --------------------------------------------------------------------------

-- The screened notes that can reach the lexical top k by BM25, read from postings alone.
CREATE FUNCTION pgmem.lexical_bound_v1(
    p_namespace text,
    terms text[],
    idf double precision[],
    other_terms text[],
    other_idf double precision[],
    k integer,
    k1 double precision,
    b double precision,
    average_length double precision
) RETURNS TABLE (kept_notes uuid[], score_floor double precision, screened_notes integer)
    -- Which notes holding any of the screen terms can be among the k best by BM25 over all
    -- the query terms, read from postings alone (index-only scans, no note visited). Each
    -- note's BM25 over the screen terms (its partial score) is a lower bound of its score,
    -- and the other terms add less than other_bound = sum(other_idf) * (k1 + 1). The best
    -- 2k partial scores are completed with the other terms' postings of those notes: the
    -- k-th best of these exact scores is at most the k-th best score of all, so a note
    -- whose partial score plus other_bound stays below it, by more than any rounding, is
    -- not among the k best. kept_notes: the others; score_floor: a score at least k notes
    -- reach, and no note left out does (NULL when none was left out); screened_notes: how
    -- many notes hold a screen term. The bound assumes
    -- every screened note may be ranked: a caller filtering notes checks that k of the kept
    -- ones it ranks still reach score_floor. No row when the BM25 parameters leave a term's
    -- share unbounded (k1 < 0, b outside [0, 1]).
    --
    --   SELECT * FROM pgmem.lexical_bound_v1('default', '{launch,code}', '{5.1,3.2}', '{secret}', '{1.3}',
    --                                        50, 1.2, 0.75, 11.5);
    LANGUAGE plpgsql STABLE
    AS $function$
#variable_conflict use_column
DECLARE
    v_other_bound double precision := (SELECT coalesce(sum(o), 0) FROM unnest(other_idf) AS o) * (k1 + 1);
BEGIN
    IF k < 1 OR k1 < 0 OR b < 0 OR b > 1 THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH
    partial AS MATERIALIZED (
        SELECT p.note_id,
               sum(pgmem.bm25_term_v1(q.idf, p.term_frequency, k1, b, p.lexeme_count, average_length)) AS score
        FROM unnest(terms, idf) AS q (lexeme, idf)
        JOIN pgmem.lexeme_postings AS p ON p.namespace = p_namespace AND p.lexeme = q.lexeme
        GROUP BY p.note_id
    ),
    completed AS (
        SELECT l.score + coalesce((
                   SELECT sum(pgmem.bm25_term_v1(q.idf, p.term_frequency, k1, b, p.lexeme_count, average_length))
                   FROM unnest(other_terms, other_idf) AS q (lexeme, idf)
                   JOIN pgmem.lexeme_postings AS p
                       ON p.namespace = p_namespace AND p.lexeme = q.lexeme AND p.note_id = l.note_id
               ), 0) AS score
        FROM (SELECT s.note_id, s.score FROM partial AS s ORDER BY s.score DESC LIMIT 2 * k) AS l
    ),
    -- Each computed once (a subquery read in several places is otherwise run in each).
    kth_score AS MATERIALIZED (
        SELECT c.score FROM completed AS c ORDER BY c.score DESC LIMIT 1 OFFSET k - 1
    ),
    kth AS MATERIALIZED (
        SELECT t.score, 1e-9 * (abs(t.score) + v_other_bound + 1) AS rounding
        FROM (SELECT (SELECT s.score FROM kth_score AS s)) AS t (score)
    )
    SELECT coalesce(array_agg(s.note_id) FILTER (WHERE s.note_id IS NOT NULL), '{}'), t.score - t.rounding,
           (SELECT count(*)::integer FROM partial)
    FROM kth AS t
    LEFT JOIN partial AS s ON t.score IS NULL OR s.score + v_other_bound >= t.score - 2 * t.rounding
    GROUP BY t.score, t.rounding;
END;
$function$;

-- Stage one's family spread: the first keep ids with at most cap of a family ahead of the rest.
CREATE FUNCTION pgmem.family_spread_v1(p_namespace text, p_notes uuid[], p_cap integer, p_keep integer)
    RETURNS TABLE (notes uuid[], under_cap integer, other_notes integer, crowding text[])
    -- The ids in their order, except that a note past the cap-th of its family goes
    -- after every note within its family's cap (a stable partition), cut to the first
    -- keep: nothing is dropped when no other family is there to take its place.
    -- under_cap: how many ids are within their family's cap; other_notes: how many ids
    -- belong to families with no more than cap ids; crowding: the families above cap.
    -- Families are read from the notes as the caller (row-level security: an id the
    -- caller cannot see is left out). A NULL cap returns the first keep ids, reading nothing.
    LANGUAGE plpgsql STABLE AS $function$
#variable_conflict use_column
BEGIN
    IF p_cap IS NULL THEN
        RETURN QUERY SELECT p_notes[1:p_keep], cardinality(p_notes), cardinality(p_notes), '{}'::text[];
        RETURN;
    END IF;
    RETURN QUERY
    WITH
    listed AS (
        SELECT d.note_id, d.position, n.family
        FROM unnest(p_notes) WITH ORDINALITY AS d (note_id, position)
        JOIN pgmem.notes AS n ON n.namespace = p_namespace AND n.note_id = d.note_id
    ),
    ranked AS (
        SELECT l.note_id, l.position, l.family,
               row_number() OVER (PARTITION BY l.family ORDER BY l.position) AS taken,
               count(*) OVER (PARTITION BY l.family) AS held
        FROM listed AS l
    )
    SELECT ARRAY(SELECT r.note_id FROM ranked AS r ORDER BY r.taken > p_cap, r.position LIMIT p_keep),
           (SELECT count(*) FROM ranked AS r WHERE r.taken <= p_cap)::integer,
           (SELECT count(*) FROM ranked AS r WHERE r.held <= p_cap)::integer,
           ARRAY(SELECT DISTINCT r.family FROM ranked AS r WHERE r.held > p_cap ORDER BY r.family);
END;
$function$;

-- How many notes of a namespace belong to none of the given families (its statistics).
CREATE FUNCTION pgmem.notes_outside_v1(p_namespace text, p_families text[]) RETURNS bigint
    LANGUAGE sql STABLE AS $$
    SELECT n.note_count - coalesce((SELECT sum(s.note_count) FROM pgmem.family_stats AS s
                                    WHERE s.namespace = p_namespace AND s.family = ANY (p_families)), 0)
    FROM pgmem.namespaces AS n
    WHERE n.namespace = p_namespace
$$;

-- A note's distinct words as 64-bit hashes (the read path's word ids); NULL for most non-ASCII text.
CREATE FUNCTION pgmem.word_hashes_v1(body text) RETURNS bytea
    -- The words are the [a-z0-9_] runs of the lower-cased text, as pgmem.retrieval.words
    -- splits it (Python's \w+ on str.lower()) when the text holds nothing but ASCII and
    -- the punctuation, symbols and emoji listed below, which neither language counts as
    -- word characters nor changes by lower-casing (tests/test_word_hashes.py checks every
    -- one). Any other text is NULL and the read path tokenises it: \w and lower-casing
    -- there are Unicode's, not the server locale's. Each distinct word, in byte order, is
    -- the first 8 bytes of the SHA-256 of its UTF-8, read as a little-endian int64 whose
    -- sign bit is set for a stop word (pgmem.ingestion.entities.STOPWORDS) and cleared
    -- otherwise. The body is parsed when the function is created: no search_path reaches it.
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN CASE WHEN body !~ '[^\u0001-\u007f\u00a0-\u00a9\u00ab-\u00b1\u00b4\u00b6-\u00b8\u00bb\u00bf\u00d7\u00f7\u2000-\u206f\u20a0-\u20c0\u2190-\u21ff\u2300-\u23ff\u2500-\u2775\u2794-\u27bf\ufe00-\ufe0f\U0001f300-\U0001f6ff\U0001f900-\U0001faff]' THEN (
        SELECT coalesce(string_agg(
                   set_byte(h.digest, 7, CASE WHEN w.word = ANY (
            '{a, about, above, after, again, against, all, also, am, an, and, any, are, as, at, be, because,
             been, before, being, below, between, both, but, by, can, could, did, do, does, doing, down,
             during, each, few, for, from, further, get, going, gonna, got, had, has, have, having, he,
             hello, her, here, hers, herself, hey, hi, him, himself, his, how, i, if, in, into, is, it, its,
             itself, just, like, many, me, more, most, much, my, myself, no, nor, not, now, of, off, oh, ok,
             okay, on, once, one, only, or, other, our, ours, ourselves, out, over, own, really, same, she,
             should, so, some, such, than, thank, thanks, that, the, their, theirs, them, themselves, then,
             there, these, they, this, those, through, to, too, under, until, up, very, was, we, well, were,
             what, when, where, which, while, who, whom, whose, why, will, with, would, yeah, yes, you, your,
             yours, yourself, yourselves}'::text[])
                                         THEN get_byte(h.digest, 7) | 128 ELSE get_byte(h.digest, 7) & 127 END),
                   '\x'::bytea ORDER BY w.word COLLATE "C"), '\x'::bytea)
        FROM (SELECT DISTINCT u.word
              -- Lower-cased in the "C" collation: A-Z only, whatever the database's locale.
              FROM regexp_split_to_table(lower(body COLLATE "C"), '[^a-z0-9_]+') AS u (word)
              WHERE u.word <> '') AS w
        CROSS JOIN LATERAL (SELECT substr(sha256(convert_to(w.word, 'UTF8')), 1, 8) AS digest) AS h)
    END;

-- The HNSW breadth (hnsw.ef_search) of stage one's dense search: ef_search, grown with the graph.
CREATE FUNCTION pgmem.hnsw_breadth_v1(p_model_id integer, p_namespace_notes bigint, ef_search integer,
                                      ef_search_notes bigint) RETURNS integer
    -- For a namespace of p_namespace_notes notes of model p_model_id. HNSW's recall at a
    -- given breadth falls as its graph grows (recall@50 of the dense top k at ef_search
    -- 100, MiniLM vectors: 0.987 at 10k notes, 0.951 at 200k, 0.84 at 1M;
    -- docs/performance.md), so above ef_search_notes notes the breadth grows in
    -- proportion to the graph's size: ceil(ef_search * notes / ef_search_notes), up to
    -- pgvector's limit of 1000, never below ef_search (NULL ef_search_notes: ef_search).
    -- The graph is the model's index, which every namespace of the model shares; its size
    -- is the index's row count as the catalog last counted it (CREATE INDEX, ANALYZE:
    -- autovacuum's keeps it within about a tenth of a growing table), or the namespace's
    -- own when larger (a namespace never outgrows its graph). Reads only the catalog,
    -- which every role may read.
    --
    --   SELECT pgmem.hnsw_breadth_v1(1, 1000000, 100, 200000);  -- 500
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE
        WHEN ef_search_notes IS NULL THEN ef_search
        ELSE greatest(ef_search, least(1000, ceil(ef_search::numeric * greatest(
            p_namespace_notes,
            (SELECT c.reltuples::bigint FROM pg_class AS c
             WHERE c.oid = to_regclass(format('pgmem.notes_embedding_hnsw_m%s', p_model_id))))
            / ef_search_notes)::integer))
    END
$$;

-- Stage one of the read path (DESIGN §3.1): the scored candidate pool of one query.
CREATE FUNCTION pgmem.stage_one_v1(
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

-- Stage one's rows for a pack: stage_one_v1's, with the feedback and statistics it reads.
CREATE FUNCTION pgmem.stage_one_pool_v1(
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
        neighbour_seeds => neighbour_seeds, family_candidates => family_candidates,
        ef_search_notes => ef_search_notes) AS s
    LEFT JOIN pgmem.family_reliability AS r ON r.namespace = p_namespace AND r.family = s.family
    LEFT JOIN pgmem.namespaces AS t ON t.namespace = p_namespace
    LEFT JOIN pgmem.family_stats AS fs ON fs.namespace = p_namespace AND fs.family = s.family;
END;
$function$;

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
CREATE FUNCTION pgmem.handle_holders_v1(p_namespace text, p_keys text[], p_limit integer)
    RETURNS TABLE (key text, note_id uuid)
    LANGUAGE sql STABLE
    AS $$
    SELECT h.key, h.note_id FROM pgmem.key_holders_v1(p_namespace, 'h', p_keys, p_limit) AS h;
$$;

-- Up to p_limit notes of p_namespace holding each entity text.
CREATE FUNCTION pgmem.entity_holders_v1(p_namespace text, p_keys text[], p_limit integer)
    RETURNS TABLE (key text, note_id uuid)
    LANGUAGE sql STABLE
    AS $$
    SELECT h.key, h.note_id FROM pgmem.key_holders_v1(p_namespace, 'e', p_keys, p_limit) AS h;
$$;

-- Logged packs ---------------------------------------------------------------------------

-- Persist one pack and its family diagnostics from a JSON document (one statement).
CREATE FUNCTION pgmem.log_pack_v1(p_pack jsonb) RETURNS uuid
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
            quarantined, collusion, colluding, burst_span, burst_lateness, bound, question_restatement, newcomer)
        SELECT pack.namespace, pack.pack_id, f.*
        FROM pack, jsonb_to_recordset(p_pack -> 'families') AS f (
            family text, count integer, score_sum float8, mean_confidence float8,
            expected_sum float8, expected_variance float8, z float8, shrunk_z float8,
            corroboration float8, reliability float8, uncertainty float8, regularizer float8,
            variance_floor_dominated boolean, feedback_helpful float8, feedback_unhelpful float8,
            feedback_reliability float8, feedback_z float8, namespace_count bigint, pool_share float8,
            namespace_share float8, newness float8, duplicate_density float8, question_echo float8,
            alarm_score float8, alarm_threshold float8, alarmed boolean, quarantined boolean,
            collusion float8, colluding boolean, burst_span float8, burst_lateness float8,
            bound boolean, question_restatement float8, newcomer boolean)
    )
    SELECT pack_id FROM pack;
$$;

-- Persist one pack, its families, packed items and rejections from a JSON document.
CREATE FUNCTION pgmem.log_pack_v2(p_pack jsonb) RETURNS uuid
    -- One statement; row-level security checks every row as the caller.
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

-- Feedback -------------------------------------------------------------------------------

-- Record feedback on notes of p_namespace in one statement; returns the updated families.
CREATE FUNCTION pgmem.feedback_v1(
    p_namespace text, p_helpful uuid[], p_unhelpful uuid[], p_weight double precision, p_pack_id uuid)
    RETURNS TABLE (family text, helpful double precision, unhelpful double precision)
    -- Every id must name a note of the namespace (else SQLSTATE PM003 and nothing is
    -- written); a note may not be both helpful and unhelpful in one call.
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_unknown uuid[];
    v_both uuid[];
BEGIN
    SELECT array_agg(DISTINCT h ORDER BY h) INTO v_both
    FROM unnest(p_helpful) AS h WHERE h = ANY (p_unhelpful);
    IF v_both IS NOT NULL THEN
        RAISE EXCEPTION 'note % is both helpful and unhelpful', v_both[1] USING ERRCODE = '22023';
    END IF;
    SELECT array_agg(DISTINCT i ORDER BY i) INTO v_unknown
    FROM unnest(coalesce(p_helpful, '{}') || coalesce(p_unhelpful, '{}')) AS i
    WHERE NOT EXISTS (SELECT 1 FROM pgmem.notes AS n WHERE n.namespace = p_namespace AND n.note_id = i);
    IF v_unknown IS NOT NULL THEN
        RAISE EXCEPTION '% note id(s) are not notes of namespace %: %',
            cardinality(v_unknown), p_namespace, array_to_string(v_unknown[1:5], ', ')
            USING ERRCODE = 'PM003';
    END IF;

    INSERT INTO pgmem.feedback (namespace, note_id, family, helpful, weight, pack_id)
    SELECT n.namespace, n.note_id, n.family, j.helpful, p_weight, p_pack_id
    FROM (SELECT DISTINCT i AS note_id, true AS helpful FROM unnest(p_helpful) AS i
          UNION ALL
          SELECT DISTINCT i, false FROM unnest(p_unhelpful) AS i) AS j
    JOIN pgmem.notes AS n ON n.namespace = p_namespace AND n.note_id = j.note_id
    ORDER BY n.note_id;

    RETURN QUERY
    SELECT r.family, r.helpful, r.unhelpful FROM pgmem.family_reliability AS r
    WHERE r.namespace = p_namespace
      AND r.family IN (SELECT n.family FROM pgmem.notes AS n
                       WHERE n.namespace = p_namespace
                         AND n.note_id = ANY (coalesce(p_helpful, '{}') || coalesce(p_unhelpful, '{}')))
    ORDER BY r.family;
END;
$$;

-- Start a namespace's learned reliability over (all families, or the given ones; admin).
CREATE FUNCTION pgmem.reset_feedback_v1(p_namespace text, p_families text[])
    RETURNS integer
    -- Deletes their feedback and totals. Admin only, like forget.
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
DECLARE
    v_removed integer;
BEGIN
    DELETE FROM pgmem.feedback AS f
    WHERE f.namespace = p_namespace AND (p_families IS NULL OR f.family = ANY (p_families));
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    DELETE FROM pgmem.family_reliability AS r
    WHERE r.namespace = p_namespace AND (p_families IS NULL OR r.family = ANY (p_families));
    UPDATE pgmem.namespaces AS s
    SET feedback_helpful = coalesce(t.helpful, 0), feedback_unhelpful = coalesce(t.unhelpful, 0)
    FROM (SELECT sum(r.helpful) AS helpful, sum(r.unhelpful) AS unhelpful
          FROM pgmem.family_reliability AS r WHERE r.namespace = p_namespace) AS t
    WHERE s.namespace = p_namespace;
    RETURN v_removed;
END;
$$;

-- Erasure and repair (admin) -------------------------------------------------------------

-- Erase notes of a namespace (by ids, document or family), audited; the one way notes leave.
CREATE FUNCTION pgmem.forget_v1(p_namespace text, p_scope text, p_selector text[], p_reason text)
    RETURNS TABLE (audit_id bigint, notes_removed integer)
    -- Deletes the notes (content and all), which deletes or recounts every row derived
    -- from them (count_forgotten_notes_v1), and records who, when, what (ids, no
    -- content), why and how much went with them.
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

-- Recompute a namespace's statistics from its notes and feedback (admin).
CREATE FUNCTION pgmem.recount_namespace_v1(p_namespace text) RETURNS void
    -- The repair for statistics that went wrong however they did.
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

-- Namespace grants and family bindings (admin) ------------------------------------------

-- Grant role p_role the namespace p_namespace (admin). An unknown role is an error.
CREATE FUNCTION pgmem.grant_namespace_v1(p_role name, p_namespace text) RETURNS void
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
CREATE FUNCTION pgmem.revoke_namespace_v1(p_role name, p_namespace text) RETURNS void
    LANGUAGE sql
    BEGIN ATOMIC
        DELETE FROM pgmem.namespace_grants AS g
        WHERE g.namespace = p_namespace
          AND g.role_oid = (SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname = p_role);
END;

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

-- Bind family p_family of p_namespace to the roles p_roles (admin); returns its note count.
CREATE FUNCTION pgmem.bind_family_v1(p_namespace text, p_family text, p_roles name[]) RETURNS bigint
    -- Binding adds to the roles already bound; an unknown role is an error and nothing is
    -- bound. Returns how many notes the family already holds: they were written before
    -- the binding and are not vouched for by it.
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
CREATE FUNCTION pgmem.unbind_family_v1(p_namespace text, p_family text, p_roles name[]) RETURNS integer
    -- Returns how many bindings were removed; a family left with none is open again.
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

-- Trigger functions ----------------------------------------------------------------------

-- Trigger: a new note's word hashes come from its text, never from the inserting role.
CREATE FUNCTION pgmem.hash_note_words_v1() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
BEGIN
    NEW.word_hashes := pgmem.word_hashes_v1(NEW.text);
    RETURN NEW;
END;
$$;

-- Refuse UPDATE, DELETE and TRUNCATE of notes (PM001), except forget's own DELETE.
CREATE FUNCTION pgmem.reject_note_change_v1() RETURNS trigger
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

-- Count inserted notes into the BM25 statistics (lexeme_stats, namespaces).
CREATE FUNCTION pgmem.count_new_notes_v1() RETURNS trigger
    -- The transition table holds only rows that were written, not those skipped by ON
    -- CONFLICT. Runs as the schema owner: writers insert notes, never touch the
    -- statistics directly.
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
BEGIN
    -- Sorted, so concurrent writers lock statistics rows in one order (no deadlock).
    INSERT INTO pgmem.lexeme_stats AS s (namespace, lexeme, document_frequency)
    SELECT n.namespace, u.lexeme, count(*)
    FROM new_notes AS n, unnest(n.lexemes) AS u
    GROUP BY n.namespace, u.lexeme
    ORDER BY n.namespace, u.lexeme
    ON CONFLICT (namespace, lexeme)
        DO UPDATE SET document_frequency = s.document_frequency + excluded.document_frequency;

    UPDATE pgmem.namespaces AS s
    SET note_count = s.note_count + d.notes, lexeme_total = s.lexeme_total + d.lexemes
    FROM (SELECT namespace, count(*) AS notes, sum(lexeme_count) AS lexemes
          FROM new_notes GROUP BY namespace) AS d
    WHERE s.namespace = d.namespace;
    RETURN NULL;
END;
$$;

-- After notes are deleted (forget, supersede): delete or recount every row derived from them.
CREATE FUNCTION pgmem.count_forgotten_notes_v1() RETURNS trigger
    -- Lexeme statistics lose the notes' lexemes (rows at zero are deleted, so no word of
    -- the erased text stays readable); feedback on the notes is deleted and the families'
    -- learned reliability recounted from what remains; logged packs that packed or
    -- rejected a deleted note are deleted with their family rows (their question may be
    -- about the erased text). The counts go to pgmem.forget_erasure for forget_v1.
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

-- Count inserted or deleted notes into pgmem.family_stats (owner rights).
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

-- Refuse a statement that inserts a note under a family its writer may not write (PM006).
CREATE FUNCTION pgmem.check_family_writers_v1() RETURNS trigger
    -- Names the first such family and namespace. Runs as the caller (not owner rights):
    -- the right is the inserting role's, and only the caller's role can tell. Writers
    -- hold no ALTER on pgmem.notes, so they cannot disable it.
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

-- Build a new embedding model's HNSW index as soon as its row exists, whoever inserts it.
CREATE FUNCTION pgmem.index_new_model_v1() RETURNS trigger
    -- Not only through register_namespace_v1: the index's dimension-typed expression is
    -- also what refuses a note whose vector does not have its model's dimension.
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
BEGIN
    PERFORM pgmem.ensure_model_index_v1(NEW.model_id);
    RETURN NULL;
END;
$$;

-- Add inserted feedback to the families' and namespaces' totals (owner rights).
CREATE FUNCTION pgmem.count_feedback_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
BEGIN
    INSERT INTO pgmem.family_reliability AS r (namespace, family, helpful, unhelpful)
    SELECT namespace, family,
           coalesce(sum(weight) FILTER (WHERE helpful), 0),
           coalesce(sum(weight) FILTER (WHERE NOT helpful), 0)
    FROM new_feedback GROUP BY namespace, family
    ON CONFLICT (namespace, family) DO UPDATE
    SET helpful = r.helpful + excluded.helpful,
        unhelpful = r.unhelpful + excluded.unhelpful,
        updated_at = now();

    UPDATE pgmem.namespaces AS s
    SET feedback_helpful = s.feedback_helpful + d.helpful,
        feedback_unhelpful = s.feedback_unhelpful + d.unhelpful
    FROM (SELECT namespace,
                 coalesce(sum(weight) FILTER (WHERE helpful), 0) AS helpful,
                 coalesce(sum(weight) FILTER (WHERE NOT helpful), 0) AS unhelpful
          FROM new_feedback GROUP BY namespace) AS d
    WHERE s.namespace = d.namespace;
    RETURN NULL;
END;
$$;

-- Delete the notes the inserted supersede requests replace (owner rights).
CREATE FUNCTION pgmem.supersede_notes_v1() RETURNS trigger
    -- Writers hold no DELETE privilege. Row-level security has already checked each
    -- request as its caller; this only refuses a request whose note is not (or no longer)
    -- on the span it names.
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

-- At commit, refuse a supersede whose replacement note is not on the replaced span (PM005).
CREATE FUNCTION pgmem.check_supersede_replaced_v1() RETURNS trigger
    -- The request path replaces notes, it never merely erases them (that is forget, for
    -- admins).
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

-- Delete the compaction telemetry of trajectories whose archived notes were forgotten.
CREATE FUNCTION pgmem.forget_compaction_log_v1() RETURNS trigger
    -- Erasure reaches telemetry too: raw verdicts quote the trajectory.
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
BEGIN
    DELETE FROM pgmem.compaction_log AS c
    USING (SELECT DISTINCT namespace, metadata ->> 'trajectory' AS trajectory_id
           FROM forgotten_compaction_notes WHERE metadata ? 'trajectory') AS f
    WHERE c.namespace = f.namespace AND c.trajectory_id = f.trajectory_id;
    RETURN NULL;
END;
$$;

-- Trigger: the postings of the notes a statement inserted; the first load analyzes the tables.
CREATE FUNCTION pgmem.post_new_notes_v1() RETURNS trigger
    -- The transition table holds only rows written, not those skipped by ON CONFLICT;
    -- postings are inserted in key order. Runs with owner rights: no role writes postings.
    -- A table never analyzed (reltuples < 0) makes the planner guess its size and read
    -- postings by sequential scans until autovacuum's first ANALYZE: the first write
    -- analyzes them once; statistics then scale with the real page count.
    -- Fires after the other insert triggers (by name), so the statistics tables are
    -- written when the first load analyzes them; the lock is only tried (NOWAIT), so a
    -- concurrent first writer skips the analysis instead of waiting for it.
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
BEGIN
    INSERT INTO pgmem.lexeme_postings (namespace, lexeme, note_id, term_frequency, lexeme_count)
    SELECT n.namespace, u.lexeme, n.note_id, coalesce(cardinality(u.positions), 1), n.lexeme_count
    FROM new_notes AS n, unnest(n.lexemes) AS u
    ORDER BY n.namespace, u.lexeme, n.note_id;
    IF EXISTS (SELECT 1 FROM pg_class
               WHERE oid IN ('pgmem.notes'::regclass, 'pgmem.lexeme_stats'::regclass,
                             'pgmem.lexeme_postings'::regclass)
                 AND reltuples < 0) THEN
        BEGIN
            LOCK TABLE pgmem.notes, pgmem.lexeme_stats, pgmem.lexeme_postings
                IN SHARE UPDATE EXCLUSIVE MODE NOWAIT;
            ANALYZE pgmem.notes, pgmem.lexeme_stats, pgmem.lexeme_postings;
        EXCEPTION WHEN lock_not_available THEN
            NULL;  -- another first writer is analyzing them
        END;
    END IF;
    RETURN NULL;
END;
$$;

-- Trigger: the postings of deleted notes go with them.
CREATE FUNCTION pgmem.unpost_deleted_notes_v1() RETURNS trigger
    -- Forget, supersede and compaction delete notes: no lexeme of an erased note stays
    -- readable. Runs with owner rights.
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgmem, pg_temp
    AS $$
BEGIN
    DELETE FROM pgmem.lexeme_postings AS p
    USING old_notes AS o, unnest(o.lexemes) AS u
    WHERE p.namespace = o.namespace AND p.lexeme = u.lexeme AND p.note_id = o.note_id;
    RETURN NULL;
END;
$$;

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

-- == Triggers ==

-- Notes are immutable: the database itself refuses UPDATE, DELETE and TRUNCATE.
CREATE TRIGGER notes_immutable_rows BEFORE UPDATE OR DELETE ON pgmem.notes
    FOR EACH ROW EXECUTE FUNCTION pgmem.reject_note_change_v1();
CREATE TRIGGER notes_immutable_truncate BEFORE TRUNCATE ON pgmem.notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.reject_note_change_v1();

-- A new note's word hashes come from its text, whatever the inserting role wrote there.
CREATE TRIGGER notes_word_hashes BEFORE INSERT ON pgmem.notes
    FOR EACH ROW EXECUTE FUNCTION pgmem.hash_note_words_v1();

-- Statistics follow the notes actually written and deleted.
CREATE TRIGGER notes_count_new AFTER INSERT ON pgmem.notes
    REFERENCING NEW TABLE AS new_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.count_new_notes_v1();
CREATE TRIGGER notes_count_forgotten AFTER DELETE ON pgmem.notes
    REFERENCING OLD TABLE AS old_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.count_forgotten_notes_v1();
CREATE TRIGGER notes_count_families AFTER INSERT ON pgmem.notes
    REFERENCING NEW TABLE AS new_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.count_family_notes_v1();
CREATE TRIGGER notes_uncount_families AFTER DELETE ON pgmem.notes
    REFERENCING OLD TABLE AS old_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.count_family_notes_v1();

-- Lexeme postings follow the notes written and deleted.
CREATE TRIGGER notes_post_new AFTER INSERT ON pgmem.notes
    REFERENCING NEW TABLE AS new_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.post_new_notes_v1();
CREATE TRIGGER notes_unpost_deleted AFTER DELETE ON pgmem.notes
    REFERENCING OLD TABLE AS old_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.unpost_deleted_notes_v1();

-- Link keys follow the notes written and deleted.
CREATE TRIGGER notes_key_new AFTER INSERT ON pgmem.notes
    REFERENCING NEW TABLE AS new_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.key_new_notes_v1();
CREATE TRIGGER notes_unkey_deleted AFTER DELETE ON pgmem.notes
    REFERENCING OLD TABLE AS old_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.unkey_deleted_notes_v1();

-- A family bound to writer roles refuses notes from other writers.
CREATE TRIGGER notes_check_family_writers AFTER INSERT ON pgmem.notes
    REFERENCING NEW TABLE AS new_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.check_family_writers_v1();

-- Erasure reaches compaction telemetry.
CREATE TRIGGER notes_forget_compaction_log AFTER DELETE ON pgmem.notes
    REFERENCING OLD TABLE AS forgotten_compaction_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.forget_compaction_log_v1();

-- Every model gets its HNSW index as soon as its row exists.
CREATE TRIGGER embedding_models_index AFTER INSERT ON pgmem.embedding_models
    FOR EACH ROW EXECUTE FUNCTION pgmem.index_new_model_v1();

-- Feedback totals.
CREATE TRIGGER feedback_count AFTER INSERT ON pgmem.feedback
    REFERENCING NEW TABLE AS new_feedback
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.count_feedback_v1();

-- Supersede: delete the replaced notes, and check at commit that the new ones are there.
CREATE TRIGGER supersede_audit_delete AFTER INSERT ON pgmem.supersede_audit
    REFERENCING NEW TABLE AS requests
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.supersede_notes_v1();
CREATE CONSTRAINT TRIGGER supersede_audit_replaced AFTER INSERT ON pgmem.supersede_audit
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION pgmem.check_supersede_replaced_v1();

-- == Views ==

-- All views run with the caller's rights (security_invoker), so the row-level security
-- of the tables they read applies to whoever queries them.

-- How often calibration switched itself off, by reason ('any' counts degraded packs).
CREATE VIEW pgmem.pack_degraded_rate_v1 WITH (security_invoker = true) AS
WITH totals AS (
    SELECT namespace, mode, count(*) AS packs FROM pgmem.pack_log GROUP BY namespace, mode
), reasons AS (
    SELECT namespace, mode, 'any' AS reason, count(*) FILTER (WHERE degraded) AS degraded_packs
    FROM pgmem.pack_log GROUP BY namespace, mode
    UNION ALL
    SELECT l.namespace, l.mode, r.reason, count(*)
    FROM pgmem.pack_log AS l, unnest(l.degraded_reasons) AS r (reason)
    GROUP BY l.namespace, l.mode, r.reason
)
SELECT t.namespace, t.mode, r.reason, t.packs, r.degraded_packs,
       r.degraded_packs::float8 / t.packs AS rate
FROM totals AS t JOIN reasons AS r USING (namespace, mode);

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

-- How often the variance floor dominated a family's expected variance.
CREATE VIEW pgmem.pack_variance_floor_rate_v1 WITH (security_invoker = true) AS
SELECT f.namespace, l.mode,
       count(DISTINCT f.pack_id) AS packs,
       count(*) AS family_rows,
       count(*) FILTER (WHERE f.variance_floor_dominated) AS floor_dominated_rows,
       avg(f.variance_floor_dominated::integer::float8) AS floor_dominated_rate,
       count(DISTINCT f.pack_id) FILTER (WHERE f.variance_floor_dominated)::float8
           / count(DISTINCT f.pack_id) AS packs_with_floor_rate
FROM pgmem.pack_log_families AS f
JOIN pgmem.pack_log AS l USING (namespace, pack_id)
GROUP BY f.namespace, l.mode;

-- The distribution of family-label entropy (nats) over logged pools.
CREATE VIEW pgmem.pack_entropy_distribution_v1 WITH (security_invoker = true) AS
SELECT namespace, mode, count(*) AS packs,
       min(entropy) AS min,
       percentile_cont(0.10) WITHIN GROUP (ORDER BY entropy) AS p10,
       percentile_cont(0.25) WITHIN GROUP (ORDER BY entropy) AS p25,
       percentile_cont(0.50) WITHIN GROUP (ORDER BY entropy) AS median,
       percentile_cont(0.75) WITHIN GROUP (ORDER BY entropy) AS p75,
       percentile_cont(0.90) WITHIN GROUP (ORDER BY entropy) AS p90,
       max(entropy) AS max,
       avg(entropy) AS mean
FROM pgmem.pack_log
GROUP BY namespace, mode;

-- Per-family regulariser statistics over the logged pools a family appeared in.
CREATE VIEW pgmem.family_regularizer_stats_v1 WITH (security_invoker = true) AS
SELECT f.namespace, l.mode, f.family,
       count(*) AS pools,
       avg(f.count) AS mean_pool_count,
       avg(f.z) AS mean_z,
       avg(f.reliability) AS mean_reliability,
       avg(f.uncertainty) AS mean_uncertainty,
       avg(f.regularizer) AS mean_regularizer,
       min(f.regularizer) AS min_regularizer,
       max(f.regularizer) AS max_regularizer,
       avg((f.regularizer > 0)::integer::float8) AS positive_rate,
       avg((f.regularizer < 0)::integer::float8) AS negative_rate,
       avg(l.degraded::integer::float8) AS degraded_rate
FROM pgmem.pack_log_families AS f
JOIN pgmem.pack_log AS l USING (namespace, pack_id)
GROUP BY f.namespace, l.mode, f.family;

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

-- Every family alarm raised in a logged pack, and every newcomer family: which family, in
-- which pack, how the score was made up (collusion and colluding NULL in packs logged
-- before migration 0015, the burst gate's burst_span, burst_lateness and bound before
-- 0017, question_restatement before 0021, newcomer before 0024), and whether the family
-- was quarantined.
CREATE VIEW pgmem.family_alarms_v1 WITH (security_invoker = true) AS
SELECT f.namespace, f.pack_id, l.created_at, l.mode, l.query, f.family, f.count, f.namespace_count,
       f.z, f.pool_share, f.namespace_share, f.newness, f.duplicate_density, f.question_echo,
       f.question_restatement, f.collusion, f.burst_span, f.burst_lateness, f.bound, f.alarm_score, f.alarm_threshold, f.colluding,
       f.quarantined, f.regularizer, f.alarmed, f.newcomer
FROM pgmem.pack_log_families AS f
JOIN pgmem.pack_log AS l USING (namespace, pack_id)
WHERE f.alarmed OR f.newcomer;

-- The store's provenance families.
CREATE VIEW pgmem.store_families_v1 WITH (security_invoker = true) AS
SELECT namespace, family,
       count(*) AS notes,
       count(DISTINCT document_id) AS documents,
       avg(confidence::float8) AS mean_confidence,
       min(source_ts) AS first_source_ts,
       max(source_ts) AS last_source_ts,
       max(created_at) AS last_written_at
FROM pgmem.notes
GROUP BY namespace, family;

-- Grants by role name, for people: dropped roles do not appear.
CREATE VIEW pgmem.namespace_grants_v1 WITH (security_invoker = true) AS
SELECT g.namespace, r.rolname AS role_name, g.role_oid, g.granted_at
FROM pgmem.namespace_grants AS g
JOIN pg_catalog.pg_roles AS r ON r.oid = g.role_oid;

-- Bindings by role name, for people (a dropped role shows as NULL: its family stays closed).
CREATE VIEW pgmem.family_writers_v1 WITH (security_invoker = true) AS
SELECT w.namespace, w.family, r.rolname AS role_name, w.role_oid, w.bound_by, w.bound_at
FROM pgmem.family_writers AS w
LEFT JOIN pg_catalog.pg_roles AS r ON r.oid = w.role_oid;

-- Every probe and compaction, with derived ratios (the telemetry view tools read).
CREATE VIEW pgmem.compaction_events WITH (security_invoker = true) AS
SELECT namespace, event_id, trajectory_id, generation, round, kind, policy, rebuild, reason, fired,
       gates, prompt_tokens, raw_verdict, predicates, tokens_before, tokens_after,
       CASE WHEN tokens_before > 0 THEN tokens_after::float8 / tokens_before END AS compression_ratio,
       probe_prompt_tokens, probe_completion_tokens, summary_prompt_tokens, summary_completion_tokens,
       probe_prompt_tokens + probe_completion_tokens + summary_prompt_tokens
           + summary_completion_tokens AS overhead_tokens,
       latency_ms, model, archived, summary_note_id, citations, logged_by, logged_at
FROM pgmem.compaction_log;

-- What triggered compactions, per namespace and policy, with each reason's share.
CREATE VIEW pgmem.compaction_trigger_mix_v1 WITH (security_invoker = true) AS
SELECT namespace, policy, reason, count(*) AS compactions,
       count(*)::float8 / sum(count(*)) OVER (PARTITION BY namespace, policy) AS share
FROM pgmem.compaction_log
WHERE kind = 'compaction'
GROUP BY namespace, policy, reason;

-- How much each compaction shrank the live context, per namespace, policy and rebuild.
CREATE VIEW pgmem.compaction_ratio_v1 WITH (security_invoker = true) AS
SELECT namespace, policy, rebuild, count(*) AS compactions,
       avg(tokens_before) AS mean_tokens_before, avg(tokens_after) AS mean_tokens_after,
       avg(tokens_after::float8 / nullif(tokens_before, 0)) AS mean_ratio,
       min(tokens_after::float8 / nullif(tokens_before, 0)) AS min_ratio,
       max(tokens_after::float8 / nullif(tokens_before, 0)) AS max_ratio
FROM pgmem.compaction_log
WHERE kind = 'compaction'
GROUP BY namespace, policy, rebuild;

-- What compaction cost one trajectory in one generation: probes, compactions, the probe
-- and summary tokens and the time spent.
CREATE VIEW pgmem.compaction_cost_by_generation_v1 WITH (security_invoker = true) AS
SELECT namespace, trajectory_id, generation,
       count(*) FILTER (WHERE kind = 'probe') AS probes,
       count(*) FILTER (WHERE kind = 'probe' AND fired) AS probes_fired,
       count(*) FILTER (WHERE kind = 'compaction') AS compactions,
       sum(probe_prompt_tokens + probe_completion_tokens) AS probe_tokens,
       sum(summary_prompt_tokens + summary_completion_tokens) AS summary_tokens,
       sum(latency_ms) AS latency_ms,
       max(prompt_tokens) AS max_prompt_tokens
FROM pgmem.compaction_log
GROUP BY namespace, trajectory_id, generation;

-- The same per trajectory (all generations).
CREATE VIEW pgmem.compaction_cost_v1 WITH (security_invoker = true) AS
SELECT namespace, trajectory_id, count(*) AS generations, sum(probes) AS probes,
       sum(compactions) AS compactions, sum(probe_tokens) AS probe_tokens,
       sum(summary_tokens) AS summary_tokens, sum(latency_ms) AS latency_ms,
       max(max_prompt_tokens) AS max_prompt_tokens
FROM pgmem.compaction_cost_by_generation_v1
GROUP BY namespace, trajectory_id;

-- == Row-level security ==

-- Every table keyed by namespace. The schema owner (who ran the migrations) and
-- superusers are not subject to it. pgmem.embedding_models is global (no namespace),
-- and pgmem.forget_audit is read by admins only (grants below).
ALTER TABLE pgmem.namespaces ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.lexeme_stats ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.lexeme_postings ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.link_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.notes ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.namespace_grants ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.family_writers ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.family_stats ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.pack_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.pack_log_families ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.pack_log_items ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.pack_log_rejections ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.feedback ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.family_reliability ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.supersede_audit ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgmem.compaction_log ENABLE ROW LEVEL SECURITY;

-- Readers and writers see the rows of their session namespace
-- (pgmem.session_namespace_v1): its notes and statistics, the family bindings (a
-- writer must know which families it may not write), logged packs, feedback, the
-- supersedes (provenance: why a cited note was replaced) and compaction telemetry.
-- These policies, FOR ALL with USING only, are also the WITH CHECK of inserts: a
-- writer inserts only into the namespace its session may use.
CREATE POLICY namespace_isolation ON pgmem.namespaces TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.lexeme_stats TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.notes TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.lexeme_postings TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.link_keys TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.family_writers TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.family_stats TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.pack_log TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.pack_log_families TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.pack_log_items TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.pack_log_rejections TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.feedback TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.family_reliability TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.supersede_audit TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY namespace_isolation ON pgmem.compaction_log TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));

-- Admins see and write every namespace.
CREATE POLICY admin_all ON pgmem.namespaces TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.lexeme_stats TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.lexeme_postings TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.link_keys TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.notes TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.namespace_grants TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.family_writers TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.family_stats TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.pack_log TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.pack_log_families TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.pack_log_items TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.pack_log_rejections TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.feedback TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.family_reliability TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.supersede_audit TO pgmem_admin USING (true);
CREATE POLICY admin_all ON pgmem.compaction_log TO pgmem_admin USING (true);

-- A role sees only the grants of roles it is a member of (so no namespace names leak).
CREATE POLICY own_grants ON pgmem.namespace_grants TO pgmem_reader, pgmem_writer
    USING (EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r
                   WHERE r.oid = role_oid AND pg_has_role(current_user, r.oid, 'MEMBER')));

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

-- A supersede request is accepted only in the session's namespace and for a note the
-- caller can see on the very span it names, for every role subject to row-level
-- security (admins included).
CREATE POLICY supersede_request ON pgmem.supersede_audit AS RESTRICTIVE FOR INSERT TO PUBLIC
    WITH CHECK (
        namespace = (SELECT pgmem.session_namespace_v1())
        AND EXISTS (SELECT 1 FROM pgmem.notes AS n
                    WHERE n.namespace = supersede_audit.namespace
                      AND n.note_id = supersede_audit.old_note_id
                      AND n.document_id = supersede_audit.document_id
                      AND n.span_start = supersede_audit.span_start
                      AND n.span_end = supersede_audit.span_end));

-- Superseding deletes the replaced note: an unbound writer must not erase a bound
-- family's notes by "replacing" them with its own. Checked as the caller.
CREATE POLICY supersede_family_right ON pgmem.supersede_audit AS RESTRICTIVE FOR INSERT TO PUBLIC
    WITH CHECK (
        pgmem.may_write_family_v1(namespace, (SELECT n.family FROM pgmem.notes AS n
                                              WHERE n.namespace = supersede_audit.namespace
                                                AND n.note_id = supersede_audit.old_note_id)));

-- == Role memberships and grants ==

-- Least privilege. Readers read their namespace and may log packs; writers also
-- insert notes, give feedback, supersede and log compaction telemetry; admins also
-- register models, forget, and manage namespace grants and family bindings. Each
-- group role holds the rights of the one below it.
GRANT pgmem_reader TO pgmem_writer;
GRANT pgmem_writer TO pgmem_admin;

-- Functions are created executable by PUBLIC; pgmem's are executable only by the roles
-- granted below.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgmem FROM PUBLIC;
GRANT USAGE ON SCHEMA pgmem TO pgmem_reader, pgmem_writer, pgmem_admin;

-- Readers: their namespace's notes and statistics, logged packs and telemetry; stage one.
GRANT SELECT ON pgmem.embedding_models, pgmem.namespaces, pgmem.lexeme_stats, pgmem.lexeme_postings, pgmem.link_keys,
    pgmem.notes,
    pgmem.namespace_grants, pgmem.family_writers, pgmem.family_stats, pgmem.pack_log,
    pgmem.pack_log_families, pgmem.pack_log_items, pgmem.pack_log_rejections, pgmem.feedback,
    pgmem.family_reliability, pgmem.supersede_audit, pgmem.compaction_log
    TO pgmem_reader;
GRANT SELECT ON pgmem.pack_degraded_rate_v1, pgmem.pack_degraded_daily_v1, pgmem.pack_variance_floor_rate_v1,
    pgmem.pack_entropy_distribution_v1, pgmem.family_regularizer_stats_v1, pgmem.pack_explain_v1,
    pgmem.family_alarms_v1, pgmem.store_families_v1, pgmem.namespace_grants_v1, pgmem.family_writers_v1,
    pgmem.compaction_events, pgmem.compaction_trigger_mix_v1, pgmem.compaction_ratio_v1,
    pgmem.compaction_cost_by_generation_v1, pgmem.compaction_cost_v1
    TO pgmem_reader;
GRANT INSERT ON pgmem.pack_log, pgmem.pack_log_families, pgmem.pack_log_items, pgmem.pack_log_rejections
    TO pgmem_reader;
GRANT EXECUTE ON FUNCTION pgmem.tsvector_token_count, pgmem.note_lexemes, pgmem.bm25_term_v1, pgmem.bm25_v1,
    pgmem.filter_value_v1, pgmem.compile_filter_v1, pgmem.group_role_v1, pgmem.may_use_namespace_v1,
    pgmem.session_namespace_v1, pgmem.may_write_family_v1, pgmem.lexical_bound_v1, pgmem.family_spread_v1,
    pgmem.notes_outside_v1, pgmem.hnsw_breadth_v1, pgmem.stage_one_v1, pgmem.stage_one_pool_v1,
    pgmem.log_pack_v1, pgmem.log_pack_v2, pgmem.check_family_writers_v1, pgmem.word_hashes_v1
    TO pgmem_reader;

-- Writers: notes, feedback, supersede requests and compaction telemetry, by column. Who
-- wrote a row and when (given_by, requested_by, logged_by, created_at, ...), the ids
-- the database numbers and the running statistics come from their defaults and the
-- triggers (owner rights), never from the inserting writer.
GRANT INSERT (namespace, note_id, external_id, document_id, span_start, span_end, text, context, family,
              role, confidence, source_ts, model_id, embedding, entities, time_tags, keywords, handles,
              links, metadata)
    ON pgmem.notes TO pgmem_writer;
-- Writers bind a namespace to a model; its statistics start at zero.
GRANT INSERT (namespace, model_id) ON pgmem.namespaces TO pgmem_writer;
GRANT INSERT (namespace, note_id, family, helpful, weight, pack_id) ON pgmem.feedback TO pgmem_writer;
GRANT INSERT (namespace, old_note_id, new_note_id, document_id, span_start, span_end, reason)
    ON pgmem.supersede_audit TO pgmem_writer;
GRANT INSERT (namespace, trajectory_id, generation, round, kind, policy, rebuild, reason, fired, gates,
              prompt_tokens, raw_verdict, predicates, tokens_before, tokens_after, probe_prompt_tokens,
              probe_completion_tokens, summary_prompt_tokens, summary_completion_tokens, latency_ms, model,
              archived, summary_note_id, citations)
    ON pgmem.compaction_log TO pgmem_writer;
GRANT EXECUTE ON FUNCTION pgmem.register_namespace_v1, pgmem.register_model_v1, pgmem.feedback_v1,
    pgmem.handle_holders_v1, pgmem.entity_holders_v1, pgmem.key_holders_v1
    TO pgmem_writer;

-- Admins: every registered embedding model gets an HNSW index on the shared notes
-- table, so only admins register models; they also forget, manage namespace grants
-- and family bindings, and read the erasure audit.
GRANT INSERT ON pgmem.embedding_models TO pgmem_admin;
GRANT INSERT, DELETE ON pgmem.namespace_grants, pgmem.family_writers TO pgmem_admin;
GRANT SELECT ON pgmem.forget_audit TO pgmem_admin;
GRANT EXECUTE ON FUNCTION pgmem.ensure_model_index_v1, pgmem.forget_v1, pgmem.recount_namespace_v1,
    pgmem.reset_feedback_v1, pgmem.grant_namespace_v1, pgmem.revoke_namespace_v1, pgmem.prune_grants_v1,
    pgmem.bind_family_v1, pgmem.unbind_family_v1
    TO pgmem_admin;
