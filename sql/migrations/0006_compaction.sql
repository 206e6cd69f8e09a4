-- Migration 0006: context compaction telemetry (pgmem.compaction). Frozen: never edit a
-- shipped migration.
--
-- * pgmem.compaction_log: one row per probe and per compaction, under the notes'
--   namespace row-level security; writers insert (no forged order, author or time).
-- * pgmem.compaction_events and the trigger-mix, ratio and cost views, security_invoker.
-- * Forgetting a trajectory's archived notes deletes its telemetry (verdicts quote it).

-- One row per rubric probe and per compaction of an agent trajectory: the gate values,
-- the raw verdict and its parsed predicates with their evidence, whether it fired and
-- why, tokens before and after, what the probe and summary calls cost. Written by
-- pgmem.compaction.Compactor (INSERT as a writer of the namespace); never updated.
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
CREATE INDEX compaction_log_trajectory ON pgmem.compaction_log (namespace, trajectory_id, generation);

-- Erasure reaches telemetry too: raw verdicts quote the trajectory, so when archived
-- notes of a trajectory are deleted (pgmem.forget_v1), its telemetry rows go with them.
CREATE FUNCTION pgmem.forget_compaction_log_v1() RETURNS trigger
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

CREATE TRIGGER notes_forget_compaction_log AFTER DELETE ON pgmem.notes
    REFERENCING OLD TABLE AS forgotten_compaction_notes
    FOR EACH STATEMENT EXECUTE FUNCTION pgmem.forget_compaction_log_v1();

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

-- Readers see the telemetry of their namespaces only (as for notes); writers log it.
ALTER TABLE pgmem.compaction_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY namespace_isolation ON pgmem.compaction_log TO pgmem_reader, pgmem_writer
    USING (namespace = (SELECT pgmem.session_namespace_v1()));
CREATE POLICY admin_all ON pgmem.compaction_log TO pgmem_admin USING (true);

REVOKE ALL ON FUNCTION pgmem.forget_compaction_log_v1 FROM PUBLIC;
GRANT SELECT ON pgmem.compaction_log, pgmem.compaction_events, pgmem.compaction_trigger_mix_v1,
    pgmem.compaction_ratio_v1, pgmem.compaction_cost_by_generation_v1, pgmem.compaction_cost_v1
    TO pgmem_reader;
-- event_id, logged_by and logged_at come from their defaults: no writer may forge an
-- event's order, author or time.
GRANT INSERT (namespace, trajectory_id, generation, round, kind, policy, rebuild, reason, fired, gates,
              prompt_tokens, raw_verdict, predicates, tokens_before, tokens_after, probe_prompt_tokens,
              probe_completion_tokens, summary_prompt_tokens, summary_completion_tokens, latency_ms, model,
              archived, summary_note_id, citations)
    ON pgmem.compaction_log TO pgmem_writer;
