"""Context compaction for agent loops: when to compact (policy), how (archive, cited
summary, rebuild) and what happened (telemetry in ``pgmem.compaction_events``)."""

from __future__ import annotations

from pgmem.compaction.chat import ChatModel, ChatResult, OpenAIChat

__all__ = ["ChatModel", "ChatResult", "OpenAIChat"]
