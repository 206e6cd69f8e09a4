"""The compaction controller: decide when (policy), archive, summarise, rebuild, log.

The decisions are written once, as generators of steps (:mod:`pgmem.db.steps`): SQL
statements, CPU work, and :class:`~pgmem.db.steps.Call` steps for what lies outside the
connection (a chat completion, :class:`Ask`; an evidence pack, :class:`PackFor`).
:class:`Compactor` drives them on a ``psycopg.Connection`` with a :class:`ChatModel`;
:class:`AsyncCompactor` awaits them on a ``psycopg.AsyncConnection`` with an
:class:`AsyncChatModel`. Both make the same decisions and write the same rows.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import psycopg
from psycopg.types.json import Jsonb

from pgmem import aio
from pgmem.api import MAX_QUERY_CHARS, pack
from pgmem.compaction import policy as rules
from pgmem.compaction.archive import (
    ArchivedMessage,
    RecalledNote,
    archive_steps,
    fetch_notes_steps,
    render_message,
    summary_span,
)
from pgmem.compaction.chat import AsyncChatModel, ChatModel, ChatResult
from pgmem.compaction.summary import (
    check_citations,
    flag_uncited,
    open_questions,
    reask_message,
    ref_of,
    short_refs,
    summary_prompt,
)
from pgmem.compaction.tokens import TokenCounter
from pgmem.db.errors import database_errors
from pgmem.db.queries import Statement
from pgmem.db.steps import Call, Compute, Execute, Steps, drive, drive_async
from pgmem.embeddings import Embedder, resolve_embedder
from pgmem.errors import ConfigurationError, InputError
from pgmem.ingestion.writer import write as write_spans
from pgmem.types import Pack, PackItem
from pgmem.validate import check_namespace, whole

POLICIES = ("rubric", "fixed", "delete_all", "keep_last", "free_tool", "none")
REBUILDS = ("pgmem", "reset")
REASONS = ("rubric", "backstop", "fixed", "tool", "manual")
Policy = Literal["rubric", "fixed", "delete_all", "keep_last", "free_tool", "none"]
Rebuild = Literal["pgmem", "reset"]
Message = dict[str, Any]
_Note = TypeVar("_Note", RecalledNote, PackItem)
_T = TypeVar("_T")
_Conn = TypeVar("_Conn")
_Chat = TypeVar("_Chat")

#: Share of the backstop at which the fixed-threshold baselines compact by default.
DEFAULT_FIXED_SHARE = 0.8
#: Completion cap of a probe answer (one JSON object of short quotes).
PROBE_MAX_TOKENS = 400
CONTINUE_TEXT = "Continue the task from where the summary leaves off."
COMPACT_TOOL_NAME = "compact_context"

RECALL_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "recall",
        "description": (
            "Reopen archived messages of this conversation: by the note ids or [#ref] citations shown in the "
            "summary and evidence, or by a search query."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "note_ids": {"type": "array", "items": {"type": "string"}, "description": "note ids or refs"},
                "query": {"type": "string", "description": "what to search the archive for"},
            },
        },
    },
}

COMPACT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": COMPACT_TOOL_NAME,
        "description": "Summarise the conversation so far and continue from the summary, freeing context.",
        "parameters": {"type": "object", "properties": {}},
    },
}


@dataclass
class CompactionEvent:
    """What the last probe or compaction did (the row also written to the telemetry table)."""

    kind: str
    fired: bool
    reason: str | None
    generation: int
    round: int
    prompt_tokens: int
    tokens_after: int | None = None
    archived: tuple[ArchivedMessage, ...] = ()
    summary: str | None = None
    summary_note_id: str | None = None
    citations: Mapping[str, Any] = field(default_factory=dict)
    verdict: rules.Verdict | None = None
    hints: tuple[str, ...] = ()


def _split_prefix(messages: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """Leading system/developer messages and the first user message (the task), and the rest."""
    prefix: list[Message] = []
    index = 0
    while index < len(messages) and messages[index].get("role") in ("system", "developer"):
        prefix.append(messages[index])
        index += 1
    if index < len(messages) and messages[index].get("role") == "user":
        prefix.append(messages[index])
        index += 1
    return prefix, list(messages[index:])


def _split_keep(body: Sequence[Message], keep: int) -> tuple[list[Message], list[Message]]:
    """Drop all but the last ``keep`` messages, never keeping a tool result without its call."""
    cut = max(0, len(body) - keep)
    while 0 < cut < len(body) and body[cut].get("role") == "tool":
        cut -= 1
    return list(body[:cut]), list(body[cut:])


@dataclass(frozen=True)
class Ask:
    """A :class:`~pgmem.db.steps.Call` request: one chat completion (the result is a ChatResult)."""

    messages: list[Message]
    max_tokens: int | None


@dataclass(frozen=True)
class PackFor:
    """A :class:`~pgmem.db.steps.Call` request: an evidence pack of the namespace (the result is a Pack)."""

    question: str
    budget: int
    token_budget: int | None


class _Controller(Generic[_Conn, _Chat]):
    """The compactor's state and decisions as steps; :class:`Compactor` and
    :class:`AsyncCompactor` drive them (see :class:`Compactor` for the parameters)."""

    def __init__(
        self,
        conn: _Conn,
        chat: _Chat,
        namespace: str = "default",
        *,
        policy: Policy | str = "rubric",
        rebuild: Rebuild | str = "pgmem",
        context_window: int = 128_000,
        backstop_fraction: float = rules.DEFAULT_BACKSTOP_FRACTION,
        rubric: str | rules.Rubric = "search",
        gates: rules.Gates | None = None,
        fixed_threshold: int | None = None,
        keep_last: int = 6,
        summary_max_tokens: int = 1024,
        pack_budget: int = 8,
        pack_token_budget: int | None = None,
        trajectory_id: str | None = None,
        embedder: Embedder | str | None = None,
        counter: TokenCounter | None = None,
        log: bool = True,
    ) -> None:
        if policy not in POLICIES:
            raise ConfigurationError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        if rebuild not in REBUILDS:
            raise ConfigurationError(f"rebuild must be one of {', '.join(REBUILDS)}, got {rebuild!r}")
        if isinstance(rubric, str):
            if rubric not in rules.RUBRICS:
                raise ConfigurationError(
                    f"rubric must be one of {', '.join(rules.RUBRICS)} or a Rubric, got {rubric!r}"
                )
            rubric = rules.RUBRICS[rubric]
        whole("context_window", context_window, 1)
        whole("keep_last", keep_last, 1)
        whole("summary_max_tokens", summary_max_tokens, 16)
        whole("pack_budget", pack_budget, 1)
        if pack_token_budget is not None:
            whole("pack_token_budget", pack_token_budget, 1)
        self.gates = gates or rules.Gates()
        self.backstop = rules.validate_config(self.gates, context_window, backstop_fraction)
        self.fixed_threshold = (
            fixed_threshold if fixed_threshold is not None else int(DEFAULT_FIXED_SHARE * self.backstop)
        )
        whole("fixed_threshold", self.fixed_threshold, 1)
        if self.fixed_threshold > self.backstop:
            raise ConfigurationError(
                f"fixed_threshold={self.fixed_threshold} can never fire before the backstop at {self.backstop} tokens"
            )
        if trajectory_id is not None and not (0 < len(trajectory_id) <= 200):
            raise ConfigurationError(f"trajectory_id must be 1-200 characters, got {trajectory_id!r}")
        self.conn = conn
        self.chat = chat
        self.namespace = check_namespace(namespace)
        self.policy = str(policy)
        self.rebuild = str(rebuild)
        self.context_window = context_window
        self.rubric = rubric
        self.keep_last = keep_last
        self.summary_max_tokens = summary_max_tokens
        self.pack_budget = pack_budget
        self.pack_token_budget = pack_token_budget
        self.trajectory_id = trajectory_id or uuid.uuid4().hex
        self.embedder = embedder
        self.counter = counter or TokenCounter()
        self.log = log
        self.generation = 0
        self.round = 0
        self.compactions = 0
        self.last_event: CompactionEvent | None = None
        self._generation_rounds = 0
        self._since_probe: int | None = None
        self._summary: str | None = None
        self._synthetic: list[Message] = []
        self._refs: dict[str, str] = {}

        self._model: Embedder | None = None

    # -- pure ---------------------------------------------------------------------------

    @property
    def tools(self) -> list[dict[str, Any]]:
        """Tool definitions to offer the agent: ``recall`` (pgmem rebuild), ``compact_context`` (free_tool)."""
        tools = [RECALL_TOOL] if self.rebuild == "pgmem" else []
        if self.policy == "free_tool":
            tools.append(COMPACT_TOOL)
        return tools

    def render(self, notes: Sequence[RecalledNote | PackItem]) -> str:
        """Notes as the agent sees them: ``[#ref] (family) text``, one per line."""
        return "\n".join(self._line(n) for n in notes)

    def _line(self, note: RecalledNote | PackItem) -> str:
        return f"[#{ref_of(note.note_id, self._refs)}] ({note.family}) {note.text}"

    def fit(self, notes: Sequence[_Note], token_budget: int | None) -> list[_Note]:
        """The leading ``notes`` whose rendered lines fit ``token_budget`` tokens.

        A pack's token budget counts note text only; the ref and family shown with each
        note cost tokens too, and the live context must stay within what was asked.
        """
        if token_budget is None:
            return list(notes)
        kept: list[_Note] = []
        used = 0
        for note in notes:
            used += self.counter.text(self._line(note))
            if used > token_budget:
                break
            kept.append(note)
        return kept

    def _asked_to_compact(self, live: Sequence[Message]) -> bool:
        for message in reversed(live):
            if message.get("role") == "assistant":
                calls = message.get("tool_calls") or []
                return any((c.get("function") or {}).get("name") == COMPACT_TOOL_NAME for c in calls)
        return False

    def _pack_arguments(self, request: PackFor) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "budget": request.budget,
            "token_budget": request.token_budget,
            "embedder": self.embedder,
        }

    # -- steps --------------------------------------------------------------------------

    def _embedder(self) -> Steps[Embedder]:
        """The namespace's embedding model, resolved once (it may load a model: CPU work)."""
        if self._model is None:
            self._model = yield Compute(resolve_embedder, (self.embedder,))
        return self._model

    def _step(self, messages: Sequence[Mapping[str, Any]]) -> Steps[list[Message]]:
        live = [dict(m) for m in messages]
        self.round += 1
        self._generation_rounds += 1
        if self._since_probe is not None:
            self._since_probe += 1
        if self.policy == "none":
            return live
        tokens = self.counter.messages(live)
        if rules.backstop_fires(tokens, self.backstop):
            return (yield from self._compact(live, "backstop", tokens))
        if self.policy in ("fixed", "delete_all", "keep_last"):
            if rules.fixed_fires(tokens, self.fixed_threshold):
                return (yield from self._compact(live, "fixed", tokens))
            return live
        if self.policy == "free_tool":
            return (yield from self._compact(live, "tool", tokens)) if self._asked_to_compact(live) else live
        return (yield from self._probe(live, tokens))

    def _compact_now(self, messages: Sequence[Mapping[str, Any]], reason: str) -> Steps[list[Message]]:
        if reason not in REASONS:
            raise InputError(f"reason must be one of {', '.join(REASONS)}, got {reason!r}")
        live = [dict(m) for m in messages]
        return (yield from self._compact(live, reason, self.counter.messages(live)))

    def _recall(
        self, note_ids: Sequence[str] | None, query: str | None, limit: int, token_budget: int | None
    ) -> Steps[list[RecalledNote]]:
        if not note_ids and not query:
            raise InputError("recall needs note_ids or a query")
        whole("limit", limit, 1, 50)
        identifiers = [self._refs.get(i.strip("[]#"), i) for i in note_ids or ()]
        found = yield from fetch_notes_steps(self.namespace, identifiers)
        if query:
            evidence: Pack = yield Call(PackFor(query, limit, token_budget))
            seen = {n.note_id for n in found}
            found += self.fit(
                [
                    RecalledNote(i.note_id, i.text, i.family, i.context, {})
                    for i in evidence.items
                    if i.note_id not in seen
                ],
                token_budget,
            )
        return found

    def _tool_call(self, tool_call: Mapping[str, Any]) -> Steps[Message]:
        function = tool_call.get("function") or {}
        name = function.get("name")
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError as exc:
            raise InputError(f"tool call arguments must be JSON, got {function.get('arguments')!r}") from exc
        if name == "recall":
            notes = yield from self._recall(arguments.get("note_ids"), arguments.get("query"), 5, None)
            content = self.render(notes) or "No archived note matches."
        elif name == COMPACT_TOOL_NAME:
            content = "The context will be compacted after this round."
        else:
            raise InputError(f"tool {name!r} is not a pgmem.compaction tool (recall, {COMPACT_TOOL_NAME})")
        return {"role": "tool", "tool_call_id": tool_call.get("id", ""), "content": content}

    def _probe(self, live: list[Message], tokens: int) -> Steps[list[Message]]:
        gate = rules.check_gates(
            self.gates,
            rules.GateState(
                round=self._generation_rounds,
                prompt_tokens=tokens,
                rounds_since_probe=self._since_probe,
                compactions=self.compactions,
            ),
        )
        if not gate.open:
            return live
        probe = {"role": "user", "content": rules.build_probe(self.rubric)}
        result: ChatResult = yield Call(Ask([*live, probe], PROBE_MAX_TOKENS))
        trajectory = "\n".join(render_message(m) for m in live)
        verdict = rules.parse_verdict(result.text, self.rubric, trajectory)
        self._since_probe = 0
        yield from self._write(
            "probe",
            fired=verdict.fire,
            reason="rubric" if verdict.fire else None,
            gates=gate.values,
            prompt_tokens=tokens,
            raw_verdict=result.text,
            predicates=verdict.to_dict(),
            probe=result,
        )
        self.last_event = CompactionEvent(
            "probe", verdict.fire, None, self.generation, self.round, tokens, verdict=verdict, hints=verdict.hints
        )
        if verdict.fire:
            return (yield from self._compact(live, "rubric", tokens, gates=gate.values))
        if verdict.hints:
            return [*live, *({"role": "user", "content": hint} for hint in verdict.hints)]
        return live

    # -- compaction ---------------------------------------------------------------------

    def _compact(
        self, live: list[Message], reason: str, tokens_before: int, gates: Mapping[str, Any] | None = None
    ) -> Steps[list[Message]]:
        started = time.perf_counter()
        prefix, body = _split_prefix(live)
        task = next((render_message(m) for m in prefix if m.get("role") == "user"), "")
        dropped, kept = _split_keep(body, self.keep_last) if self.policy == "keep_last" else (body, [])
        real = [(i, m) for i, m in enumerate(dropped) if m not in self._synthetic]
        archived: list[ArchivedMessage] = []
        if self.rebuild == "pgmem" and real:
            model = yield from self._embedder()
            archived, _ = yield from archive_steps(
                real,
                namespace=self.namespace,
                embedder=model,
                trajectory_id=self.trajectory_id,
                generation=self.generation,
                round_number=self.round,
                all_messages=live,
            )
        summary = note_id = None
        citations: dict[str, Any] = {}
        usage = (0, 0)
        chat_model: str | None = None
        if self.policy not in ("delete_all", "keep_last"):
            summary, citations, usage, chat_model = yield from self._summarise(task, real, archived)
        if summary is not None and self.rebuild == "pgmem":
            note_id = yield from self._write_summary(summary, citations, reason)
        evidence = (yield from self._evidence(task, summary)) if self.rebuild == "pgmem" else None
        rebuilt = self._rebuild(prefix, summary, evidence, kept)
        tokens_after = self.counter.messages(rebuilt)
        yield from self._write(
            "compaction",
            fired=True,
            reason=reason,
            # A compaction the rubric did not decide records the limits that did.
            gates=gates or {"backstop": self.backstop, "fixed_threshold": self.fixed_threshold},
            prompt_tokens=tokens_before,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            summary_usage=usage,
            model=chat_model,
            latency_ms=(time.perf_counter() - started) * 1000.0,
            archived=sum(len(a.note_ids) for a in archived),
            summary_note_id=note_id,
            citations=citations,
        )
        self.last_event = CompactionEvent(
            "compaction",
            True,
            reason,
            self.generation,
            self.round,
            tokens_before,
            tokens_after=tokens_after,
            archived=tuple(archived),
            summary=summary,
            summary_note_id=note_id,
            citations=citations,
        )
        self.generation += 1
        self.compactions += 1
        self._generation_rounds = 0
        self._since_probe = None
        self._summary = summary or self._summary
        self._synthetic = [m for m in rebuilt if m not in prefix and m not in kept]
        return rebuilt

    def _summarise(
        self, task: str, dropped: Sequence[tuple[int, Message]], archived: Sequence[ArchivedMessage]
    ) -> Steps[tuple[str, dict[str, Any], tuple[int, int], str]]:
        """The summary of the dropped messages; cited and checked when they were archived."""
        if self.rebuild == "pgmem":
            ids = [n for a in archived for n in a.note_ids]
            refs = short_refs(ids)
            self._refs.update(refs)
            by_position = {a.position: a for a in archived}
            excerpt: list[tuple[str | None, str]] = [
                (ref_of(by_position[p].note_ids[0], refs), f"{m.get('role')}: {by_position[p].text}")
                for p, m in dropped
                if p in by_position
            ]
        else:
            refs = {}
            excerpt = [(None, f"{m.get('role')}: {render_message(m)}") for _, m in dropped]
        prompt = summary_prompt(task, excerpt, self.summary_max_tokens, previous=self._summary)
        first: ChatResult = yield Call(Ask(prompt, self.summary_max_tokens))
        results = [first]
        text = first.text.strip()
        citations: dict[str, Any] = {}
        if refs:
            check = check_citations(text, refs)
            rejected = list(check.invalid)
            if not check.ok:
                again: ChatResult = yield Call(
                    Ask(
                        [*prompt, {"role": "assistant", "content": text}, reask_message(check)], self.summary_max_tokens
                    )
                )
                results.append(again)
                text = again.text.strip()
                check = check_citations(text, refs)
            text, flagged = flag_uncited(text, refs)
            citations = {
                "cited": list(check.cited),
                "rejected": rejected,
                "rejected_after_reask": list(check.invalid),
                "reasked": len(results) > 1,
                "flagged": flagged,
            }
        usage = (sum(r.prompt_tokens for r in results), sum(r.completion_tokens for r in results))
        return text, citations, usage, results[-1].model

    def _write_summary(self, summary: str, citations: Mapping[str, Any], reason: str) -> Steps[str | None]:
        if not summary.strip():
            return None
        span = summary_span(
            summary,
            trajectory_id=self.trajectory_id,
            generation=self.generation,
            cites=citations.get("cited", []),
            flagged=int(citations.get("flagged", 0)),
            reason=reason,
        )
        model = yield from self._embedder()
        written = yield from write_spans([span], namespace=self.namespace, embedder=model)
        return written.note_ids[0]

    def _evidence(self, task: str, summary: str | None) -> Steps[str]:
        question = " ".join([task, *open_questions(summary or "")]).strip() or (summary or "")
        if not question.strip():
            return ""
        evidence: Pack = yield Call(PackFor(question[:MAX_QUERY_CHARS], self.pack_budget, self.pack_token_budget))
        return self.render(self.fit(evidence.items, self.pack_token_budget))

    def _rebuild(
        self, prefix: list[Message], summary: str | None, evidence: str | None, kept: list[Message]
    ) -> list[Message]:
        """[system, task, summary with citations, evidence pack, continue] (parts as they apply)."""
        rebuilt = list(prefix)
        if summary is not None:
            note = (
                " (citations [#ref] name archived notes; reopen them with the recall tool)"
                if evidence is not None
                else ""
            )
            rebuilt.append(
                {
                    "role": "assistant",
                    "content": f"Summary of the work so far, generation {self.generation}{note}:\n{summary}",
                }
            )
        if evidence:
            rebuilt.append(
                {"role": "user", "content": f"Evidence from memory for the task and open questions:\n{evidence}"}
            )
        if kept:
            rebuilt.extend(kept)
        else:
            rebuilt.append({"role": "user", "content": CONTINUE_TEXT})
        return rebuilt

    # -- telemetry ----------------------------------------------------------------------

    def _write(
        self,
        kind: str,
        *,
        fired: bool,
        reason: str | None,
        gates: Mapping[str, Any],
        prompt_tokens: int,
        raw_verdict: str | None = None,
        predicates: Mapping[str, Any] | None = None,
        probe: ChatResult | None = None,
        tokens_before: int | None = None,
        tokens_after: int | None = None,
        summary_usage: tuple[int, int] = (0, 0),
        model: str | None = None,
        latency_ms: float | None = None,
        archived: int = 0,
        summary_note_id: str | None = None,
        citations: Mapping[str, Any] | None = None,
    ) -> Steps[None]:
        if not self.log:
            return
        row = {
            "namespace": self.namespace,
            "trajectory_id": self.trajectory_id,
            "generation": self.generation,
            "round": self.round,
            "kind": kind,
            "policy": self.policy,
            "rebuild": self.rebuild,
            "reason": reason,
            "fired": fired,
            "gates": Jsonb(dict(gates)),
            "prompt_tokens": prompt_tokens,
            "raw_verdict": raw_verdict,
            "predicates": Jsonb(dict(predicates)) if predicates is not None else None,
            "tokens_before": tokens_before,
            "tokens_after": tokens_after,
            "probe_prompt_tokens": probe.prompt_tokens if probe else 0,
            "probe_completion_tokens": probe.completion_tokens if probe else 0,
            "summary_prompt_tokens": summary_usage[0],
            "summary_completion_tokens": summary_usage[1],
            "latency_ms": latency_ms if latency_ms is not None else (probe.latency_ms if probe else 0.0),
            "model": model or (probe.model if probe else getattr(self.chat, "model", None)),
            "archived": archived,
            "summary_note_id": summary_note_id,
            "citations": Jsonb(dict(citations)) if citations else None,
        }
        with database_errors("log compaction telemetry"):
            yield Execute(Statement("log compaction telemetry", "log_compaction_event", row))


