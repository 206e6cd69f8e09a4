-- Migration 0012: the first write into a database analyzes what stage one plans on
-- (issue 12). Frozen: never edit a shipped migration.
--
-- A table never analyzed has no statistics (pg_class.reltuples < 0): the planner then
-- guesses its size from ten pages, and stage one reads pgmem.lexeme_postings by
-- sequential scans until autovacuum's first ANALYZE, about a minute after a first load
-- (measured on the 438-note demo store: stage one 27.9 ms before, 18.0 ms after analyzing
-- the postings alone). Statistics, once taken, scale with the table's real page count,
-- so analyzing once is enough; autovacuum keeps them after that.

-- Trigger: the postings of the notes a statement inserted.
CREATE OR REPLACE FUNCTION pgmem.post_new_notes_v1() RETURNS trigger
    -- The transition table holds only rows written, not those skipped by ON CONFLICT;
    -- postings are inserted in key order. Runs with owner rights: no role writes postings.
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
