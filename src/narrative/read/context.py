"""The context block: in one call, what an agent should see next, within a token budget.

Layout (stable: the order never changes; a section with nothing to show is left out)::

    <context>
    <about_you>                        who the person is: the facts of Your Story, newest first
    </about_you>
    <storyline name="…">               the current storyline: description, rolling summary, participants
    </storyline>
    <bindings storyline="…">           what is bound to the current storyline: tool sets, jobs, goals (status)
    </bindings>
    <scene_memory> … </scene_memory>   recalled memories, placed by the scene formatter (read/scene.py)
    <open_threads>                     active questions, waiting-ons and tasks, newest first
    </open_threads>
    <reminders>                        goals gone quiet, decisions due for review (read/agenda.py)
    </reminders>
    <latest_narrative topic="…">       the newest link of the current storyline's chain (else the user's)
    </latest_narrative>
    <other_storylines>                 up to two other recent topic storylines, one line each
    </other_storylines>
    <recent_messages conversation="…"> up to 30 messages of the active (else the latest) conversation
    </recent_messages>
    </context>

What goes in:

* **current storyline** — the storyline of the user's latest message; small-talk default storylines
  are skipped when a topic storyline appears among the recent messages (they carry no summary).
* **scene_memory** — the hybrid-search hits for the query plus the most important of the newest
  memories of the current storyline. Each memory becomes a ``SceneItem`` whose position is the message
  it came from (``memory.positions[-1]``; a memory without source messages counts as "now", the chat
  length), with the memory's importance and emotions; ``chat_length`` is the user's last message
  position. Memories in retention tier ``key_points``/``theme`` are shown by their key points (ITSERR:
  older exchanges compressed). A conversation memory whose messages are all shown verbatim under
  ``recent_messages`` is left out, and so is any memory whose text mostly repeats (≥ 75 % of its
  4-word shingles) one shown message or one better-ranked memory: nothing is said twice. Typed
  memories carry a label (``Decision:`` …); each text is clipped to 60 words.
* **open threads** — active entities of types question_opened, waiting_on and task.
* **about you** — Talking Rock: "Your Story tells who you are".  The current facts of Your Story (what the person
  said about themselves, noted by the write path, and facts an agent filed there), newest first, each once.
* **bindings** and **reminders** (given an agenda: ``read/agenda.py``) — the live bindings of the current storyline
  (NarraNexus: "If there's a running job, the agent sees its status"), the stale goals and the decisions due for
  review.

Budget (tokens counted with the given counter, by default ``ApproxTokenCounter``; the whole block,
wrapper included, never exceeds ``budget``). Shares, filled in this order:

==================  =========================================================================
storyline           at most 8 % (drops the description, then participants, then old points)
open_threads        at most 10 % (drops the oldest threads)
latest_narrative    at most 5 % (the sentence is clipped)
other_storylines    at most 7 % (drops the older storyline)
recent_messages     35 % plus half of what the four sections above left unused (drops the oldest)
scene_memory        everything left, at least 35 %: the scene formatter drops The Story So Far
                    first, then Leading Up; if Current Scene alone is over, its least relevant
                    memories go
bindings            at most 4 % (drops tool sets first, goals last); taken from recent_messages
reminders           at most 5 % (drops decisions to review first, the quietest goal last); from recent_messages
about_you           at most 4 % (drops the oldest facts); from recent_messages
==================  =========================================================================

Recent messages and the scene therefore always get most of the budget, summaries a small fixed part.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from narrative.checks import require_positive, require_text
from narrative.errors import ValidationError
from narrative.model import (
    OPEN_ENTITY_TYPES,
    Conversation,
    Entity,
    EntityType,
    MemoryItem,
    Message,
    Narrative,
    Retention,
    Storyline,
    StorylineKind,
    Stream,
)
from narrative.providers.tokens import TokenCounter
from narrative.read.agenda import Agenda, binding_section, reminder_section
from narrative.read.context_block import LAYOUT, ContextBlock, LineCachedCounter, Recalled, SectionInfo
from narrative.read.current import current_messages
from narrative.read.scene import Scene, SceneItem, SceneSettings, auxiliary, build_scene
from narrative.read.search import SearchHit
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text.patterns import split_sentences

__all__ = [
    "LAYOUT",
    "MAX_RECENT",
    "MIN_BUDGET",
    "SHARES",
    "ContextBlock",
    "LineCachedCounter",
    "Recalled",
    "SectionInfo",
    "build_context",
    "memory_text",
    "scene_position",
]

#: Caps of the small sections and the base shares of the two big ones (fractions of the budget).
SHARES = {
    "storyline": 0.08,
    "open_threads": 0.10,
    "latest_narrative": 0.05,
    "other_storylines": 0.07,
    "recent_messages": 0.35,
    "scene_memory": 0.35,
    "bindings": 0.04,  # the agenda's two sections are paid for by recent_messages' share
    "reminders": 0.05,
    "about_you": 0.04,  # paid for by recent_messages too
}
MIN_BUDGET = 50  # the smallest budget any interface accepts; the scene alone is meant for ≥ 1000
MAX_BUDGET = 1_000_000
MAX_RECENT = 30
MAX_THREADS = 20
MAX_ABOUT = 10  # facts of Your Story read for about_you
MEMORY_WORDS = 60  # a memory's text in the scene is clipped to this many words
MESSAGE_WORDS = 120  # a recent message is clipped to this many words
THREAD_LABELS = {EntityType.QUESTION_OPENED: "question", EntityType.WAITING_ON: "waiting on", EntityType.TASK: "task"}
STREAM_LABELS = {Stream.DECISION: "Decision", Stream.RESEARCH: "Research", Stream.REFLECTION: "Reflection"}

Search = Callable[[str, int], list[SearchHit]]
AgendaOf = Callable[[Storyline | None], Agenda]  # the agenda, given the current storyline


# --- small helpers -------------------------------------------------------------------------------------


def _clip(text: str, words: int) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


def _attr(value: object) -> str:
    return '"' + " ".join(str(value).replace('"', "'").split()) + '"'


def _day(moment: datetime | None) -> str:
    return "" if moment is None else moment.date().isoformat()


def memory_text(memory: MemoryItem, words: int = MEMORY_WORDS) -> str:
    """What the scene shows for a memory: key points once compressed, a label for typed streams, clipped."""
    compressed = memory.retention in (Retention.KEY_POINTS, Retention.THEME) and memory.key_points.strip()
    text = memory.key_points if compressed else memory.content
    label = STREAM_LABELS.get(memory.stream)
    return _clip(f"{label}: {text}" if label else text, words)


def scene_position(memory: MemoryItem, chat_length: int) -> int:
    """The message a memory came from (its newest source message), else "now" (the chat length)."""
    return memory.positions[-1] if memory.positions else chat_length


@dataclass
class _Lines:
    """A section being fitted: a head line, ranked body lines, a tail line."""

    head: str
    tail: str
    lines: list[tuple[float, str]] = field(default_factory=list)  # (priority, text); lowest goes first

    def fit(self, limit: int, counter: TokenCounter) -> tuple[str, int, int, int]:
        """(text, tokens, shown, dropped); text is "" when not even one line fits."""
        costs = [counter.count(text) + 1 for _, text in self.lines]  # +1: the newline before each line
        frame = counter.count(self.head) + counter.count(self.tail) + 1
        kept = set(range(len(self.lines)))
        total = frame + sum(costs)
        for i in sorted(kept, key=lambda i: (self.lines[i][0], i)):
            if total <= limit:
                break
            kept.discard(i)
            total -= costs[i]
        if not kept or total > limit:
            return "", 0, 0, len(self.lines)
        body = [text for i, (_, text) in enumerate(self.lines) if i in kept]
        return "\n".join([self.head, *body, self.tail]), total, len(kept), len(self.lines) - len(kept)


# --- gathering -------------------------------------------------------------------------------------------


@dataclass
class _Gathered:
    chat_length: int
    conversation: Conversation | None
    recent: list[Message]
    storylines: dict[int, Storyline]
    current: Storyline | None
    narrative: Narrative | None
    threads: list[Entity]
    agenda: Agenda | None = None
    about: list[MemoryItem] = field(default_factory=list)


def _gather(store: Store, user_id: str) -> _Gathered:
    conversation = store.active_conversation(user_id)
    if conversation is None:
        latest = store.list_conversations(user_id, limit=1)
        conversation = latest[0] if latest else None
    recent: list[Message] = []
    if conversation is not None:
        recent = store.list_messages(user_id, conversation_id=conversation.id, limit=MAX_RECENT, latest=True)
        recent = current_messages(store, user_id, recent)  # a corrected statement is not shown as what is true
    storylines = {s.id: s for s in store.list_storylines(user_id, include_archived=True)}
    candidates = recent or store.list_messages(user_id, limit=10, latest=True)
    current = _current_storyline(candidates, storylines)
    narrative = None
    if current is not None:
        narrative = store.latest_narrative(user_id, storyline_id=current.id)
    narrative = narrative or store.latest_narrative(user_id)
    threads = store.list_entities(user_id, entity_types=sorted(OPEN_ENTITY_TYPES), active=True, limit=MAX_THREADS)
    gathered = _Gathered(store.last_position(user_id), conversation, recent, storylines, current, narrative, threads)
    gathered.about = _about(store, user_id, storylines)
    return gathered


def _about(store: Store, user_id: str, storylines: dict[int, Storyline]) -> list[MemoryItem]:
    """The current facts of Your Story, newest first, each text once (said again, it is shown once)."""
    story = next((s for s in storylines.values() if s.kind is StorylineKind.YOUR_STORY), None)
    if story is None:
        return []
    facts = store.list_memories(
        user_id, MemoryFilter(storyline_ids=[story.id], streams=[Stream.FACT], current_only=True, limit=MAX_ABOUT)
    )
    seen: set[str] = set()
    once = []
    for fact in facts:
        key = " ".join(fact.content.casefold().split())
        if key not in seen:
            seen.add(key)
            once.append(fact)
    return once


def _current_storyline(messages: Sequence[Message], storylines: dict[int, Storyline]) -> Storyline | None:
    routed = [storylines[m.storyline_id] for m in reversed(messages) if m.storyline_id in storylines]
    topical = [s for s in routed if s.kind is not StorylineKind.DEFAULT]
    chosen = topical or routed
    return chosen[0] if chosen else None


def _select(
    store: Store, user_id: str, hits: Sequence[SearchHit], current: Storyline | None, extra: int, chat_length: int
) -> list[Recalled]:
    """Search hits best first, then the most important of the current storyline's newest memories."""
    chosen: list[Recalled] = []
    seen: set[int] = set()
    for hit in hits:
        seen.update((hit.memory.id, *hit.also))  # a memory folded into a hit is said by it
        chosen.append(
            _recalled(
                hit.memory,
                len(chosen) + 1,
                "search",
                hit.score,
                str(hit.why()["summary"]),
                chat_length,
                shown=hit.text if hit.text and hit.text != hit.memory.content else None,
            )
        )
    if current is None or extra <= 0:
        return chosen
    newest = store.list_memories(user_id, MemoryFilter(storyline_ids=[current.id], current_only=True, limit=3 * extra))
    ranked = sorted(enumerate(newest), key=lambda p: (-p[1].importance, p[0]))
    picked = [m for _, m in ranked if m.id not in seen][:extra]
    for memory in picked:
        why = f"recent in the current storyline {current.name!r} (importance {memory.importance})"
        chosen.append(_recalled(memory, len(chosen) + 1, "storyline", 0.0, why, chat_length))
    return chosen


