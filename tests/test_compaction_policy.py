"""The compaction policy: gates, rubrics, fire rules, verdict parsing and the backstop."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgmem import ConfigurationError, PgmemError
from pgmem.compaction.policy import (
    REASONING_RUBRIC,
    SEARCH_RUBRIC,
    SWITCH_STRATEGY_HINT,
    Gates,
    GateState,
    Predicate,
    Rubric,
    answers_verdict,
    backstop_fires,
    backstop_tokens,
    build_probe,
    check_gates,
    evidence_present,
    fixed_fires,
    parse_verdict,
    validate_config,
)

TRAJECTORY = (
    "user: find the capital of Australia\n"
    "assistant: calling search('capital of Australia')\n"
    "tool search: Canberra is the capital of Australia.\n"
    "assistant: The capital is Canberra. Next I check its population."
)


def verdict_json(**answers: tuple[str, str]) -> str:
    return json.dumps({name: {"answer": said, "evidence": ev} for name, (said, ev) in answers.items()})


# --- gates ---------------------------------------------------------------------------


def state(**kw: Any) -> GateState:
    base: dict[str, Any] = {"round": 5, "prompt_tokens": 1000, "rounds_since_probe": None, "compactions": 0}
    base.update(kw)
    return GateState(**base)


def test_gates_open_when_every_gate_passes() -> None:
    decision = check_gates(Gates(min_round=2, min_prompt_tokens=500, probe_period=2), state())
    assert decision.open and decision.closed_by is None
    assert decision.values["prompt_tokens"] == 1000


@pytest.mark.parametrize(
    ("gates", "st_kw", "closed_by"),
    [
        (Gates(min_round=6), {}, "min_round"),
        (Gates(min_prompt_tokens=1001), {}, "min_prompt_tokens"),
        (Gates(probe_period=3), {"rounds_since_probe": 2}, "probe_period"),
        (Gates(max_compactions=2), {"compactions": 2}, "max_compactions"),
    ],
)
def test_each_gate_closes(gates: Gates, st_kw: dict[str, Any], closed_by: str) -> None:
    decision = check_gates(gates, state(**st_kw))
    assert not decision.open and decision.closed_by == closed_by


def test_probe_period_reopens_and_max_compactions_defaults_unbounded() -> None:
    assert check_gates(Gates(probe_period=3), state(rounds_since_probe=3)).open
    assert check_gates(Gates(), state(compactions=10_000)).open


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"min_round": -1}, "min_round"),
        ({"min_prompt_tokens": -5}, "min_prompt_tokens"),
        ({"probe_period": 0}, "probe_period"),
        ({"max_compactions": -1}, "max_compactions"),
    ],
)
def test_bad_gates_name_the_parameter(kwargs: dict[str, int], name: str) -> None:
    with pytest.raises(ConfigurationError, match=name):
        Gates(**kwargs)


# --- backstop and configuration ------------------------------------------------------


def test_backstop_is_a_fraction_of_the_window() -> None:
    assert backstop_tokens(128_000) == 38_400
    assert backstop_tokens(1000, 0.5) == 500
    assert backstop_fires(500, 500) and not backstop_fires(499, 500)


@pytest.mark.parametrize(
    ("window", "fraction", "name"),
    [(0, 0.3, "context_window"), (100, 0.0, "backstop_fraction"), (100, 1.5, "backstop_fraction")],
)
def test_bad_backstop_configuration(window: int, fraction: float, name: str) -> None:
    with pytest.raises(ConfigurationError, match=name):
        backstop_tokens(window, fraction)


def test_gate_that_can_never_open_before_the_backstop_is_refused_naming_both_values() -> None:
    with pytest.raises(ConfigurationError) as info:
        validate_config(Gates(min_prompt_tokens=40_000), 128_000, 0.3)
    message = str(info.value)
    assert "min_prompt_tokens=40000" in message and "38400" in message
    assert isinstance(info.value, PgmemError)
    assert validate_config(Gates(min_prompt_tokens=38_399), 128_000) == 38_400


@given(st.integers(1, 10**7), st.floats(0.01, 1.0), st.integers(0, 10**7))
def test_validate_config_accepts_exactly_the_gates_below_the_backstop(
    window: int, fraction: float, tokens: int
) -> None:
    backstop = backstop_tokens(window, fraction)
    if tokens < backstop:
        assert validate_config(Gates(min_prompt_tokens=tokens), window, fraction) == backstop
    else:
        with pytest.raises(ConfigurationError):
            validate_config(Gates(min_prompt_tokens=tokens), window, fraction)


def test_fixed_threshold() -> None:
    assert fixed_fires(100, 100) and not fixed_fires(99, 100)


# --- fire rules ----------------------------------------------------------------------


def test_search_rubric_fires_on_c1_c2_c3_and_not_n1() -> None:
    for c1 in (False, True):
        for c2 in (False, True):
            for c3 in (False, True):
                for n1 in (False, True):
                    v = answers_verdict(SEARCH_RUBRIC, {"C1": c1, "C2": c2, "C3": c3, "N1": n1})
                    assert v.fire == (c1 and c2 and c3 and not n1)
                    assert (SWITCH_STRATEGY_HINT in v.hints) == n1


def test_reasoning_rubric_fires_on_q1_or_q2_and_q3() -> None:
    for q1 in (False, True):
        for q2 in (False, True):
            for q3 in (False, True):
                v = answers_verdict(REASONING_RUBRIC, {"Q1": q1, "Q2": q2, "Q3": q3})
                assert v.fire == (q1 or (q2 and q3))
                assert v.hints == ()


def test_user_defined_rubric() -> None:
    rubric = Rubric(
        name="budget",
        predicates=(Predicate("done", "Is the sub-task done?"), Predicate("long", "Is the context long?")),
        fire=lambda a: a["done"] and a["long"],
        fire_text="COMPRESS when done and long",
        hints={"long": "Be brief."},
    )
    raw = verdict_json(done=("yes", "The capital is Canberra"), long=("yes", "Next I check its population"))
    verdict = parse_verdict(raw, rubric, TRAJECTORY)
    assert verdict.fire and verdict.hints == ("Be brief.",) and verdict.rubric == "budget"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"predicates": ()}, "at least one predicate"),
        ({"predicates": (Predicate("a", "x?"), Predicate("a", "y?"))}, "duplicate"),
        ({"predicates": (Predicate("a", "x?"),), "hints": {"b": "h"}}, "unknown predicates"),
    ],
)
def test_bad_user_rubrics_are_refused(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"name": "r", "fire": lambda a: True, "fire_text": "always"}
    args.update(kwargs)
    with pytest.raises(ConfigurationError, match=match):
        Rubric(**args)


@pytest.mark.parametrize(("name", "question"), [("1bad", "q?"), ("ok", "  ")])
def test_bad_predicates_are_refused(name: str, question: str) -> None:
    with pytest.raises(ConfigurationError):
        Predicate(name, question)


# --- probe prompt --------------------------------------------------------------------


def test_probe_lists_every_predicate_the_rule_and_the_json_shape() -> None:
    probe = build_probe(SEARCH_RUBRIC)
    for p in SEARCH_RUBRIC.predicates:
        assert f"{p.name}: {p.question}" in probe
    assert SEARCH_RUBRIC.fire_text in probe
    assert '"evidence"' in probe and "exact" in probe


# --- verdict parsing -----------------------------------------------------------------


def test_evidenced_verdict_fires() -> None:
    raw = verdict_json(
        C1=("yes", "tool search: Canberra is the capital"),
        C2=("yes", "The capital is Canberra."),
        C3=("yes", "Canberra is the capital of Australia"),
        N1=("no", ""),
    )
    verdict = parse_verdict("Here you go:\n```json\n" + raw + "\n```", SEARCH_RUBRIC, TRAJECTORY)
    assert verdict.readable and verdict.fire and verdict.problems == ()
    assert verdict.counted() == {"C1": True, "C2": True, "C3": True, "N1": False}


def test_yes_without_evidence_counts_as_no_and_is_logged() -> None:
    raw = verdict_json(C1=("yes", ""), C2=("yes", "Canberra"), C3=("yes", "Canberra"), N1=("no", ""))
    verdict = parse_verdict(raw, SEARCH_RUBRIC, TRAJECTORY)
    assert not verdict.fire
    assert verdict.answers[0].said == "yes" and not verdict.answers[0].counted
    assert verdict.answers[0].note == "yes without evidence"
    assert "C1: yes without evidence" in verdict.problems


def test_invented_evidence_counts_as_no() -> None:
    raw = verdict_json(
        C1=("yes", "Sydney is the capital"), C2=("yes", "Canberra"), C3=("yes", "Canberra"), N1=("no", "")
    )
    verdict = parse_verdict(raw, SEARCH_RUBRIC, TRAJECTORY)
    assert not verdict.fire and verdict.answers[0].note == "evidence is not a quote of the trajectory"


def test_evidence_matching_ignores_case_whitespace_and_surrounding_quotes() -> None:
    assert evidence_present('"canberra   IS the capital"', TRAJECTORY)
    assert not evidence_present('""', TRAJECTORY)
    assert not evidence_present("   ", TRAJECTORY)


def test_model_decision_field_is_ignored() -> None:
    raw = json.dumps({"C1": {"answer": "no", "evidence": ""}, "decision": "COMPRESS"})
    assert not parse_verdict(raw, SEARCH_RUBRIC, TRAJECTORY).fire


def test_n1_evidenced_returns_the_switch_strategy_hint() -> None:
    raw = verdict_json(
        C1=("yes", "Canberra"), C2=("yes", "Canberra"), C3=("yes", "Canberra"), N1=("yes", "calling search(")
    )
    verdict = parse_verdict(raw, SEARCH_RUBRIC, TRAJECTORY)
    assert not verdict.fire and verdict.hints == (SWITCH_STRATEGY_HINT,)


def test_line_format_is_read_too() -> None:
    raw = 'Q1: yes - "The capital is Canberra."\nQ2: no\nQ3: yes “Next I check its population”'
    verdict = parse_verdict(raw, REASONING_RUBRIC, TRAJECTORY)
    assert verdict.readable and verdict.fire
    assert verdict.counted() == {"Q1": True, "Q2": False, "Q3": True}


@pytest.mark.parametrize(
    "raw",
    ["", "COMPRESS", "{not json", "[1, 2]", '{"C1": 3, "C2": null}', '{"C1": {"answer": "maybe"}}', "C9: yes"],
)
def test_malformed_verdicts_never_fire(raw: str) -> None:
    verdict = parse_verdict(raw, SEARCH_RUBRIC, TRAJECTORY)
    assert not verdict.fire
    assert not any(a.counted for a in verdict.answers)
    assert len(verdict.answers) == len(SEARCH_RUBRIC.predicates)


def test_unreadable_verdict_is_flagged() -> None:
    verdict = parse_verdict("I think we should compress.", SEARCH_RUBRIC, TRAJECTORY)
    assert not verdict.readable and verdict.problems[0].startswith("unreadable verdict")
    assert verdict.to_dict()["readable"] is False


@given(st.text(max_size=300))
def test_any_text_parses_without_error_and_fires_only_on_evidence(raw: str) -> None:
    verdict = parse_verdict(raw, SEARCH_RUBRIC, TRAJECTORY)
    for answer in verdict.answers:
        if answer.counted:
            assert answer.evidence is not None and evidence_present(answer.evidence, TRAJECTORY)


@given(st.sampled_from(TRAJECTORY.split()), st.booleans())
def test_quotes_from_the_trajectory_always_count(word: str, as_lines: bool) -> None:
    if as_lines:
        raw = f'Q1: yes "{word}"\nQ2: no\nQ3: no'
    else:
        raw = verdict_json(Q1=("yes", word), Q2=("no", ""), Q3=("no", ""))
    assert parse_verdict(raw, REASONING_RUBRIC, TRAJECTORY).fire
