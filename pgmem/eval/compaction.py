"""``pgmem eval-compaction``: LoCoMo replayed as a growing agent context under a live cap.

Each conversation is an agent trajectory: a system message and a task, then every
dialogue turn arrives as an observation; a session opens with a header and closes
with an end marker, and decision points are session ends. Every policy runs on the
same :class:`~pgmem.compaction.Compactor` loop with the same summariser.

The summariser and the probe are a **deterministic stand-in**, not a language model
(:class:`ExtractiveChat`): the summary is sentences chosen from the dropped turns
(each citing its note id when the turns were archived), and the search rubric's
predicates are answered from the trajectory: C1 = a session just closed, C2 = the
extractive summary fits (it is built to the cap), C3 = new turns since the last
compaction, N1 = never.

At each question (asked at the first session end after all its gold turns were
seen) the live context is measured: evidence-in-context recall is the share of gold
turns whose text, or a citation of whose archived note, is in it; context tokens are
its size. The pgmem policy may call its ``recall`` tool once with the question,
filling the rest of the cap. The reference ``pack`` is :func:`pgmem.pack` alone over
every turn seen so far, with the whole cap as its token budget.

With a real model (``chat``, e.g. :class:`~pgmem.compaction.OpenAIChat` on any
OpenAI-compatible server) the same replay runs with the model as rubric judge and
summariser, and at each question a small agent (the same model) answers from the live
context it has then (plus what ``recall`` brought, for pgmem): answer containment and
token F1 against LoCoMo's answers are reported beside the evidence recall.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from pgmem.api import ingest, pack
from pgmem.compaction.archive import archived_lookup, fetch_notes, message_digest, render_message
from pgmem.compaction.chat import ChatModel, ChatResult
from pgmem.compaction.controller import Compactor
from pgmem.compaction.policy import PROBE_OPENING, SEARCH_RUBRIC, Gates
from pgmem.compaction.summary import OPEN_QUESTIONS, cite_sentences
from pgmem.compaction.tokens import TokenCounter
from pgmem.db.queries import fetch
from pgmem.embeddings import Embedder
from pgmem.errors import ConfigurationError
from pgmem.eval.datasets import EvalCorpus, EvalQuestion
from pgmem.eval.metrics import contains_answer, token_f1
from pgmem.types import Span

#: (label, policy, rebuild) of every system compared; the label is the report's name.
SYSTEMS: tuple[tuple[str, str, str], ...] = (
    ("none", "none", "reset"),
    ("fixed", "fixed", "reset"),
    ("delete_all", "delete_all", "reset"),
    ("keep_last", "keep_last", "reset"),
    ("rubric", "rubric", "reset"),
    ("rubric+pgmem", "rubric", "pgmem"),
)
PACK_ONLY = "pack"
DEFAULT_CAPS = (2000, 4000, 8000)
#: Tokens per message the keep-last-N baseline budgets for: it keeps cap / this many
#: messages (LoCoMo turns average about 30 tokens, so about a third of the cap).
KEEP_LAST_TOKENS = 100
SYSTEM_PROMPT = "You are a conversational agent with a long memory. Follow the conversation closely."
TASK = "Follow the conversation between the two speakers and remember it: you will be asked about it later."
#: Policies that compact at a token threshold below the backstop.
THRESHOLD_POLICIES = ("fixed", "delete_all", "keep_last")
#: Completion cap of the answering agent (LoCoMo answers are a few words).
ANSWER_MAX_TOKENS = 48
ANSWER_PROMPT = (
    "Answer this question about the conversation from the context above, in a few words "
    "(a name, a date, a place or a short phrase). If the context does not say, answer 'unknown'.\n"
    "Question: {question}"
)
_END = re.compile(r"^\[session (\d+) ended\]$")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d[\d,.:/-]*")


# -- the stand-in model ---------------------------------------------------------------------


def _informative(text: str) -> float:
    """How much checkable content a turn carries: names, numbers and long words per token."""
    words = _WORD.findall(text.split(":", 1)[-1])
    if not words:
        return 0.0
    score = sum(1.0 for w in words[1:] if w[0].isupper()) + sum(1.5 for w in words if w[0].isdigit())
    score += sum(0.5 for w in words if len(w) >= 7)
    return score / math.sqrt(len(words))


class ExtractiveChat:
    """A deterministic stand-in for the chat model (see the module docstring)."""

    model = "extractive-stand-in"

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def complete(self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None) -> ChatResult:
        last = str(messages[-1].get("content", ""))
        text = self._probe(messages[:-1]) if last.startswith(PROBE_OPENING) else self._summary(last, max_tokens)
        return ChatResult(text, self.counter.messages(messages), self.counter.text(text), self.model, 0.0)

    def _probe(self, trajectory: Sequence[Mapping[str, Any]]) -> str:
        contents = [str(m.get("content", "")) for m in trajectory]
        closed = bool(contents) and _END.match(contents[-1]) is not None
        observed = [c for m, c in zip(trajectory, contents, strict=True) if m.get("role") == "user" and ": " in c]
        answers: dict[str, dict[str, str]] = {name: {"answer": "no", "evidence": ""} for name in SEARCH_RUBRIC.names}
        if closed:
            answers["C1"] = {"answer": "yes", "evidence": contents[-1]}
        if observed:
            answers["C2"] = answers["C3"] = {"answer": "yes", "evidence": observed[-1][:60]}
        return json.dumps(answers)

    def _summary(self, request: str, max_tokens: int | None) -> str:
        previous, _, excerpt = request.partition("Excerpt:\n")
        _, _, previous = previous.partition("Earlier summary:\n")
        candidates: list[tuple[float, int, str]] = []
        for order, line in enumerate(previous.strip().splitlines()):
            if line.strip() and not line.startswith(OPEN_QUESTIONS):
                candidates.append((_informative(line), order, line.strip()))
        for order, line in enumerate(excerpt.splitlines(), start=len(candidates)):
            match = re.match(r"^(?:\[#([0-9a-f]+)\] )?\w+: (.*)$", line)
            if not match or ": " not in match.group(2):  # session headers and markers carry no fact
                continue
            ref, turn = match.group(1), match.group(2)
            candidates.append((_informative(turn), order, cite_sentences(turn, ref) if ref else turn))
        budget = max_tokens or 10**9
        chosen: list[tuple[int, str]] = []
        used = 0
        for score, order, sentence in sorted(candidates, key=lambda c: (-c[0], c[1])):
            cost = self.counter.text(sentence) + 1
            if score > 0 and used + cost <= budget:
                chosen.append((order, sentence))
                used += cost
        return "\n".join(sentence for _, sentence in sorted(chosen))


# -- replay ---------------------------------------------------------------------------------

#: When questions are asked (see :class:`CompactionEvalConfig`).
ASK_TIMES = ("evidence", "end")


@dataclass(frozen=True)
class CompactionEvalConfig:
    """What one ``eval-compaction`` run compares.

    Parameters
    ----------
    caps : tuple of int
        Live context caps in tokens (each >= 500).
    systems : tuple of str
        Labels from :data:`SYSTEMS` plus ``pack`` (default all).
    limit_conversations : int, optional
        Only the first N conversations.
    ask : {"evidence", "end"}
        When each question is asked: at the first session end after all its gold turns
        were seen (default; recency helps), or every question at the conversation's end
        (the evidence may be many compactions old).
    limit_questions : int, optional
        Only the first N answerable questions of each conversation (for a slow model).
    limit_sessions : int, optional
        Only the first N sessions of each conversation, and the questions whose gold
        turns all lie in them (for a slow model).
    """

    caps: tuple[int, ...] = DEFAULT_CAPS
    systems: tuple[str, ...] = (*(label for label, _, _ in SYSTEMS), PACK_ONLY)
    limit_conversations: int | None = None
    ask: str = "evidence"
    limit_questions: int | None = None
    limit_sessions: int | None = None

    def __post_init__(self) -> None:
        if not self.caps or any(cap < 500 for cap in self.caps):
            raise ConfigurationError(f"caps must be token counts >= 500, got {self.caps}")
        known = {label for label, _, _ in SYSTEMS} | {PACK_ONLY}
        unknown = [s for s in self.systems if s not in known]
        if unknown or not self.systems:
            raise ConfigurationError(f"systems must be among {', '.join(sorted(known))}; got {list(self.systems)}")
        if self.limit_conversations is not None and self.limit_conversations < 1:
            raise ConfigurationError(f"limit_conversations must be >= 1, got {self.limit_conversations}")
        for name in ("limit_questions", "limit_sessions"):
            limit = getattr(self, name)
            if limit is not None and limit < 1:
                raise ConfigurationError(f"{name} must be >= 1, got {limit}")
        if self.ask not in ASK_TIMES:
            raise ConfigurationError(f"ask must be one of {', '.join(ASK_TIMES)}, got {self.ask!r}")


@dataclass
class _Tally:
    recalls: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    drift: dict[str, list[float]] = field(default_factory=dict)
    compactions: int = 0
    dropped: int = 0
    recovered: int = 0
    containment: list[float] = field(default_factory=list)
    f1: list[float] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)

    def answer(self, chat: ChatModel, context: Sequence[Mapping[str, Any]], question: EvalQuestion) -> None:
        """Let the agent answer ``question`` from ``context``; score it against the gold answers."""
        prediction = answer_question(chat, context, question.question)
        containment = contains_answer(prediction, question.answers)
        f1 = token_f1(prediction, question.answers)
        if containment is not None and f1 is not None:
            self.containment.append(containment)
            self.f1.append(f1)
        self.answers.append(
            {"question": question.question, "gold": list(question.answers), "answer": prediction, "f1": f1}
        )


def answer_question(chat: ChatModel, context: Sequence[Mapping[str, Any]], question: str) -> str:
    """The agent's short answer to ``question`` with ``context`` as its live context."""
    asked = {"role": "user", "content": ANSWER_PROMPT.format(question=question)}
    return chat.complete([*context, asked], max_tokens=ANSWER_MAX_TOKENS).text.strip()


