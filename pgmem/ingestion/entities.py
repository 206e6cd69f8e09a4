"""Entity tags: names of people, organisations, places, products and other things.

The default :class:`RuleEntityExtractor` reads capitalisation, a few word lists and
the words around a name; every tag carries a confidence that says how strong that
evidence was (see :data:`ENTITY_CONFIDENCE`). Anything with an
``extract(text) -> tuple[EntityTag, ...]`` method can replace it (the
:class:`EntityExtractor` protocol); :class:`SpacyEntityExtractor` wraps a spaCy
pipeline the caller already has.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pgmem.errors import ConfigurationError
from pgmem.validate import between


@dataclass(frozen=True)
class EntityTag:
    """An entity string and the confidence, in [0, 1], that it names something."""

    text: str
    confidence: float


class EntityExtractor(Protocol):
    """Finds entity tags in a text; :class:`pgmem.ingestion.enricher.RuleEnricher` takes one."""

    def extract(self, text: str) -> tuple[EntityTag, ...]: ...


#: Base confidence by the strongest evidence found for a name. Each further mention
#: adds :data:`REPEAT_BONUS` (at most two of them); the result is capped at 0.99.
ENTITY_CONFIDENCE: dict[str, float] = {
    "honorific": 0.9,  # Dr. Ada Lovelace, Mrs Dalloway
    "organisation": 0.9,  # Acme Corp, University of Oxford
    "place_name": 0.85,  # Grand Canyon, Fifth Avenue
    "identifier": 0.85,  # Model 3, iPhone 15, Flight 370
    "multiword_cued": 0.85,  # "in New York"
    "multiword": 0.8,  # Ada Lovelace
    "place_cue": 0.75,  # "in Paris", "from Oslo"
    "acronym": 0.7,  # NASA, LGBTQ
    "brand": 0.7,  # iPhone, eBay
    "capitalised": 0.6,  # a capitalised word inside a sentence
    "sentence_initial": 0.4,  # capitalised only, perhaps, because it opens a sentence
    "capitalised_common": 0.35,  # "Wow, Great!": a common word that happens to be capitalised
}
REPEAT_BONUS = 0.1

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom whose why will with would you your
    yours yourself yourselves also yes oh ok okay yeah hey hi hello really well like
    got get going gonna thanks thank one much many
    """.split()  # noqa: SIM905 - a word list reads best as text
)

# Words that open sentences (in chat above all) but never start a name. A capitalised
# word from this list at the start of a sentence is no entity; inside a sentence it is
# a weak one. Person names that are also words (Hope, Grace, Max) are left out on purpose.
COMMON_WORDS = STOPWORDS | frozenset(
    """
    yesterday today tomorrow tonight monday tuesday wednesday thursday friday saturday sunday
    january february march april june july august september october november december
    last next this after before then however meanwhile anyway anyways besides still even
    later earlier soon now once again afterwards eventually suddenly
    wow yep yup yea nope nah aww awww aw woah whoa woo woohoo yay yum oof ooh ah ahh haha
    lol omg hmm mm um uh ha hah huh wowza whew phew bummer cheers congrats congratulations
    bye goodbye sorry please welcome sure totally definitely absolutely exactly indeed agreed
    true right cool nice great good awesome amazing wonderful fantastic lovely beautiful
    sweet cute fun funny crazy glad happy sad tough hard interesting impressive exciting
    excited proud lucky super pretty little big small long best better same new old
    sounds sound seems looks look looking feels feel feeling seeing see saw seen hearing
    hear heard glad keep kept let lets take took taking make makes making made go goes
    went gone doing done having being been getting finding found trying tried try tell
    told talk talking chat chatting remember remind reminds appreciate appreciated
    appreciating believe guess wish wishing hope hoping hopefully love loved loving
    enjoy enjoyed enjoying check thinking think thought know knew knowing need needs
    want wanted wanna gotta guys anything everything something nothing everyone someone
    anyone nobody everybody somebody maybe perhaps probably possibly actually basically
    honestly seriously literally definitely certainly sometimes always never often usually
    lately recently recent currently finally first second third also plus especially
    highly thankfully unfortunately luckily surprisingly interestingly obviously clearly
    together alone though although since unless whether either neither every each another
    any lots lot way things thing stuff life time times day days moments moment people
    family friends friend kids work job home nature art music books book pets dance
    dancing painting writing reading cooking playing working learning running hiking
    gaming swimming walking watching sharing supporting helping staying spending starting
    winning losing creating connecting exploring relaxing volunteering networking
    parenting growing building combining gaining showing sending giving searching
    surrounding hanging anytime count counting mental care change setbacks challenges
    events animals people's fingers mixed nope yeah yes okay ok alright hey hi hello
    thanks thank here there where what when who whom whose why how which did does do is
    are was were can could would should will shall may might must has have had name list
    describe explain tell give show compare according based given
    almost stay catch cherish bet hang create takes understand spill ouch mmm y'all strong
    young brave thoughts whenever wherever however whatever realizing realize morning evening
    night afternoon birthday luck job meet say ask call text send visit visiting join bring grab
    wait watch read play listen imagine picture congratulate welcome met saw called asked visited
    mr mrs ms dr
    """.split()  # noqa: SIM905 - a word list reads best as text
)

