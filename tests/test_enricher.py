"""The write-path enricher: concrete examples for every extractor, then properties."""

from __future__ import annotations

import dataclasses
import sys
from datetime import UTC, date, datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pgmem
from pgmem.ingestion.enricher import (
    STOPWORDS,
    EnricherConfig,
    EntityTag,
    QueryHints,
    RuleEnricher,
    RuleEntityExtractor,
    SpacyEntityExtractor,
    SpanInput,
    classify_role,
    context_descriptor,
    derive_query_hints,
    extract_entities,
    extract_handles,
    extract_keywords,
    extract_time_tags,
)

# LoCoMo's first session: "1:56 pm on 8 May, 2023" (a Monday).
SESSION = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def span(text: str, **fields: Any) -> SpanInput:
    values: dict[str, Any] = {
        "text": text,
        "family": "f",
        "source_ts": None,
        "role": None,
        "confidence": None,
        "context": None,
        "metadata": {},
    }
    values.update(fields)
    return SpanInput(**values)


def days(tag: Any) -> tuple[str, str, str, str]:
    return (tag.text, tag.granularity, tag.start.date().isoformat(), tag.end.date().isoformat())


# --- time tags ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2023-05-08", ("2023-05-08", "day", "2023-05-08", "2023-05-09")),
        ("May 8, 2023", ("May 8, 2023", "day", "2023-05-08", "2023-05-09")),
        ("8 May 2023", ("8 May 2023", "day", "2023-05-08", "2023-05-09")),
        ("on 8 May, 2023", ("8 May, 2023", "day", "2023-05-08", "2023-05-09")),
        ("the 8th of May 2023", ("the 8th of May 2023", "day", "2023-05-08", "2023-05-09")),
        ("25/12/2023", ("25/12/2023", "day", "2023-12-25", "2023-12-26")),
        ("May 2023", ("May 2023", "month", "2023-05-01", "2023-06-01")),
        ("in December 2022", ("December 2022", "month", "2022-12-01", "2023-01-01")),
        ("summer 2022", ("summer 2022", "season", "2022-06-01", "2022-09-01")),
        ("winter of 2022", ("winter of 2022", "season", "2022-12-01", "2023-03-01")),
        ("2023", ("2023", "year", "2023-01-01", "2024-01-01")),
        ("built in 1843", ("1843", "year", "1843-01-01", "1844-01-01")),
        ("the 1990s", ("the 1990s", "decade", "1990-01-01", "2000-01-01")),
        ("the late 90s", ("the late 90s", "decade", "1996-01-01", "2000-01-01")),
    ],
)
def test_absolute_expressions_need_no_anchor(text: str, expected: tuple[str, str, str, str]) -> None:
    assert [days(t) for t in extract_time_tags(text, None)] == [expected]
    assert [days(t) for t in extract_time_tags(text, SESSION)] == [expected]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("yesterday", ("yesterday", "day", "2023-05-07", "2023-05-08")),
        ("today", ("today", "day", "2023-05-08", "2023-05-09")),
        ("tomorrow", ("tomorrow", "day", "2023-05-09", "2023-05-10")),
        ("last night", ("last night", "day", "2023-05-07", "2023-05-08")),
        ("the day before yesterday", ("the day before yesterday", "day", "2023-05-06", "2023-05-07")),
        ("two days ago", ("two days ago", "day", "2023-05-06", "2023-05-07")),
        ("3 years ago", ("3 years ago", "year", "2020-01-01", "2021-01-01")),
        ("a few days ago", ("a few days ago", "day", "2023-05-04", "2023-05-07")),
        ("in two weeks", ("in two weeks", "week", "2023-05-22", "2023-05-29")),
        ("last week", ("last week", "week", "2023-05-01", "2023-05-08")),
        ("this week", ("this week", "week", "2023-05-08", "2023-05-15")),
        ("next month", ("next month", "month", "2023-06-01", "2023-07-01")),
        ("last year", ("last year", "year", "2022-01-01", "2023-01-01")),
        ("the past month", ("the past month", "month", "2023-04-08", "2023-05-09")),
        ("this weekend", ("this weekend", "week", "2023-05-13", "2023-05-15")),
        ("last weekend", ("last weekend", "week", "2023-05-06", "2023-05-08")),
        ("last Friday", ("last Friday", "day", "2023-05-05", "2023-05-06")),
        ("next Friday", ("next Friday", "day", "2023-05-12", "2023-05-13")),
        ("on Friday", ("Friday", "day", "2023-05-05", "2023-05-06")),
        ("last May", ("last May", "month", "2022-05-01", "2022-06-01")),
        ("next May", ("next May", "month", "2024-05-01", "2024-06-01")),
        ("in August", ("August", "month", "2023-08-01", "2023-09-01")),
        ("last summer", ("last summer", "season", "2022-06-01", "2022-09-01")),
        ("on May 5", ("May 5", "day", "2023-05-05", "2023-05-06")),
    ],
)
def test_relative_expressions_resolve_against_the_session_time(text: str, expected: tuple[str, str, str, str]) -> None:
    assert [days(t) for t in extract_time_tags(text, SESSION)] == [expected]
    assert extract_time_tags(text, None) == ()  # nothing to resolve them against


