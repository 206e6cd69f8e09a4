"""The evaluation dataset adapters: the generic JSONL format, and the shared public data."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pgmem.demo import load_corpus
from pgmem.errors import ConfigurationError, InputError
from pgmem.eval import EvalCorpus, EvalQuestion, load_dataset, load_hotpotqa, load_jsonl, load_locomo, load_multihop
from pgmem.ingestion.sources import conversation_transcript

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(record, ensure_ascii=False) for record in records) + "\n", encoding="utf-8")
    return path


NOTES: list[dict[str, Any]] = [
    {"type": "note", "id": "n1", "text": "Ada founded Acme in 1999.", "family": "wiki"},
    {
        "type": "note",
        "namespace": "team",
        "id": "n1",
        "text": "Bob joined Acme.",
        "family": "hr",
        "document_id": "memo",
        "start": 10,
        "end": 26,
        "source_ts": "2024-03-01T09:00:00+00:00",
        "role": "fact",
        "metadata": {"page": 2},
    },
    {"type": "note", "namespace": "team", "id": "n2", "text": "Café opened.", "family": "hr", "document_id": "memo"},
]
QUESTIONS: list[dict[str, Any]] = [
    {"type": "question", "id": "q1", "question": "Who founded Acme?", "gold": ["n1"], "answers": ["Ada"]},
    {"type": "question", "id": "q2", "namespace": "team", "question": "Who joined?", "gold": ["n1", "n2"]},
    {"type": "question", "id": "q3", "namespace": "team", "question": "Unknowable?", "gold": [], "category": "null"},
]


def test_jsonl_happy_path(tmp_path: Path) -> None:
    corpus = load_jsonl(_write(tmp_path / "mine.jsonl", NOTES + QUESTIONS))
    assert corpus.name == "mine"
    assert corpus.stats() == {"namespaces": 2, "spans": 3, "questions": 3, "families": 2}
    first = corpus.spans["default"][0]
    assert (first.document_id, first.start, first.end, first.external_id) == ("n1", 0, 25, "n1")
    memo = corpus.spans["team"]
    assert (memo[0].start, memo[0].end, memo[0].role, memo[0].metadata) == (10, 26, "fact", {"page": 2})
    assert (memo[1].document_id, memo[1].start, memo[1].end) == ("memo", 0, len("Café opened.".encode()))
    assert corpus.questions[0] == EvalQuestion("q1", "default", "Who founded Acme?", ("n1",), ("Ada",), "default")
    assert corpus.questions[1].gold == ("n1", "n2") and corpus.questions[1].answers == ()
    assert corpus.questions[2].gold == () and corpus.questions[2].category == "null"
    assert load_dataset(str(tmp_path / "mine.jsonl"), tmp_path) == corpus


@pytest.mark.parametrize(
    ("records", "line", "message"),
    [
        ([*NOTES, {**NOTES[2], "id": "n1"}], 4, "field 'id': note 'n1' repeated in namespace 'team'"),
        ([*NOTES, {**QUESTIONS[1], "gold": ["n1", "n3"]}], 4, "field 'gold': 'n3' is no note id of namespace 'team'"),
        ([{**NOTES[0], "end": 5}, *QUESTIONS[:1]], 1, "start/end must cover exactly the text's 25 UTF-8 bytes"),
        ([{**NOTES[0], "source_ts": "2024-03-01"}, *QUESTIONS[:1]], 1, "source_ts must be timezone-aware"),
        ([{key: v for key, v in NOTES[0].items() if key != "family"}], 1, "missing field 'family'"),
        ([NOTES[0], {**QUESTIONS[0], "golds": ["n1"]}], 2, "unknown field 'golds' for a question"),
    ],
)
def test_jsonl_errors_name_file_line_and_field(
    tmp_path: Path, records: list[dict[str, Any]], line: int, message: str
) -> None:
    path = _write(tmp_path / "bad.jsonl", records)
    with pytest.raises(InputError) as caught:
        load_jsonl(path)
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert message in str(caught.value)


def test_jsonl_invalid_json_and_unknown_dataset(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(NOTES[0]) + "\n\n{not json\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"broken\.jsonl:3: not valid JSON"):
        load_jsonl(path)
    with pytest.raises(ConfigurationError, match="dataset must be one of"):
        load_dataset("squad", tmp_path)
    with pytest.raises(InputError, match="no such file"):
        load_dataset("locomo", tmp_path)


def _require(*parts: str) -> Path:
    path = SHARED_DATA.joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"shared data not found: {path}")
    return path


def _check_offsets(corpus: EvalCorpus, documents: dict[tuple[str, str], bytes]) -> None:
    for namespace, spans in corpus.spans.items():
        for span in spans:
            assert documents[namespace, span.document_id][span.start : span.end].decode("utf-8") == span.text


# LoCoMo gold ids that name no turn of their conversation, as published.
LOCOMO_BAD_GOLD = {("conv-42/q59", "D10:19"), ("conv-42/q89", "D"), ("conv-43/q19", "D:11:26")}


def test_locomo_dev() -> None:
    corpus = load_locomo(_require("locomo", "locomo_dev5.json"))
    assert corpus.stats() == {"namespaces": 5, "spans": 2760, "questions": 999, "families": 128}
    assert list(corpus.spans) == [f"locomo-{c}" for c in ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")]
    categories = Counter(q.category for q in corpus.questions)
    assert categories == {"category 1": 142, "category 2": 156, "category 3": 46, "category 4": 418, "category 5": 237}
    adversarial = [q for q in corpus.questions if q.adversarial]
    assert len(adversarial) == 237 and all(q.category == "category 5" and q.answers == () for q in adversarial)
    assert all(len(q.answers) == 1 for q in corpus.questions if not q.adversarial)
    assert sum(1 for q in corpus.questions if not q.gold) == 2  # two category-3 questions of conv-26
    split = next(q for q in corpus.questions if q.namespace == "locomo-conv-26" and "D9:17" in q.gold)
    assert "D8:6" in split.gold  # the published entry "D8:6; D9:17"
    bad = set()
    for question in corpus.questions:
        known = {span.external_id for span in corpus.spans[question.namespace]}
        bad |= {(question.id, gold) for gold in question.gold if gold not in known}
    assert bad == LOCOMO_BAD_GOLD
    samples = json.loads(_require("locomo", "locomo_dev5.json").read_text(encoding="utf-8"))
    transcripts = {
        (namespace, document_id): conversation_transcript(sample, document_id).encode()
        for sample in samples
        for namespace in [f"locomo-{sample['sample_id']}"]
        for document_id in {span.document_id for span in corpus.spans[namespace]}
    }
    _check_offsets(corpus, transcripts)
    first = corpus.spans["locomo-conv-26"][0]
    assert (first.external_id, first.family, str(first.source_ts)) == ("D1:1", "session_1", "2023-05-08 13:56:00+00:00")

    by_speaker = load_locomo(_require("locomo", "locomo_dev5.json"), family_by="speaker", limit_conversations=1)
    assert by_speaker.stats() == {"namespaces": 1, "spans": 419, "questions": 199, "families": 2}


def test_multihop_sample() -> None:
    corpus = load_multihop(
        _require("multihop_rag_sample", "queries.json"), _require("multihop_rag_sample", "ground_truth.json")
    )
    assert corpus.stats() == {"namespaces": 1, "spans": 438, "questions": 500, "families": 37}
    assert sum(1 for q in corpus.questions if not q.gold) == 71
    assert all(q.category == "null_query" for q in corpus.questions if not q.gold)
    assert all(len(q.answers) == 1 for q in corpus.questions)
    known = {span.external_id for span in corpus.spans["multihop"]}
    assert all(gold in known for q in corpus.questions for gold in q.gold)
    # Same fact ids, spans and gold as the demo corpus shipped in the package.
    spans, questions = load_corpus()
    assert list(corpus.spans["multihop"]) == spans
    assert [(q.id, q.gold) for q in corpus.questions] == [(q.id, q.evidence) for q in questions]


def test_hotpotqa_dev_sample() -> None:
    path = _require("hotpotqa_dev_sample", "hotpot_dev_distractor_v1_100.json")
    corpus = load_hotpotqa(path)
    assert corpus.stats() == {"namespaces": 103, "spans": 4278, "questions": 103, "families": 1022}
    assert Counter(q.category for q in corpus.questions) == {"bridge": 82, "comparison": 21}
    raw = json.loads(path.read_text(encoding="utf-8"))
    documents = {
        (f"hotpot-{record['_id']}", title): "".join(sentences).encode("utf-8")
        for record in raw
        for title, sentences in record["context"]
    }
    _check_offsets(corpus, documents)
    for record, question in zip(raw, corpus.questions, strict=True):
        assert question.namespace == f"hotpot-{record['_id']}" and question.answers == (record["answer"],)
        notes = {span.external_id: span for span in corpus.spans[question.namespace]}
        context = dict(record["context"])
        assert len(question.gold) == len(record["supporting_facts"])
        for title, index in record["supporting_facts"]:
            assert notes[f"{title}#{index}"].text == context[title][index].strip()
