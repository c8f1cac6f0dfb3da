"""Exports of one user's memory: lossless JSON (see docs/export-format.md) and readable Markdown.

The JSON document is deterministic — rows in primary-key order, keys sorted, no export time —
so exporting, importing into an empty store and exporting again gives the same bytes.
The Markdown is for people: one section per storyline with the memories of closed conversations
(and what they extracted), the other remembered items, the open threads, and every archived
conversation's transcript, each memory linking to its conversation's anchor.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from narrative.errors import ValidationError
from narrative.model import Conversation, Entity, EntityType, MemoryItem, Storyline, StorylineKind, Stream
from narrative.read.full_text import full_texts
from narrative.read.open_items import open_entities
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text.lines import entity_label

__all__ = [
    "FORMAT",
    "MEMORY_COLUMNS",
    "SCHEMA_VERSION",
    "Dump",
    "export_csv",
    "export_json",
    "export_jsonl",
    "export_markdown",
    "parse_dump",
]

FORMAT = "narrative-export"
SCHEMA_VERSION = 1
VECTOR_TABLES = ("memory_vectors", "storyline_vectors", "passage_vectors")


@dataclass(frozen=True)
class Dump:
    user: str
    tables: dict[str, list[dict[str, Any]]]

    def models(self) -> Counter[str]:
        return Counter(str(r.get("model")) for t in VECTOR_TABLES for r in self.tables.get(t, []))


def export_json(store: Store, user_id: str) -> str:
    """Every row of the user, with a header: format, schema_version, user, migrations, models, counts."""
    tables = store.export_user_rows(user_id)
    dump = Dump(user_id, tables)
    document = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "user": user_id,
        "migrations": store.applied_migrations(),
        "embedding_models": dict(sorted(dump.models().items())),
        "counts": {table: len(rows) for table, rows in tables.items()},
        "tables": tables,
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def parse_dump(text: str) -> Dump:
    """Check a JSON export's envelope; ValidationError names what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("the export is empty", field="text")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValidationError(f"the export is not JSON: {error}", field="text") from error
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValidationError(f"not a narrative export (format must be {FORMAT!r})", field="format")
    if document.get("schema_version") != SCHEMA_VERSION:
        raise ValidationError(
            f"unsupported schema_version {document.get('schema_version')!r}; this version reads {SCHEMA_VERSION}",
            field="schema_version",
        )
    tables = document.get("tables")
    if not isinstance(tables, dict) or not all(
        isinstance(rows, list) and all(isinstance(r, dict) for r in rows) for rows in tables.values()
    ):
        raise ValidationError("tables must map each table name to a list of row objects", field="tables")
    user = document.get("user")
    if not isinstance(user, str) or not user:
        raise ValidationError("the export names no user", field="user")
    return Dump(user, tables)


# --- markdown ------------------------------------------------------------------------------------


def _anchor(conversation_id: int) -> str:
    return f"conversation-{conversation_id}"


def _link(conversations: dict[int, Conversation], conversation_id: int | None) -> str:
    if conversation_id is None or conversation_id not in conversations:
        return ""
    c = conversations[conversation_id]
    title = f" “{c.title}”" if c.title else ""
    return f"[conversation #{c.id}{title}](#{_anchor(c.id)})"


_LINE_END = re.compile(r"\r\n|\r|\n")  # what CommonMark takes for the end of a line
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")  # a code fence: ``` or ~~~ (three or more), up to 3 spaces in


def _opening(line: str) -> str | None:
    """The fence ``line`` opens a code block with (``` or ~~~, as long as it is), else None."""
    found = _FENCE.fullmatch(line)
    if found is None or (found[1][0] == "`" and "`" in found[2]):  # ``` with a backtick after it is inline code
        return None
    return found[1]


def _closes(found: re.Match[str], fence: str) -> bool:
    """A fence line closes ``fence``: the same character, at least as many, nothing after it."""
    return found[1][0] == fence[0] and len(found[1]) >= len(fence) and not found[2].strip()


def _fences_closed(lines: list[str]) -> list[str]:
    """``lines`` with a code fence they leave open closed after them: an open fence would make code of all that
    follows it in the export."""
    open_fence: str | None = None
    for line in lines:
        if open_fence is None:
            open_fence = _opening(line)
        elif (found := _FENCE.fullmatch(line)) and _closes(found, open_fence):
            open_fence = None
    return lines if open_fence is None else [*lines, open_fence]


