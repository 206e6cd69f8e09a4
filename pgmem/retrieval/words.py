"""The words of a pool's notes, read once per pool (the family alarm and the packer share them).

A note's words are the ``\\w+`` runs of its lower-cased text; its *content* words are
those that are not stop words. The family alarm compares every note's content words
with the question's and, for the notes it reads, with every other note's (word
Jaccard); the packer compares all the words of the notes it reaches with those already
packed. Words are compared as 64-bit hashes: stage one returns each note's distinct
word hashes, computed by the database when the note was written
(``pgmem.word_hashes_v1``, migration 0016); notes without them (written before, or
text it leaves out) are tokenised and hashed here the same way, once per process (a memo).
Shared words are counted by sorting hashes (no BLAS call, no pairwise Python loop).

Pure numpy, :mod:`hashlib` and :mod:`re`: no I/O.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import sys
import threading
from collections.abc import Collection, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from pgmem.ingestion.entities import STOPWORDS

_WORD = re.compile(r"\w+", re.UNICODE)
# For ASCII text, \w is [A-Za-z0-9_]: mapping every other byte to a space and splitting
# finds the same runs as the regex, about four times faster (bytes.translate is a plain
# table lookup; str.translate is not).
_ASCII_NON_WORD_TO_SPACE = bytes(code if chr(code).isalnum() or chr(code) == "_" else 32 for code in range(128)) + (
    b" " * 128
)
# The same keeping NUL, which joins new texts tokenised in one batch.
_ASCII_NON_WORD_TO_SPACE_KEEP_NUL = b"\x00" + _ASCII_NON_WORD_TO_SPACE[1:]
#: A question of fewer content words than this is restated by any note on its topic: a
#: note's restatement is scaled by ``min(1, question words / _RESTATED_WORDS)``.
_RESTATED_WORDS = 5
#: A query asks a question when it ends with "?" or starts with one of these words.
_ASKING_WORDS = frozenset((
    "what", "when", "where", "who", "whom", "whose", "which", "why", "how", "is", "are", "was", "were", "am",
    "do", "does", "did", "can", "could", "should", "would", "will", "shall", "may", "might", "must", "has",
    "have", "had",
))  # fmt: skip
#: Word hashes travel as little-endian int64 (pgmem.word_hashes_v1's bytea).
_HASH: Final = np.dtype("<i8")
_HASH_BYTES: Final = 8
#: A hash's sign bit marks a stop word: content words are the hashes >= 0.
_LOW_BITS: Final = (1 << 63) - 1
_SIGN_BIT: Final = np.int64(-(1 << 63))
_NATIVE_LITTLE_ENDIAN = sys.byteorder == "little"
_Array = npt.NDArray[np.float64]
_Ints = npt.NDArray[np.int64]


def word_list(text: str) -> list[str]:
    """The ``\\w+`` runs of ``text`` lower-cased, in order (repeats kept)."""
    lowered = text.lower()
    if lowered.isascii():
        return lowered.encode("ascii").translate(_ASCII_NON_WORD_TO_SPACE).decode("ascii").split()
    return _WORD.findall(lowered)


def is_question(text: str) -> bool:
    """Whether ``text`` asks a question: it ends with "?" or its first word asks (what, did, ...)."""
    words = word_list(text)
    return text.rstrip().endswith("?") or (bool(words) and words[0] in _ASKING_WORDS)


def content_words(text: str) -> frozenset[str]:
    """Lower-cased ``\\w+`` words of ``text`` without stop words."""
    return frozenset(word_list(text)).difference(STOPWORDS)


def word_hash(word: str) -> int:
    """``word``'s 64-bit hash as ``pgmem.word_hashes_v1`` stores it: the first 8 bytes of the
    SHA-256 of its UTF-8 as a little-endian int64, negative for a stop word, else >= 0."""
    return _hashed([word])[0]


def _hashed(words: Sequence[str]) -> list[int]:
    """:func:`word_hash` of each of ``words`` (the bit operations done once for all)."""
    sha256 = hashlib.sha256
    digests = b"".join([sha256(word.encode("utf-8")).digest()[:_HASH_BYTES] for word in words])
    values = np.frombuffer(digests, dtype=_HASH) & _LOW_BITS
    stop = np.fromiter(map(STOPWORDS.__contains__, words), dtype=bool, count=len(words))
    values[stop] |= _SIGN_BIT  # v | 2**63 as an int64 is v - 2**63
    hashes: list[int] = values.tolist()
    return hashes


def _packed(hashes: Sequence[int]) -> bytes:
    """Hashes as the bytes of little-endian int64s."""
    return np.array(hashes, dtype=_HASH).tobytes()


def _unpacked(data: bytes) -> Sequence[int]:
    """The int64s of :func:`_packed` bytes (a view of them where the machine's int64 is little-endian)."""
    if _NATIVE_LITTLE_ENDIAN:
        return memoryview(data).cast("q")
    return np.frombuffer(data, dtype=_HASH).tolist()  # type: ignore[no-any-return]


#: The characters of the texts ``pgmem.word_hashes_v1`` hashes (its regular expression's
#: class): ASCII, and punctuation, symbols and emoji that are no word characters and that
#: lower-casing leaves alone, so its ``[a-z0-9_]+`` split finds :func:`word_list`'s words.
DATABASE_HASHED_CHARACTERS: Final = (
    r"\u0001-\u007f\u00a0-\u00a9\u00ab-\u00b1\u00b4\u00b6-\u00b8\u00bb\u00bf\u00d7\u00f7\u2000-\u206f"
    r"\u20a0-\u20c0\u2190-\u21ff\u2300-\u23ff\u2500-\u2775\u2794-\u27bf\ufe00-\ufe0f\U0001f300-\U0001f6ff"
    r"\U0001f900-\U0001faff"
)
_DATABASE_HASHED = re.compile(f"[{DATABASE_HASHED_CHARACTERS}]*")


def hashed_by_database(text: str) -> bool:
    """Whether ``pgmem.word_hashes_v1`` stores ``text``'s hashes (else NULL: the read path tokenises it)."""
    return _DATABASE_HASHED.fullmatch(text) is not None


def word_hashes(text: str) -> bytes:
    """The distinct words of ``text`` hashed (:func:`word_hash`), in byte order, packed as
    little-endian int64s: what ``pgmem.word_hashes_v1`` stores when :func:`hashed_by_database`."""
    return _packed(_hashed(sorted(set(word_list(text)))))


def _word_lists(texts: Sequence[str]) -> list[list[str]]:
    """``word_list`` of each text; the ASCII ones lower-cased and mapped in one batch."""
    plain = [text for text in texts if text.isascii()]
    joined = "\x00".join(plain)
    if len(plain) < 2 or joined.count("\x00") != len(plain) - 1:
        return [word_list(text) for text in texts]
    # ASCII lower-casing is per character: the joined text splits back into each text's words.
    parts = joined.lower().encode("ascii").translate(_ASCII_NON_WORD_TO_SPACE_KEEP_NUL).decode("ascii").split("\x00")
    if len(plain) == len(texts):
        return list(map(str.split, parts))
    batch = iter(parts)
    return [next(batch).split() if text.isascii() else word_list(text) for text in texts]


class _WordHashes:
    """A process-wide memo: a note text -> its :func:`word_hashes`, for the notes stage one
    returns without them (written before migration 0016, or text the database does not hash).

    Notes are immutable and the same notes come back in pool after pool, so each such
    text is tokenised and hashed once per process, not once per pack; each word is
    hashed once (a vocabulary). When the memo holds more than ``max_characters`` of text
    or ``max_words`` words, both are cleared.
    """

    def __init__(self, max_characters: int = 8_000_000, max_words: int = 1 << 20) -> None:
        self.max_characters = max_characters
        self.max_words = max_words
        self._lock = threading.Lock()
        self._vocabulary: dict[str, int] = {}
        self._texts: dict[str, bytes] = {}
        self._characters = 0

    def reset_lock(self) -> None:
        """A fresh lock (in a forked child, where another thread may have held the parent's)."""
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every text and word (the next lookups tokenise again)."""
        with self._lock:
            self._forget()

    def _forget(self) -> None:
        self._texts.clear()
        self._vocabulary = {}
        self._characters = 0

    def lookup(self, texts: Sequence[str], known: Sequence[bytes | None] | None = None) -> list[bytes]:
        """Each text's word hashes: ``known[i]`` where it is not None, else the memo's."""
        with self._lock:
            if self._characters > self.max_characters or len(self._vocabulary) > self.max_words:
                self._forget()
            memo = self._texts
            if known is None:
                found = list(map(memo.get, texts))
            else:
                found = [memo.get(text) if given is None else given for text, given in zip(texts, known, strict=True)]
            missing = [index for index, hashes in enumerate(found) if hashes is None]
            if missing:
                self._learn(list(dict.fromkeys(texts[index] for index in missing)))
                for index in missing:
                    found[index] = memo[texts[index]]
        return found  # type: ignore[return-value]  # every text is known now

    def hashes(self, words: Collection[str]) -> list[int]:
        """The hashes of ``words``, in their order."""
        with self._lock:
            vocabulary = self._vocabulary
            new = [word for word in words if word not in vocabulary]
            if new:
                vocabulary.update(zip(new, _hashed(new), strict=True))
            return [vocabulary[word] for word in words]

    def _learn(self, texts: list[str]) -> None:
        """Tokenise and hash ``texts`` (new, distinct)."""
        vocabulary = self._vocabulary
        distinct = list(map(set, _word_lists(texts)))
        every = list(itertools.chain.from_iterable(distinct))
        new = [word for word in set(every) if word not in vocabulary]
        if new:
            vocabulary.update(zip(new, _hashed(new), strict=True))
        # One array for all the texts, sliced per text; set order: the read path only asks
        # which hashes are equal (word_hashes, what the database stores, is sorted by word).
        packed = _packed(list(map(vocabulary.__getitem__, every)))
        bounds = [_HASH_BYTES * end for end in itertools.accumulate(map(len, distinct), initial=0)]
        self._texts.update(zip(texts, map(packed.__getitem__, map(slice, bounds[:-1], bounds[1:])), strict=True))
        self._characters += sum(map(len, texts))


_WORD_HASHES = _WordHashes()
os.register_at_fork(after_in_child=_WORD_HASHES.reset_lock)


class PoolWords:
    """Each note's content words (as hashes) and, on demand, all its words.

    Parameters
    ----------
    texts : sequence of str
        The pool's note texts, in candidate order.
    question : str
        The question the pool was searched for (the echo is measured against it).
    hashes : sequence of bytes or None, optional
        Each note's word hashes as stage one returns them (:func:`word_hashes`), None
        for a note without them; the notes without are tokenised (memoised per process).
    """

    def __init__(self, texts: Sequence[str], question: str = "", hashes: Sequence[bytes | None] | None = None) -> None:
        self.size = len(texts)
        self._texts = texts
        self._sets: dict[int, frozenset[str]] = {}
        self._id_sets: dict[int, frozenset[int]] = {}
        self._question = content_words(question)
        self._asks = is_question(question)
        if hashes is not None and None not in hashes:
            self._per_note: Sequence[bytes] = hashes  # type: ignore[assignment]  # no None in it
        else:
            self._per_note = _WORD_HASHES.lookup(texts, hashes)
        self._asked = _WORD_HASHES.hashes(self._question) if self._question else []
        every = np.frombuffer(b"".join(self._per_note), dtype=_HASH)
        lengths = np.fromiter(map(len, self._per_note), dtype=np.int64, count=self.size) // _HASH_BYTES
        content = every >= 0
        # One entry per (note, distinct content word), in note order.
        self.content_ids: _Ints = every[content]
        self.content_rows: _Ints = np.arange(self.size, dtype=np.int64).repeat(lengths)[content]
        self.content_sizes: _Array = np.bincount(self.content_rows, minlength=self.size).astype(np.float64)
        self._word_order: tuple[_Ints, _Ints] | None = None

    def words(self, row: int) -> frozenset[str]:
        """All the words of note ``row`` (stop words included)."""
        found = self._sets.get(row)
        if found is None:
            found = self._sets[row] = frozenset(word_list(self._texts[row]))
        return found

    def word_ids(self, row: int) -> frozenset[int]:
        """All the words of note ``row`` as hashes: equal where :meth:`words` are, without tokenising."""
        found = self._id_sets.get(row)
        if found is None:
            found = self._id_sets[row] = frozenset(_unpacked(self._per_note[row]))
        return found

    def holding(self, words: Sequence[str]) -> npt.NDArray[np.bool_]:
        """Which notes hold each of ``words`` (content words): a notes × words matrix,
        read from the notes' hashes (no tokenising)."""
        held = np.zeros((self.size, len(words)), dtype=bool)
        if not words or not len(self.content_ids):
            return held
        rows, columns = self._holders(_WORD_HASHES.hashes(words))
        held[rows, columns] = True
        return held

    def echo(self) -> _Array:
        """Share of the question's content words each note contains (0s for a question without any)."""
        if not self._question:
            return np.zeros(self.size)
        # Each note holds a content word once: a note's entries found are its words asked.
        rows, _ = self._holders(sorted(set(self._asked)))
        return np.bincount(rows, minlength=self.size) / len(self._question)

    def _by_word(self) -> tuple[_Ints, _Ints]:
        """The content entries ordered by word hash (any order within a word's run), and
        their hashes in that order: sorted once per pool, for the near-duplicates, the echo
        and the coverage's holders alike."""
        if self._word_order is None:
            order = self.content_ids.argsort()
            self._word_order = (order, self.content_ids[order])
        return self._word_order

    def _holders(self, hashes: Sequence[int]) -> tuple[_Ints, _Ints]:
        """The (note, index in ``hashes``) of every content entry holding one of ``hashes``
        (distinct): a binary search of each hash in the pool's sorted words."""
        order, word = self._by_word()
        wanted = np.array(hashes, dtype=_HASH)
        first = np.searchsorted(word, wanted, side="left")
        counts = np.searchsorted(word, wanted, side="right") - first
        total = int(counts.sum())
        # The runs' positions laid end to end: run j covers first[j] .. first[j] + counts[j].
        position = np.arange(total) + (first - (counts.cumsum() - counts)).repeat(counts)
        return self.content_rows[order[position]], np.arange(len(wanted)).repeat(counts)

    def restatement(self, echo: _Array | None = None) -> _Array:
        """How nearly each note restates the question: ``echo ** 4 * precision * min(1, q / 5)``.

        ``echo`` is :meth:`echo` (the share of the question's ``q`` content words the note
        holds; pass it if already computed), ``precision`` the share of the note's own
        content words that are the question's. A note that repeats the whole question and
        adds a short claim scores high; a note holding part of the question (a sentence
        the question was built from) or a long note that mentions every question word
        among many others scores low; so does every note for a short question. 0 for every
        note when the query asks no question (:func:`is_question`): a note holding all of a
        few keywords is their best match, not an echo.
        """
        if not self._asks:
            return np.zeros(self.size)
        if echo is None:
            echo = self.echo()
        precision = echo * len(self._question) / np.maximum(self.content_sizes, 1.0)
        restated: _Array = echo**4 * np.minimum(precision, 1.0) * min(1.0, len(self._question) / _RESTATED_WORDS)
        return restated

    def nearest_duplicate(self, documents: Sequence[str], rows: Sequence[int] | _Ints | None = None) -> _Array:
        """For each note (or each of ``rows``), the highest content-word Jaccard with a note of another document."""
        return self.nearest_duplicates(documents, rows)[0]

    def nearest_duplicates(
        self,
        documents: Sequence[str] | _Ints,
        rows: Sequence[int] | _Ints | None = None,
        families: Sequence[str] | _Ints | None = None,
    ) -> tuple[_Array, _Array]:
        """For each note (or each of ``rows``), the highest content-word Jaccard with a note of
        another document, and the same among notes of its own family (zeros without ``families``).

        Parameters
        ----------
        documents : sequence of str, or array of int
            Each note's document (or a code per document), in candidate order.
        rows : sequence of int, optional
            The notes to measure, in the order wanted (default: all, in order). Only
            these rows of the pool-wide matrix are computed.
        families : sequence of str, or array of int, optional
            Each note's family (or a code per family), in candidate order.
        """
        count = self.size
        if rows is None:
            rows = np.arange(count)
        if count < 2:
            return np.zeros(len(rows)), np.zeros(len(rows))
        wanted = np.zeros(count, dtype=bool)
        wanted[rows] = True
        picked = np.flatnonzero(wanted)
        position = wanted.cumsum() - 1
        shared = self._shared(picked, wanted, position)
        document = label_codes(documents)
        # Notes of one document (the note itself included) are not near-duplicates: 0.
        np.copyto(shared, 0.0, where=document[picked, None] == document[None, :])
        # A note without content words shares none: counted as one word, its unions are
        # >= 1 and its Jaccards the 0 they are (other unions are >= either note's size).
        union = np.maximum(self.content_sizes[picked], 1.0)[:, None] + self.content_sizes[None, :]
        union -= shared
        jaccard = np.divide(shared, union, out=shared)
        nearest: _Array = jaccard.max(axis=1)[position[rows]]
        if families is None:
            return nearest, np.zeros(len(rows))
        family = label_codes(families)
        np.copyto(jaccard, 0.0, where=family[picked, None] != family[None, :])
        within: _Array = jaccard.max(axis=1)[position[rows]]
        return nearest, within

    def _shared(self, picked: _Ints, wanted: npt.NDArray[np.bool_], position: _Ints) -> _Array:
        """``shared[p, j]``: how many content words note ``picked[p]`` and note j have in common
        (float64: the counts are small integers, exact, and the Jaccards divide them)."""
        count = self.size
        # Runs of one word (any order within a run: every count below is symmetric).
        order, word = self._by_word()
        row = self.content_rows[order]
        bounds = np.flatnonzero(np.concatenate(([True], word[1:] != word[:-1], [True])))
        starts = bounds[:-1]
        lengths = bounds[1:] - starts
        common = _common_runs(lengths)
        paired = lengths >= 2
        bits = None
        if len(common):
            # A word in many notes (a speaker's name in every turn) would make k*k pairs:
            # such words are counted as bits instead, popcount of each pair's AND.
            bit = np.zeros(len(lengths))
            bit[common] = _POWERS[: len(common)]
            masks = np.bincount(row, weights=bit.repeat(lengths), minlength=count).astype(np.uint64)
            bits = _popcount(masks[picked, None] & masks[None, :])
            paired[common] = False
        # Every entry of a paired word in a picked note pairs with the other entries of its run.
        run_length = np.where(paired, lengths, 0).repeat(lengths)
        run_start = starts.repeat(lengths)
        entries = np.flatnonzero((run_length > 0) & wanted[row])
        partners = run_length[entries] - 1
        total = int(partners.sum())
        if total:
            # The partners of entry e are the run's entries but e, laid end to end.
            offset = np.arange(total) - (partners.cumsum() - partners).repeat(partners)
            offset += offset >= (entries - run_start[entries]).repeat(partners)
            partner = run_start[entries].repeat(partners) + offset
            cells = (position[row[entries]] * count).repeat(partners) + row[partner]
            shared = np.bincount(cells, minlength=len(picked) * count).reshape(len(picked), count)
        else:
            shared = np.zeros((len(picked), count), dtype=np.int64)
        if bits is not None:
            shared += bits
        counts: _Array = shared.astype(np.float64)
        return counts


def label_codes(labels: Sequence[str] | _Ints, names: Sequence[str] | None = None) -> _Ints:
    """Each label as a small integer (equal labels, equal codes): its index in ``names``, or
    (without ``names``) a new code per distinct label in order of appearance; an integer
    array is taken as codes already."""
    if isinstance(labels, np.ndarray):
        return labels
    number = {label: index for index, label in enumerate(dict.fromkeys(labels) if names is None else names)}
    return np.fromiter(map(number.__getitem__, labels), dtype=np.int64, count=len(labels))


#: A word in at least this many notes of a pool is counted as a bit, not as pairs.
_COMMON_WORD_NOTES = 16
#: How many such words fit one float64-exact bitmask.
_COMMON_WORDS_MAX = 52
_POWERS = 2.0 ** np.arange(_COMMON_WORDS_MAX)  # exact: distinct powers below 2**52 add without rounding


def _common_runs(lengths: _Ints) -> _Ints:
    """The runs (words) counted as bits: the longest, of at least _COMMON_WORD_NOTES notes."""
    if not hasattr(np, "bitwise_count"):  # numpy < 2: pairs only
        return np.zeros(0, dtype=np.int64)
    candidates = np.flatnonzero(lengths >= _COMMON_WORD_NOTES)
    if len(candidates) > _COMMON_WORDS_MAX:
        candidates = np.sort(candidates[np.argsort(-lengths[candidates], kind="stable")[:_COMMON_WORDS_MAX]])
    return candidates


def _popcount(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint8]:
    counted: npt.NDArray[np.uint8] = np.bitwise_count(values)
    return counted
