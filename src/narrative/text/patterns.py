"""Lexicons, compiled regular expressions and the lexical detectors of the heuristic extractor.

Everything here is built once at import (plain sets and ``re.compile``; no file, model or
environment access) so that one turn costs a few hundred microseconds.  The detectors are pure
functions over already-split sentences; :mod:`narrative.write.extract` assembles them into a
:class:`~narrative.write.extract.TurnExtraction`, and the read side uses the same lexicons (``STOPWORDS``).

| detector            | rule (the function docstrings have the details)                                       |
|---------------------|----------------------------------------------------------------------------------------|
| ``split_sentences`` | split after ``.!?…`` (closing quotes stay) and newlines; re-join after p., Dr., e.g. … |
| ``is_question``     | ends with ``?``, or is unpunctuated and opens with a wh-word or an auxiliary           |
| ``is_small_talk``   | greetings, thanks, goodbyes, "how are you", tag questions, ≤ 6-word contentless lines  |
| ``question_kind``   | methodological cues, then interpretive cues (``_METHODOLOGICAL``, ``_INTERPRETIVE``), |
|                     | else factual                                                                           |
| ``find_emotions``   | lexicon + phrases; a negator earlier in the same clause drops the cue                  |
| ``find_people``     | relation / "named" / title / "by" cues, Title-case runs not at a sentence start and not |
|                     | after place or thing words; vocatives ("Thanks, Joanna!") are marked "addressee"        |
| ``topic_tags``      | capitalised phrases, then content words by frequency; stopwords, names, emotions out    |
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

# --- lexicons ----------------------------------------------------------------------------------


def lex(words: str) -> frozenset[str]:
    """A lexicon from a whitespace-separated word list."""
    return frozenset(words.split())


STOPWORDS = lex(
    """
    a about above after again against ago all almost along already also although always am among an and
    another any anybody anyone anything anyway anyways anywhere are aren't around as at away back be became
    because become been before being below beside besides best better between beyond both but by can can't
    cannot could couldn't did didn't do does doesn't doing don't done down during each either else enough
    especially even ever every everybody everyone everything everywhere few first for from further get gets
    getting go goes going gone gonna got gotta had hadn't has hasn't have haven't having he he'd he'll he's
    her here here's hers herself him himself his how how's however i i'd i'll i'm i've if in indeed instead
    into is isn't it it'd it'll it's its itself just kind kinda last later least less let let's like likely
    little lot lots made make makes making many may maybe me meanwhile might mine more moreover most mostly
    much must my myself near nearly need needs neither never next no nobody none nor not nothing now nowhere
    of off often oh ok okay on once one ones only onto or other others otherwise ought our ours ourselves
    out over own per perhaps please plus quite rather really right same several shall she she'd she'll she's
    should shouldn't since so some somebody someone something sometime sometimes somewhat somewhere soon
    still such sure than that that'd that'll that's the their theirs them themselves then there there's
    these they they'd they'll they're they've thing things this those though through thus till to today
    together tomorrow tonight too totally toward towards truly under unless until up upon us very via
    was wasn't we we'd we'll we're we've well were weren't what what's whatever when whenever where where's
    whether which while who who's whoever whole whom whose why will with within without won't would wouldn't
    yeah yep yes yet you you'd you'll you're you've your yours yourself yourselves yesterday lately recently
    actually basically definitely certainly probably seriously honestly literally especially absolutely
    hey hi hello hiya bye goodbye thanks thank thx ty wow whoa aw aww awww omg lol haha hahaha hmm um uh
    great awesome cool nice good amazing wonderful fantastic incredible super fun glad sounds sound
    look looks looking looked see seeing seen saw seems seem feel feels feeling felt think thinks thought
    know knows knew known want wants wanted wish get take takes took taken give gives gave given come comes
    came keep keeps kept say says said tell told ask asked try tried trying mean means meant put let
    lets find found show showed shown bring brings brought remember reminds reminded reminder remind
    also again able anyway else ever stuff bit pretty sort real reason way ways time times day days week
    weeks month months year years lot something anything everything nothing wait hear heard talk talked
    chat chatting catch catching congrats congratulations welcome sorry btw by-the-way ya yo dude buddy
    man guys folks gosh wanna gotta gonna i'ma ain't 'cause cause cuz cos tho thru u ur im ive id dont
    cant wont isnt didnt doesnt thats whats went goes taking starting start started thinking doing agree
    agreed help helps helping helped pick picked chose choose realize realized continue check stand stands happen
    happens happening happened talking sharing share shared creating create created spreading making getting giving
    having ran new long different important similar single special tough hard easy word words people part whole
    big small huge tiny old young thinkin inspiring inspired rewarding powerful lovely sweet cute beautiful gorgeous
    perfect favorite fave lucky caring positive crazy wild use used using work worked working keen vital
    woohoo yay dang damn yikes oops ooh ahh huh hooray bravo jeez woah
    """
)

PRONOUNS = lex("i me my mine you your yours he him his she her hers it its we us our ours they them their theirs")
WEEKDAYS_MONTHS = lex(
    """
    monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun
    january february march april may june july august september october november december jan feb mar apr
    jun jul aug sep sept oct nov dec
    """
)
#: Capitalised words that are almost never a person's name in chat.
NOT_NAMES = lex(
    """
    god lord christmas easter halloween thanksgiving hanukkah ramadan diwali valentine valentine's
    english spanish french german italian chinese japanese korean american british canadian mexican
    african european asian indian irish scottish russian christian muslim jewish catholic buddhist hindu
    internet tv wifi covid ok okay lgbtq lgbt dr mr mrs ms prof mom dad mum grandma grandpa mama papa
    congrats congratulations happy merry dear bro sis thanks hey hi hello wow yes no oh midwestern western eastern
    northern southern
    """
)
#: Last words that make a capitalised phrase a place, an organisation or an event, not a person.
PLACE_SUFFIXES = lex(
    """
    canyon falls park lake river street st road avenue ave boulevard square university college school
    academy institute center centre museum gallery mountain mountains mount beach island islands city
    town village county state states company inc ltd corp club church cathedral hospital clinic bay valley
    festival conference summit convention fair market mall cafe restaurant bar hotel station airport bridge
    forest desert ocean sea coast trail library studio studios foundation association council group team
    league cup championship tournament series show project program programme lab labs department
    """
)
PLACE_PREFIXES = lex("new north south east west saint st los las san santa mount lake grand great united fort port")
#: Words right before a capitalised token that make it a place, a thing or a title, not a person.
NON_PERSON_LEFT = lex(
    """
    in at from near into across around visit visited visiting the a an of on using use used via about
    learn learning learned play playing played watch watching watched read reading speak speaking spoke
    install installed installing run running try trying tried called named titled like love loved my your our
    his her their some any fellow this that every each local
    pick picked choose chose chosen prefer preferred over versus vs adopt adopted adopting switch switched
    migrate migrated migrating deploy deployed deploying upgrade upgraded uses
    """
)
#: Words right before a name that make it a tool, a product or a choice (a subset of ``NON_PERSON_LEFT``).
THING_LEFT = lex(
    """
    using use used via install installed installing run running pick picked choose chose chosen prefer preferred
    over versus vs adopt adopted adopting switch switched migrate migrated migrating deploy deployed deploying
    upgrade upgraded uses learn learning learned
    """
)
#: Verbs after a name that only a person does ("Priya thinks", "Sam said"): the name is someone.
PERSON_VERBS = lex(
    """
    said says told tells asked asks thinks thought wants wanted promised replied replies wrote writes texted emailed
    mentioned mentions suggested suggests agreed agrees feels felt loves loved hates hated knows knew believes
    believed wonders wondered laughed laughs smiled cried called calls offered offers invited invites
    """
)
#: Verbs before a name that one does to a person ("met Tom", "told Sam"): the name is someone.
SOCIAL_VERBS = lex("met meet meeting told tell asked ask texted emailed invited thanked hugged married dating phoned")
#: Verbs before "to" that make what follows a thing one moves to ("we switched to Linear").
SWITCH_TO = lex("switch switched switching migrate migrated migrating upgrade upgraded moving moved port ported")
#: Verbs before "with" that make what follows a thing one settles on ("we went with Postgres"), not company.
CHOICE_WITH = lex("stick sticking stuck stay staying stayed replace replaced replacing")
COMMUNICATION_VERBS = lex(
    """
    talk talked talking spoke speak speaking said say sent send sending gave give giving wrote write writing
    introduced introduce listen listened replied reply reached explained explain mentioned mention
    """
)
RELATION_WORDS = (
    "friend|best friend|colleague|coworker|co-worker|boss|manager|partner|husband|wife|son|daughter|mom|"
    "mother|dad|father|sister|brother|cousin|aunt|uncle|grandma|grandmother|grandpa|grandfather|mentor|"
    "teacher|professor|student|neighbor|neighbour|roommate|girlfriend|boyfriend|fiance|fiancee|client|"
    "doctor|therapist|coach|advisor|supervisor|kid|child|baby|dog|cat|puppy|kitten|pet"
)
#: Interjections that may precede a vocative name ("Hey Mel!", "Thanks, Joanna").
VOCATIVE_LEAD = lex(
    "hey hi hello hiya yo thanks thank bye goodbye congrats congratulations dear sorry wow oh aw aww welcome"
)

#: Words before a sentence-final name that make it an object ("I met Tom."), not an address ("See you, Tom!").
MENTION_LEFT = lex(
    """
    with to and or met meet meeting saw see seeing visit visited visiting call called calling told tell asked ask
    for from by about love loved like liked miss missed hugged help helped thank thanked introduced invited
    join joined texted text emailed email dating married marry than as is was be been named at in of behind like
    """
)
INTERJECTIONS = VOCATIVE_LEAD | lex(
    "yeah yes yep yup ok okay sure absolutely totally well so and agreed exactly right true indeed no nope cool "
    "great awesome nice good night morning cheers see ya you love agree i too me miss"
)

#: emotion cue (single word) -> label.  Multi-word cues are in ``EMOTION_PHRASES``.
EMOTION_WORDS: dict[str, str] = {}
for _label, _words in {
    "joy": "happy happier happiest happiness joy joyful joyous glad delighted cheerful overjoyed elated "
    "blissful ecstatic enjoy enjoyed enjoying enjoyable",
    "sadness": "sad sadder saddest sadness unhappy upset heartbroken heartbreaking devastated depressed "
    "depressing miserable gloomy grief grieving mourning cried crying tears sorrow",
    "fear": "scared afraid frightened terrified fear fearful panic panicked horrified scary terrifying",
    "anxiety": "anxious anxiety nervous worried worry worrying stressed stressful overwhelmed tense uneasy",
    "anger": "angry anger furious annoyed irritated outraged livid pissed resentful mad",
    "frustration": "frustrated frustrating frustration",
    "surprise": "surprised surprise surprising shocked shocking astonished stunned amazed unexpected",
    "pride": "proud pride",
    "gratitude": "grateful gratitude thankful appreciate appreciated appreciative blessed",
    "love": "love loved loving adore adored",
    "excitement": "excited exciting excitement thrilled eager pumped stoked",
    "guilt": "guilty guilt ashamed shame regret regretted remorse",
    "relief": "relieved relief phew",
    "hope": "hopeful hoping hopes",
    "disappointment": "disappointed disappointing disappointment bummed bummer letdown",
    "loneliness": "lonely loneliness isolated",
    "determination": "determined determination motivated",
}.items():
    for _w in _words.split():
        EMOTION_WORDS[_w] = _label

#: multi-word cues (one alternation, group name = label), matched before single words; a negation inside
#: them is part of the cue ("can't wait", "won't give up").
EMOTION_PHRASES = re.compile(
    r"(?P<excitement>\bcan'?t wait\b|\bcannot wait\b|\blooking forward\b)"
    r"|(?P<determination>\b(?:never|won'?t|not) (?:going to )?giv(?:e|ing) up\b)"
    r"|(?P<surprise>\bcan'?t believe\b)"
    r"|(?P<sadness>\b(?:feel|feeling|felt) (?:so |really )?down\b|\bi miss(?:ed)? (?:you|him|her|them|my|our|"
    r"the days|those)\b|\bbroke my heart\b|\bbroken heart\b)"
    r"|(?P<hope>\bgave me hope\b|\bhope for\b|\bfull of hope\b)"
    r"|(?P<love>\bin love\b)"
)
_PHRASE_HINT = ("wait", "forward", "give up", "giving up", "believe", "down", "miss", "hope", "in love", "heart")
STRONG_EMOTION_WORDS = lex(
    """
    devastated heartbroken heartbreaking terrified thrilled ecstatic overjoyed furious outraged livid
    miserable grief grieving mourning panic panicked horrified shocked elated
    """
)
INTENSIFIERS = lex("so really very extremely super incredibly truly deeply absolutely totally beyond")
NEGATORS = lex(
    """
    not no never nor neither hardly without n't don't didn't doesn't isn't wasn't aren't weren't can't cannot
    won't wouldn't couldn't shouldn't haven't hasn't hadn't ain't dont didnt isnt wasnt cant wont
    """
)
CLAUSE_BREAKS = lex("but though although however yet whereas except")

#: Words ending in -ly / -ed that are still worth a topic tag.
KEEP_LY_ED = lex(
    """
    family italy july rally ally belly jelly lily bully butterfly firefly anomaly monopoly supply reply holy
    assembly sacred wicked kindred hundred bred shred seed speed breed greed weed feed need bed red shed sled
    """
)
NO_SINGULAR = lex(
    """
    series species news physics mathematics politics ethics economics athletics gymnastics lens christmas
    canvas chaos virus bonus campus focus status thesis analysis basis crisis tennis dress always perhaps
    sometimes yes this his hers its ours yours theirs was has does is as us plus bus gas lgbtq trans
    """
)

# --- compiled expressions ----------------------------------------------------------------------

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})
_SPLIT = re.compile(r"(?<=[.!?\u2026])\s+|(?<=[.!?\u2026][\"')\]])\s+|\s*\n+\s*")
_ABBREV_END = re.compile(
    r"(?:\b(?:p|pp|dr|mr|mrs|ms|prof|st|vs|no|vol|ch|ed|eds|al|cf|fig|approx|etc|e\.g|i\.e|jr|sr)\.)$",
    re.IGNORECASE,
)
WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*[A-Za-z]|[A-Za-z]")
CAP_RUN = re.compile(r"(?<![\w'\-])[A-Z][a-z]+(?:'s)?(?:[ ][A-Z][a-z]+(?:'s)?){0,3}(?![\w\-])")
QUOTED = re.compile(r"\"[^\"]{1,400}\"")
QUOTED_ANY = re.compile(r"\"[^\"]{1,400}\"|(?<![\w'])'[^']{2,80}'(?![\w'])")
_WH_START = re.compile(
    r"^(?:who|whom|whose|what|when|where|why|how|which|is|are|am|was|were|do|does|did|can|could|should|"
    r"would|will|shall|have|has|had|may|might)\b"
)
_LEAD_FILLER = re.compile(
    r"^(?:(?:so|and|but|oh|ok|okay|well|hey|wow|btw|also|anyway|anyways|plus|then|by the way|"
    r"on another note|on a different note|out of curiosity|just curious|yeah|yes|no|hmm|um)\b[,!.]?\s*)+"
)
SMALL_TALK = re.compile(
    r"^(?:(?:hey|hi|hello|hiya|yo|morning|good (?:morning|afternoon|evening|night))\b[^?]{0,25}[!.]?$"
    r"|(?:thanks|thank you|thx|ty|cheers|bye|goodbye|see you|see ya|take care|talk (?:to you )?soon|"
    r"later|congrats|congratulations|no worries|no problem|np|sure thing|of course|you're welcome|"
    r"same here|me too|agreed|exactly|absolutely|totally|definitely|yep|yeah|yes|nope|no|ok|okay|cool|"
    r"nice|great|awesome|wow|lol|haha|aw+|oh|sounds (?:good|great|fun|awesome|amazing|like a plan)|"
    r"that'?s (?:so |really )?(?:great|awesome|cool|amazing|nice|wonderful|fantastic|sweet|cute|"
    r"lovely|true|fair|right)|good (?:luck|to (?:hear|see|know))|glad to hear(?: that)?|"
    r"keep (?:it up|going|us posted|me posted)|you got this|have fun|enjoy)\b[^?]{0,30}[!.]?$"
    r"|(?:how (?:are|r) (?:you|u|ya)|how(?:'s| is| are| have) (?:it going|everything|things|you been|"
    r"life|your day|your week|your weekend|you doing)|how(?:'re| are) (?:ya|you) doin|what'?s up|"
    r"what'?s new|anything new|how about you|what about you|and you|you\?|hbu|wbu|right|isn'?t it|"
    r"don'?t you think|really|seriously|can you believe it|guess what|how was your (?:day|week|weekend)|"
    r"how have you been|have you been (?:up to )?anything)\b[^?]{0,40}\?*$)"
)
_TAG_QUESTION = re.compile(r",\s*(?:right|huh|eh|isn'?t it|don'?t you think|aren'?t they|don'?t they)\s*\?$")

_METHODOLOGICAL = re.compile(
    r"\bhow (?:should|would|could|can|do|might) (?:i|we|you|one) (?!feel\b|think\b|know\b|like\b|"
    r"manage to feel\b)\w+"
    r"|\bwhich (?:approach|method|methodology|framework|tool|technique|strategy|way|library|format|option|"
    r"model|design)\b"
    r"|\bwhat(?:'s| is| would be| will be)? (?:the |a )?(?:best|right|better|proper|correct|recommended) "
    r"(?:way|approach|method|strategy|process|order|tool)\b"
    r"|\bwhat (?:method|approach|methodology|strategy|technique|process|framework|steps?)\b"
    r"|\bshould (?:we|i)\b|\bhow to\b|\bwhat steps\b|\bhow (?:do|did) you (?:make|do|build|start|prepare)\b"
)
_INTERPRETIVE = re.compile(
    r"^why\b|\bwhy (?:do|did|does|is|are|was|were|would|should|has|have|not)\b"
    r"|\bwhat (?:does|did|do|might|could) .{1,60}\bmean\b|\bwhat do you mean\b"
    r"|\bhow (?:do|did|does|would|will) (?:you|it|that|this|they|he|she) (?:feel|make you feel)\b"
    r"|\bhow (?:did|does|do) (?:it|that|this) make\b|\bwhat (?:do|did) you think\b|\bdo you think\b"
    r"|\bwhat(?:'s| is| was) (?:the )?(?:meaning|significance|point|purpose|message)\b"
    r"|\binterpret\w*\b|\bsignifican\w+\b|\bwhat(?:'s| is) your (?:take|opinion|view|sense)\b"
    r"|\bwhat (?:inspired|made|motivates|motivated|drew|drives|got) you\b|\bhow would you describe\b"
    r"|\bwhat (?:sparked|prompted|drove)\b"
)
_CLARIFICATION = re.compile(
    r"\bwhat do you mean\b|\b(?:can|could|would) you (?:please )?(?:clarify|explain what you mean|elaborate)\b"
    r"|\b(?:do|did) you mean\b|\bi meant\b(?! to\b)|\bwhat i meant\b|\bto clarify\b|\bjust to be clear\b"
    r"|\bnot sure what you mean\b|\bwhat did you mean\b|\bby that i mean\b|\bclarification\b"
)
_CLARIFY_START = re.compile(r"^(?:no,? |sorry,? )?i mean\b")

RELATION_CUE = re.compile(
    rf"\b(?:[Mm]y|[Oo]ur|[Hh]is|[Hh]er|[Tt]heir) (?:(?:new|old|best|little|older|younger|big|dear) )?({RELATION_WORDS})"
    r"(?:,)? ([A-Z][a-z]+)\b"
)
NAMED_CUE = re.compile(
    r"\b(?:named|(?:who'?s|guy|girl|man|woman|person|kid|boy|baby|dog|cat|puppy|friend|someone|somebody) called)"
    r" ([A-Z][a-z]+)\b(?![\-'])"
)
TITLE_CUE = re.compile(r"\b(?:Dr|Mr|Mrs|Ms|Prof|Professor)\.? ([A-Z][a-z]+)\b")
FIRST_LETTER = re.compile(r"[A-Za-z]")
PRODUCT_TAIL = re.compile(r" (?:[A-Z]{2,}|\d)")
POSSESSIVE_HINT = re.compile(r"\b(?:[Mm]y|[Oo]ur|[Hh]is|[Hh]er|[Tt]heir) ")
CUE_HINT = re.compile(r"named|called|Dr|Mr|Ms|Prof")
BY_AUTHOR = re.compile(r"\bby ((?:[A-Z][a-z]+|[A-Z]\.)(?: (?:[A-Z][a-z'\-]+|[A-Z]\.)){0,3})")


# --- small helpers -----------------------------------------------------------------------------


def normalize(text: str) -> str:
    """Fold typographic quotes to ASCII and trim; the only preprocessing every detector shares."""
    return text.translate(_QUOTES).strip()


def split_sentences(text: str) -> list[str]:
    """Split on sentence punctuation and newlines, re-joining after abbreviations and before digits."""
    parts = [p.strip() for p in _SPLIT.split(text) if p and p.strip()]
    out: list[str] = []
    for part in parts:
        if out and (part[:1].isdigit() or part[:1].islower() or _ABBREV_END.search(" " + out[-1].rsplit(" ", 1)[-1])):
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


def words(text: str) -> list[str]:
    """Word tokens (letters, inner apostrophes and hyphens), original case."""
    return WORD.findall(text)


def strip_lead(lower_sentence: str) -> str:
    """Drop leading discourse fillers ("so,", "oh wow,", "by the way") from a lowercased sentence."""
    return _LEAD_FILLER.sub("", lower_sentence).strip()


def drop_leading_stopwords(toks: Sequence[str]) -> list[str]:
    """``toks`` without its leading stopwords ("See Truth and Method" → "Truth and Method")."""
    i = 0
    while i < len(toks) and (toks[i].lower() in STOPWORDS or toks[i].lower() in ("cf", "cf.")):
        i += 1
    return list(toks[i:])


def is_question(sentence: str) -> bool:
    """A question ends with ``?``, or has no end punctuation and opens with a wh-word or an auxiliary."""
    s = sentence.rstrip()
    if s.endswith("?"):
        return True
    if s[-1:] in ".!\u2026":
        return False
    lead = strip_lead(s.lower())
    return bool(_WH_START.match(lead)) and len(lead.split()) >= 3


def is_small_talk(sentence: str) -> bool:
    """Greetings, thanks, goodbyes, "how are you", tag questions, and short (≤ 6 words) contentless lines."""
    low = sentence.lower().strip(" \"'")
    lead = strip_lead(low) or low
    if len(low) <= 90:
        if SMALL_TALK.match(lead) or SMALL_TALK.match(low):
            return True
        if _TAG_QUESTION.search(low) and len(low.split()) <= 6:
            return True
    toks = words(lead)
    return len(toks) <= 6 and all(w.lower() in STOPWORDS for w in toks)


def question_kind(sentence: str) -> str:
    """``methodological`` (how should / which approach / should we / how to), ``interpretive`` (why / what
    does it mean / how do you feel / what do you think / what inspired you), else ``factual``."""
    low = strip_lead(sentence.lower())
    if _METHODOLOGICAL.search(low):
        return "methodological"
    if _INTERPRETIVE.search(low):
        return "interpretive"
    return "factual"


def is_clarification(text_lower: str, previous_was_question: bool) -> bool:
    """Clarification phrases; a turn opening with "I mean" counts only right after a question."""
    if _CLARIFICATION.search(text_lower):
        return True
    return previous_was_question and bool(_CLARIFY_START.match(strip_lead(text_lower)))


def negated_before(lower: str, start: int, window: int = 4) -> bool:
    """True when a negator occurs within ``window`` tokens before ``start`` in the same clause."""
    head = lower[max(0, start - 60) : start]
    for mark in (",", ";", ":", "\u2014", "\u2013", " - "):
        head = head.rsplit(mark, 1)[-1]
    toks = head.split()[-window:]
    for tok in reversed(toks):
        t = tok.strip("\"'()")
        if t in CLAUSE_BREAKS:
            return False
        if t in NEGATORS or t.endswith("n't"):
            return True
    return False


# --- emotions ----------------------------------------------------------------------------------

_EMO_WORD = re.compile(r"\b(" + "|".join(sorted(EMOTION_WORDS, key=len, reverse=True)) + r")\b")
_FORMULAIC_LOVE = re.compile(r"(?:'d|would|'ll|will) (?:really |so )?$")


def find_emotions(lower: str) -> tuple[tuple[str, ...], bool]:
    """Emotion labels in order of first appearance, and whether any is strong.

    Phrases first ("can't wait" → excitement, "won't give up" → determination), then single cues.
    A cue preceded by a negator in the same clause ("not happy", "no worries") is dropped; "would
    love to" is a wish, not love.  Strong: a cue from ``STRONG_EMOTION_WORDS`` or one intensified by
    "so/really/very/…" right before it.
    """
    found: dict[str, int] = {}
    strong = False
    covered: list[tuple[int, int]] = []
    for m in EMOTION_PHRASES.finditer(lower) if any(map(lower.__contains__, _PHRASE_HINT)) else ():
        covered.append(m.span())
        found.setdefault(m.lastgroup or "", m.start())
    for m in _EMO_WORD.finditer(lower):
        if any(a <= m.start() < b for a, b in covered):
            continue
        cue = m.group(1)
        if negated_before(lower, m.start()):
            continue
        if cue == "love" and _FORMULAIC_LOVE.search(lower[max(0, m.start() - 12) : m.start()]):
            continue
        found.setdefault(EMOTION_WORDS[cue], m.start())
        before = lower[max(0, m.start() - 20) : m.start()].split()[-2:]
        if cue in STRONG_EMOTION_WORDS or any(b in INTENSIFIERS for b in before):
            strong = True
    labels = tuple(sorted(found, key=lambda k: found[k]))
    return labels, strong


# --- people ------------------------------------------------------------------------------------


def name_ok(word: str) -> bool:
    low = word.lower()
    return not (
        low in STOPWORDS
        or low in PRONOUNS
        or low in WEEKDAYS_MONTHS
        or low in NOT_NAMES
        or low in EMOTION_WORDS
        or len(word) < 2
        or (low.endswith("ly") and low not in KEEP_LY_ED)
    )


@lru_cache(maxsize=8192)
def clean_run(run: str) -> tuple[str, ...]:
    """A capitalised run without possessive 's, leading interjections and non-name ends (cached)."""
    toks = [t[:-2] if t.endswith("'s") else t for t in run.split()]
    if len(toks) > 1 and toks[0].lower() in PLACE_PREFIXES:
        return tuple(toks)  # "New York", "San Diego": keep the prefix so the run reads as a place
    while toks and (toks[0].lower() in VOCATIVE_LEAD or not name_ok(toks[0])):
        toks.pop(0)
    while toks and not name_ok(toks[-1]):
        toks.pop()
    return tuple(toks)