def _once(chosen: list[Recalled]) -> list[Recalled]:
    """Each sentence once in the scene: overlapping exchanges (a turn with the turn before, then that turn with
    the next) and compressed key points repeat what a better-ranked item says; it is said there, and a
    memory left with nothing new is not shown again."""
    said: set[str] = set()
    kept: list[Recalled] = []
    for recalled in chosen:
        fresh = []
        for sentence in split_sentences(recalled.text):
            key = " ".join(sentence.lower().rstrip(".!?…").split())
            if key and key not in said:
                said.add(key)
                fresh.append(sentence)
        if fresh:
            text = " ".join(fresh)
            kept.append(recalled if text == " ".join(split_sentences(recalled.text)) else replace(recalled, text=text))
    return kept


def _recalled(
    memory: MemoryItem, rank: int, origin: str, score: float, why: str, chat_length: int, shown: str | None = None
) -> Recalled:
    """A recalled memory as the scene shows it: what its search hit shows (the turns and passages that answer,
    not what a later turn superseded), else the memory's own text."""
    if shown is not None and memory.retention is Retention.FULL:
        text = memory_text(dataclasses.replace(memory, content=shown))
    else:
        text = memory_text(memory)
    return Recalled(memory, rank, origin, score, why, scene_position(memory, chat_length), text)


