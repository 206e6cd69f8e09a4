"""Keywords: a small budget of the words a question about a note would use.

Questions ask for names, numbers and things ("When did Caroline go to the support
group?", "How many dogs does Melanie have?"), so the scoring favours proper nouns,
numbers and nouns over verbs, adverbs and chat filler. No model: each occurrence of
a word adds

    weight = shape * cue

where *shape* is 2.5 for a capitalised word inside a sentence (a name), 2.0 for a
number (1.5 for a single digit), 1.5 for a capitalised word opening a sentence, 1.3
for a word with a noun suffix (-tion, -ment, -ness, ...), 0.6 for one with an
adjective or past-tense suffix (-ful, -ous, -ive, -able, -less, -ed), 0.4 for an
adverb in -ly, and 1.0 otherwise; *cue* is 1.5 when the word follows a determiner, a
possessive, a number or "of" (a noun is most likely there) and 1.0 otherwise. Words
are ranked by their summed weight, then by first appearance; stop words, chat filler,
time words and words shorter than three letters (numbers excepted) are skipped.
Keywords are lower-cased, possessive-free and unique, so the same question and note
wording produce the same keyword.
"""

from __future__ import annotations

import re

from pgmem.ingestion.entities import STOPWORDS

# Words that a question rarely turns on: filler, vague nouns, light verbs, evaluations
# and time words (time expressions have time tags of their own).
_GENERIC = STOPWORDS | frozenset(
    """
    think thought know knew known feel felt feeling feelings want wanted wanna make makes made
    making really thing things stuff lot lots kind kinds bit way ways something anything
    everything nothing someone anyone everyone somebody anybody everybody always never sometimes
    often usually maybe perhaps probably definitely totally absolutely actually basically great
    good awesome amazing nice cool glad happy love loved loves lovely wonderful fantastic cute
    sure wow sounds sound seems seem looks look looking keep kept let lets see seen saw say
    said says tell told telling come came coming take took taken taking give gave given giving
    went goes doing done been having getting got pretty super sweet fun funny crazy awesome
    incredible beautiful glad yep yup nope haha lol omg aww oof hmm though although even still
    every another able ever else yet soon back around away right left need needs needed use
    used using try tried trying hope hoping hopefully wish glad sorry congrats congratulations
    cheers bye today tonight tomorrow yesterday week weeks month months year years day days ago
    last next time times moment moments recently lately currently now later earlier new old
    big little small long best better same different whole true real sure keep things let's
    i'm i've i'll i'd you're you've you'll it's that's what's there's don't didn't doesn't
    can't won't isn't wasn't aren't couldn't wouldn't shouldn't must might may shall plus since
    """.split()  # noqa: SIM905 - a word list reads best as text
)
_NOUN_CUES = frozenset(
    """a an the my your his her our their its this that these those some any each every no
    several many few of new first second""".split()  # noqa: SIM905
)
_NOUN_SUFFIXES = ("tion", "sion", "ment", "ness", "ity", "ship", "ism", "ist", "ance", "ence", "ery", "hood", "dom")
_WEAK_SUFFIXES = ("ful", "ous", "ive", "able", "ible", "less", "ed")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_POSSESSIVE = re.compile(r"['’]s$")
_SENTENCE_END = re.compile(r"[.!?…:\n]")


def _shape(word: str, key: str, initial: bool) -> float:
    if key.isdigit():
        return 2.0 if len(key) > 1 else 1.5
    if word[0].isupper():
        return 1.5 if initial else 2.5
    if key.endswith(_NOUN_SUFFIXES):
        return 1.3
    if key.endswith("ly"):
        return 0.4
    if key.endswith(_WEAK_SUFFIXES):
        return 0.6
    return 1.0


def extract_keywords(text: str, budget: int) -> tuple[str, ...]:
    """Up to ``budget`` question-oriented keywords of ``text``.

    Parameters
    ----------
    text : str
        Any text; never raises.
    budget : int
        How many keywords to keep at most.

    Returns
    -------
    tuple of str
        Lower-cased, unique, best first; the same text always gives the same tuple.
    """
    weights: dict[str, float] = {}
    first: dict[str, int] = {}
    previous = ""
    previous_end = 0
    for index, match in enumerate(_WORD.finditer(text)):
        word = match.group(0)
        if "'" in word or "’" in word:
            word = _POSSESSIVE.sub("", word)
        key = word.lower()
        # Most words follow one space, which ends no sentence.
        start = match.start()
        initial = index == 0 or (
            (start - previous_end != 1 or text[previous_end] != " ")
            and _SENTENCE_END.search(text, previous_end, start) is not None
        )
        cue = 1.5 if (previous in _NOUN_CUES or previous.isdigit()) and not initial else 1.0
        previous, previous_end = key, match.end()
        if key in _GENERIC or "'" in key or "’" in key or (len(key) < 3 and not key.isdigit()):
            continue
        weights[key] = weights.get(key, 0.0) + _shape(word, key, initial) * cue
        first.setdefault(key, index)
    ranked = sorted(weights, key=lambda k: (-weights[k], first[k], k))
    return tuple(ranked[: max(0, budget)])
