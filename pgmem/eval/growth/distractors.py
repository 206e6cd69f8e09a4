"""Distractor notes that pad a namespace of an evaluation corpus: real text, not noise.

Distractors (:func:`distractor_spans`) are whole spans of the corpus's other
namespaces first (another conversation's turns, another question's paragraphs), then,
when those run out, recombinations of those spans' texts (the first half of one span's
words and the second half of another's, as ``benchmarks/bench_lexical.py`` does) —
not of the padded namespace's own texts, whose halves would be near-duplicates of its
gold notes, unless the corpus has no other namespace (MultiHop-RAG). Their
families and timestamps are drawn from the padded namespace's own spans, weighted by how
many spans each family has, so padding changes the store's size but not its family
structure. A distractor is its own one-span document, marked ``{"distractor": true}`` in
its metadata, with an ``external_id`` that no gold id can equal.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from pgmem.errors import ConfigurationError, InputError
from pgmem.eval.datasets import EvalCorpus
from pgmem.ingest.spans import MAX_SPAN_BYTES
from pgmem.types import Span

#: Recombinations in a row that may come out as duplicates before the corpus is judged
#: too small to give more distinct distractors.
MAX_DUPLICATE_DRAWS = 10_000
#: Document and external ids of distractors start with this (or with more dashes in
#: front of it, when the corpus itself has ids that start so).
DISTRACTOR_TAG = "distractor"


def _free_tag(*corpora: EvalCorpus) -> str:
    """A tag that starts no document id, external id or gold id of the corpora."""
    taken = [
        value
        for corpus in corpora
        for spans in corpus.spans.values()
        for span in spans
        for value in (span.document_id, span.external_id or "")
    ]
    taken += [gold for corpus in corpora for question in corpus.questions for gold in question.gold]
    tag = DISTRACTOR_TAG
    while any(value.startswith(tag) for value in taken):
        tag = "-" + tag
    return tag


def _recombined(texts: Sequence[str], seen: set[str], rng: random.Random) -> Iterator[str]:
    """New texts: the first half of one text's words, the second half of another's."""
    words = [text.split() for text in texts]
    already = len(seen)
    failures = 0
    while True:
        first, second = rng.choice(words), rng.choice(words)
        text = " ".join(first[: max(1, len(first) // 2)] + second[len(second) // 2 :])
        if text in seen or len(text.encode("utf-8")) > MAX_SPAN_BYTES:
            failures += 1
            if failures > MAX_DUPLICATE_DRAWS:
                raise InputError(
                    f"count: {len(texts)} span texts recombine into no more than {len(seen) - already}"
                    " distinct recombined distractors; ask for fewer (a smaller growth factor)"
                )
            continue
        failures = 0
        seen.add(text)
        yield text


def _distractor_stream(corpus: EvalCorpus, namespace: str, seed: int, source: EvalCorpus) -> Iterator[Span]:
    own = corpus.spans[namespace]
    rng = random.Random(f"pgmem-growth:{seed}:{namespace}")
    family_counts: dict[str, int] = {}
    for span in own:
        family_counts[span.family] = family_counts.get(span.family, 0) + 1
    families = list(family_counts)
    weights = [family_counts[family] for family in families]
    timestamps = [span.source_ts for span in own]
    tag = _free_tag(corpus, source)
    others = [span for name in sorted(source.spans) if name != namespace for span in source.spans[name]]
    # Recombined from other namespaces' texts: halves of the namespace's own texts
    # would be near-duplicates of its gold notes (on one LoCoMo conversation at ×100,
    # hashing embedder, they halve recall), an attack rather than a bigger store. A
    # corpus of one namespace has nothing else to recombine.
    texts = [span.text for span in others] or [span.text for span in own]
    real_texts = {span.text for spans in (*source.spans.values(), own) for span in spans}
    rng.shuffle(others)

    def real() -> Iterator[tuple[str, Span | None]]:
        for span in others:
            yield span.text, span

    def recombined() -> Iterator[tuple[str, Span | None]]:
        for text in _recombined(texts, set(real_texts), rng):
            yield text, None

    number = 0
    for sources in (real(), recombined()):
        for text, origin in sources:
            # Drawn per distractor in a fixed order: the sequence does not depend on how
            # many are asked for, so a larger count extends a smaller one.
            family = rng.choices(families, weights)[0]
            source_ts = rng.choice(timestamps)
            metadata = {**(origin.metadata or {}), "distractor": True} if origin else {"distractor": True}
            yield Span(
                document_id=f"{tag}/{number}",
                text=text,
                start=0,
                end=len(text.encode("utf-8")),
                family=family,
                source_ts=source_ts,
                external_id=f"{tag}-{number}",
                role=origin.role if origin else None,
                confidence=origin.confidence if origin else None,
                context=origin.context if origin else None,
                metadata=metadata,
            )
            number += 1


def distractor_spans(
    corpus: EvalCorpus,
    namespace: str,
    count: int,
    seed: int = 0,
    *,
    source: EvalCorpus | None = None,
) -> list[Span]:
    """Distractor notes for one namespace of a corpus.

    Parameters
    ----------
    corpus : EvalCorpus
        The corpus whose namespace is padded; its gold ids are never reused.
    namespace : str
        A namespace of ``corpus`` (a key of ``corpus.spans``).
    count : int
        How many distractors (>= 0).
    seed : int
        Seed of every draw; the same arguments give the same spans, and a larger
        ``count`` extends the list a smaller one gives.
    source : EvalCorpus, optional
        Where distractor texts come from (default ``corpus``): pass the whole dataset
        when ``corpus`` is a part of it, so the other parts' real spans are used.

    Returns
    -------
    list of Span
        First the real spans of the source's other namespaces, shuffled, texts
        unchanged (role, confidence and context kept); then recombinations of those
        spans' texts (first half of one's words, second half of another's), distinct
        from every real text and from each other. Only when the source has no other
        namespace are the namespace's own texts recombined: then distractors hold
        halves of gold notes, a harder test than a larger store. Each is its own one-span
        document ``distractor/<n>`` (start 0, end its UTF-8 length) with external id
        ``distractor-<n>`` (more dashes in front when the corpus has ids starting
        ``distractor``), a family drawn from the namespace's own families weighted by
        their span counts, a ``source_ts`` drawn from the namespace's own spans, and
        ``"distractor": true`` in its metadata.

    Raises
    ------
    ConfigurationError
        ``namespace`` is not one of the corpus's, or ``count`` is negative.
    InputError
        The source's texts cannot give ``count`` distinct distractors.
    """
    if namespace not in corpus.spans or not corpus.spans[namespace]:
        raise ConfigurationError(
            f"namespace must be one of the corpus's namespaces with spans ({', '.join(sorted(corpus.spans))}),"
            f" got {namespace!r}"
        )
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ConfigurationError(f"count must be a whole number >= 0, got {count!r}")
    spans: list[Span] = []
    if count == 0:
        return spans
    for span in _distractor_stream(corpus, namespace, seed, source or corpus):
        spans.append(span)
        if len(spans) == count:
            break
    return spans