# --- sections ------------------------------------------------------------------------------------------------


def _storyline_lines(storyline: Storyline) -> _Lines:
    section = _Lines(f"<storyline name={_attr(storyline.name)}>", "</storyline>")
    summary = [line.strip() for line in storyline.summary.splitlines() if line.strip()]
    if storyline.description.strip() and storyline.description.strip() not in storyline.summary:
        section.lines.append((0, _clip(storyline.description.strip(), 40)))
    for i, line in enumerate(summary):
        section.lines.append((2 + i, _clip(line, 60)))
    if storyline.participants:
        people = ", ".join(f"{p.name} ({p.role})" for p in storyline.participants)
        section.lines.append((1, f"Participants: {people}"))
    section.lines.sort(key=lambda p: 1 if p[1].startswith("Participants:") else 0)  # participants last
    return section


def _thread_lines(threads: Sequence[Entity], storylines: dict[int, Storyline]) -> _Lines:
    section = _Lines("<open_threads>", "</open_threads>")
    for i, entity in enumerate(threads):  # newest first: the oldest has the lowest priority
        where = storylines.get(entity.storyline_id or 0)
        place = f", {where.name}" if where is not None and where.kind is not StorylineKind.DEFAULT else ""
        text = f"- {THREAD_LABELS.get(entity.entity_type, entity.entity_type.value)}: {_clip(entity.name, 30)}"
        section.lines.append((-i, f"{text} (since {_day(entity.created_at)}{place})"))
    return section