class Compactor(_Controller[psycopg.Connection[Any], ChatModel]):
    """Keeps an agent's live context within budget; archives and explains every compaction.

    Call :meth:`step` once per agent round with the whole live context; it returns the
    context to send next (the same list, a rebuilt one, or the same plus a hint).

    Parameters
    ----------
    conn : psycopg.Connection
        A connection to a migrated database. Archive, summary note and telemetry are
        written in its transaction (savepoints if one is open); pgmem never commits,
        rolls back or closes it. On an autocommit connection each write is durable at once.
    chat : ChatModel
        Answers probes and writes summaries (e.g. :class:`OpenAIChat`).
    namespace : str
        Where archived notes, summaries and telemetry go (default ``"default"``).
    policy : {"rubric", "fixed", "delete_all", "keep_last", "free_tool", "none"}
        When to compact. ``rubric``: gates, then an evidence-checked rubric probe;
        ``fixed``: at ``fixed_threshold`` tokens, with a summary; ``delete_all``: at the
        threshold, drop everything after the task; ``keep_last``: at the threshold, keep
        the last ``keep_last`` messages; ``free_tool``: when the model calls the
        ``compact_context`` tool; ``none``: never. All but ``none`` also compact at the
        backstop.
    rebuild : {"pgmem", "reset"}
        How. ``pgmem``: archive dropped messages as notes, cited summary, evidence pack
        from :func:`pgmem.pack`; ``reset``: a plain summary, nothing archived.
    context_window : int
        The model's context window in tokens, >= 1.
    backstop_fraction : float
        The backstop, as a share of ``context_window``, in (0, 1] (default 0.3).
    rubric : {"search", "reasoning"} or Rubric
        The rubric of the ``rubric`` policy (default ``search``).
    gates : Gates, optional
        Probe gates (default: ``Gates()``). A ``min_prompt_tokens`` at or above the
        backstop is refused with :class:`pgmem.ConfigurationError`.
    fixed_threshold : int, optional
        Tokens at which the threshold baselines compact (default 0.8 of the backstop).
    keep_last : int
        Messages ``keep_last`` keeps, >= 1 (default 6).
    summary_max_tokens : int
        Cap on summary tokens, >= 16 (default 1024).
    pack_budget, pack_token_budget : int, optional
        Notes (default 8) and tokens (default none) of the rebuild's evidence pack.
    trajectory_id : str, optional
        Names this trajectory in notes and telemetry (default: a new UUID).
    embedder : Embedder or str, optional
        The namespace's embedding model (see :func:`pgmem.ingest`).
    counter : TokenCounter, optional
        Counts prompt tokens (default: the documented estimate).
    log : bool
        Write telemetry rows to ``pgmem.compaction_log`` (default True).
    """

    def step(self, messages: Sequence[Mapping[str, Any]]) -> list[Message]:
        """One agent round: maybe probe, maybe compact; return the live context to send next."""
        return self._drive(self._step(messages))

    def compact(self, messages: Sequence[Mapping[str, Any]], reason: str = "manual") -> list[Message]:
        """Compact now, whatever the policy says; return the rebuilt live context."""
        return self._drive(self._compact_now(messages, reason))

    def recall(
        self,
        note_ids: Sequence[str] | None = None,
        query: str | None = None,
        limit: int = 5,
        token_budget: int | None = None,
    ) -> list[RecalledNote]:
        """Reopen archived notes by id (full or a ``[#ref]`` citation) and/or by query.

        A query is answered with :func:`pgmem.pack` over the namespace: at most ``limit``
        notes (1-50) and, if given, ``token_budget`` tokens.
        """
        return self._drive(self._recall(note_ids, query, limit, token_budget))

    def handle_tool_call(self, tool_call: Mapping[str, Any]) -> Message:
        """The ``tool`` message answering one of :attr:`tools`' calls (``recall`` or ``compact_context``)."""
        return self._drive(self._tool_call(tool_call))

    def _drive(self, steps: Steps[_T]) -> _T:
        return drive(self.conn, steps, self._handle)

    def _handle(self, request: Ask | PackFor) -> ChatResult | Pack:
        if isinstance(request, Ask):
            return self.chat.complete(request.messages, max_tokens=request.max_tokens)
        return pack(self.conn, request.question, **self._pack_arguments(request))


