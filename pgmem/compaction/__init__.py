"""Context compaction for agent loops: when to compact (policy), how (archive, cited
summary, rebuild) and what happened (telemetry in ``pgmem.compaction_events``)."""

from __future__ import annotations

from pgmem.compaction.archive import RecalledNote
from pgmem.compaction.chat import AsyncChatModel, AsyncOpenAIChat, ChatModel, ChatResult, OpenAIChat
from pgmem.compaction.controller import RECALL_TOOL, AsyncCompactor, CompactionEvent, Compactor
from pgmem.compaction.policy import Gates, Predicate, Rubric
from pgmem.compaction.tokens import TokenCounter

__all__ = [
    "RECALL_TOOL",
    "AsyncChatModel",
    "AsyncCompactor",
    "AsyncOpenAIChat",
    "ChatModel",
    "ChatResult",
    "CompactionEvent",
    "Compactor",
    "Gates",
    "OpenAIChat",
    "Predicate",
    "RecalledNote",
    "Rubric",
    "TokenCounter",
]
