"""Run the code blocks of a docs page, so a copy-paste example cannot rot."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent.parent / "docs"

_BLOCK = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def code_blocks(page: str, lang: str) -> list[str]:
    """The fenced code blocks of ``docs/<page>`` written in ``lang``, in page order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    blocks = [m["body"] for m in _BLOCK.finditer(text) if m["lang"] == lang]
    if not blocks:
        raise AssertionError(f"docs/{page} has no {lang} code block")
    return blocks


def run_python_blocks(page: str) -> dict[str, Any]:
    """Execute every Python block of ``docs/<page>`` in order, in one fresh module namespace.

    Returns the namespace, so a test can assert on what the example built.
    """
    namespace: dict[str, Any] = {"__name__": "__docs_example__"}
    for index, block in enumerate(code_blocks(page, "python")):
        exec(compile(block, f"docs/{page} (python block {index + 1})", "exec"), namespace)
    return namespace
