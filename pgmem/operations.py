"""The small operations as pure halves: arguments → one :class:`Statement`, rows → result.

:func:`pgmem.forget`, :func:`pgmem.feedback`, :func:`pgmem.reset_feedback`,
:func:`pgmem.register_model`, :func:`pgmem.bind_family` and :func:`pgmem.unbind_family`
each check their arguments, run one named statement and read its rows. The checking
and the reading live here, once; the sync driver (:mod:`pgmem.api`) and the async one
(:mod:`pgmem.aio`) only run the statement.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pgmem.db.queries import Rows, Statement
from pgmem.embeddings import Embedder
from pgmem.errors import DatabaseError, InputError
from pgmem.ingestion.spans import MAX_ID_CHARS
from pgmem.retrieval.pipeline import check_strings
from pgmem.validate import check_namespace, check_text, describe_value

#: Most families one :func:`pgmem.reset_feedback` call names.
MAX_FAMILIES = 10_000
#: Longest reason of a :func:`pgmem.forget` call, in characters (kept in the audit table).
MAX_REASON_CHARS = 4_096


@dataclass(frozen=True)
class ForgetResult:
    """What :func:`pgmem.forget` removed: how many notes, and the audit record that says so."""

    audit_id: int
    notes_removed: int


@dataclass(frozen=True)
class FeedbackResult:
    """What :func:`pgmem.feedback` recorded, and the families' updated summed feedback weights."""

    recorded: int
    #: family -> (helpful, unhelpful) summed weights after this feedback.
    families: Mapping[str, tuple[float, float]]


def _uuid(name: str, value: object) -> str:
    """``value`` as a canonical UUID string, else InputError naming ``name``."""
    # Only text is parsed: str() of an arbitrary object can fail in any way.
    parsed = value
    if isinstance(value, str):
        try:
            parsed = uuid.UUID(value)
        except ValueError:
            parsed = None
    if not isinstance(parsed, uuid.UUID):
        raise InputError(f"{name} must be a UUID, got {describe_value(value)}")
    return str(parsed)


def _note_ids(name: str, values: Iterable[str] | None) -> list[str]:
    """Canonical note ids from a list of UUIDs, else InputError naming the bad element."""
    if values is None:
        return []
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise InputError(f"{name} must be a list of note ids, got {describe_value(values)}")
    return [_uuid(f"{name}[{i}]", v) for i, v in enumerate(values)]


def _unique_note_ids(name: str, values: Iterable[str] | None) -> list[str]:
    ids = _note_ids(f"feedback: {name}", values)
    if len(set(ids)) != len(ids):
        raise InputError(f"feedback: {name} names a note twice")
    return ids


def forget_statement(
    *,
    namespace: str,
    reason: str,
    note_ids: Sequence[str] | None = None,
    document_id: str | None = None,
    family: str | None = None,
) -> Statement:
    """The checked ``forget`` statement (arguments as :func:`pgmem.forget`)."""
    check_namespace(namespace)
    selectors = {"notes": note_ids, "document": document_id, "family": family}
    given = [(scope, value) for scope, value in selectors.items() if value is not None]
    if len(given) != 1:
        raise InputError("forget needs exactly one of note_ids, document_id or family")
    check_text("forget: reason", reason, max_chars=MAX_REASON_CHARS)
    scope, value = given[0]
    if scope == "notes":
        selector = _note_ids("forget: note_ids", value)
        if not selector:
            raise InputError("forget: note_ids must be a non-empty list of note ids")
    else:
        field = "document_id" if scope == "document" else scope
        selector = [check_text(f"forget: {field}", value, max_chars=MAX_ID_CHARS)]
    return Statement(
        "forget", "forget", {"namespace": namespace, "scope": scope, "selector": selector, "reason": reason}
    )


def forget_result(rows: Rows) -> ForgetResult:
    if not rows:
        raise DatabaseError("forget: pgmem.forget_v1 returned nothing")
    return ForgetResult(audit_id=int(rows[0]["audit_id"]), notes_removed=int(rows[0]["notes_removed"]))