def _text_lines(head: str, text: str, pad: str, tail: str = "") -> list[str]:
    """``head`` followed by ``text`` (a message, a memory: any number of lines, words unchanged) as Markdown lines
    that stay in the block ``head`` opens: every later line indented by ``pad`` (a list item's content column, so
    a blank line, a list or a fence does not end the item), a fence left open closed, and ``tail`` after the last
    line (on a line of its own after a fence or an empty line).  Text that opens with a fence starts on the line
    after ``head``: on ``head``'s line it would read as inline code, and its closing fence would open one."""
    lines = _fences_closed(_LINE_END.split(text))
    first, rest = ("", lines) if _opening(lines[0]) else (lines[0], lines[1:])
    out = [f"{head} {first}" if first else head, *(pad + line if line else "" for line in rest)]
    if tail:
        last = out[-1]
        ends_apart = len(out) > 1 and (not last or _FENCE.fullmatch(last.removeprefix(pad)))
        out = [*out, pad + tail.strip()] if ends_apart else [*out[:-1], last + tail]
    return out


def _item(head: str, text: str, indent: str = "", tail: str = "") -> list[str]:
    """One list item, ``indent`` deep: ``- head text tail``, every line of ``text`` inside the item."""
    return _text_lines(f"{indent}- {head}", text, indent + "  ", tail)


def _entity_lines(e: Entity) -> list[str]:
    label = entity_label(e.entity_type, e.name, e.data).removeprefix("waiting on ")
    kind = e.entity_type.value.replace("_", " ")
    state = "" if e.is_active else f" — resolved {e.resolved_at:%Y-%m-%d}" if e.resolved_at else " — resolved"
    return _item(f"{kind}:", label, indent="  ", tail=state)


def _memory_block(store: Store, user_id: str, m: MemoryItem, conversations: dict[int, Conversation]) -> list[str]:
    when = m.event_at or m.created_at
    source = _link(conversations, m.conversation_id)
    lines = [f"### {when:%Y-%m-%d}" + (f" · from {source}" if source else ""), ""]
    lines += _fences_closed(_LINE_END.split(m.content))
    if m.user_edited and m.original_content:
        lines += ["", *_text_lines("_Edited by you; first proposed as:_", m.original_content, "")]
    entities = store.list_entities(user_id, memory_id=m.id)
    if entities:
        lines += ["", "Extracted:"]
        lines += [line for e in sorted(entities, key=lambda e: e.id) for line in _entity_lines(e)]
    return [*lines, ""]


def _storyline_section(
    store: Store,
    user_id: str,
    storyline: Storyline | None,
    memories: list[MemoryItem],
    conversations: dict[int, Conversation],
) -> list[str]:
    closing = [m for m in memories if m.user_reviewed]
    others = [m for m in memories if m not in closing and m.stream is not Stream.CONVERSATION]
    title = storyline.name if storyline is not None else "Not in a storyline"
    lines = [f"## {title}", ""]
    if storyline is not None and storyline.description:
        lines += [f"_{storyline.description}_", ""]
    for m in sorted(closing, key=lambda m: (m.event_at or m.created_at, m.id)):
        lines += _memory_block(store, user_id, m, conversations)
    if others:
        lines += ["Also remembered:", ""]
        for m in sorted(others, key=lambda m: (m.event_at or m.created_at, m.id)):
            source = _link(conversations, m.conversation_id)
            head = f"{(m.event_at or m.created_at):%Y-%m-%d} [{m.stream.value}]"
            lines += _item(head, m.content, tail=f" ({source})" if source else "")
        lines.append("")
    return lines


def _transcripts(store: Store, user_id: str, conversations: dict[int, Conversation]) -> list[str]:
    lines = ["## Archived conversations", ""]
    for c in sorted(conversations.values(), key=lambda c: c.id):
        title = f" · “{c.title}”" if c.title else ""
        lines += [
            f'<a id="{_anchor(c.id)}"></a>',
            "",
            f"### Conversation #{c.id}{title} · {c.status.value}",
            "",
            f"Started {c.started_at:%Y-%m-%d %H:%M}, {c.message_count} messages"
            + (f", archived {c.archived_at:%Y-%m-%d %H:%M}" if c.archived_at else "")
            + ".",
            "",
        ]
        for message in store.list_messages(user_id, conversation_id=c.id):
            who = message.speaker or message.role.value
            lines += _item(f"**{who}** ({message.created_at:%H:%M}):", message.content)
        lines.append("")
    return lines