def _narrative_lines(narrative: Narrative, limit: int) -> _Lines:
    section = _Lines(f"<latest_narrative topic={_attr(narrative.topic or '-')}>", "</latest_narrative>")
    section.lines.append((0, _clip(narrative.summary, max(8, int(limit * 0.6)))))  # ~0.6 words per token left
    return section


def _about_lines(facts: Sequence[MemoryItem]) -> _Lines:
    section = _Lines("<about_you>", "</about_you>")
    for i, fact in enumerate(facts):  # newest first: the oldest has the lowest priority
        section.lines.append((-i, f"- {_clip(fact.content, 40)} (said {_day(fact.event_at or fact.created_at)})"))
    return section


def _auxiliary_lines(others: Sequence[Storyline]) -> _Lines:
    section = _Lines("<other_storylines>", "</other_storylines>")
    for i, storyline in enumerate(others):
        points = [line.strip().lstrip("-").strip() for line in storyline.summary.splitlines() if line.strip()]
        latest = points[-1] if points else storyline.description.strip()
        text = f"- {storyline.name}: {_clip(latest, 40)}" if latest else f"- {storyline.name}"
        section.lines.append((-i, text))
    return section


def _recent_lines(conversation: Conversation, recent: Sequence[Message]) -> _Lines:
    head = (
        f"<recent_messages conversation={_attr(conversation.id)} title={_attr(conversation.title or '-')}"
        f" status={_attr(conversation.status.value)} started={_attr(_day(conversation.started_at))}>"
    )
    section = _Lines(head, "</recent_messages>")
    for i, message in enumerate(recent):  # oldest first: the oldest has the lowest priority
        who = message.speaker or message.role.value
        section.lines.append((i, f"{who}: {_clip(message.content, MESSAGE_WORDS)}"))
    return section


def _emotional_state(chosen: Sequence[Recalled], chat_length: int, settings: SceneSettings) -> str | None:
    recent = [r for r in chosen if chat_length - r.position < settings.CURRENT_SCENE_SIZE and r.memory.emotions]
    if not recent:
        return None
    newest = max(recent, key=lambda r: (r.position, r.memory.id))
    return ", ".join(newest.memory.emotions)


