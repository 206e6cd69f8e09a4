"""Pure splitting of plain text and Markdown into span pieces with exact byte offsets.

Everything here works on ``str`` character indices and converts to UTF-8 byte offsets
once, at the end, so a piece's ``start``/``end`` always select exactly its text from the
document's UTF-8 bytes, whatever the Unicode. No I/O, no database.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

from pgmem.errors import ConfigurationError
from pgmem.ingestion.spans import MAX_CONTEXT_CHARS, MAX_SPAN_BYTES
from pgmem.validate import whole

UNITS = ("sentence", "paragraph")

#: The smallest max_bytes: one UTF-8 character can take 4 bytes and is never cut.
MIN_MAX_BYTES = 4

#: Joins the trail of headings above a span into its context.
CONTEXT_SEPARATOR = " › "


@dataclass(frozen=True)
class SplitConfig:
    """How documents are cut into spans.

    Parameters
    ----------
    unit : {"paragraph", "sentence"}
        ``"paragraph"`` (default): one span per blank-line separated paragraph; a
        paragraph over ``max_bytes`` is cut at sentence boundaries into pieces of about
        ``target_bytes``. ``"sentence"``: paragraphs are cut into sentences, and
        consecutive sentences are merged while the merged span stays within
        ``target_bytes``.
    target_bytes : int
        Preferred span size in UTF-8 bytes when a paragraph must be cut or sentences
        merged; in ``[1, max_bytes]``, default 600.
    max_bytes : int
        Hard upper bound of a span in UTF-8 bytes; in ``[4, MAX_SPAN_BYTES]``, default 2000.
    """

    unit: str = "paragraph"
    target_bytes: int = 600
    max_bytes: int = 2000

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ConfigurationError(f"unit must be one of {', '.join(map(repr, UNITS))}, got {self.unit!r}")
        whole("max_bytes", self.max_bytes, MIN_MAX_BYTES, MAX_SPAN_BYTES)
        whole("target_bytes", self.target_bytes, 1, self.max_bytes)


@dataclass(frozen=True)
class Piece:
    """One piece of a document: its text, UTF-8 byte offsets and heading context."""

    text: str
    start: int
    end: int
    context: str | None = None


Range = tuple[int, int]


# A stretch of the document split as one unit: a paragraph or a code block.
@dataclass(frozen=True)
class _Block:
    start: int
    end: int
    kind: str  # "text", "markdown" or "code"
    context: str | None = None


def split_document(text: str, config: SplitConfig, *, markdown: bool = False) -> list[Piece]:
    """Cut a whole document into pieces, in document order.

    Parameters
    ----------
    text : str
        The document (``\\n`` or ``\\r\\n`` line endings).
    config : SplitConfig
        Unit and sizes.
    markdown : bool
        Read headings, fenced code blocks and lists as Markdown.

    Returns
    -------
    list of Piece
        Non-empty, whitespace-trimmed, non-overlapping pieces of at most
        ``config.max_bytes`` bytes, with byte offsets into ``text.encode("utf-8")``.
    """
    blocks = _markdown_blocks(text) if markdown else _text_blocks(text)
    ranges: list[tuple[int, int, str | None]] = []
    for block in blocks:
        ranges.extend((a, b, block.context) for a, b in _split_block(text, block, config))
    return _to_pieces(text, ranges)


def split_passage(text: str, config: SplitConfig) -> list[Piece]:
    """Cut one passage (e.g. a dialogue turn): whole if it fits ``max_bytes``, else in pieces.

    The passage is trimmed; an over-long passage is cut like an over-long paragraph
    (sentences, then white space, then characters). Offsets are bytes into ``text``.
    """
    return _to_pieces(text, [(a, b, None) for a, b in _prose(text, 0, len(text), config, "paragraph")])


def sentence_ranges(text: str, start: int = 0, end: int | None = None) -> list[Range]:
    """Character ranges of the sentences of ``text[start:end]``, trimmed, in order.

    A sentence ends at ``.``, ``!``, ``?`` or ``…`` (with closing quotes or brackets)
    followed by white space and a capital letter, digit, opening quote or bracket; and
    at the ideographic full stop and the fullwidth ``!`` and ``?``. Common abbreviations
    (``Dr.``, ``e.g.``, ``U.S.``, initials), decimals and ellipses do not end a sentence.
    """
    stop = len(text) if end is None else end
    cuts = [start]
    for match in _TERMINATOR.finditer(text, start, stop):
        if _ends_sentence(text, match, stop):
            cuts.append(match.end())
    cuts.append(stop)
    ranges = [_trim(text, a, b) for a, b in pairwise(cuts)]
    return [(a, b) for a, b in ranges if a < b]


# -- blocks -----------------------------------------------------------------------------

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")
_BREAK = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*")
_LIST_ITEM = re.compile(r"([ \t]*)(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


# (start, end of content) of each line in `text[pos:stop]`; content excludes `\r\n`.
def _lines(text: str, pos: int, stop: int | None = None) -> Iterator[tuple[int, int]]:
    size = len(text) if stop is None else stop
    while pos < size:
        newline = text.find("\n", pos, size)
        after = size if newline < 0 else newline + 1
        end = after if newline < 0 else newline
        if end > pos and text[end - 1] == "\r":
            end -= 1
        yield pos, end
        pos = after


def _first_line(text: str) -> int:
    # A byte order mark is not part of the text; spans start after it.
    return 1 if text.startswith("\ufeff") else 0


def _is_blank(text: str, start: int, end: int) -> bool:
    return start == end or text[start:end].isspace()


def _text_blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    first = last = -1
    for start, end in _lines(text, _first_line(text)):
        if _is_blank(text, start, end):
            if first >= 0:
                blocks.append(_Block(first, last, "text"))
            first = -1
        else:
            first = start if first < 0 else first
            last = end
    if first >= 0:
        blocks.append(_Block(first, last, "text"))
    return blocks


# Where a YAML front matter block (`---` ... `---`) ends, or `pos` if none.
def _front_matter_end(text: str, pos: int) -> int:
    lines = _lines(text, pos)
    opening = next(lines, None)
    if opening is None or text[opening[0] : opening[1]].rstrip() != "---":
        return pos
    for start, end in lines:
        if text[start:end].rstrip() in ("---", "..."):
            return end
    return pos


def _context(headings: list[str]) -> str | None:
    context = CONTEXT_SEPARATOR.join(h for h in headings if h)
    if len(context) > MAX_CONTEXT_CHARS:
        # Keep the most specific end of a very deep or long heading trail.
        context = "…" + context[-(MAX_CONTEXT_CHARS - 1) :]
    return context or None


def _markdown_blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    headings: list[str] = []
    paragraph: list[Range] = []
    fence: tuple[str, int, int] | None = None  # fence character, its length, block start

    def flush() -> None:
        if paragraph:
            blocks.append(_Block(paragraph[0][0], paragraph[-1][1], "markdown", _context(headings)))
            paragraph.clear()

    def set_heading(level: int, title: str) -> None:
        headings[level - 1 :] = []
        headings.extend([""] * (level - 1 - len(headings)))
        headings.append(title.strip())

    last_end = 0
    for start, end in _lines(text, _front_matter_end(text, _first_line(text))):
        line = text[start:end]
        last_end = end
        if fence is not None:
            closing = _FENCE.fullmatch(line)
            if (
                closing
                and closing.group(1)[0] == fence[0]
                and len(closing.group(1)) >= fence[1]
                and not closing.group(2).strip()
            ):
                blocks.append(_Block(fence[2], end, "code", _context(headings)))
                fence = None
            continue
        if _is_blank(text, start, end):
            flush()
            continue
        opening = _FENCE.fullmatch(line)
        if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            flush()
            fence = (opening.group(1)[0], len(opening.group(1)), start)
            continue
        atx = _ATX.fullmatch(line)
        if atx:
            flush()
            set_heading(len(atx.group(1)), atx.group(2) or "")
            continue
        underline = _SETEXT.fullmatch(line)
        if underline and paragraph and not _LIST_ITEM.match(text, paragraph[0][0], paragraph[0][1]):
            title = " ".join(text[a:b].strip() for a, b in paragraph)
            paragraph.clear()
            set_heading(1 if underline.group(1)[0] == "=" else 2, title)
            continue
        if _BREAK.fullmatch(line):
            flush()
            continue
        paragraph.append((start, end))
    flush()
    if fence is not None:
        # An unclosed fence runs to the end of the document, as in CommonMark.
        blocks.append(_Block(fence[2], last_end, "code", _context(headings)))
    return blocks


# A Markdown paragraph cut before each top-level list item, or None if it has no list.
def _list_items(text: str, start: int, end: int) -> list[Range] | None:
    cuts: list[int] = []
    top: int | None = None
    for line_start, line_end in _lines(text, start, end):
        item = _LIST_ITEM.match(text, line_start, line_end)
        if item is None:
            continue
        indent = len(item.group(1).expandtabs(4))
        if top is None:
            top = indent
        if indent <= top:
            cuts.append(line_start)
    if not cuts:
        return None
    bounds = [start, *cuts, end] if cuts[0] > start else [*cuts, end]
    return list(pairwise(bounds))


# -- cutting ----------------------------------------------------------------------------


def _split_block(text: str, block: _Block, config: SplitConfig) -> list[Range]:
    if block.kind == "code":
        if _size(text, block.start, block.end) <= config.max_bytes:
            return _nonempty([_trim(text, block.start, block.end)])
        lines = [_trim(text, a, b) for a, b in _lines(text, block.start, block.end)]
        return _pack(text, _nonempty(lines), config)
    items = _list_items(text, block.start, block.end) if block.kind == "markdown" else None
    if items is None or (config.unit == "paragraph" and _size(text, block.start, block.end) <= config.target_bytes):
        return _prose(text, block.start, block.end, config, config.unit)
    return [r for a, b in items for r in _prose(text, a, b, config, config.unit)]


def _prose(text: str, start: int, end: int, config: SplitConfig, unit: str) -> list[Range]:
    start, end = _trim(text, start, end)
    if start == end:
        return []
    if unit == "paragraph" and _size(text, start, end) <= config.max_bytes:
        return [(start, end)]
    return _pack(text, sentence_ranges(text, start, end), config)


# Merge consecutive units while the merged range fits target_bytes. A unit over max_bytes
# is first cut at white space, and a word over max_bytes at character boundaries, so
# every result fits max_bytes.
def _pack(text: str, units: list[Range], config: SplitConfig) -> list[Range]:
    atoms: list[Range] = []
    for a, b in units:
        if _size(text, a, b) <= config.max_bytes:
            atoms.append((a, b))
        else:
            atoms.extend(_cut_long(text, a, b, config))
    packed: list[Range] = []
    size = 0
    for a, b in atoms:
        if packed:
            grown = size + _size(text, packed[-1][1], b)
            if grown <= config.target_bytes:
                packed[-1] = (packed[-1][0], b)
                size = grown
                continue
        packed.append((a, b))
        size = _size(text, a, b)
    return packed


_WORD = re.compile(r"\S+")


def _cut_long(text: str, start: int, end: int, config: SplitConfig) -> list[Range]:
    pieces: list[Range] = []
    # A hard cut aims at target_bytes but must keep one whole character (up to 4 bytes).
    limit = max(config.target_bytes, MIN_MAX_BYTES)
    for word in _WORD.finditer(text, start, end):
        a, b = word.span()
        if _size(text, a, b) <= config.max_bytes:
            pieces.append((a, b))
        else:
            pieces.extend(_hard_cut(text, a, b, limit))
    return pieces


# Whether a cut before `text[index]` would break a user-perceived character.
def _glued(text: str, index: int) -> bool:
    char = text[index]
    return (
        unicodedata.category(char) in ("Mn", "Me", "Mc")
        or char == "\u200d"
        or "\U0001f3fb" <= char <= "\U0001f3ff"
        or "\U000e0020" <= char <= "\U000e007f"
        or text[index - 1] == "\u200d"
    )


def _hard_cut(text: str, start: int, end: int, limit: int) -> list[Range]:
    pieces: list[Range] = []
    while start < end:
        size = 0
        cut = start
        while cut < end:
            width = _char_size(text[cut])
            if size + width > limit and cut > start:
                break
            size += width
            cut += 1
        if cut < end:
            # Prefer not to split a base character from its combining marks or a ZWJ
            # sequence; if the whole piece is one such cluster, cut it anyway.
            back = cut
            while back > start + 1 and _glued(text, back):
                back -= 1
            if not _glued(text, back):
                cut = back
        pieces.append((start, cut))
        start = cut
    return pieces


# -- sentences --------------------------------------------------------------------------

# Linear on a long run of terminators ("....", no space): a match starts only at the
# run's first character and never gives back part of it (rescanning the run from each
# of its characters was quadratic, 6 s on a 16 KiB span). A later start in the same
# run would fail the same way: the run and its closers must be followed by white space.
_TERMINATOR = re.compile(r"(?:(?<![.!?…])[.!?…]++['\"’”)\]»]*+(?=\s)|[。！？]+['\"’”」』)\]]*)")
_OPENERS = "\"'“‘«([¿¡*_"
# Abbreviations compared as written (a capitalised word that is also a common word
# would otherwise stop every sentence ending in it).
_ABBREVIATIONS = frozenset(
    word
    for group in (
        "Mr Mrs Ms Mx Dr Prof Sr Jr St Mt Ft Gen Col Lt Sgt Capt Cmdr Adm Gov Sen Rep Rev Hon Pres",
        "Inc Ltd Co Corp Bros No Nos Fig Figs Vol Vols Ch Sec Dept Univ Ave Blvd Rd Est",
        "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec fig figs vol vols",
        "vs cf al approx esp incl resp viz pp eds ibid ca",
    )
    for word in group.split()
)
_INITIALS = re.compile(r"(?:[^\W\d_]\.)*[^\W\d_]")


def _ends_sentence(text: str, match: re.Match[str], stop: int) -> bool:
    mark = match.group(0)
    if mark[0] in "。！？":
        return match.end() < stop
    following = match.end()
    while following < stop and text[following].isspace():
        following += 1
    if following >= stop:
        return False
    first = text[following]
    # A sentence starts with a capital, a digit, an opening mark, or a letter of a
    # script without case.
    if not (first.isupper() or first.istitle() or first.isdigit() or first in _OPENERS or first.isalpha()):
        return False
    if first.islower():
        return False
    run = mark.rstrip("'\"’”)]»")
    if "!" in run or "?" in run:
        return True
    if "…" in run or len(run) > 1:
        return False  # an ellipsis continues the sentence
    word_start = match.start()
    while word_start > 0 and not text[word_start - 1].isspace():
        word_start -= 1
    word = text[word_start : match.start()].lstrip(_OPENERS)
    return not (word in _ABBREVIATIONS or _INITIALS.fullmatch(word))


# -- sizes and offsets ------------------------------------------------------------------


def _char_size(char: str) -> int:
    code = ord(char)
    return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4


def _size(text: str, start: int, end: int) -> int:
    return len(text[start:end].encode("utf-8"))


def _trim(text: str, start: int, end: int) -> Range:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _nonempty(ranges: list[Range]) -> list[Range]:
    return [(a, b) for a, b in ranges if a < b]


def _to_pieces(text: str, ranges: list[tuple[int, int, str | None]]) -> list[Piece]:
    pieces: list[Piece] = []
    char = byte = 0
    for start, end, context in ranges:
        byte += _size(text, char, start)
        body = text[start:end]
        size = len(body.encode("utf-8"))
        pieces.append(Piece(body, byte, byte + size, context))
        char, byte = end, byte + size
    return pieces
