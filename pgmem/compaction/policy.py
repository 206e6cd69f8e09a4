"""When to compact: gates, rubric probes, verdict parsing and the backstop (pure, no I/O).

Everything here is a function of its arguments, so the controller, the evaluation and
the tests share one decision procedure. The controller supplies the state (round,
prompt tokens, rounds since the last probe, compactions so far) and the model's raw
verdict; these functions say whether a gate is open, what the probe asks, what the
verdict means and whether the rubric fires.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pgmem.errors import ConfigurationError

#: Default share of the context window at which the backstop compacts unconditionally.
DEFAULT_BACKSTOP_FRACTION = 0.3

#: What the probe model must answer with, one of these per rubric.
COMPRESS = "COMPRESS"
CONTINUE = "CONTINUE"


# ---------------------------------------------------------------------------------------
# Gates


@dataclass(frozen=True)
class Gates:
    """Cheap checks that must all pass before a rubric probe is spent.

    Parameters
    ----------
    min_round : int
        First round (0-based count of assistant turns) at which a probe may run, >= 0.
    min_prompt_tokens : int
        Prompt size below which no probe runs, >= 0.
    probe_period : int
        Rounds to wait after a probe before the next one, >= 1.
    max_compactions : int or None
        Most compactions in one trajectory; ``None`` (default) is unbounded.
    """

    min_round: int = 2
    min_prompt_tokens: int = 0
    probe_period: int = 1
    max_compactions: int | None = None

    def __post_init__(self) -> None:
        if self.min_round < 0:
            raise ConfigurationError(f"min_round must be >= 0, got {self.min_round}")
        if self.min_prompt_tokens < 0:
            raise ConfigurationError(f"min_prompt_tokens must be >= 0, got {self.min_prompt_tokens}")
        if self.probe_period < 1:
            raise ConfigurationError(f"probe_period must be >= 1, got {self.probe_period}")
        if self.max_compactions is not None and self.max_compactions < 0:
            raise ConfigurationError(f"max_compactions must be >= 0 or None, got {self.max_compactions}")


@dataclass(frozen=True)
class GateState:
    """Where a trajectory stands when the controller asks whether to probe."""

    round: int
    prompt_tokens: int
    rounds_since_probe: int | None  # None: never probed in this generation
    compactions: int


@dataclass(frozen=True)
class GateDecision:
    """Whether every gate is open, and the first gate that is closed (for telemetry)."""

    open: bool
    closed_by: str | None
    values: Mapping[str, Any]


def check_gates(gates: Gates, state: GateState) -> GateDecision:
    """Every gate's value and whether all are open; ``closed_by`` names the first shut one."""
    values: dict[str, Any] = {
        "round": state.round,
        "min_round": gates.min_round,
        "prompt_tokens": state.prompt_tokens,
        "min_prompt_tokens": gates.min_prompt_tokens,
        "rounds_since_probe": state.rounds_since_probe,
        "probe_period": gates.probe_period,
        "compactions": state.compactions,
        "max_compactions": gates.max_compactions,
    }
    closed: str | None = None
    if state.round < gates.min_round:
        closed = "min_round"
    elif state.prompt_tokens < gates.min_prompt_tokens:
        closed = "min_prompt_tokens"
    elif state.rounds_since_probe is not None and state.rounds_since_probe < gates.probe_period:
        closed = "probe_period"
    elif gates.max_compactions is not None and state.compactions >= gates.max_compactions:
        closed = "max_compactions"
    return GateDecision(open=closed is None, closed_by=closed, values=values)


# ---------------------------------------------------------------------------------------
# Backstop and configuration


def backstop_tokens(context_window: int, fraction: float = DEFAULT_BACKSTOP_FRACTION) -> int:
    """Prompt size at which compaction happens whatever the rubric says."""
    if context_window < 1:
        raise ConfigurationError(f"context_window must be >= 1 token, got {context_window}")
    if not 0.0 < fraction <= 1.0:
        raise ConfigurationError(f"backstop_fraction must be in (0, 1], got {fraction}")
    return max(1, int(context_window * fraction))


def backstop_fires(prompt_tokens: int, backstop: int) -> bool:
    """True when the prompt has reached the backstop."""
    return prompt_tokens >= backstop


def validate_config(gates: Gates, context_window: int, backstop_fraction: float = DEFAULT_BACKSTOP_FRACTION) -> int:
    """Refuse a configuration whose probe can never run before the backstop; return the backstop.

    Raises
    ------
    ConfigurationError
        When ``min_prompt_tokens`` is at or above the backstop (the rubric would be
        dead code); the message names both values.
    """
    backstop = backstop_tokens(context_window, backstop_fraction)
    if gates.min_prompt_tokens >= backstop:
        raise ConfigurationError(
            f"min_prompt_tokens={gates.min_prompt_tokens} can never open before the backstop fires at "
            f"{backstop} tokens (backstop_fraction={backstop_fraction} of context_window={context_window}); "
            f"min_prompt_tokens must be < {backstop}"
        )
    return backstop