def _fit_scene(
    chosen: list[Recalled], chat_length: int, limit: int, counter: TokenCounter
) -> tuple[Scene | None, list[Recalled]]:
    """The scene within ``limit``; when Current Scene alone is over, the least relevant of it go first."""
    settings = SceneSettings(MIN_BUDGET=1)
    pool = list(chosen)
    while pool:
        items = [SceneItem(r.position, r.text, r.memory.importance, r.memory.emotions) for r in pool]
        scene = build_scene(
            items,
            chat_length,
            budget=limit,
            counter=counter,
            settings=settings,
            emotional_state=_emotional_state(pool, chat_length, settings),
        )
        if scene.tokens <= limit:
            return scene, _shown(pool, scene)
        current = [r for r in pool if chat_length - r.position < settings.CURRENT_SCENE_SIZE]
        over = scene.tokens - limit
        for victim in sorted(current, key=lambda r: -r.rank):  # lowest relevance first
            pool.remove(victim)
            over -= counter.count(victim.text) + 4
            if over <= 0:
                break
        if not current:
            break
    return None, []


def _shown(pool: Sequence[Recalled], scene: Scene) -> list[Recalled]:
    """The recalled memories the fitted scene kept (the formatter drops whole items, oldest first)."""
    kept: dict[tuple[int, str], int] = {}
    for bucket in scene.buckets:
        for entry in bucket.entries:
            key = (entry.item.position, entry.item.text)
            kept[key] = kept.get(key, 0) + 1
    shown = []
    for recalled in pool:
        key = (recalled.position, " ".join(recalled.text.split()))
        if kept.get(key, 0) > 0:
            kept[key] -= 1
            shown.append(recalled)
    return shown


# --- assembly ----------------------------------------------------------------------------------------------


def check_budget(budget: object) -> int:
    value = require_positive(budget, "budget")
    if not MIN_BUDGET <= value <= MAX_BUDGET:
        raise ValidationError(f"budget must be between {MIN_BUDGET} and {MAX_BUDGET} tokens, got {value}", "budget")
    return value


