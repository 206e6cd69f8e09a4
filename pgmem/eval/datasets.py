"""Dataset adapters: public QA data (and a generic JSON Lines format) as spans and questions.

Each adapter reads files only, and returns an :class:`EvalCorpus`: the spans to ingest,
grouped by namespace, and the questions with the ``external_id`` values of their gold
spans. Every span is checked with :func:`pgmem.ingest.spans.validate_span` at load time,
so a bad record is reported with its file before anything is written. See
docs/eval_data.md for the mapping of each dataset and the oddities found in the data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgmem.errors import ConfigurationError, InputError
from pgmem.ingest.sources import FAMILY_BY, spans_from_conversation
from pgmem.ingest.spans import validate_span
from pgmem.types import Span

__all__ = [
    "DATASETS",
    "EvalCorpus",
    "EvalQuestion",
    "load_dataset",
    "load_hotpotqa",
    "load_jsonl",
    "load_locomo",
    "load_multihop",
]

#: The shared datasets :func:`load_dataset` knows, and their files under ``data_dir``.
DATASETS: Mapping[str, tuple[str, ...]] = {
    "locomo": ("locomo/locomo_dev5.json",),
    "multihop": ("multihop_rag_sample/queries.json", "multihop_rag_sample/ground_truth.json"),
    "hotpotqa": ("hotpotqa_dev_sample/hotpot_dev_distractor_v1_100.json",),
}

MULTIHOP_NAMESPACE = "multihop"
DEFAULT_NAMESPACE = "default"
DEFAULT_CATEGORY = "default"


@dataclass(frozen=True)
class EvalQuestion:
    """One evaluation question and its gold evidence.

    Parameters
    ----------
    id : str
        Unique within its corpus.
    namespace : str
        The corpus namespace the question is asked against.
    question : str
        The question text.
    gold : tuple of str
        Gold evidence ids: ``external_id`` values of spans in ``namespace``. Empty for a
        question with no evidence (a MultiHop-RAG null query, say).
    answers : tuple of str
        Gold answer strings; empty when the data has none (LoCoMo adversarial questions).
    category : str
        The dataset's question type: ``"category 2"`` (LoCoMo), the ``question_type``
        (MultiHop-RAG), ``"bridge"`` or ``"comparison"`` (HotpotQA).
    adversarial : bool
        The question is unanswerable from the corpus by design (LoCoMo category 5).
    """

    id: str
    namespace: str
    question: str
    gold: tuple[str, ...]
    answers: tuple[str, ...]
    category: str
    adversarial: bool = False


@dataclass(frozen=True)
class EvalCorpus:
    """Spans to ingest, by namespace, and the questions asked against them.

    Parameters
    ----------
    name : str
        The dataset name (``"locomo"``, ``"multihop"``, ``"hotpotqa"``, or a JSONL stem).
    spans : dict of str to tuple of Span
        Namespace to its spans, in source order.
    questions : tuple of EvalQuestion
        In source order.
    """

    name: str
    spans: dict[str, tuple[Span, ...]]
    questions: tuple[EvalQuestion, ...]

    def stats(self) -> dict[str, int]:
        """Counts of the corpus.

        Returns
        -------
        dict of str to int
            ``namespaces``, ``spans``, ``questions``, and ``families`` (distinct
            (namespace, family) pairs: a family is only ever compared within its pool).
        """
        return {
            "namespaces": len(self.spans),
            "spans": sum(len(spans) for spans in self.spans.values()),
            "questions": len(self.questions),
            "families": sum(len({span.family for span in spans}) for spans in self.spans.values()),
        }


# -- shared helpers ---------------------------------------------------------------------


def read_utf8(path: Path) -> str:
    """The file's text; InputError naming the file when it cannot be read or is not UTF-8."""
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _read_json(path: Path) -> Any:
    text = read_utf8(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None


def _get(record: object, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``record[key]`` if ``record`` is an object holding a ``kind`` there, else InputError."""
    if not isinstance(record, Mapping):
        raise InputError(f"{where}: must be a JSON object, got {type(record).__name__}")
    if key not in record:
        raise InputError(f"{where}: missing field {key!r}")
    value = record[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise InputError(f"{where}: field {key!r} has the wrong type (bool)")
    if not isinstance(value, kind):
        raise InputError(f"{where}: field {key!r} has the wrong type ({type(value).__name__})")
    return value


def _answer_text(value: object) -> str:
    # LoCoMo stores some answers as numbers (a year, a count).
    return value if isinstance(value, str) else json.dumps(value)


def _validated(spans: Sequence[Span], namespace: str, where: str) -> tuple[Span, ...]:
    for index, span in enumerate(spans):
        try:
            validate_span(index, span, namespace)
        except InputError as exc:
            raise InputError(f"{where}: namespace {namespace!r}: {exc}") from None
    return tuple(spans)


# -- LoCoMo -----------------------------------------------------------------------------


def _evidence_ids(entries: list[Any], where: str) -> tuple[str, ...]:
    # The data has a few entries holding two ids ("D8:6; D9:17"): split them.
    ids: list[str] = []
    for entry in entries:
        if not isinstance(entry, str):
            raise InputError(f"{where}: evidence entries must be strings, got {type(entry).__name__}")
        for part in entry.split(";"):
            part = part.strip()
            if part and part not in ids:
                ids.append(part)
    return tuple(ids)


def load_locomo(path: Path, *, family_by: str = "session", limit_conversations: int | None = None) -> EvalCorpus:
    """LoCoMo conversations: a dialogue turn is a note, one namespace per conversation.

    Parameters
    ----------
    path : Path
        A LoCoMo JSON file (a list of samples with ``conversation``, ``qa``, ``sample_id``).
    family_by : {"session", "speaker"}
        A turn's family: its session (default) or its speaker.
    limit_conversations : int, optional
        Read only the first N conversations.

    Returns
    -------
    EvalCorpus
        Spans from :func:`pgmem.ingest.sources.spans_from_conversation` (``external_id``
        = ``dia_id``, time = session date, offsets into the session transcript) in
        namespace ``"locomo-<sample_id>"``; questions with id ``"<sample_id>/q<n>"``,
        category ``"category <n>"``, evidence entries split on ``;``; category 5 is
        kept with ``adversarial=True`` and ``answers=()``. Gold ids are as published,
        including the few that name no turn (see docs/eval_data.md).
    """
    if family_by not in FAMILY_BY:
        raise ConfigurationError(f"family_by must be one of {', '.join(map(repr, FAMILY_BY))}, got {family_by!r}")
    if limit_conversations is not None and limit_conversations < 1:
        raise ConfigurationError(f"limit_conversations must be >= 1, got {limit_conversations}")
    data = _read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: must hold a list of LoCoMo samples, got {type(data).__name__}")
    samples = data if limit_conversations is None else data[:limit_conversations]
    spans: dict[str, tuple[Span, ...]] = {}
    questions: list[EvalQuestion] = []
    for number, sample in enumerate(samples, start=1):
        where = f"{path}: sample {number}"
        sample_id = _get(sample, "sample_id", str, where)
        where = f"{path}: {sample_id}"
        namespace = f"locomo-{sample_id}"
        if namespace in spans:
            raise InputError(f"{where}: sample_id {sample_id!r} appears twice")
        try:
            turns = spans_from_conversation(sample, family_by=family_by)
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from None
        spans[namespace] = _validated(turns, namespace, str(path))
        for index, qa in enumerate(_get(sample, "qa", list, where), start=1):
            qa_where = f"{where} qa {index}"
            category = _get(qa, "category", int, qa_where)
            adversarial = category == 5
            answers: tuple[str, ...] = ()
            if not adversarial:
                answers = (_answer_text(_get(qa, "answer", (str, int, float), qa_where)),)
            questions.append(
                EvalQuestion(
                    id=f"{sample_id}/q{index}",
                    namespace=namespace,
                    question=_get(qa, "question", str, qa_where),
                    gold=_evidence_ids(_get(qa, "evidence", list, qa_where), qa_where),
                    answers=answers,
                    category=f"category {category}",
                    adversarial=adversarial,
                )
            )
    return EvalCorpus("locomo", spans, tuple(questions))


# -- MultiHop-RAG -----------------------------------------------------------------------


def load_multihop(queries_path: Path, ground_truth_path: Path) -> EvalCorpus:
    """The MultiHop-RAG sample: each distinct gold fact is a note (its own document).

    Parameters
    ----------
    queries_path : Path
        ``queries.json``: ``{"queries": [{"id", "question", "question_type"}]}``.
    ground_truth_path : Path
        ``ground_truth.json``: query id to ``{"answer", "evidence_list": [{"fact",
        "source", "title", "url", "author", "category", "published_at"}]}``.

    Returns
    -------
    EvalCorpus
        One namespace, ``"multihop"``. A fact (distinct by URL and text) gets the id
        ``F001``, ``F002``, ... in order of first appearance (the ids of the shipped demo
        corpus), ``family`` = publisher, ``source_ts`` = ``published_at``, ``context`` =
        publisher and title (as in the demo corpus). Null queries are kept with ``gold=()``; ``answers`` is
        ``(answer,)`` and ``category`` the ``question_type``.
    """
    queries = _get(_read_json(queries_path), "queries", list, str(queries_path))
    truth = _read_json(ground_truth_path)
    if not isinstance(truth, Mapping):
        raise InputError(f"{ground_truth_path}: must map query ids to answers, got {type(truth).__name__}")
    facts: dict[tuple[str, str], Span] = {}
    questions: list[EvalQuestion] = []
    for number, query in enumerate(queries, start=1):
        query_id = _get(query, "id", str, f"{queries_path}: query {number}")
        where = f"{queries_path}: query {query_id!r}"
        truth_where = f"{ground_truth_path}: query {query_id!r}"
        if query_id not in truth:
            raise InputError(f"{truth_where}: missing (every query needs its ground truth)")
        record = truth[query_id]
        gold: list[str] = []
        for index, evidence in enumerate(_get(record, "evidence_list", list, truth_where), start=1):
            fact_where = f"{truth_where} evidence {index}"
            fields = {
                name: _get(evidence, name, str, fact_where)
                for name in ("fact", "source", "title", "url", "published_at")
            }
            author = _get(evidence, "author", (str, type(None)), fact_where)  # null for 62 quotations
            key = (fields["url"], fields["fact"])
            if key not in facts:
                fact_id = f"F{len(facts) + 1:03d}"
                facts[key] = Span(
                    document_id=fact_id,
                    text=fields["fact"],
                    start=0,
                    end=len(fields["fact"].encode("utf-8")),
                    family=fields["source"],
                    source_ts=fields["published_at"],
                    external_id=fact_id,
                    context=f"{fields['source']} › {fields['title']}",
                    metadata={"url": fields["url"], "title": fields["title"], "author": author},
                )
            fact_id = str(facts[key].external_id)
            if fact_id not in gold:
                gold.append(fact_id)
        questions.append(
            EvalQuestion(
                id=query_id,
                namespace=MULTIHOP_NAMESPACE,
                question=_get(query, "question", str, where),
                gold=tuple(sorted(gold)),
                answers=(_get(record, "answer", str, truth_where),),
                category=_get(query, "question_type", str, where),
            )
        )
    spans = _validated(list(facts.values()), MULTIHOP_NAMESPACE, str(ground_truth_path))
    return EvalCorpus("multihop", {MULTIHOP_NAMESPACE: spans}, tuple(questions))


# -- HotpotQA ---------------------------------------------------------------------------


def _paragraph_spans(title: str, sentences: list[Any], where: str) -> list[Span]:
    # The paragraph is its sentences joined as published (each carries its own leading
    # space); a span is a sentence without surrounding whitespace, offsets into that text.
    spans: list[Span] = []
    offset = 0
    for index, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise InputError(f"{where}: sentence {index} must be a string, got {type(sentence).__name__}")
        stripped = sentence.strip()
        if stripped:
            lead = len(sentence[: len(sentence) - len(sentence.lstrip())].encode("utf-8"))
            start = offset + lead
            spans.append(
                Span(
                    document_id=title,
                    text=stripped,
                    start=start,
                    end=start + len(stripped.encode("utf-8")),
                    family=title,
                    external_id=f"{title}#{index}",
                    context=title,
                )
            )
        offset += len(sentence.encode("utf-8"))
    return spans


def load_hotpotqa(path: Path) -> EvalCorpus:
    """HotpotQA (distractor setting, official format): a sentence is a note.

    Parameters
    ----------
    path : Path
        A JSON list of questions with ``_id``, ``question``, ``answer``, ``type``,
        ``supporting_facts`` ([title, sentence index]) and ``context`` ([title,
        sentences]).

    Returns
    -------
    EvalCorpus
        One namespace per question, ``"hotpot-<_id>"``, holding its context paragraphs:
        a paragraph is a document (``document_id`` = title, its text the sentences
        joined as published), a non-blank sentence is a span (whitespace stripped,
        byte offsets into that text), ``family`` = ``context`` = title, ``external_id`` =
        ``"<title>#<sentence index>"``. Gold = the supporting facts; ``category`` = ``type``.
    """
    data = _read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: must hold a list of HotpotQA questions, got {type(data).__name__}")
    spans: dict[str, tuple[Span, ...]] = {}
    questions: list[EvalQuestion] = []
    for number, record in enumerate(data, start=1):
        question_id = _get(record, "_id", str, f"{path}: question {number}")
        where = f"{path}: question {question_id!r}"
        namespace = f"hotpot-{question_id}"
        if namespace in spans:
            raise InputError(f"{where}: _id appears twice")
        paragraphs: list[Span] = []
        titles: set[str] = set()
        for index, paragraph in enumerate(_get(record, "context", list, where)):
            if not (isinstance(paragraph, list) and len(paragraph) == 2 and isinstance(paragraph[0], str)):
                raise InputError(f"{where}: context {index} must be [title, [sentences]]")
            title, sentences = paragraph
            if title in titles:
                raise InputError(f"{where}: context title {title!r} appears twice")
            if not isinstance(sentences, list):
                raise InputError(f"{where}: context {title!r} must list its sentences")
            titles.add(title)
            paragraphs.extend(_paragraph_spans(title, sentences, f"{where} context {title!r}"))
        spans[namespace] = _validated(paragraphs, namespace, str(path))
        known = {span.external_id for span in spans[namespace]}
        gold: list[str] = []
        for fact in _get(record, "supporting_facts", list, where):
            if not (isinstance(fact, list) and len(fact) == 2 and isinstance(fact[0], str) and type(fact[1]) is int):
                raise InputError(f"{where}: supporting_facts entries must be [title, sentence index], got {fact!r}")
            fact_id = f"{fact[0]}#{fact[1]}"
            if fact_id not in known:
                raise InputError(f"{where}: supporting fact {fact!r} names no non-blank context sentence")
            if fact_id not in gold:
                gold.append(fact_id)
        questions.append(
            EvalQuestion(
                id=question_id,
                namespace=namespace,
                question=_get(record, "question", str, where),
                gold=tuple(gold),
                answers=(_get(record, "answer", str, where),),
                category=_get(record, "type", str, where),
            )
        )
    return EvalCorpus("hotpotqa", spans, tuple(questions))


# -- generic JSON Lines -----------------------------------------------------------------

_NOTE_FIELDS = frozenset(
    {"type", "namespace", "id", "text", "family", "document_id", "start", "end", "source_ts", "role", "metadata"}
)
_QUESTION_FIELDS = frozenset({"type", "id", "namespace", "question", "gold", "answers", "category", "adversarial"})


def _optional(record: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str, default: Any) -> Any:
    if record.get(key) is None:
        return default
    return _get(record, key, kind, where)


def _text(record: Mapping[str, Any], key: str, where: str) -> str:
    value: str = _get(record, key, str, where)
    if not value.strip():
        raise InputError(f"{where}: field {key!r} must not be empty")
    return value


def _string_list(record: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    values = _optional(record, key, list, where, [])
    if not all(isinstance(value, str) and value.strip() for value in values):
        raise InputError(f"{where}: field {key!r} must be a list of non-empty strings")
    return tuple(values)


def _jsonl_note(record: Mapping[str, Any], where: str) -> tuple[str, Span]:
    note_id = _text(record, "id", where)
    text = _get(record, "text", str, where)
    start = _optional(record, "start", int, where, 0)
    end = _optional(record, "end", int, where, start + len(text.encode("utf-8", "surrogatepass")))
    span = Span(
        document_id=_optional(record, "document_id", str, where, note_id),
        text=text,
        start=start,
        end=end,
        family=_get(record, "family", str, where),
        source_ts=_optional(record, "source_ts", str, where, None),
        external_id=note_id,
        role=_optional(record, "role", str, where, None),
        metadata=_optional(record, "metadata", dict, where, None),
    )
    namespace = _text(record, "namespace", where) if "namespace" in record else DEFAULT_NAMESPACE
    try:
        validate_span(0, span, namespace)
    except InputError as exc:
        # validate_span says "span 0 ('id'): field rule"; keep only the field and rule.
        message = str(exc).removeprefix(f"span 0 ({note_id!r}): ")
        raise InputError(f"{where}: {message}") from None
    return namespace, span


def _jsonl_question(record: Mapping[str, Any], where: str) -> EvalQuestion:
    _get(record, "gold", list, where)  # required, even when empty
    return EvalQuestion(
        id=_text(record, "id", where),
        namespace=_text(record, "namespace", where) if "namespace" in record else DEFAULT_NAMESPACE,
        question=_text(record, "question", where),
        gold=_string_list(record, "gold", where),
        answers=_string_list(record, "answers", where),
        category=_text(record, "category", where) if "category" in record else DEFAULT_CATEGORY,
        adversarial=_optional(record, "adversarial", bool, where, False),
    )


def load_jsonl(path: Path) -> EvalCorpus:
    """The generic evaluation format: one JSON object per line, a note or a question.

    Parameters
    ----------
    path : Path
        UTF-8 JSON Lines; blank lines are skipped. A note is ``{"type": "note", "id",
        "text", "family"}`` with optional ``namespace`` (default ``"default"``),
        ``document_id`` (default the id), ``start``/``end`` (UTF-8 byte offsets, default
        0 and the text's length), ``source_ts`` (ISO 8601 with offset), ``role`` and
        ``metadata``. A question is ``{"type": "question", "id", "question", "gold"}``
        with optional ``namespace``, ``answers``, ``category`` (default ``"default"``)
        and ``adversarial``. See docs/eval_data.md. A file whose first record is a
        LongMemEval question record is read by :func:`pgmem.eval.longmemeval.load_longmemeval`.

    Returns
    -------
    EvalCorpus
        Named after the file's stem; a note's ``id`` is its span's ``external_id``.

    Raises
    ------
    InputError
        Naming the file, line and field: invalid JSON, a missing, unknown or mistyped
        field, an invalid span, a note id repeated in its namespace, a question id
        repeated, a gold id that is no note of the question's namespace, or no question.
    """
    lines = read_utf8(path).split("\n")
    spans: dict[str, list[Span]] = {}
    note_ids: dict[str, set[str]] = {}
    questions: list[tuple[str, EvalQuestion]] = []
    question_ids: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not spans and not questions and _is_longmemeval(record):
            return _load_longmemeval(path)
        kind = _get(record, "type", str, where)
        allowed = {"note": _NOTE_FIELDS, "question": _QUESTION_FIELDS}.get(kind)
        if allowed is None:
            raise InputError(f"{where}: field 'type' must be 'note' or 'question', got {kind!r}")
        unknown = sorted(set(record) - allowed)
        if unknown:
            raise InputError(
                f"{where}: unknown field {unknown[0]!r} for a {kind} (allowed: {', '.join(sorted(allowed))})"
            )
        if kind == "note":
            namespace, span = _jsonl_note(record, where)
            ids = note_ids.setdefault(namespace, set())
            if span.external_id in ids:
                raise InputError(f"{where}: field 'id': note {span.external_id!r} repeated in namespace {namespace!r}")
            ids.add(str(span.external_id))
            spans.setdefault(namespace, []).append(span)
        else:
            question = _jsonl_question(record, where)
            if question.id in question_ids:
                raise InputError(f"{where}: field 'id': question {question.id!r} repeated")
            question_ids.add(question.id)
            questions.append((where, question))
    if not questions:
        raise InputError(f"{path}: holds no question")
    for where, question in questions:
        known = note_ids.get(question.namespace, set())
        for gold in question.gold:
            if gold not in known:
                raise InputError(
                    f"{where}: field 'gold': {gold!r} is no note id of namespace {question.namespace!r}"
                    f" ({len(known)} notes there)"
                )
    return EvalCorpus(
        path.stem,
        {namespace: tuple(group) for namespace, group in spans.items()},
        tuple(question for _, question in questions),
    )


# -- dispatch ---------------------------------------------------------------------------


# pgmem.eval.longmemeval builds on this module's EvalCorpus: imported when first needed.
def _is_longmemeval(record: object) -> bool:
    from pgmem.eval.longmemeval import is_longmemeval_record

    return isinstance(record, Mapping) and "type" not in record and is_longmemeval_record(record)


def _load_longmemeval(path: Path) -> EvalCorpus:
    from pgmem.eval.longmemeval import load_longmemeval

    return load_longmemeval(path)


def load_dataset(name_or_path: str, data_dir: Path) -> EvalCorpus:
    """A corpus by dataset name, or from a generic JSON Lines file.

    Parameters
    ----------
    name_or_path : str
        ``"locomo"``, ``"multihop"`` or ``"hotpotqa"`` (files under ``data_dir``, see
        :data:`DATASETS`), the path of a ``.jsonl`` file (:func:`load_jsonl`), or of a
        LongMemEval ``.json`` file (:func:`pgmem.eval.longmemeval.load_longmemeval`).
    data_dir : Path
        The shared data folder (``locomo/``, ``multihop_rag_sample/``,
        ``hotpotqa_dev_sample/``).

    Returns
    -------
    EvalCorpus
    """
    if name_or_path.endswith(".jsonl"):
        return load_jsonl(Path(name_or_path))
    if name_or_path.endswith(".json"):
        return _load_longmemeval(Path(name_or_path))
    if name_or_path not in DATASETS:
        raise ConfigurationError(
            f"dataset must be one of {', '.join(map(repr, DATASETS))}, a .jsonl or a LongMemEval .json path,"
            f" got {name_or_path!r}"
        )
    paths = [data_dir / relative for relative in DATASETS[name_or_path]]
    for file in paths:
        if not file.is_file():
            raise InputError(f"{file}: no such file (dataset {name_or_path!r} under data_dir {data_dir})")
    if name_or_path == "locomo":
        return load_locomo(paths[0])
    if name_or_path == "multihop":
        return load_multihop(paths[0], paths[1])
    return load_hotpotqa(paths[0])