# --- topic tags --------------------------------------------------------------------------------


def singular(word: str) -> str:
    """A light plural fold so "kids"/"kid" and "stories"/"story" count together."""
    if len(word) < 4 or word in NO_SINGULAR or word.endswith(("ss", "us", "is", "'s")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
    return word


@lru_cache(maxsize=16384)
def tag_key(low: str) -> str | None:
    """The tag a lowercase token contributes (its singular), or None when it is not a content word."""
    return singular(low) if content_word(low) else None


def content_word(low: str) -> bool:
    """A token worth a topic tag: not a stopword, emotion cue, pronoun, weekday or bare verb form."""
    if len(low) < 3 or low in STOPWORDS or low in EMOTION_WORDS or low in WEEKDAYS_MONTHS:
        return False
    if "'" in low:
        return False
    if low.endswith("ly") and low not in KEEP_LY_ED:
        return False
    return not (low.endswith("ed") and len(low) >= 5 and low not in KEEP_LY_ED and not low.endswith("eed"))


@lru_cache(maxsize=16384)
def _token_weight(tok: str) -> tuple[str, str | None, float]:
    """(lowercase token without 's, its tag or None, base weight: 1, or 1.5 when long and not -ing)."""
    low = tok.lower()
    low = low[:-2] if low.endswith("'s") else low
    key = tag_key(low)
    return low, key, 1.5 if key is not None and len(key) >= 7 and not key.endswith("ing") else 1.0


def topic_tags(sentences: Sequence[str], exclude: Iterable[str] = (), limit: int | None = 5) -> tuple[str, ...]:
    """Up to ``limit`` (None: all) lowercase tags: capitalised multi-word phrases, then content words by frequency.

    Scoring: a content word scores its count in the turn, +1 when it is ever capitalised mid-sentence
    (a proper noun), +0.5 when it is long (≥ 7 letters, not -ing); a multi-word capitalised phrase that is not a
    person scores 3.  Ties keep first-appearance order.  Words in ``exclude`` (people) are skipped.
    """
    banned = {e.lower() for e in exclude}
    for e in list(banned):
        banned.update(e.split())
    scores: dict[str, float] = {}
    first: dict[str, int] = {}
    pos = 0
    for sentence in sentences:
        bare = QUOTED.sub(" ", sentence)
        for m in CAP_RUN.finditer(bare):
            toks = clean_run(m.group(0))
            if toks and m.start() == 0 and toks[0].lower().endswith(("ing", "ed")):
                toks = toks[1:]  # "Adopting Gadamer's …" is about Gadamer
            phrase = " ".join(toks).lower()
            if len(toks) > 1 and phrase not in banned:
                scores[phrase] = scores.get(phrase, 0.0) + 3.0
                first.setdefault(phrase, pos)
                banned.update(phrase.split())
        for i, tok in enumerate(words(bare)):
            pos += 1
            low, key, weight = _token_weight(tok)
            if key is None or low in banned:
                continue
            scores[key] = scores.get(key, 0.0) + weight + (1.0 if i > 0 and tok[0].isupper() else 0.0)
            first.setdefault(key, pos)
    ranked = sorted(scores, key=lambda k: (-scores[k], first[k]))
    return tuple(k for k in ranked if k not in banned)[:limit]