def _sessions(spans: Sequence[Span]) -> list[tuple[str, list[Span]]]:
    sessions: dict[str, list[Span]] = {}
    for span in spans:
        sessions.setdefault(span.document_id, []).append(span)
    return list(sessions.items())


def _session_of_turns(sessions: Sequence[tuple[str, list[Span]]]) -> dict[str, int]:
    return {str(s.external_id): index for index, (_, spans) in enumerate(sessions) for s in spans}


def _truncate(messages: list[dict[str, Any]], cap: int, counter: TokenCounter) -> list[dict[str, Any]]:
    """The ``none`` policy's context: oldest observations dropped until it fits the cap."""
    head, body = messages[:2], messages[2:]
    total = counter.messages(messages)
    while body and total > cap:
        total -= counter.message(body.pop(0))
    return head + body


def _compactor(
    conn: psycopg.Connection[Any],
    policy: str,
    rebuild: str,
    cap: int,
    namespace: str,
    tid: str,
    embedder: Embedder,
    chat: ChatModel | None = None,
) -> Compactor:
    counter = TokenCounter()
    return Compactor(
        conn,
        chat=chat or ExtractiveChat(counter),
        namespace=namespace,
        policy=policy,
        rebuild=rebuild,
        context_window=cap,
        backstop_fraction=1.0,
        gates=Gates(min_round=1, min_prompt_tokens=cap // 2, probe_period=1),
        keep_last=max(2, cap // KEEP_LAST_TOKENS),
        summary_max_tokens=cap // 4,
        pack_budget=50,
        pack_token_budget=cap // 4,
        trajectory_id=tid,
        embedder=embedder,
        counter=counter,
    )


def _present(
    question: EvalQuestion,
    context: str,
    turn_text: Mapping[str, str],
    note_turns: Mapping[str, set[str]],
) -> set[str]:
    """Gold turns whose text, or a citation of whose archived note, is in ``context``."""
    found = {gold for gold in question.gold if gold in turn_text and turn_text[gold] in context}
    for ref in set(re.findall(r"\[#([0-9a-f]{4,32})\]", context)):
        for note_id, turns in note_turns.items():
            if note_id.replace("-", "").startswith(ref):
                found |= turns & set(question.gold)
    return found


def replay_conversation(
    conn: psycopg.Connection[Any],
    namespace: str,
    spans: Sequence[Span],
    questions: Sequence[EvalQuestion],
    config: CompactionEvalConfig,
    embedder: Embedder,
    tallies: dict[tuple[int, str], _Tally],
    progress: Callable[[int], None] | None = None,
    chat: ChatModel | None = None,
) -> None:
    """Replay one conversation under every cap and system, adding to ``tallies``.

    With ``chat`` the model is the summariser and rubric judge, and answers every question.
    """
    sessions = _sessions(spans)[: config.limit_sessions]
    spans = [s for _, session_spans in sessions for s in session_spans]
    cut = {str(s.external_id) for s in spans} if config.limit_sessions else None
    questions = [q for q in questions if cut is None or cut.issuperset(q.gold)]
    turn_session = _session_of_turns(sessions)
    turn_text = {str(s.external_id): s.text for s in spans}
    by_text: dict[str, set[str]] = {}
    for s in spans:
        by_text.setdefault(s.text, set()).add(str(s.external_id))
    answerable = [q for q in questions if not q.adversarial and any(g in turn_session for g in q.gold)]
    asked: dict[int, list[EvalQuestion]] = {}
    for q in answerable[: config.limit_questions]:
        when = len(sessions) - 1 if config.ask == "end" else max(turn_session[g] for g in q.gold if g in turn_session)
        asked.setdefault(when, []).append(q)
    pack_namespace = f"{namespace}.pack"
    counter = TokenCounter()
    if PACK_ONLY in config.systems:
        # Renders and fits packs exactly as the compactor's recall does (no model call).
        reader = _compactor(conn, "none", "pgmem", max(config.caps), pack_namespace, "pack", embedder)
        for index, (_, session_spans) in enumerate(sessions):
            ingest(conn, session_spans, namespace=pack_namespace, embedder=embedder)
            for cap in config.caps:
                for q in asked.get(index, []):
                    packed = pack(
                        conn, q.question, namespace=pack_namespace, budget=50, token_budget=cap, embedder=embedder
                    ).items
                    items = reader.fit(packed, cap)
                    context = reader.render(items)
                    tally = tallies.setdefault((cap, PACK_ONLY), _Tally())
                    hit = {g for g in q.gold if any(i.external_id == g for i in items)}
                    tally.recalls.append(len(hit) / len(q.gold))
                    tally.tokens.append(counter.text(context))
                    if chat is not None:
                        evidence = {"role": "user", "content": f"Evidence from memory:\n{context}"}
                        tally.answer(chat, [*_opening(), evidence], q)
                    if progress:
                        progress(1)
    for cap in config.caps:
        for label, policy, rebuild in SYSTEMS:
            if label not in config.systems:
                continue
            system = (label, policy, rebuild)
            _replay_system(conn, namespace, sessions, asked, cap, system, embedder, turn_text, by_text, tallies, chat)
            if progress:
                progress(sum(len(v) for v in asked.values()))


def _replay_system(
    conn: psycopg.Connection[Any],
    namespace: str,
    sessions: Sequence[tuple[str, list[Span]]],
    asked: Mapping[int, list[EvalQuestion]],
    cap: int,
    system: tuple[str, str, str],
    embedder: Embedder,
    turn_text: Mapping[str, str],
    by_text: Mapping[str, set[str]],
    tallies: dict[tuple[int, str], _Tally],
    chat: ChatModel | None,
) -> None:
    label, policy, rebuild = system
    tid = f"{namespace}/{label}/{cap}"
    compactor = _compactor(conn, policy, rebuild, cap, namespace, tid, embedder, chat)
    counter = compactor.counter
    tally = tallies.setdefault((cap, label), _Tally())
    # Decision points are session ends; mid-session the policy's threshold (or the
    # backstop) still acts. Stepping only there asks a real model no probe that the
    # session's end would not (the stand-in's C1 is "a session closed" anyway).
    threshold = compactor.fixed_threshold if policy in THRESHOLD_POLICIES else compactor.backstop
    live = _opening()
    appended: list[dict[str, Any]] = []
    note_turns: dict[str, set[str]] = {}
    seen_before: dict[str, int] = {}  # gold turn -> compactions done when it was seen
    for index, (document_id, session_spans) in enumerate(sessions):
        session = document_id.rsplit("/", 1)[-1].replace("_", " ")
        arriving: list[tuple[str | None, dict[str, Any]]] = [
            (None, {"role": "user", "content": f"[{session} begins: {session_spans[0].source_ts}]"}),
            *((str(s.external_id), {"role": "user", "content": s.text}) for s in session_spans),
            (None, {"role": "user", "content": f"[session {index + 1} ended]"}),
        ]
        for turn, message in arriving:
            if turn is not None:
                seen_before[turn] = compactor.compactions
            live.append(message)
            appended.append(message)
            before = compactor.compactions
            if (turn is None and _END.match(message["content"])) or counter.messages(live) >= threshold:
                live = compactor.step(live)
            if policy == "none":
                live = _truncate(live, cap, counter)
            if compactor.compactions > before and compactor.last_event is not None:
                for archived in compactor.last_event.archived:
                    for note_id in archived.note_ids:
                        note_turns[note_id] = set(by_text.get(archived.text, set()))
        for q in asked.get(index, []):
            context = "\n".join(render_message(m) for m in live)
            tokens = counter.messages(live)
            agent = list(live)
            if rebuild == "pgmem" and cap - tokens > 50:
                recalled = compactor.recall(query=q.question, limit=50, token_budget=cap - tokens)
                extra = compactor.render(recalled)
                context += "\n" + extra
                tokens += counter.text(extra)
                agent.append({"role": "user", "content": f"Recalled from memory for the question:\n{extra}"})
            if chat is not None:
                tally.answer(chat, agent, q)
            found = _present(q, context, turn_text, note_turns)
            gold = [g for g in q.gold if g in turn_text]
            tally.recalls.append(len(found) / len(gold))
            tally.tokens.append(tokens)
            for g in gold:
                compacted_since = compactor.compactions - seen_before[g]
                bucket = f"before compaction {min(seen_before[g] + 1, 4)}" if compacted_since else "not yet compacted"
                bucket = bucket.replace("compaction 4", "compaction 4+")
                tally.drift.setdefault(bucket, []).append(1.0 if g in found else 0.0)
    tally.compactions += compactor.compactions
    if rebuild == "pgmem":
        _check_archive(conn, namespace, tid, appended, live, tally)


def _opening() -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": TASK}]


def _check_archive(
    conn: psycopg.Connection[Any],
    namespace: str,
    tid: str,
    appended: Sequence[dict[str, Any]],
    live: Sequence[dict[str, Any]],
    tally: _Tally,
) -> None:
    """Every dropped message is recovered by id with its exact text (all of them, not a sample)."""
    dropped = {message_digest(m): m for m in appended if m not in live and render_message(m).strip()}
    ids_of: dict[str, list[str]] = {}
    for row in fetch(conn, archived_lookup(namespace, tid, list(dropped))):
        if row["note_id"] is not None:
            ids_of.setdefault(str(row["digest"]), []).append(str(row["note_id"]))
    tally.dropped += len(dropped)
    for digest, message in dropped.items():
        notes = fetch_notes(conn, namespace, ids_of.get(digest, []))
        if " ".join(n.text for n in notes).split() == render_message(message).split():
            tally.recovered += 1


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def run_compaction_eval(
    conn: psycopg.Connection[Any],
    corpus: EvalCorpus,
    embedder: Embedder,
    config: CompactionEvalConfig,
    progress: Callable[[int], None] | None = None,
    chat: ChatModel | None = None,
) -> dict[str, Any]:
    """Replay every conversation of ``corpus``; return the report (rows, drift, archive).

    ``chat`` replaces the stand-in: it judges, summarises and answers every question; the
    rows then also carry ``answer_containment`` and ``answer_f1`` (percent) and the report
    every answer under ``answers``.
    """
    if corpus.name != "locomo":
        raise ConfigurationError(
            f"eval-compaction replays LoCoMo conversations; dataset must be locomo, got {corpus.name!r}"
        )
    namespaces = list(corpus.spans)[: config.limit_conversations]
    tallies: dict[tuple[int, str], _Tally] = {}
    for namespace in namespaces:
        questions = [q for q in corpus.questions if q.namespace == namespace]
        replay_conversation(
            conn, namespace, corpus.spans[namespace], questions, config, embedder, tallies, progress, chat
        )
    rows: list[dict[str, Any]] = []
    for (cap, label), t in sorted(tallies.items(), key=lambda kv: (kv[0][0], _order(kv[0][1]))):
        row: dict[str, Any] = {
            "cap": cap,
            "policy": label,
            "evidence_recall": round(100.0 * _mean(t.recalls), 2),
            "context_tokens": round(_mean(t.tokens), 1),
        }
        if chat is not None:
            row["answer_containment"] = round(100.0 * _mean(t.containment), 2)
            row["answer_f1"] = round(100.0 * _mean(t.f1), 2)
        rows.append(row)
    return {
        "dataset": corpus.name,
        "conversations": len(namespaces),
        "questions": max((len(t.recalls) for t in tallies.values()), default=0),
        "caps": list(config.caps),
        "ask": config.ask,
        "embedding_model": embedder.name,
        "stand_in": None if chat is not None else ExtractiveChat.model,
        "chat_model": chat.model if chat is not None else None,
        "rows": rows,
        "compactions": {f"{label}@{cap}": t.compactions for (cap, label), t in tallies.items() if label != PACK_ONLY},
        "drift": {
            f"{label}@{cap}": {bucket: round(100.0 * _mean(v), 2) for bucket, v in sorted(t.drift.items())}
            for (cap, label), t in tallies.items()
            if t.drift
        },
        "drift_counts": {
            f"{label}@{cap}": {bucket: len(v) for bucket, v in sorted(t.drift.items())}
            for (cap, label), t in tallies.items()
            if t.drift
        },
        "archive": {
            f"{label}@{cap}": {"dropped": t.dropped, "recovered": t.recovered}
            for (cap, label), t in tallies.items()
            if label.endswith("+pgmem")
        },
        "answers": {f"{label}@{cap}": t.answers for (cap, label), t in tallies.items() if t.answers},
    }


def _order(label: str) -> int:
    labels = [*(label for label, _, _ in SYSTEMS), PACK_ONLY]
    return labels.index(label) if label in labels else len(labels)


def render_compaction_markdown(report: Mapping[str, Any]) -> str:
    """The Markdown report: the recall-vs-tokens table, drift, archive completeness."""
    lines = [
        f"# Compaction on {report['dataset']} ({report['conversations']} conversations, "
        f"{report['questions']} questions per system and cap)",
        "",
        (
            f"The summariser and rubric probe are a deterministic stand-in (`{report['stand_in']}`), not a language "
            "model: extractive sentences citing their note ids; C1 = a session closed, C2 = the summary fits, "
            "C3 = new turns since the last compaction, N1 = never."
            if report.get("stand_in")
            else f"The model `{report['chat_model']}` is rubric judge and summariser, and answers every question "
            "from the live context it has then (pgmem: plus one recall with the question)."
        ),
        "",
        "Questions are asked "
        + (
            "at the conversation's end."
            if report.get("ask") == "end"
            else "at the first session end after all their gold turns were seen."
        ),
        "",
    ]
    answered = bool(report["rows"]) and "answer_f1" in report["rows"][0]
    header = "| cap | policy | evidence-in-context recall (%) | mean context tokens | compactions |"
    lines += [
        header + (" answer containment (%) | answer token F1 (%) |" if answered else ""),
        "|---:|---|---:|---:|---:|" + ("---:|---:|" if answered else ""),
    ]
    for row in report["rows"]:
        compactions = report["compactions"].get(f"{row['policy']}@{row['cap']}", "")
        line = (
            f"| {row['cap']} | {row['policy']} | {row['evidence_recall']:.1f} | {row['context_tokens']:.0f} "
            f"| {compactions} |"
        )
        if answered:
            line += f" {row['answer_containment']:.1f} | {row['answer_f1']:.1f} |"
        lines.append(line)
    lines += ["", "## Recursive drift (recall of gold turns by when they were first seen)", ""]
    buckets = sorted({b for d in report["drift"].values() for b in d})
    lines += ["| system | " + " | ".join(buckets) + " |", "|---|" + "---:|" * len(buckets)]
    for system, drift in report["drift"].items():
        counts = report["drift_counts"][system]
        cells = [f"{drift[b]:.1f} ({counts[b]})" if b in drift else "" for b in buckets]
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    lines += ["", "## Archive completeness (every dropped message looked up by id)", ""]
    lines += ["| system | dropped | recovered |", "|---|---:|---:|"]
    for system, archive in report["archive"].items():
        lines.append(f"| {system} | {archive['dropped']} | {archive['recovered']} |")
    if report.get("answers"):
        lines += ["", "## Answers (the first three per system)", ""]
        lines += ["| system | question | gold | answer |", "|---|---|---|---|"]
        for system, answers in report["answers"].items():
            for a in answers[:3]:
                cells = [a["question"], " / ".join(map(str, a["gold"])), a["answer"]]
                lines.append(f"| {system} | " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """``text`` as one Markdown table cell (pipes escaped, on one line, at most 120 characters)."""
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= 120 else flat[:119] + "…"


def write_compaction_outputs(report: Mapping[str, Any], out: Path) -> list[Path]:
    """``compaction.json`` (the rows), ``compaction-report.json``, ``compaction.md`` and the plot."""
    from pgmem.eval.plots import plot_compaction

    out.mkdir(parents=True, exist_ok=True)
    rows = out / "compaction.json"
    rows.write_text(json.dumps(report["rows"], indent=2) + "\n", encoding="utf-8")
    full = out / "compaction-report.json"
    full.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    markdown = out / "compaction.md"
    markdown.write_text(render_compaction_markdown(report), encoding="utf-8")
    return [rows, full, markdown, plot_compaction(report["rows"], out / "compaction.png")]