def export_markdown(store: Store, user_id: str) -> str:
    """A readable export: storylines with their memories, open threads, archived transcripts."""
    storylines = store.list_storylines(user_id, include_archived=True)
    conversations = {c.id: c for c in store.list_conversations(user_id, limit=1_000_000)}
    memories = store.list_memories(user_id, MemoryFilter())
    by_storyline: dict[int | None, list[MemoryItem]] = {}
    for m in memories:
        by_storyline.setdefault(m.storyline_id, []).append(m)
    lines = [
        f"# The narrative memory of {user_id}",
        "",
        f"{len(memories)} memories in {len(storylines)} storylines, from {len(conversations)} conversations."
        " Exported by narrative.",
        "",
    ]
    order = sorted(storylines, key=lambda s: (s.kind is not StorylineKind.YOUR_STORY, s.id))
    for storyline in order:
        items = by_storyline.get(storyline.id, [])
        if items or storyline.kind is StorylineKind.YOUR_STORY:
            lines += _storyline_section(store, user_id, storyline, items, conversations)
    if by_storyline.get(None):
        lines += _storyline_section(store, user_id, None, by_storyline[None], conversations)
    open_items = open_entities(store, user_id)
    if open_items:
        lines += ["## Open threads", ""]
        for e in open_items:
            label = entity_label(e.entity_type, e.name, e.data)
            kind = "waiting on" if e.entity_type is EntityType.WAITING_ON else e.entity_type.value.replace("_", " ")
            source = _link(conversations, e.conversation_id)
            lines += _item(f"{kind}:", label.removeprefix("waiting on "), tail=f" ({source})" if source else "")
        lines.append("")
    lines += _transcripts(store, user_id, conversations)
    return "\n".join(lines).rstrip() + "\n"


# --- jsonl and csv: the memories as rows ---------------------------------------------------------

#: The columns of the JSONL and CSV exports, in order: one row per memory.
MEMORY_COLUMNS = (
    "id",
    "time",
    "created_at",
    "stream",
    "source",
    "importance",
    "content",
    "storyline_id",
    "storyline",
    "conversation_id",
    "message_ids",
    "emotions",
    "metadata",
    "current",
    "superseded_by",
    "text",
)


def _memory_rows(store: Store, user_id: str) -> list[dict[str, Any]]:
    """Every memory of the user, oldest first (by id), as the rows of the JSONL and CSV exports.

    ``content`` is the memory's own text, as every other reader of it sees it; ``text`` is the whole text it
    stands for: for a memory of a long message, which quotes only its first passage, the whole message (a row
    of these exports is all a spreadsheet or a pipeline gets of a memory, and must not lose the rest)."""
    names = {s.id: s.name for s in store.list_storylines(user_id, include_archived=True)}
    memories = sorted(store.list_memories(user_id, MemoryFilter()), key=lambda m: m.id)
    whole = full_texts(store, user_id, memories)
    rows = []
    for m in memories:
        rows.append(
            {
                "id": m.id,
                "time": (m.event_at or m.created_at).isoformat(),
                "created_at": m.created_at.isoformat(),
                "stream": m.stream.value,
                "source": m.source.value,
                "importance": m.importance,
                "content": m.content,
                "storyline_id": m.storyline_id,
                "storyline": names.get(m.storyline_id) if m.storyline_id is not None else None,
                "conversation_id": m.conversation_id,
                "message_ids": list(m.message_ids),
                "emotions": list(m.emotions),
                "metadata": m.metadata,
                "current": m.valid_to is None,
                "superseded_by": m.superseded_by,
                "text": whole[m.id],
            }
        )
    return rows


def export_jsonl(store: Store, user_id: str) -> str:
    """One JSON object a line, one line per memory (``MEMORY_COLUMNS``), oldest first; keys in that order."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in _memory_rows(store, user_id))


def export_csv(store: Store, user_id: str) -> str:
    """A header line, then one line per memory (``MEMORY_COLUMNS``); lists and metadata as JSON text, empty
    cells for null, ``true``/``false`` for ``current``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(MEMORY_COLUMNS)
    for row in _memory_rows(store, user_id):
        writer.writerow([_cell(row[column]) for column in MEMORY_COLUMNS])
    return out.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)
