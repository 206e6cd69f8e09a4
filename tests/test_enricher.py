"""The first, rule-based enricher: concrete examples for every extractor."""

from __future__ import annotations

from datetime import UTC, datetime

from pgmem.ingest.enricher import (
    EnricherConfig,
    RuleEnricher,
    SpanInput,
    classify_role,
    extract_entities,
    extract_handles,
    extract_keywords,
    extract_time_tags,
)

SESSION = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def test_absolute_and_relative_times() -> None:
    tags = extract_time_tags("On 2023-05-01 and in June 2022, and yesterday, and last month, in 2019.", SESSION)
    found = {(t.text, t.granularity, t.start.date().isoformat(), t.end.date().isoformat()) for t in tags}
    assert ("2023-05-01", "day", "2023-05-01", "2023-05-02") in found
    assert ("June 2022", "month", "2022-06-01", "2022-07-01") in found
    assert ("yesterday", "day", "2023-05-07", "2023-05-08") in found
    assert ("last month", "month", "2023-04-01", "2023-05-01") in found
    assert ("2019", "year", "2019-01-01", "2020-01-01") in found
    assert all(0 < t.confidence <= 1 for t in tags)
    assert not any(t.text == "yesterday" for t in extract_time_tags("yesterday", None))
    assert extract_time_tags("8 May, 2023", None)[0].granularity == "day"


def test_handles() -> None:
    handles = extract_handles(
        "Mail ada@acme.io about ACME-1234 on https://acme.io/x?y=1, v2.3.1, $4.5 million, 12 kg, #launch, "
        'the "Analytical Engine" and parse_config().'
    )
    for expected in (
        "ada@acme.io",
        "ACME-1234",
        "https://acme.io/x?y=1",
        "v2.3.1",
        "$4.5 million",
        "12 kg",
        "#launch",
        "Analytical Engine",
        "parse_config",
    ):
        assert expected in handles


def test_entities_keywords_and_roles() -> None:
    entities = {e.text: e.confidence for e in extract_entities("Yesterday Ada Lovelace met the NASA team in Paris.")}
    assert entities["Ada Lovelace"] > entities.get("Yesterday", 0)
    assert "NASA" in entities and "Paris" in entities
    assert extract_keywords("The engine the engine Lovelace built in 1843.", 3) == ("engine", "lovelace", "1843")
    assert classify_role("I think the design should change.", {}, False) == "claim"
    assert classify_role("A tensor is an array with axes.", {}, False) == "definition"
    assert classify_role("Hey, how are you?", {"speaker": "Mel"}, False) == "dialogue"
    assert classify_role("Step 1: install the package.", {}, False) == "procedure"


def test_enrichment_respects_given_values_and_derives_the_rest() -> None:
    enricher = RuleEnricher(EnricherConfig(keyword_budget=2))
    span = SpanInput("Ada founded Acme in Paris yesterday.", "wire", SESSION, None, None, None, {"speaker": "Mel"})
    facets = enricher.enrich(span)
    assert facets.role == "dialogue" and facets.context == "Mel · 8 May 2023"
    assert len(facets.keywords) == 2 and 0 < facets.confidence < 1
    given = enricher.enrich(SpanInput("x y", "wire", None, "fact", 0.9, "ctx", {}))
    assert (given.role, given.confidence, given.context) == ("fact", 0.9, "ctx")