class AsyncCompactor(_Controller[psycopg.AsyncConnection[Any], AsyncChatModel]):
    """:class:`Compactor` for asyncio agents: the same parameters, decisions and
    telemetry rows, on a ``psycopg.AsyncConnection`` (any row factory, inside the
    caller's transaction or not) with an :class:`AsyncChatModel` (e.g.
    :class:`~pgmem.compaction.AsyncOpenAIChat`). :meth:`step`, :meth:`compact`,
    :meth:`recall` and :meth:`handle_tool_call` are awaited; :attr:`tools`,
    :meth:`render` and :meth:`fit` are the same plain members. Embedding runs in a
    worker thread, so the event loop keeps serving other tasks meanwhile.
    """

    async def step(self, messages: Sequence[Mapping[str, Any]]) -> list[Message]:
        """One agent round: maybe probe, maybe compact; return the live context to send next."""
        return await self._drive(self._step(messages))

    async def compact(self, messages: Sequence[Mapping[str, Any]], reason: str = "manual") -> list[Message]:
        """Compact now, whatever the policy says; return the rebuilt live context."""
        return await self._drive(self._compact_now(messages, reason))

    async def recall(
        self,
        note_ids: Sequence[str] | None = None,
        query: str | None = None,
        limit: int = 5,
        token_budget: int | None = None,
    ) -> list[RecalledNote]:
        """Reopen archived notes by id and/or by query (:meth:`Compactor.recall`, awaited)."""
        return await self._drive(self._recall(note_ids, query, limit, token_budget))

    async def handle_tool_call(self, tool_call: Mapping[str, Any]) -> Message:
        """The ``tool`` message answering one of :attr:`tools`' calls (``recall`` or ``compact_context``)."""
        return await self._drive(self._tool_call(tool_call))

    async def _drive(self, steps: Steps[_T]) -> _T:
        return await drive_async(self.conn, steps, self._handle)

    async def _handle(self, request: Ask | PackFor) -> ChatResult | Pack:
        if isinstance(request, Ask):
            return await self.chat.complete(request.messages, max_tokens=request.max_tokens)
        return await aio.pack(self.conn, request.question, **self._pack_arguments(request))