def test_a_conversation_turn_resolves_against_its_session() -> None:
    later = datetime(2023, 10, 20, 9, 0, tzinfo=UTC)  # a Friday
    tags = extract_time_tags("We went camping last summer, and last Friday I ran a charity race.", later)
    assert [days(t) for t in tags] == [
        ("last summer", "season", "2023-06-01", "2023-09-01"),
        ("last Friday", "day", "2023-10-13", "2023-10-14"),
    ]


def test_the_anchor_day_is_the_local_day_of_the_source() -> None:
    new_york = timezone(timedelta(hours=-4))
    late_evening = datetime(2023, 5, 8, 23, 30, tzinfo=new_york)  # already 9 May in UTC
    assert days(extract_time_tags("yesterday", late_evening)[0])[2] == "2023-05-07"
    naive = datetime(2023, 5, 8, 12, 0)
    assert days(extract_time_tags("yesterday", naive)[0])[2] == "2023-05-07"


def test_confidence_follows_specificity_and_anchoring() -> None:
    text = "On 2023-05-08, May 8, 2023, yesterday, last May, in 2019, 2021 and a few weeks ago."
    confidence = {t.text: t.confidence for t in extract_time_tags(text, SESSION)}
    assert confidence["2023-05-08"] > confidence["yesterday"] > confidence["2019"] > confidence["2021"]
    assert confidence["May 8, 2023"] > confidence["last May"] > confidence["a few weeks ago"]


@pytest.mark.parametrize(
    "text",
    [
        "30 February 2023",  # no such day
        "in their 80s",  # an age, not a decade
        "2000 people came",  # a count
        "I may go, you may not",  # a verb
        "it costs $2023",
        "issue #2023",
    ],
)
def test_what_is_not_a_time(text: str) -> None:
    assert extract_time_tags(text, SESSION) == ()


def test_the_most_specific_expression_wins() -> None:
    tags = extract_time_tags("Monday, 8 May 2023, in May 2023 and last May 2023.", SESSION)
    # No weekday, no bare month, no bare year; the repeated "May 2023" is one tag.
    assert [days(t) for t in tags] == [
        ("8 May 2023", "day", "2023-05-08", "2023-05-09"),
        ("May 2023", "month", "2023-05-01", "2023-06-01"),
    ]


# Case-insensitive matching equates these non-ASCII letters with ASCII ones.
UNICODE_CASE_EQUIVALENTS = {"s": ("\u017f",), "i": ("\u0131", "\u0130"), "k": ("\u212a",)}
# Time expressions whose words are all matched case-insensitively.
CASE_INSENSITIVE_TIMES = (
    "last spring",
    "next spring",
    "spring of 2020",
    "summer 2022",
    "this week",
    "the past month",
    "last night",
    "this morning",
    "yesterday",
    "six days ago",
    "several weeks ago",
    "a couple of weeks back",
    "in six months",
    "the last six weeks",
    "earlier this week",
    "later this month",
    "the early 2000s",
    "Sept 5, 2020",
    "5 Sept 2020",
    "August of 2019",
    "this past weekend",
    "in 1999",
)


