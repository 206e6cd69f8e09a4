"""Recorded MiniLM vectors: what the bundled embedder returned before its query path changed.

``tests/golden_embeddings/minilm.npz`` holds, for :data:`SENTENCES`, the rows of one
batched ``embed()`` call and of one ``embed([text])`` call per text, written by::

    PYTHONPATH=/path/to/old/tree python tests/minilm_golden.py --record

(issue 12: the single-question path and its session options must not move the vectors
of ingested text or of questions).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from golden_util import recorder_main

RECORDED = Path(__file__).parent / "golden_embeddings" / "minilm.npz"
SENTENCES = (
    "Who founded Acme Corp in Paris in 2021?",
    "When did Caroline go to the LGBTQ support group?",
    "What did Melanie paint recently?",
    "Would Jon still pursue his dance studio if he had not lost his job?",
    "The northern ferry terminal shut on 4 March after storm damage to the pier.",
    "Ferry passengers were moved to the southern quay for the repairs.",
    "Engineers inspected the pier pilings during the following week, and the council voted an"
    " emergency budget of 2.4 million euros to rebuild the damaged section before the summer season.",
    "",
    "ok",
    "Café naïve über straße: données à Paris, 東京 and Zürich.",
    "x-ray v2.3.1 release checklist — owner: team@acme.example (ticket #4711)",
    "I was, you know, at the thing yesterday... it was great!!! :)",
    " ".join(["long"] * 300),
    "What is the capital of France?",
    "Paris is the capital of France.",
    "How many hours did the review of the parser take on Friday afternoon?",
)


def record() -> None:
    from pgmem.embeddings import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    batched = embedder.embed(list(SENTENCES))
    single = np.stack([embedder.embed([text])[0] for text in SENTENCES])
    RECORDED.parent.mkdir(exist_ok=True)
    np.savez_compressed(RECORDED, batched=batched, single=single)
    print(f"wrote {RECORDED}")


if __name__ == "__main__":
    recorder_main(__doc__.splitlines()[0], "tests/golden_embeddings/minilm.npz", record)
