"""Recall and latency as the store grows: the questions' corpus padded with distractors.

Each namespace of an :class:`~pgmem.eval.datasets.EvalCorpus` is padded, in place, to
``factor ×`` its size (×1, ×10, ×100 by default) with distractor notes, and every system
of :mod:`pgmem.eval.runner` is evaluated at each size.

* :mod:`~pgmem.eval.growth.distractors` — which texts pad a namespace;
* :mod:`~pgmem.eval.growth.run` — the padding and evaluation, factor by factor;
* :mod:`~pgmem.eval.growth.render` — the Markdown page and the written files;
* :mod:`~pgmem.eval.growth.command` — ``pgmem eval-growth``.
"""

from __future__ import annotations

from pgmem.eval.growth.command import growth_command
from pgmem.eval.growth.distractors import distractor_spans
from pgmem.eval.growth.render import render_growth_markdown, write_growth
from pgmem.eval.growth.run import DEFAULT_FACTORS, GrowthProgress, run_growth

__all__ = [
    "DEFAULT_FACTORS",
    "GrowthProgress",
    "distractor_spans",
    "growth_command",
    "render_growth_markdown",
    "run_growth",
    "write_growth",
]