def _case_variants(text: str) -> list[str]:
    """``text`` with each s, i or k in turn (and all of them at once) replaced by each letter
    case-insensitive matching equates with it."""
    variants = [
        text[:at] + other + text[at + 1 :]
        for at, letter in enumerate(text)
        for other in UNICODE_CASE_EQUIVALENTS.get(letter.lower(), ())
    ]
    variants.append("".join(UNICODE_CASE_EQUIVALENTS.get(c.lower(), (c,))[0] for c in text))
    return variants


@pytest.mark.parametrize("text", CASE_INSENSITIVE_TIMES)
def test_letters_matched_case_insensitively_read_as_their_ascii_letters(text: str) -> None:
    # "laſt spring" matched the expression but its words were looked up as written
    # (KeyError: the whole write failed); they are folded to ASCII first.
    expected = [days(tag)[1:] for tag in extract_time_tags(text, SESSION)]
    assert expected, text
    for variant in _case_variants(text):
        for written in (variant, f"We met {variant}, I think.", variant.upper()):
            assert [days(tag)[1:] for tag in extract_time_tags(written, SESSION)] == expected, written
            RuleEnricher().enrich(span(written, source_ts=SESSION))
            derive_query_hints(written, SESSION)


@settings(max_examples=400, deadline=None)
@given(
    text=st.one_of(
        st.text(alphabet=st.characters(max_codepoint=127), max_size=120),
        st.lists(
            st.one_of(
                st.sampled_from(
                    [
                        *CASE_INSENSITIVE_TIMES,
                        "Monday",
                        "May",
                        "March 3",
                        "the 90s",
                        "'80s",
                        "tonight",
                        "tomorrow",
                        "evening",
                        "decade",
                        "winter",
                        "fall",
                        "autumn",
                        "2023-05-08",
                    ]
                ),
                st.text(alphabet=st.characters(max_codepoint=127), max_size=6),
            ),
            max_size=8,
        ).map(" ".join),
    )
)
def test_the_screen_never_hides_a_time_expression(text: str) -> None:
    from pgmem.ingestion import times

    # ASCII text the screen turns away holds nothing the regular expression matches.
    assert times._may_hold_time(text) or not list(times._TIME.finditer(text)), text
    assert times._may_hold_time(text + "\u017f")  # any other character: always searched


# --- entities -----------------------------------------------------------------------


def test_entity_confidence_follows_the_evidence() -> None:
    text = (
        "Yesterday Ada Lovelace met Dr. Smith of Acme Corp in Paris. Wow, the NASA team and Bob came too. "
        "Later she bought an iPhone 15 and a Tesla Model 3 and flew Flight 370 along Route 66."
    )
    found = {e.text: e.confidence for e in extract_entities(text)}
    assert found["Smith"] == found["Acme Corp"] == 0.9  # honorific, organisation suffix
    assert found["Ada Lovelace"] == 0.8  # multiword proper name ("Yesterday" stripped)
    assert found["Paris"] == 0.75  # place cue
    assert found["NASA"] == 0.7
    assert found["Bob"] == 0.6
    for product in ("iPhone 15", "Tesla Model 3", "Flight 370", "Route 66"):
        assert found[product] == 0.85
    assert not {"Yesterday", "Wow", "Later", "Dr", "Dr. Smith"} & set(found)


def test_sentence_initial_words_are_weak_and_repetition_strengthens() -> None:
    found = {e.text: e.confidence for e in extract_entities("Caroline went home. Thanks, Melanie! Sounds fun.")}
    assert found == {"Caroline": 0.4, "Melanie": 0.6}
    repeated = {e.text: e.confidence for e in extract_entities("Caroline went home. I saw Caroline and Caroline.")}
    assert repeated["Caroline"] == pytest.approx(0.6 + 0.2)


