"""Role: a small label saying what kind of statement a note is.

The rules are tried in order and the first that fires wins: a conversation turn
(metadata has a ``speaker``) is ``dialogue``; then ``summary``, ``procedure``,
``definition``, ``claim`` (opinion, hedging, reported speech), ``event`` (something
happened or will happen at a stated time), ``fact`` (anything else with a name, a
number or a plain "X is/has Y" statement); a question, or text with none of that, is
``other``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SUMMARY = re.compile(
    r"^\W*(?:in\s+summary|to\s+summari[sz]e|summary\s*:|overall\b|in\s+short|tl;?dr|in\s+conclusion|to\s+sum\s+up"
    r"|all\s+in\s+all|in\s+brief|key\s+takeaways?)",
    re.IGNORECASE,
)
_IMPERATIVES = (
    "install|run|click|open|set|add|create|configure|type|press|select|go\\s+to|make\\s+sure|ensure|use|download"
    "|enter|copy|paste|remove|delete|restart|start|stop|save|mix|stir|bake|preheat|heat|pour|combine|place|insert"
    "|connect|update|upgrade|check|verify|navigate|choose|fill|log\\s+in|sign\\s+in|cut|chop|boil|whisk|apply"
)
_PROCEDURE = re.compile(
    r"^\W*(?:step\s+\d+|\d+[.)]\s|[-*•]\s+(?:" + _IMPERATIVES + r")\b|first(?:ly)?,|then,|next,|finally,"
    r"|to\s+\w+[^.]{0,60},\s*(?:" + _IMPERATIVES + r")\b|how\s+to\b|(?:" + _IMPERATIVES + r")\s+(?:the|a|an|your|it|"
    r"all|each|\d)\b)",
    re.IGNORECASE,
)
_DEFINITION = re.compile(
    r"\b(?:is|are)\s+defined\s+as\b|\brefers?\s+to\b|\bstands?\s+for\b|\b(?:also\s+)?known\s+as\b|\ba\.k\.a\.?"
    r"|\bis\s+(?:a|an)\s+(?:type|kind|form|sort|class|branch|method|unit|measure)\s+of\b"
    # At most 64 leading non-word characters: \W and the first word both take "-" and
    # quotes, and trying every split of a long run of them was quadratic (14 s on a
    # 16 KiB span of dashes).
    r"|^\W{0,64}(?:an?\s+|the\s+)?[\w'’-]+(?:\s+[\w'’-]+){0,3}\s+(?:is|means)\s+(?:an?|the)\s+\w+(?:\s+\w+){0,4}\s+"
    r"(?:that|which|who|of|used|for|with|where|in\s+which)\b",
    re.IGNORECASE,
)
_PRONOUN_SUBJECT = re.compile(
    r"^\W*(?:it|this|that|he|she|they|we|i|you|there|here|mine|yours|which|what|who|everything|something)\b",
    re.IGNORECASE,
)
_CLAIM = re.compile(
    r"\b(?:i\s+think|i\s+believe|i\s+feel|i\s+guess|i\s+suspect|in\s+my\s+(?:opinion|view)|imo|should|must"
    r"|ought\s+to|arguably|probably|likely|unlikely|clearly|obviously|allegedly|reportedly|apparently|seems?"
    r"|claims?|claimed|argues?|argued|according\s+to|suggests?|i'm\s+sure|i\s+bet|no\s+doubt)\b",
    re.IGNORECASE,
)
_EVENT_VERB = re.compile(
    r"\b(?:\w{3,}ed|went|met|saw|took|made|got|had|did|came|began|won|lost|left|gave|found|bought|sold|moved|ran"
    r"|wrote|built|became|held|brought|told|spoke|flew|drove|ate|fell|paid|sent|spent|broke|chose|threw|wore|"
    r"will|going\s+to|plan(?:s|ning)?\s+to|scheduled|happens?|takes?\s+place)\b",
    re.IGNORECASE,
)
# Screens for ASCII text (where case-insensitive matching is ASCII lower-casing): a word
# each alternative of _CLAIM needs, and those of _DEFINITION ("is" or "means" for the last
# two). A text holding none of them cannot match, and the expression is not run (the
# role's costliest steps).
_CLAIM_WORDS = (
    "think", "believe", "feel", "guess", "suspect", "opinion", "view", "imo", "should", "must", "ought",
    "arguably", "probably", "likely", "clearly", "obviously", "allegedly", "reportedly", "apparently", "seem",
    "claim", "argue", "according", "suggest", "sure", "bet", "doubt",
)  # fmt: skip
_DEFINITION_WORDS = ("defined", "refer", "stand", "known", "a.k.a")
_IS_OR_MEANS = re.compile(r"\b(?:is|means)\s", re.IGNORECASE)
_FACT = re.compile(r"\d|\b(?:is|are|was|were|has|have|had|contains?|includes?|consists?)\b")
_PROPER_NOUN = re.compile(r"(?<=\s)[A-Z][a-z]+")


def classify_role(text: str, metadata: Mapping[str, Any], has_time: bool) -> str:
    """The role of a note from deterministic rules.

    Parameters
    ----------
    text : str
        The note's text; never raises.
    metadata : mapping
        The span's metadata; a non-empty ``speaker`` makes the note ``dialogue``.
    has_time : bool
        Whether the note carries a time tag (an ``event`` needs one).

    Returns
    -------
    str
        One of ``fact``, ``event``, ``definition``, ``procedure``, ``claim``,
        ``dialogue``, ``summary``, ``other``.
    """
    if metadata.get("speaker"):
        return "dialogue"
    if _SUMMARY.search(text):
        return "summary"
    if _PROCEDURE.search(text):
        return "procedure"
    stripped = text.strip()
    if stripped.endswith("?"):
        return "other"
    lowered = text.lower() if text.isascii() else None
    if (
        (_screened(lowered, _DEFINITION_WORDS) or _IS_OR_MEANS.search(text) is not None)
        and _DEFINITION.search(text)
        and not _PRONOUN_SUBJECT.match(text)
    ):
        return "definition"
    if _screened(lowered, _CLAIM_WORDS) and _CLAIM.search(text):
        return "claim"
    if has_time and _EVENT_VERB.search(text):
        return "event"
    if _FACT.search(text) or _PROPER_NOUN.search(text):
        return "fact"
    return "other"


def _screened(lowered: str | None, words: tuple[str, ...]) -> bool:
    """Whether an expression must run: always for non-ASCII text (``lowered`` None), else
    when the lower-cased text holds one of ``words``."""
    return lowered is None or any(word in lowered for word in words)