def fixed_fires(prompt_tokens: int, threshold: int) -> bool:
    """The fixed-threshold baseline: compact once the prompt reaches ``threshold`` tokens."""
    return prompt_tokens >= threshold


# ---------------------------------------------------------------------------------------
# Rubrics


@dataclass(frozen=True)
class Predicate:
    """One yes/no question of a rubric, answered with a quoted piece of evidence."""

    name: str
    question: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,31}", self.name):
            raise ConfigurationError(
                f"predicate name must be 1-32 letters, digits or underscores starting with a letter, got {self.name!r}"
            )
        if not self.question.strip():
            raise ConfigurationError(f"predicate {self.name} needs a non-empty question")


FireRule = Callable[[Mapping[str, bool]], bool]


@dataclass(frozen=True)
class Rubric:
    """A named set of predicates and the rule that turns their answers into COMPRESS.

    Parameters
    ----------
    name : str
        Recorded in telemetry.
    predicates : sequence of Predicate
        Asked in this order; names unique.
    fire : callable
        Answers (predicate name -> bool, a missing or unevidenced answer is False) to
        True for COMPRESS.
    fire_text : str
        The fire rule in words, shown to the model and in telemetry.
    hints : mapping
        Predicate name -> hint returned to the agent when that predicate is yes
        (e.g. the search rubric's "switch strategy" on N1).
    """

    name: str
    predicates: tuple[Predicate, ...]
    fire: FireRule
    fire_text: str
    hints: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [p.name for p in self.predicates]
        if not names:
            raise ConfigurationError(f"rubric {self.name!r} needs at least one predicate")
        if len(set(names)) != len(names):
            raise ConfigurationError(f"rubric {self.name!r} has duplicate predicate names: {names}")
        unknown = set(self.hints) - set(names)
        if unknown:
            raise ConfigurationError(f"rubric {self.name!r} hints name unknown predicates: {sorted(unknown)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.predicates)


SWITCH_STRATEGY_HINT = (
    "Your last searches brought nothing new. Switch strategy: rephrase the sub-question, "
    "use another tool or source, or answer with what you have."
)

SEARCH_RUBRIC = Rubric(
    name="search",
    predicates=(
        Predicate("C1", "Did the last assistant message close a tool call or a sub-analysis?"),
        Predicate("C2", "Does the state needed from here on fit in 3 to 5 cited facts?"),
        Predicate("C3", "Are there new facts or a refined sub-question since the last compaction?"),
        Predicate("N1", "Are you stuck: did at least 3 of the last 4 searches bring nothing new?"),
    ),
    fire=lambda a: a["C1"] and a["C2"] and a["C3"] and not a["N1"],
    fire_text="COMPRESS when C1 and C2 and C3 and not N1",
    hints={"N1": SWITCH_STRATEGY_HINT},
)

REASONING_RUBRIC = Rubric(
    name="reasoning",
    predicates=(
        Predicate("Q1", "Did the last round produce a concrete answer?"),
        Predicate("Q2", "Did the last two rounds add no new non-trivial fact?"),
        Predicate("Q3", "Is the exact next step known?"),
    ),
    fire=lambda a: a["Q1"] or (a["Q2"] and a["Q3"]),
    fire_text="COMPRESS when Q1, or when Q2 and Q3",
)

RUBRICS: Mapping[str, Rubric] = {SEARCH_RUBRIC.name: SEARCH_RUBRIC, REASONING_RUBRIC.name: REASONING_RUBRIC}


#: First line of every probe (how a stand-in model tells a probe from a summary request).
PROBE_OPENING = "Pause the task. Decide whether the conversation so far should be compacted now."


def build_probe(rubric: Rubric) -> str:
    """The probe message appended to the current prefix (removed again on CONTINUE)."""
    lines = [
        PROBE_OPENING,
        "Answer each question yes or no. For every yes, quote evidence: an exact piece of text",
        "copied from the conversation above. A yes without an exact quote counts as no.",
        "",
    ]
    lines += [f"{p.name}: {p.question}" for p in rubric.predicates]
    example = {p.name: {"answer": "yes|no", "evidence": "exact quote or empty"} for p in rubric.predicates}
    lines += [
        "",
        f"Rule: {rubric.fire_text}.",
        "Reply with one JSON object and nothing else, e.g.",
        json.dumps({**example, "decision": f"{COMPRESS}|{CONTINUE}"}),
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Verdicts


@dataclass(frozen=True)
class PredicateAnswer:
    """One parsed answer: what the model said and what is counted.

    ``counted`` is the value the fire rule sees: True only for a yes whose evidence
    is an exact quote of the trajectory. ``note`` says why a yes was not counted.
    """

    name: str
    said: str | None  # "yes", "no" or None when missing/unreadable
    evidence: str | None
    counted: bool
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "said": self.said,
            "evidence": self.evidence,
            "counted": self.counted,
            "note": self.note,
        }


@dataclass(frozen=True)
class Verdict:
    """A parsed probe answer: per-predicate answers, the decision and any hint."""

    rubric: str
    readable: bool
    answers: tuple[PredicateAnswer, ...]
    fire: bool
    hints: tuple[str, ...]
    problems: tuple[str, ...]

    def counted(self) -> dict[str, bool]:
        return {a.name: a.counted for a in self.answers}

    def to_dict(self) -> dict[str, Any]:
        return {
            "rubric": self.rubric,
            "readable": self.readable,
            "answers": [a.to_dict() for a in self.answers],
            "fire": self.fire,
            "hints": list(self.hints),
            "problems": list(self.problems),
        }


_WS = re.compile(r"\s+")
_QUOTES = "\"'“”‘’`"


def normalise_text(text: str) -> str:
    """Whitespace collapsed and case folded: the form evidence is matched in."""
    return _WS.sub(" ", text).strip().casefold()


def evidence_present(evidence: str, trajectory_text: str) -> bool:
    """True when ``evidence`` (surrounding quotes stripped) is a substring of the trajectory.

    Matching ignores case and runs of whitespace only; an empty quote never counts.
    """
    needle = normalise_text(evidence.strip().strip(_QUOTES))
    return bool(needle) and needle in normalise_text(trajectory_text)


def _extract_json(raw: str) -> Any:
    # Models wrap JSON in code fences or add a sentence around it: take the outermost object.
    start, end = raw.find("{"), raw.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        return json.loads(raw[start : end + 1])
    except json.JSONDecodeError:
        return None


_LINE = re.compile(
    r"^\s*\W*(?P<name>[A-Za-z][A-Za-z0-9_]*)\W*\s*[:=\-–—]\s*\W*(?P<said>yes|no)\b(?P<rest>.*)$",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”")


def _lines_fallback(raw: str, names: Sequence[str]) -> dict[str, dict[str, str]]:
    # "C1: yes — "quoted evidence"" per line; only exact predicate names are taken.
    found: dict[str, dict[str, str]] = {}
    wanted = {n.casefold(): n for n in names}
    for line in raw.splitlines():
        match = _LINE.match(line)
        if not match or match["name"].casefold() not in wanted:
            continue
        quote = _QUOTED.search(match["rest"])
        evidence = next((g for g in quote.groups() if g), "") if quote else ""
        found[wanted[match["name"].casefold()]] = {"answer": match["said"], "evidence": evidence}
    return found


def _said(value: Any) -> str | None:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str) and value.strip().casefold() in {"yes", "no", "true", "false"}:
        return "yes" if value.strip().casefold() in {"yes", "true"} else "no"
    return None


def parse_verdict(raw: str, rubric: Rubric, trajectory_text: str) -> Verdict:
    """Parse a probe answer; anything unreadable or unevidenced counts as "no".

    The model's own ``decision`` field is ignored: the fire rule is applied to the
    counted answers, so a model cannot COMPRESS without the evidence for it.
    """
    problems: list[str] = []
    data = _extract_json(raw)
    entries: Mapping[str, Any]
    if isinstance(data, Mapping):
        entries = data
    else:
        entries = _lines_fallback(raw, rubric.names)
        if not entries:
            problems.append("unreadable verdict: no JSON object and no 'NAME: yes/no' lines")
    answers: list[PredicateAnswer] = []
    for name in rubric.names:
        entry = entries.get(name)
        said: str | None
        evidence: str | None
        if isinstance(entry, Mapping):
            said, ev = _said(entry.get("answer")), entry.get("evidence")
            evidence = ev if isinstance(ev, str) and ev.strip() else None
        else:
            said, evidence = _said(entry), None
        note: str | None = None
        counted = False
        if said is None:
            note = "missing or unreadable answer"
        elif said == "yes":
            if evidence is None:
                note = "yes without evidence"
            elif not evidence_present(evidence, trajectory_text):
                note = "evidence is not a quote of the trajectory"
            else:
                counted = True
        if note is not None and entries:
            problems.append(f"{name}: {note}")
        answers.append(PredicateAnswer(name, said, evidence, counted, note))
    return _verdict(rubric, tuple(answers), readable=bool(entries), problems=tuple(problems))


def _verdict(
    rubric: Rubric, answers: tuple[PredicateAnswer, ...], readable: bool, problems: tuple[str, ...]
) -> Verdict:
    counted = {a.name: a.counted for a in answers}
    return Verdict(
        rubric=rubric.name,
        readable=readable,
        answers=answers,
        fire=bool(rubric.fire(counted)),
        hints=tuple(text for name, text in rubric.hints.items() if counted[name]),
        problems=problems,
    )


def answers_verdict(rubric: Rubric, answers: Mapping[str, bool]) -> Verdict:
    """A verdict from answers known without a model (the evaluation's stand-in)."""
    parsed = tuple(
        PredicateAnswer(name, "yes" if answers.get(name, False) else "no", None, bool(answers.get(name, False)))
        for name in rubric.names
    )
    return _verdict(rubric, parsed, readable=True, problems=())