def test_entities_are_clean_names() -> None:
    text = "Caroline's Pride Parade was in New York City. I read The Name of the Wind by J.K. Rowling; I'm in."
    assert [e.text for e in extract_entities(text)] == [
        "Caroline",
        "Pride Parade",
        "New York City",
        "Name of the Wind",
        "J.K. Rowling",
    ]
    assert extract_entities("I LOVE THIS SO MUCH, OK? LOL") == ()


def test_rule_entity_confidences_can_be_tuned() -> None:
    extractor = RuleEntityExtractor({"acronym": 0.5})
    assert extractor.extract("the NASA team") == (EntityTag("NASA", 0.5),)
    with pytest.raises(pgmem.ConfigurationError, match="unknown evidence 'acronyms'"):
        RuleEntityExtractor({"acronyms": 0.5})
    with pytest.raises(pgmem.ConfigurationError, match=r"confidence\['acronym'\] must be in \[0.0, 1.0\]"):
        RuleEntityExtractor({"acronym": 1.5})


class FakeNlp:
    """Stands in for a spaCy ``Language``: ``nlp(text).ents`` with ``.text`` and ``.label_``."""

    def __init__(self, entities: list[tuple[str, str]]) -> None:
        self.entities = entities
        self.calls: list[str] = []

    def __call__(self, text: str) -> SimpleNamespace:
        self.calls.append(text)
        return SimpleNamespace(ents=[SimpleNamespace(text=t, label_=label) for t, label in self.entities])


def test_spacy_adapter_is_duck_typed_and_never_imports_spacy() -> None:
    nlp = FakeNlp([("Caroline's", "PERSON"), ("Acme", "ORG"), ("8 May", "DATE"), ("Caroline", "PERSON")])
    extractor = SpacyEntityExtractor(nlp)
    assert extractor.extract("text") == (EntityTag("Caroline", 0.95), EntityTag("Acme", 0.85))
    assert nlp.calls == ["text"]
    custom = SpacyEntityExtractor(nlp, label_confidence={"ORG": 0.6})
    assert custom.extract("text") == (EntityTag("Acme", 0.6),)
    with pytest.raises(pgmem.ConfigurationError, match=r"label_confidence\['ORG'\]"):
        SpacyEntityExtractor(nlp, label_confidence={"ORG": 2.0})
    assert "spacy" not in sys.modules


def test_the_enricher_takes_a_pluggable_entity_extractor() -> None:
    enricher = RuleEnricher(entity_extractor=SpacyEntityExtractor(FakeNlp([("Ada", "PERSON")])))
    assert enricher.enrich(span("whatever text")).entities == (EntityTag("Ada", 0.85),)
    with pytest.raises(pgmem.ConfigurationError, match="entity_extractor"):
        RuleEnricher(entity_extractor=object())  # type: ignore[arg-type]


# --- keywords, handles, roles -------------------------------------------------------


def test_keywords_favour_names_numbers_and_nouns() -> None:
    assert extract_keywords("The engine the engine Lovelace built in 1843.", 3) == ("engine", "lovelace", "1843")
    keywords = extract_keywords("Wow, I really think Caroline's dogs are great; she has 2 dogs and a cat.", 8)
    assert set(keywords[:2]) == {"dogs", "caroline"}
    assert {"2", "cat"} <= set(keywords)
    assert not {"wow", "really", "think", "great", "caroline's"} & set(keywords)
    assert extract_keywords("Paris paris PARIS", 8) == ("paris",)
    assert extract_keywords("one two three", 0) == ()


def test_handles() -> None:
    handles = extract_handles(
        "Mail ada@acme.io about ACME-1234 on https://acme.io/x?y=1, v2.3.1, $4.5 million, 12 kg, 5km, 30%, "
        '#launch, @bob, the "Analytical Engine", parse_config() and os.path.join(), commit 3f2a9c1d. '
        "See www.example.org/a."
    )
    assert handles == (
        "ada@acme.io",
        "ACME-1234",
        "https://acme.io/x?y=1",
        "v2.3.1",
        "$4.5 million",
        "12 kg",
        "5km",
        "30%",
        "#launch",
        "@bob",
        "Analytical Engine",
        "parse_config",
        "os.path.join",
        "3f2a9c1d",
        "www.example.org/a",
    )
    assert extract_handles("I walked 5 in the morning with my iPhone") == ()


