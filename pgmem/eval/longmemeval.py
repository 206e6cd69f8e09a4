"""LongMemEval records (Wu et al., ICLR 2025) as an evaluation corpus.

LongMemEval is not in the shared data (its licence and size keep it out); users who have
it can evaluate pgmem on it, and the published session-level metrics
(:mod:`pgmem.eval.metrics`) make the figures comparable with what other memory tools
report. A record is one question with its own haystack of chat sessions::

    {"question_id": "e47becba", "question_type": "single-session-user",
     "question": "...", "answer": "...", "question_date": "2023/05/30 (Tue) 23:40",
     "haystack_session_ids": ["s1", ...], "haystack_dates": ["2023/05/20 (Sat) 02:21", ...],
     "haystack_sessions": [[{"role": "user", "content": "...", "has_answer": true}, ...], ...],
     "answer_session_ids": ["s1"]}

Each record becomes one namespace (``lme-<question_id>``): its sessions' turns are notes
(``external_id`` ``"<session id>:<turn index>"``, ``document_id`` the session id, family
the session, speaker the role, time the session's date), its gold evidence the turns
marked ``has_answer`` — or, when a record marks none, every turn of its answer
sessions. Abstention questions (ids ending ``_abs``) are kept with ``adversarial=True``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgmem.errors import InputError
from pgmem.eval.datasets import EvalCorpus, EvalQuestion, read_utf8
from pgmem.ingest.sources import spans_from_conversation
from pgmem.validate import NAMESPACE_PATTERN

__all__ = ["is_longmemeval_record", "load_longmemeval", "longmemeval_corpus"]

#: The fields that tell a LongMemEval record from pgmem's own JSON Lines records.
RECORD_FIELDS = ("question_id", "question", "haystack_sessions", "haystack_session_ids")

# LongMemEval's dates: "2023/05/20 (Sat) 02:21".
_DATE = re.compile(r"^(\d{4})/(\d{2})/(\d{2})(?: \([A-Za-z]{3}\))?(?: (\d{2}):(\d{2}))?$")


def is_longmemeval_record(record: object) -> bool:
    """True when ``record`` has the fields of a LongMemEval question record."""
    return isinstance(record, Mapping) and all(key in record for key in RECORD_FIELDS)


def load_longmemeval(path: Path) -> EvalCorpus:
    """A LongMemEval file: a JSON list of records (as published) or JSON Lines of them.

    Raises
    ------
    InputError
        Naming the file, the record and the field that is wrong.
    """
    text = read_utf8(path)
    records: list[tuple[str, object]] = []
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        records = [(f"{path}: record {i}", record) for i, record in enumerate(data, start=1)]
    else:
        for number, line in enumerate(text.split("\n"), start=1):
            if line.strip():
                try:
                    records.append((f"{path}:{number}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}:{number}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    return longmemeval_corpus(records, name=path.stem)


def longmemeval_corpus(records: Iterable[tuple[str, object]], *, name: str) -> EvalCorpus:
    """The corpus of ``(where, record)`` pairs; ``where`` prefixes every error message."""
    spans: dict[str, tuple[Any, ...]] = {}
    questions: list[EvalQuestion] = []
    for where, record in records:
        if not is_longmemeval_record(record):
            missing = [k for k in RECORD_FIELDS if not isinstance(record, Mapping) or k not in record]
            raise InputError(f"{where}: not a LongMemEval record (missing {', '.join(map(repr, missing))})")
        assert isinstance(record, Mapping)
        question_id = _string(record, "question_id", where)
        where = f"{where} ({question_id})"
        namespace = f"lme-{question_id}"
        if not NAMESPACE_PATTERN.match(namespace):
            raise InputError(f"{where}: field 'question_id' must make a valid namespace, got {question_id!r}")
        if namespace in spans:
            raise InputError(f"{where}: field 'question_id': {question_id!r} repeated")
        turns, gold = _turns(record, where)
        try:
            spans[namespace] = tuple(spans_from_conversation(turns, document_prefix=namespace))
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        abstention = question_id.endswith("_abs")
        answer = record.get("answer")
        questions.append(
            EvalQuestion(
                id=question_id,
                namespace=namespace,
                question=_string(record, "question", where),
                gold=() if abstention else gold,
                answers=() if abstention or answer is None else (str(answer),),
                category=str(record.get("question_type") or "default"),
                adversarial=abstention,
            )
        )
    if not questions:
        raise InputError(f"{name}: holds no LongMemEval record")
    return EvalCorpus(name, spans, tuple(questions))


def _string(record: Mapping[str, Any], key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: field {key!r} must be a non-empty string, got {value!r}")
    return value


def _list(record: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = record.get(key, [])
    if not isinstance(value, list):
        raise InputError(f"{where}: field {key!r} must be a list, got {type(value).__name__}")
    return value


def _turns(record: Mapping[str, Any], where: str) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """The flat turn list :func:`spans_from_conversation` reads, and the gold turn ids."""
    session_ids = _list(record, "haystack_session_ids", where)
    sessions = _list(record, "haystack_sessions", where)
    dates = _list(record, "haystack_dates", where) or [None] * len(sessions)
    if not (len(session_ids) == len(sessions) == len(dates)):
        raise InputError(
            f"{where}: haystack_session_ids, haystack_sessions and haystack_dates must have one entry per session,"
            f" got {len(session_ids)}, {len(sessions)} and {len(dates)}"
        )
    answer_sessions = {str(s) for s in _list(record, "answer_session_ids", where)}
    turns: list[dict[str, Any]] = []
    marked: list[str] = []
    in_answer_sessions: list[str] = []
    for number, (session_id, session, date) in enumerate(zip(session_ids, sessions, dates, strict=True), start=1):
        session_where = f"{where} session {number}"
        if not isinstance(session_id, str | int) or not str(session_id).strip():
            raise InputError(f"{session_where}: session id must be a non-empty string, got {session_id!r}")
        if not isinstance(session, list):
            raise InputError(f"{session_where}: must be a list of turns, got {type(session).__name__}")
        time = None if date is None else _date(date, f"{session_where}: date")
        for index, turn in enumerate(session):
            turn_where = f"{session_where} turn {index}"
            if not isinstance(turn, Mapping):
                raise InputError(f"{turn_where}: must be an object, got {type(turn).__name__}")
            turn_id = f"{session_id}:{index}"
            role, content = turn.get("role"), turn.get("content")
            if not isinstance(role, str) or not isinstance(content, str):
                raise InputError(f"{turn_where}: 'role' and 'content' must be strings")
            has_answer = turn.get("has_answer", False)
            if not isinstance(has_answer, bool):
                raise InputError(f"{turn_where}: 'has_answer' must be true or false, got {has_answer!r}")
            if not content.strip():
                continue  # an empty turn is no evidence and no note
            turns.append(
                {"speaker": role, "text": content, "session": str(session_id), "id": turn_id}
                | ({"time": time.isoformat()} if time else {})
            )
            if has_answer:
                marked.append(turn_id)
            if str(session_id) in answer_sessions:
                in_answer_sessions.append(turn_id)
    return turns, tuple(marked or in_answer_sessions)


def _date(value: object, describe: str) -> datetime:
    match = _DATE.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise InputError(f"{describe} must look like '2023/05/20 (Sat) 02:21', got {value!r}")
    year, month, day, hour, minute = (int(g) if g else 0 for g in match.groups())
    try:
        return datetime(year, month, day, hour, minute, tzinfo=UTC)
    except ValueError as exc:
        raise InputError(f"{describe} is no calendar date ({exc}), got {value!r}") from None
