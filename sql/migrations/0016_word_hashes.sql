-- Migration 0016: each note's words as 64-bit hashes, computed by the database at write
-- time, so that no pack needs to tokenise note texts (issue 12; stage one returns them
-- since migration 0018). Frozen: never edit a shipped migration.
--
-- * pgmem.notes gains word_hashes (bytea): the note's distinct words as little-endian
--   int64 hashes, stop words with the sign bit set (pgmem.word_hashes_v1). A BEFORE
--   INSERT trigger fills it from the note's text, whatever the inserting role wrote
--   there, and writers are not granted the column: the hashes feed the family alarm's
--   echo, near-duplicate and collusion inputs, and a writer who chose them could hide
--   its notes from the alarm. Notes written before this migration keep NULL (no table
--   rewrite): the read path tokenises those.

ALTER TABLE pgmem.notes ADD COLUMN word_hashes bytea;

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

CREATE TRIGGER notes_word_hashes BEFORE INSERT ON pgmem.notes
    FOR EACH ROW EXECUTE FUNCTION pgmem.hash_note_words_v1();


REVOKE ALL ON FUNCTION pgmem.word_hashes_v1, pgmem.hash_note_words_v1 FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgmem.word_hashes_v1 TO pgmem_reader;