@pytest.mark.parametrize(
    ("text", "metadata", "has_time", "role"),
    [
        ("Hey, how are you?", {"speaker": "Mel"}, False, "dialogue"),
        ("In summary, the launch went well.", {}, False, "summary"),
        ("Step 1: install the package.", {}, False, "procedure"),
        ("To deploy, run make release.", {}, False, "procedure"),
        ("A tensor is an array with named axes.", {}, False, "definition"),
        ("HTTP stands for Hypertext Transfer Protocol.", {}, False, "definition"),
        ("I think the design should change.", {}, False, "claim"),
        ("Ada founded Acme in Paris yesterday.", {}, True, "event"),
        ("Acme has 40 employees.", {}, False, "fact"),
        ("What is the plan?", {}, False, "other"),
        ("ok then", {}, False, "other"),
    ],
)
def test_roles(text: str, metadata: dict[str, Any], has_time: bool, role: str) -> None:
    assert classify_role(text, metadata, has_time) == role


ROLE_PHRASES = (
    "is defined as", "refers to", "stands for", "also known as", "a.k.a.", "is a type of", "is a kind of",
    "The bridge is a structure that", "Rust means a language with", "A tensor is an array with named axes.",
    "I think", "I believe", "I feel", "I guess", "I suspect", "in my opinion", "in my view", "IMO", "should",
    "must", "ought to", "arguably", "probably", "unlikely", "clearly", "obviously", "allegedly", "reportedly",
    "apparently", "seems", "claimed", "argues", "according to", "suggests", "I'm sure", "I bet", "no doubt",
    "is", "means", "It is", "the", "of", "that",
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    words=st.lists(
        st.one_of(st.sampled_from(ROLE_PHRASES), st.text(alphabet=st.characters(max_codepoint=127), max_size=6)),
        max_size=8,
    ),
    upper=st.booleans(),
)
def test_the_role_screens_never_hide_a_match(words: list[str], upper: bool) -> None:
    from pgmem.ingestion import roles

    # ASCII text the screens turn away holds nothing the expressions match (both match
    # case-insensitively: an upper-cased text screens like a lower-cased one).
    text = " ".join(words).upper() if upper else " ".join(words)
    lowered = text.lower()
    if roles._CLAIM.search(text):
        assert roles._screened(lowered, roles._CLAIM_WORDS), text
    if roles._DEFINITION.search(text):
        assert roles._screened(lowered, roles._DEFINITION_WORDS) or roles._IS_OR_MEANS.search(text), text
    assert roles._screened(None, ())  # any other character: always run


# --- context, confidence, the enricher ----------------------------------------------


def test_context_descriptor() -> None:
    assert context_descriptor({"speaker": "Caroline", "session": 3}, SESSION) == "Caroline · session 3 · 8 May 2023"
    assert context_descriptor({"speaker": "Caroline"}, None) == "Caroline"
    assert context_descriptor({"title": "Pgmem guide", "section": "Install"}, SESSION) == "Pgmem guide › Install"
    assert context_descriptor({"title": "x" * 500}, None) == "x" * 79 + "…"
    assert context_descriptor({}, SESSION) == "8 May 2023"
    assert context_descriptor({"speaker": {"nested": 1}}, None) == ""


def test_enrichment_respects_given_values_and_derives_the_rest() -> None:
    enricher = RuleEnricher(EnricherConfig(keyword_budget=2))
    turn = span("Ada founded Acme in Paris yesterday.", source_ts=SESSION, metadata={"speaker": "Mel", "session": 1})
    facets = enricher.enrich(turn)
    assert facets.role == "dialogue" and facets.context == "Mel · session 1 · 8 May 2023"
    assert len(facets.keywords) == 2 and 0 < facets.confidence < 1
    assert [t.text for t in facets.time_tags] == ["yesterday"]
    given_values = enricher.enrich(span("x y", role="fact", confidence=0.9, context="ctx"))
    assert (given_values.role, given_values.confidence, given_values.context) == ("fact", 0.9, "ctx")