def feedback_statement(
    *,
    namespace: str = "default",
    helpful: Iterable[str] | None = None,
    unhelpful: Iterable[str] | None = None,
    weight: float = 1.0,
    pack_id: str | None = None,
) -> Statement:
    """The checked ``feedback`` statement (arguments as :func:`pgmem.feedback`)."""
    check_namespace(namespace)
    good = _unique_note_ids("helpful", helpful)
    bad = _unique_note_ids("unhelpful", unhelpful)
    if not good and not bad:
        raise InputError("feedback: give at least one helpful or unhelpful note id")
    both = sorted(set(good) & set(bad))
    if both:
        raise InputError(f"feedback: note {both[0]} is both helpful and unhelpful")
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight <= 1000:
        raise InputError(f"feedback: weight must be in (0, 1000], got {describe_value(weight)}")
    if pack_id is not None:
        pack_id = _uuid("feedback: pack_id", pack_id)
    arguments = {"namespace": namespace, "helpful": good, "unhelpful": bad, "weight": float(weight), "pack_id": pack_id}
    return Statement("feedback", "feedback", arguments)


def feedback_result(statement: Statement, rows: Rows) -> FeedbackResult:
    return FeedbackResult(
        recorded=len(statement.params["helpful"]) + len(statement.params["unhelpful"]),
        families={str(r["family"]): (float(r["helpful"]), float(r["unhelpful"])) for r in rows},
    )


def reset_feedback_statement(*, namespace: str, families: Sequence[str] | None = None) -> Statement:
    """The checked ``reset_feedback`` statement (arguments as :func:`pgmem.reset_feedback`)."""
    check_namespace(namespace)
    selected = None if families is None else list(check_strings("families", families, limit=MAX_FAMILIES))
    if selected is not None and not selected:
        raise InputError("reset_feedback: families must be None (all) or a non-empty list")
    return Statement("reset feedback", "reset_feedback", {"namespace": namespace, "families": selected})


def reset_feedback_result(rows: Rows) -> int:
    return int(rows[0]["judgements_removed"]) if rows else 0


def register_model_statement(model: Embedder) -> Statement:
    """The ``register_model`` statement for a resolved embedder."""
    return Statement("register model", "register_model", {"model": model.name, "dimension": model.dimension})


def register_model_result(rows: Rows) -> int:
    if not rows or rows[0]["model_id"] is None:
        raise DatabaseError("register model: pgmem.register_model_v1 returned nothing")
    return int(rows[0]["model_id"])


def _role_names(name: str, roles: Sequence[str]) -> list[str]:
    if isinstance(roles, str) or not isinstance(roles, Iterable):
        raise InputError(f"{name} must be a list of role names, got {describe_value(roles)}")
    names = list(check_strings(name, roles))
    if not names:
        raise InputError(f"{name} must name at least one role")
    return names


def bind_family_statement(*, namespace: str, family: str, roles: Sequence[str]) -> Statement:
    """The checked ``bind_family`` statement (arguments as :func:`pgmem.bind_family`)."""
    check_namespace(namespace)
    family = check_text("bind_family: family", family, max_chars=MAX_ID_CHARS)
    names = _role_names("bind_family: roles", roles)
    return Statement("bind family", "bind_family", {"namespace": namespace, "family": family, "roles": names})


def bind_family_result(rows: Rows) -> int:
    return int(rows[0]["notes"]) if rows else 0


def unbind_family_statement(*, namespace: str, family: str, roles: Sequence[str] | None = None) -> Statement:
    """The checked ``unbind_family`` statement (arguments as :func:`pgmem.unbind_family`)."""
    check_namespace(namespace)
    family = check_text("unbind_family: family", family, max_chars=MAX_ID_CHARS)
    names = None if roles is None else _role_names("unbind_family: roles", roles)
    return Statement("unbind family", "unbind_family", {"namespace": namespace, "family": family, "roles": names})


def unbind_family_result(rows: Rows) -> int:
    return int(rows[0]["removed"]) if rows else 0