# Words stripped from the front of a capitalised run: "Hey Caroline", "Thanks Mel",
# "Yesterday Ada Lovelace", "The Beatles". Adjectives ("New York", "Great Britain") stay.
_LEADING_NOISE = STOPWORDS | frozenset(
    """yesterday today tomorrow tonight monday tuesday wednesday thursday friday saturday sunday
    last next this after before then however meanwhile anyway anyways besides later earlier soon
    afterwards eventually suddenly wow yep yup yea nope
    nah aww awww aw woah whoa woo woohoo yay yum oof ooh ah ahh haha lol omg hmm um uh ha hah huh
    whew phew cheers congrats congratulations bye goodbye sorry please welcome sure totally
    definitely absolutely exactly indeed agreed mr mrs ms dr""".split()  # noqa: SIM905
)
_HONORIFICS = frozenset(
    """mr mrs ms miss mx dr doctor prof professor sir dame lord lady rev reverend capt captain col
    gen lt sgt president senator governor mayor judge justice king queen prince princess aunt
    uncle coach officer""".split()  # noqa: SIM905
)
_ORGANISATION_SUFFIXES = frozenset(
    """inc corp corporation ltd llc llp plc gmbh ag co company group holdings bank university
    college institute foundation association society agency council committee commission
    ministry department museum hospital clinic school academy church club party airlines
    airways labs laboratories technologies systems partners studios records press center
    centre library union league federation network""".split()  # noqa: SIM905
)
_ORGANISATION_HEADS = frozenset(
    """university bank institute museum church department ministry college school academy
    republic kingdom commonwealth federation league""".split()  # noqa: SIM905
)
_PLACE_SUFFIXES = frozenset(
    """street st avenue ave road rd boulevard blvd lane park lake river mountain mountains mount
    mt island islands bay beach city county state province valley canyon falls square bridge
    hall stadium airport station coast forest desert ocean sea gulf peninsula""".split()  # noqa: SIM905
)
_PLACE_CUES = frozenset(
    """in at from to near visited visiting visit around across into toward towards outside inside
    through via reach reached""".split()  # noqa: SIM905
)
# A number after one of these identifies a thing: Flight 370, Route 66, Model 3.
_IDENTIFIER_HEADS = frozenset(
    """model flight route highway interstate apollo windows version series type class gate terminal
    platform room building level floor chapter episode season volume vol part act book stage phase
    mark mk boeing airbus galaxy pixel playstation xbox studio channel area district zone unit bus
    train line track apartment suite block sector tier grade macos ios android python java
    iphone ipad""".split()  # noqa: SIM905
)
_COUNT_WORDS = frozenset(
    """am pm percent hour minute year day week month time person dollar mile more less or and to
    of out""".split()  # noqa: SIM905
)
_VERBS_IN_S = frozenset("is was has does this as us its".split())  # noqa: SIM905
_MONTHS_AND_DAYS = frozenset(
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday jan feb mar apr jun jul aug sep sept oct
    nov dec mon tue tues wed weds thu thur thurs fri sat""".split()  # noqa: SIM905
)
# Common words that also begin place and other names.
_NAME_ADJECTIVES = frozenset(
    """new old great little big good grand north south east west upper lower saint fort mount lake
    red blue green black white royal united central national first second third""".split()  # noqa: SIM905
)
_STRIPPABLE_AT_START = COMMON_WORDS - _NAME_ADJECTIVES
_CONNECTORS = frozenset("of the de del da di la le van von der den du & y".split())  # noqa: SIM905
# All-capital words that are chat or formatting, not names of anything.
_NOT_ACRONYMS = frozenset(
    "OK OKAY LOL OMG BTW FYI IMO IMHO TBH ASAP DIY AM PM TV ID PS NB RIP LMAO ROFL TY THX XOXO".split()  # noqa: SIM905
)
_ABBREVIATIONS = frozenset("mr mrs ms dr prof st mt jr sr vs rev capt col gen lt sgt fr no co inc corp ltd".split())  # noqa: SIM905

_UPPER = "A-ZÀ-ÖØ-Þ"
# A run of capitalised words, joined by spaces and the small words names contain.
_RUN = re.compile(
    rf"(?<![\w'’&.-])(?:[{_UPPER}]|[ie](?=[A-Z]))[\w'’&.-]*"
    rf"(?:[ \t]+(?:(?:of|the|de|del|da|di|la|le|van|von|der|den|du|&|y)[ \t]+)*[{_UPPER}][\w'’&.-]*)*"
)
_NUMBER_AFTER = re.compile(r"[ \t]+(\d{1,4}[A-Za-z]?)(?![\w.,:/%]\w|[.,]\d|%)(?:[ \t]+([a-z]+))?")
_PREVIOUS_WORD = re.compile(r"(\w+)[ \t]+$")
_WORD_BEFORE_PERIOD = re.compile(r"(\w+)\.$")
_TOKEN = re.compile(r"\S+")
_POSSESSIVE = re.compile(r"['’]s?$", re.IGNORECASE)
_CONTRACTION = re.compile(r"(?:['’](?:m|re|ve|ll|d)|n['’]t)$", re.IGNORECASE)
_ACRONYM = re.compile(r"^[A-Z][A-Z0-9&-]*[A-Z0-9]s?$")
_INITIAL = re.compile(rf"^(?:[{_UPPER}]\.)+$")
_CAMEL = re.compile(r"[a-z][A-Z]")
_SENTENCE_END = ".!?…:\n\r•"
_OPENERS = " \t\"'“‘([{*-–—"


def _is_sentence_initial(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens a sentence, a line or a quotation."""
    i = start - 1
    while i >= 0 and text[i] in _OPENERS:
        i -= 1
    if i < 0:
        return True
    if text[i] in "\"'”’)]":
        i -= 1
    if i < 0 or text[i] not in _SENTENCE_END:
        return False
    if text[i] == ".":
        # "Dr. Smith", "J. K. Rowling": an abbreviation's period ends no sentence.
        word = _WORD_BEFORE_PERIOD.search(text, max(0, i - 12), i + 1)
        if word is not None and (word.group(1).lower() in _ABBREVIATIONS or len(word.group(1)) == 1):
            return False
    return True


def _clean_token(token: str) -> str:
    token = _POSSESSIVE.sub("", token)
    if _INITIAL.match(token):
        return token  # "J. K. Rowling" keeps its periods
    return token.strip(".'’-&")


@dataclass
class _Candidate:
    text: str
    evidence: str
    position: int


def _evidence(
    words: list[str],
    initial: bool,
    stripped: bool,
    honorific: bool,
    previous: str,
) -> str | None:
    """The strongest evidence that ``words`` name something, or None if they do not."""
    lowered = [w.lower() for w in words]
    if honorific:
        return "honorific"
    if len(words) > 1:
        if lowered[-1] in _ORGANISATION_SUFFIXES or (lowered[0] in _ORGANISATION_HEADS and lowered[1] == "of"):
            return "organisation"
        if lowered[-1] in _PLACE_SUFFIXES:
            return "place_name"
        if all(_ACRONYM.match(w) for w in words) and len(words) > 2:
            return None  # SHOUTING, not a name
        if initial and all(w in COMMON_WORDS for w in lowered):
            return None  # "Good Morning", "Happy Birthday"
        return "multiword_cued" if previous in _PLACE_CUES else "multiword"
    word, low = words[0], lowered[0]
    if _ACRONYM.match(word) and len(word) > 1:
        return None if word.rstrip("s") in _NOT_ACRONYMS or low in STOPWORDS else "acronym"
    if low in _MONTHS_AND_DAYS or len(word) < 2:
        return None  # time expressions are time tags
    if _CAMEL.search(word):
        return "brand"
    common = low in COMMON_WORDS
    if initial or stripped:
        # Opening a sentence, capitalisation says nothing; a common word there is no name,
        # and neither is a word shaped like an adverb, a gerund or a past tense.
        if common or (len(low) > 5 and low.endswith(("ly", "ing", "ed"))):
            return None
        return "sentence_initial" if initial else "capitalised"
    if common:
        return "capitalised_common"
    return "place_cue" if previous in _PLACE_CUES else "capitalised"


def _run_candidates(text: str, match: re.Match[str]) -> list[_Candidate]:
    """Split a capitalised run at sentence ends and possessives; judge each part."""
    candidates: list[_Candidate] = []
    groups: list[list[tuple[str, int]]] = [[]]
    for token_match in _TOKEN.finditer(match.group(0)):
        token = token_match.group(0)
        if token == "I" or _CONTRACTION.search(token):
            # "I", "I'm", "Can't": no part of a name, and a name does not run across them.
            groups.append([])
            continue
        groups[-1].append((token, match.start() + token_match.start()))
        lowered = token.lower().rstrip(".")
        # "Inc." may end a sentence too, and a name rarely follows a company's suffix.
        ends_sentence = token.endswith(".") and (
            lowered in _ORGANISATION_SUFFIXES or not (lowered in _ABBREVIATIONS or _INITIAL.match(token))
        )
        if ends_sentence or _POSSESSIVE.search(token):
            groups.append([])
    last_group = len(groups) - 1
    for index, group in enumerate(groups):
        if not group:
            continue
        start = group[0][1]
        initial = _is_sentence_initial(text, start)
        words = [(_clean_token(token), position) for token, position in group]
        words = [(w, p) for w, p in words if w]
        honorific = False
        stripped = False
        while words and (words[0][0].lower() in _LEADING_NOISE or words[0][0].lower() in _CONNECTORS):
            if words[0][0].lower() in _HONORIFICS:
                honorific = True
            words = words[1:]
            stripped = True
        # At a sentence start, "Meet Caroline" and "Visiting Paris" begin with a common
        # word that is no part of the name; "New York" and "Grand Canyon" do not.
        if initial and not stripped:
            while len(words) > 1 and words[0][0].lower() in _STRIPPABLE_AT_START:
                words = words[1:]
                stripped = True
        # "Dr. Ada Lovelace" is tagged "Ada Lovelace", as a question about her would be;
        # "Lord of the Rings" keeps its lord.
        while len(words) > 1 and words[0][0].lower() in _HONORIFICS and words[1][0].lower() not in _CONNECTORS:
            honorific = True
            words = words[1:]
        if honorific:
            cut = next((i for i, (w, _) in enumerate(words) if w.lower() in _CONNECTORS), len(words))
            # "Dr. Smith of Acme Corp": a person, then where they come from.
            affiliation = [(w, p) for w, p in words[cut:] if w.lower() not in _CONNECTORS]
            if affiliation:
                evidence = _evidence([w for w, _ in affiliation], False, False, False, "")
                if evidence is not None:
                    candidates.append(_Candidate(" ".join(w for w, _ in affiliation), evidence, affiliation[0][1]))
            words = words[:cut]
        while words and words[-1][0].lower() in _CONNECTORS:
            words = words[:-1]
        if not words:
            continue
        names = [w for w, _ in words]
        position = words[0][1]
        previous_match = _PREVIOUS_WORD.search(text, max(0, position - 16), position)
        previous = previous_match.group(1).lower() if previous_match else ""
        number = _NUMBER_AFTER.match(text, match.end()) if index == last_group else None
        if number is not None and not group[-1][0].endswith((".", ",")):
            head = names[-1]
            following = (number.group(2) or "").lower()
            # "saw Caroline 3 times" counts; "Cyberpunk 2077 is out" names a thing.
            counted = following in _COUNT_WORDS or (following.endswith("s") and following not in _VERBS_IN_S)
            identifies = head.lower() in _IDENTIFIER_HEADS or _CAMEL.search(head) is not None or not counted
            # "May 8" is a date and "Step 2" a procedure, not things with numbers.
            if identifies and head.lower() not in _MONTHS_AND_DAYS and head.lower() not in ("step", "day", "week"):
                candidates.append(_Candidate(" ".join([*names, number.group(1)]), "identifier", position))
                continue
        evidence = _evidence(names, initial and not stripped, stripped and not honorific, honorific, previous)
        if evidence is not None:
            candidates.append(_Candidate(" ".join(names), evidence, position))
    return candidates


class RuleEntityExtractor:
    """Entities from capitalisation, word lists and context; no model, no network.

    Parameters
    ----------
    confidence : mapping of str to float, optional
        Overrides of :data:`ENTITY_CONFIDENCE`, each in [0, 1].
    """

    def __init__(self, confidence: Mapping[str, float] | None = None) -> None:
        self.confidence = dict(ENTITY_CONFIDENCE)
        for name, value in (confidence or {}).items():
            if name not in ENTITY_CONFIDENCE:
                raise ConfigurationError(
                    f"confidence has unknown evidence {name!r}; known: {', '.join(ENTITY_CONFIDENCE)}"
                )
            between(f"confidence[{name!r}]", value, 0.0, 1.0)
            self.confidence[name] = value

    def extract(self, text: str) -> tuple[EntityTag, ...]:
        """Entity tags of ``text`` in order of first mention; never raises."""
        best: dict[str, float] = {}
        mentions: dict[str, int] = {}
        for match in _RUN.finditer(text):
            for candidate in _run_candidates(text, match):
                score = self.confidence[candidate.evidence]
                best[candidate.text] = max(best.get(candidate.text, 0.0), score)
                mentions[candidate.text] = mentions.get(candidate.text, 0) + 1
        return tuple(
            EntityTag(name, round(min(0.99, score + REPEAT_BONUS * min(2, mentions[name] - 1)), 4))
            for name, score in best.items()
        )


_DEFAULT = RuleEntityExtractor()


def extract_entities(text: str) -> tuple[EntityTag, ...]:
    """Entity tags found by the default :class:`RuleEntityExtractor`.

    Parameters
    ----------
    text : str
        Any text; never raises.

    Returns
    -------
    tuple of EntityTag
        In order of first mention, each with a confidence in [0, 1].
    """
    return _DEFAULT.extract(text)


#: Confidence given to each spaCy entity label; labels not listed are ignored (dates,
#: times, money and quantities are time tags and micro-handles already).
SPACY_LABEL_CONFIDENCE: dict[str, float] = {
    "PERSON": 0.85,
    "ORG": 0.85,
    "GPE": 0.85,
    "LOC": 0.8,
    "FAC": 0.8,
    "PRODUCT": 0.75,
    "EVENT": 0.75,
    "NORP": 0.7,
    "WORK_OF_ART": 0.7,
    "LAW": 0.7,
    "LANGUAGE": 0.7,
}


class SpacyEntityExtractor:
    """Entity tags from a spaCy pipeline the caller loaded (spaCy is not a dependency).

    Parameters
    ----------
    nlp : callable
        A ``spacy.Language`` or anything like it: ``nlp(text).ents`` yields spans
        with ``.text`` and ``.label_``.
    label_confidence : mapping of str to float, optional
        Confidence per entity label (default :data:`SPACY_LABEL_CONFIDENCE`); labels
        not in the mapping are skipped. Each further mention adds
        :data:`REPEAT_BONUS`, capped at 0.99.

    Examples
    --------
    >>> import spacy  # doctest: +SKIP
    >>> enricher = RuleEnricher(entity_extractor=SpacyEntityExtractor(spacy.load("en_core_web_sm")))  # doctest: +SKIP
    """

    def __init__(self, nlp: Callable[[str], Any], label_confidence: Mapping[str, float] | None = None) -> None:
        self.nlp = nlp
        self.label_confidence = dict(SPACY_LABEL_CONFIDENCE if label_confidence is None else label_confidence)
        for label, value in self.label_confidence.items():
            between(f"label_confidence[{label!r}]", value, 0.0, 1.0)

    def extract(self, text: str) -> tuple[EntityTag, ...]:
        """Entity tags of ``text`` in order of first mention."""
        best: dict[str, float] = {}
        mentions: dict[str, int] = {}
        for entity in self.nlp(text).ents:
            score = self.label_confidence.get(str(entity.label_))
            if score is None:
                continue
            name = _POSSESSIVE.sub("", " ".join(str(entity.text).split())).strip(" .,;:!?\"'“”‘’")
            if not name or "\x00" in name:
                continue
            best[name] = max(best.get(name, 0.0), score)
            mentions[name] = mentions.get(name, 0) + 1
        return tuple(
            EntityTag(name, round(min(0.99, score + REPEAT_BONUS * min(2, mentions[name] - 1)), 4))
            for name, score in best.items()
        )