def test_write_time_confidence_is_the_documented_weighted_mean() -> None:
    config = EnricherConfig(prior_weight=2.0, quality_weight=1.0, extraction_weight=1.0, quality_words=10)
    enricher = RuleEnricher(config)
    text = "Ada Lovelace wrote the first program in 1843 for the engine."  # 11 words
    facets = enricher.enrich(span(text))
    extraction = (0.8 + 0.6) / 2  # "Ada Lovelace" (multiword), "1843" (year with a cue)
    assert facets.confidence == pytest.approx((2 * 0.5 + 1 * 1.0 + 1 * extraction) / 4, abs=1e-4)
    # Nothing extracted: the extraction weight leaves the mean.
    bare = enricher.enrich(span("just some words here"))
    assert bare.confidence == pytest.approx((2 * 0.5 + 1 * 0.4) / 3, abs=1e-4)
    trusted = RuleEnricher(dataclasses.replace(config, family_priors={"f": 1.0})).enrich(span("just some words here"))
    assert trusted.confidence == pytest.approx((2 * 1.0 + 1 * 0.4) / 3, abs=1e-4)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"keyword_budget": -1}, r"keyword_budget must be in \[0, 64\]"),
        ({"source_prior": 1.5}, r"source_prior must be in \[0.0, 1.0\]"),
        ({"prior_weight": -0.1}, "prior_weight must be >= 0.0"),
        ({"prior_weight": 0, "quality_weight": 0, "extraction_weight": 0}, "positive sum"),
        ({"family_priors": {"wiki": 2}}, r"family_priors\['wiki'\] must be in \[0.0, 1.0\]"),
        ({"family_priors": [("wiki", 1)]}, "family_priors must be a mapping"),
        ({"quality_words": 0}, "quality_words must be >= 1"),
        ({"min_entity_confidence": float("nan")}, "min_entity_confidence must be finite"),
    ],
)
def test_config_errors_name_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(pgmem.ConfigurationError, match=message):
        EnricherConfig(**fields)


def test_weak_entities_can_be_left_out() -> None:
    enricher = RuleEnricher(EnricherConfig(min_entity_confidence=0.5))
    assert [e.text for e in enricher.enrich(span("Caroline met Melanie.")).entities] == ["Melanie"]


# --- query hints --------------------------------------------------------------------


def test_query_hints_for_a_question() -> None:
    hints = derive_query_hints("What did Caroline do in May 2023?")
    assert hints == QueryHints(
        entities=("Caroline",),
        time_from=datetime(2023, 5, 1, tzinfo=UTC),
        time_to=datetime(2023, 6, 1, tzinfo=UTC),
        keywords=("caroline", "2023"),
        handles=(),
    )


def test_query_hints_resolve_relative_times_only_with_now() -> None:
    question = "When Did Melanie run a race last week or on 2023-04-20?"
    anchored = derive_query_hints(question, now=SESSION)
    assert anchored.entities == ("Melanie",)
    assert (anchored.time_from, anchored.time_to) == (
        datetime(2023, 4, 20, tzinfo=UTC),
        datetime(2023, 5, 8, tzinfo=UTC),
    )  # the hull of both expressions
    unanchored = derive_query_hints(question)
    assert (unanchored.time_from, unanchored.time_to) == (
        datetime(2023, 4, 20, tzinfo=UTC),
        datetime(2023, 4, 21, tzinfo=UTC),
    )
    assert derive_query_hints("What happened last week?") == QueryHints(keywords=("happened",))


def test_query_hints_keep_handles_and_drop_weak_entities() -> None:
    hints = derive_query_hints('Who fixed ACME-1234 in v2.3.1 of "Night Owl"?')
    assert hints.handles == ("ACME-1234", "v2.3.1", "Night Owl")
    assert "Who" not in hints.entities
    assert derive_query_hints("Caroline?").entities == ()  # a sentence-initial word is weak
    with pytest.raises(pgmem.InputError, match="question must be a string"):
        derive_query_hints(None)  # type: ignore[arg-type]
    with pytest.raises(pgmem.ConfigurationError, match="keyword_budget"):
        derive_query_hints("x", keyword_budget=-1)