def search_size(budget: int) -> int:
    """How many search hits to ask for: about one per 45 tokens of the scene's base share, 6 to 40."""
    return max(6, min(40, int(budget * SHARES["scene_memory"]) // 45))


def build_context(
    store: Store,
    user_id: str,
    query: str,
    budget: int = 2000,
    *,
    search: Search,
    counter: TokenCounter | None = None,
    agenda: AgendaOf | None = None,
) -> ContextBlock:
    """Assemble the context block for ``query`` within ``budget`` tokens (layout in the module docstring)."""
    require_text(query, "query", max_length=10_000)
    budget = check_budget(budget)
    counter = counter or LineCachedCounter()
    gathered = _gather(store, user_id)
    if agenda is not None:
        gathered.agenda = agenda(gathered.current)
    k = search_size(budget)
    chosen = _once(_select(store, user_id, search(query, k), gathered.current, max(2, k // 4), gathered.chat_length))
    block = _assemble(query, budget, budget, gathered, chosen, counter)
    for _ in range(3):  # a counter that is not additive may overshoot a little: tighten and retry
        if block.tokens <= budget:
            break
        block = _assemble(query, budget, 2 * budget - block.tokens - 4, gathered, chosen, counter)
    return block


def _assemble(
    query: str, budget: int, limit: int, g: _Gathered, chosen: list[Recalled], counter: TokenCounter
) -> ContextBlock:
    frame = counter.count("<context>") + counter.count("</context>") + len(LAYOUT) + 1
    left = limit - frame
    infos: list[SectionInfo] = []
    texts: dict[str, str] = {}

    def put(name: str, section: _Lines | None, cap: int) -> int:
        text, tokens, shown, dropped = section.fit(cap, counter) if section is not None else ("", 0, 0, 0)
        infos.append(SectionInfo(name, cap, tokens, shown, dropped))
        texts[name] = text
        return tokens

    others = auxiliary(list(g.storylines.values()), None if g.current is None else g.current.id)
    small = {
        "storyline": None if g.current is None else _storyline_lines(g.current),
        "open_threads": _thread_lines(g.threads, g.storylines) if g.threads else None,
        "latest_narrative": None,
        "other_storylines": _auxiliary_lines(others) if others else None,
    }
    slack = 0
    for name, section in small.items():
        cap = int(limit * SHARES[name])
        if name == "latest_narrative" and g.narrative is not None:
            section = _narrative_lines(g.narrative, cap)
        used = put(name, section, cap)
        slack += cap - used
        left -= used
    agenda_used = _put_agenda(put, g, limit)
    agenda_used += put("about_you", _about_lines(g.about) if g.about else None, int(limit * SHARES["about_you"]))
    left -= agenda_used
    recent_cap = min(left, int(limit * SHARES["recent_messages"]) - agenda_used + slack // 2)
    recent = _recent_lines(g.conversation, g.recent) if g.conversation is not None and g.recent else None
    left -= put("recent_messages", recent, recent_cap)
    shown_recent = _info(infos, "recent_messages").shown
    pool = _without_repeats(chosen, g.recent[len(g.recent) - shown_recent :] if shown_recent else [])
    scene, kept = _fit_scene(pool, g.chat_length, left, counter) if pool else (None, [])
    scene_text = scene.render() if scene is not None else ""
    infos.append(
        SectionInfo("scene_memory", left, 0 if scene is None else scene.tokens, len(kept), len(pool) - len(kept))
    )
    texts["scene_memory"] = scene_text
    body = [texts[name] for name in LAYOUT if texts.get(name)]
    text = "\n".join(["<context>", *body, "</context>"])
    order = {name: i for i, name in enumerate(LAYOUT)}
    return ContextBlock(
        query=query,
        budget=budget,
        tokens=counter.count(text),
        counter=counter.identity,
        text=text,
        chat_length=g.chat_length,
        storyline=g.current if texts["storyline"] else None,
        scene=scene,
        memories=tuple(kept),
        conversation=g.conversation,
        recent=tuple(g.recent[len(g.recent) - shown_recent :]) if shown_recent else (),
        threads=tuple(g.threads[: _info(infos, "open_threads").shown]),
        narrative=g.narrative if texts["latest_narrative"] else None,
        auxiliary=tuple(others[: _info(infos, "other_storylines").shown]),
        sections=tuple(sorted(infos, key=lambda s: order[s.name])),
        agenda=g.agenda,
        about=tuple(g.about[: _info(infos, "about_you").shown]),
    )


def _put_agenda(put: Callable[[str, _Lines | None, int], int], g: _Gathered, limit: int) -> int:
    """The bindings and reminders sections (when there is an agenda); the tokens they used."""
    bindings: _Lines | None = None
    reminders: _Lines | None = None
    if g.agenda is not None and g.current is not None and g.agenda.bindings:
        bindings = _Lines(*binding_section(g.current, g.agenda.bindings))
    if g.agenda is not None and (g.agenda.stale_goals or g.agenda.reviews):
        reminders = _Lines(*reminder_section(g.agenda))
    return put("bindings", bindings, int(limit * SHARES["bindings"])) + put(
        "reminders", reminders, int(limit * SHARES["reminders"])
    )


def _info(infos: Sequence[SectionInfo], name: str) -> SectionInfo:
    return next(i for i in infos if i.name == name)


_WORDS = re.compile(r"[a-z0-9']+")
SHINGLE = 4  # words per shingle when comparing texts
REDUNDANT = 0.75  # share of a memory's shingles found in one other text that makes it a repeat


def _shingles(text: str) -> frozenset[tuple[str, ...]]:
    words = _WORDS.findall(text.lower())
    if len(words) <= SHINGLE:
        return frozenset([tuple(words)])
    return frozenset(tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1))


def _without_repeats(chosen: Sequence[Recalled], shown: Sequence[Message]) -> list[Recalled]:
    """Leave out what the block already says: conversation memories whose messages are all shown under
    recent_messages, and any memory whose text mostly (≥ 75 % of its 4-word shingles) repeats one shown
    message or one better-ranked memory.  A memory a person edited says what its messages do not ("April 8"
    where they said "April 1"): the messages shown never stand in for it."""
    shown_ids = {m.id for m in shown}
    said = [_shingles(m.content) for m in shown]
    seen: list[frozenset[tuple[str, ...]]] = []
    kept = []
    for r in chosen:
        m = r.memory
        if not m.user_edited and m.stream is Stream.CONVERSATION and m.message_ids and set(m.message_ids) <= shown_ids:
            continue
        mine = _shingles(m.content)
        against = seen if m.user_edited else [*said, *seen]
        if mine and any(len(mine & other) >= REDUNDANT * len(mine) for other in against):
            continue
        seen.append(mine)
        kept.append(r)
    return kept
