"""Token counts of exactly what a chat call sends: a model tokenizer, or a documented estimate.

With a ``tokenizer.json`` (the Hugging Face file shipped with every open model) the
count is exact for the message text; without one it is the estimate pgmem's packer
uses for budgets (:func:`pgmem.retrieval.packer.count_tokens`: every run of word
characters and every punctuation character is a piece of ``ceil(len / 4)`` tokens).

Chat templates wrap each message in a few tokens of their own (ChatML:
``<|im_start|>role\\n`` … ``<|im_end|>\\n``; OpenAI documents 3 per message plus 3
priming the reply). Both counters add :data:`MESSAGE_OVERHEAD` per message and
:data:`REPLY_PRIMING` per request, so the two agree on what a message costs beyond
its text; pass other values for a template that differs.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pgmem.errors import ConfigurationError
from pgmem.retrieval.packer import count_tokens

#: Template tokens around each message (role marker and delimiters).
MESSAGE_OVERHEAD = 4
#: Template tokens that open the assistant reply.
REPLY_PRIMING = 3

Message = Mapping[str, Any]


def message_text(message: Message) -> str:
    """Everything of one message that reaches the model: role, name, content, tool calls."""
    parts = [str(message.get("role", ""))]
    if message.get("name"):
        parts.append(str(message["name"]))
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, Sequence):
        # Multi-part content: only text parts are tokens; other parts are kept as JSON.
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            else:
                parts.append(json.dumps(part, sort_keys=True, default=str))
    if message.get("tool_calls"):
        parts.append(json.dumps(message["tool_calls"], sort_keys=True, default=str))
    if message.get("tool_call_id"):
        parts.append(str(message["tool_call_id"]))
    return "\n".join(parts)


class TokenCounter:
    """Counts the tokens of chat messages.

    Parameters
    ----------
    tokenizer_json : str or Path, optional
        A Hugging Face ``tokenizer.json`` of the chat model; exact text counts. Without
        it the documented estimate is used.
    message_overhead : int
        Template tokens added per message (default :data:`MESSAGE_OVERHEAD`).
    reply_priming : int
        Template tokens added per request (default :data:`REPLY_PRIMING`).
    """

    def __init__(
        self,
        tokenizer_json: str | Path | None = None,
        *,
        message_overhead: int = MESSAGE_OVERHEAD,
        reply_priming: int = REPLY_PRIMING,
    ) -> None:
        if message_overhead < 0 or reply_priming < 0:
            raise ConfigurationError(
                f"message_overhead and reply_priming must be >= 0, got {message_overhead} and {reply_priming}"
            )
        self.message_overhead = message_overhead
        self.reply_priming = reply_priming
        self.exact = tokenizer_json is not None
        self._count_text: Callable[[str], int] = count_tokens
        if tokenizer_json is not None:
            path = Path(tokenizer_json)
            if not path.is_file():
                raise ConfigurationError(f"tokenizer_json must be an existing tokenizer.json file, got {str(path)!r}")
            from tokenizers import Tokenizer

            try:
                tokenizer = Tokenizer.from_file(str(path))
            except Exception as exc:  # tokenizers raises a bare Exception on a bad file
                raise ConfigurationError(f"tokenizer_json {str(path)!r} is not a readable tokenizer: {exc}") from exc
            # Counting must see the whole text: a shipped truncation or padding would cap or pad it.
            tokenizer.no_truncation()
            tokenizer.no_padding()
            self._count_text = lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)
        # An agent loop recounts the same messages every round: count each text once.
        self._count_text = functools.lru_cache(maxsize=65_536)(self._count_text)

    def text(self, text: str) -> int:
        """Tokens of plain text (no template overhead)."""
        return self._count_text(text) if text else 0

    def message(self, message: Message) -> int:
        """Tokens of one message, template overhead included."""
        return self._count_text(message_text(message)) + self.message_overhead

    def messages(self, messages: Sequence[Message]) -> int:
        """Tokens of a whole request: every message plus the reply priming."""
        return sum(self.message(m) for m in messages) + self.reply_priming