def test_stopwords_are_still_exported() -> None:
    assert {"the", "what", "did"} <= STOPWORDS


# --- properties ---------------------------------------------------------------------

FRAGMENTS = st.sampled_from(
    [
        "yesterday",
        "last May",
        "in two weeks",
        "the 1990s",
        "summer 2022",
        "8 May, 2023",
        "May 8, 2023",
        "2023-05-08",
        "30/02/2023",
        "9999-12-31",
        "0000-01-01",
        "a few years ago",
        "999 years ago",
        "in 999 decades",
        "next Friday",
        "this weekend",
        "Dr. Ada Lovelace",
        "Acme Corp",
        "iPhone 15",
        "NASA",
        "Caroline's",
        "I'm",
        "https://x.io/a",
        "ACME-1234",
        "$4.5 million",
        '"quoted"',
        "What",
        "?",
        ".",
        " ",
        "\n",
    ]
)
TEXTS = st.one_of(st.text(max_size=200), st.lists(st.one_of(FRAGMENTS, st.text(max_size=8)), max_size=12).map(" ".join))
ANCHORS = st.one_of(
    st.none(),
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12))]),
    ),
)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, anchor=ANCHORS)
def test_extractors_never_raise_and_respect_their_bounds(text: str, anchor: datetime | None) -> None:
    for tag in extract_time_tags(text, anchor):
        assert tag.start < tag.end
        assert tag.start.tzinfo is not None and tag.end.tzinfo is not None
        assert 0 <= tag.confidence <= 1
        assert tag.granularity in {"day", "week", "month", "season", "year", "decade"}
    for entity in extract_entities(text):
        assert entity.text and 0 <= entity.confidence <= 1
    keywords = extract_keywords(text, 8)
    assert len(keywords) <= 8 and len(set(keywords)) == len(keywords)
    assert all(k == k.lower() for k in keywords)
    assert all(isinstance(h, str) and h for h in extract_handles(text))
    hints = derive_query_hints(text, anchor)
    if hints.time_from is not None and hints.time_to is not None:
        assert hints.time_from < hints.time_to


@settings(max_examples=150, deadline=None)
@given(
    text=TEXTS,
    anchor=ANCHORS,
    speaker=st.one_of(st.none(), st.text(max_size=20)),
    session=st.one_of(st.none(), st.integers(), st.text(max_size=10)),
)
def test_enrichment_is_deterministic_and_bounded(
    text: str, anchor: datetime | None, speaker: str | None, session: int | str | None
) -> None:
    metadata = {"speaker": speaker, "session": session}
    first = RuleEnricher().enrich(span(text, source_ts=anchor, metadata=metadata))
    again = RuleEnricher().enrich(span(text, source_ts=anchor, metadata=dict(metadata)))
    assert first == again
    assert first.role in pgmem.ROLES
    assert 0 <= first.confidence <= 1
    assert len(first.context) <= 200 and "\x00" not in first.context
    assert all(0 <= e.confidence <= 1 for e in first.entities)


def test_relative_resolution_is_cached_per_expression_and_day() -> None:
    from pgmem.ingestion import times

    times._resolve.cache_clear()
    for _ in range(3):
        extract_time_tags("yesterday and last week", SESSION)
        extract_time_tags("yesterday", SESSION + timedelta(hours=1))
    info = times._resolve.cache_info()
    assert (info.misses, info.hits) == (2, 7)
    assert date(2023, 5, 7) == extract_time_tags("yesterday", SESSION)[0].start.date()


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(max_size=80), st.text(alphabet=st.characters(max_codepoint=127), max_size=80)))
def test_the_confidence_counts_letters_and_visible_characters_as_str_does(text: str) -> None:
    from pgmem.ingestion import enricher

    assert enricher._letters(text) == sum(map(str.isalpha, text))
    assert len("".join(text.split())) == len(text) - sum(map(str.isspace, text))
