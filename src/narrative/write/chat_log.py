"""Chat logs to import: JSONL of messages, and the conversation exports of ChatGPT and Claude.

Everything is read and checked before anything is stored (``import_chat`` stores what this returns), so a
bad line is reported with its number and nothing of the file is half-stored.  Three formats:

``jsonl``
    One message a line: ``{"content": "...", "role": "user"}`` with, optionally, ``speaker``, ``at`` (ISO
    8601, or seconds since 1970), ``meta`` (an object) and ``conversation`` (any text or number: a new value
    starts a new conversation; ``title`` names it).  ``text`` is accepted for ``content``; roles are
    ``user``, ``assistant``, ``system``, ``tool`` (``human`` and ``ai`` are read as user and assistant).
    Blank lines are skipped.
``chatgpt``
    ChatGPT's ``conversations.json``: a list of conversations, each a tree of messages (``mapping``); the
    branch that ends at ``current_node`` is the conversation as it was last seen.  Hidden and empty messages
    are skipped (counted in ``skipped``).
``claude``
    Claude's ``conversations.json``: a list of conversations, each with ``chat_messages`` (``sender``
    ``human`` or ``assistant``, ``text`` or text ``content`` blocks).  Empty messages are skipped.

``auto`` tells them apart: a JSON array (or object) whose conversations have ``mapping`` is ChatGPT's, with
``chat_messages`` Claude's; anything else is read as JSONL.

Conversations come out in the order they began (a message without a time takes the one before it), and
:func:`held_already` says which of them the user holds already, so an import stores each one once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from narrative.checks import require_message
from narrative.errors import ValidationError
from narrative.model import Message, Role
from narrative.store.protocol import Store
from narrative.validate import MAX_NAME, check_value, require_unicode

__all__ = ["FORMATS", "ChatConversation", "ChatLog", "ChatTurn", "held_already", "parse_chat_log"]

FORMATS = ("auto", "jsonl", "chatgpt", "claude")
ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
}


@dataclass(frozen=True)
class ChatTurn:
    """One message to remember, with where it was in the file (``line 7``, ``conversation 2, message 4``)."""

    content: str
    role: str
    where: str
    speaker: str = ""
    at: datetime | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChatConversation:
    title: str
    where: str
    turns: list[ChatTurn] = field(default_factory=list)


@dataclass
class ChatLog:
    format: str
    conversations: list[ChatConversation]
    skipped: int = 0  # empty or hidden messages of an export, left out

    @property
    def messages(self) -> int:
        return sum(len(c.turns) for c in self.conversations)


def parse_chat_log(text: str, format: str = "auto") -> ChatLog:
    """Read and check a whole chat log; ValidationError names the line (or conversation and message)."""
    if format not in FORMATS:
        raise ValidationError(f"format must be one of {', '.join(FORMATS)}; got {format!r}", field="format")
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("the chat log is empty", field="text")
    document: Any = None
    if format in ("auto", "chatgpt", "claude"):
        document = _json_document(text, required=format != "auto")
    if format == "auto":
        format = _detect(document)
    log = _jsonl(text) if format == "jsonl" else _export(document, format)
    log.conversations = [_timed(c) for c in log.conversations if c.turns]
    if not log.conversations:
        raise ValidationError("the chat log holds no message with text", field="text")
    log.conversations = _in_time_order(log.conversations)
    return log


def _timed(conversation: ChatConversation) -> ChatConversation:
    """A message without a time in a conversation whose other messages have one takes the time of the message
    before it (the first ones: of the first that has one); stamped with the time of the import, it would sit
    among messages of years before as the newest thing said.  A conversation without any time is left as is
    (its messages are stamped when stored)."""
    known = [t.at for t in conversation.turns if t.at is not None]
    if not known or len(known) == len(conversation.turns):
        return conversation
    last = known[0]
    turns = []
    for turn in conversation.turns:
        last = turn.at or last
        turns.append(turn if turn.at is not None else replace(turn, at=last))
    return replace(conversation, turns=turns)


def _in_time_order(conversations: list[ChatConversation]) -> list[ChatConversation]:
    """Conversations in the order they began, those without a time last (they are stamped with the time of the
    import) and ties in file order: ChatGPT's export lists the newest first, and stored in file order the
    narrative chain would run backwards and the oldest conversation would be taken for where the user left off."""

    def began(item: tuple[int, ChatConversation]) -> tuple[bool, datetime, int]:
        index, conversation = item
        times = [t.at for t in conversation.turns if t.at is not None]
        return (not times, min(times) if times else datetime.min.replace(tzinfo=UTC), index)

    return [c for _, c in sorted(enumerate(conversations), key=began)]


def _json_document(text: str, required: bool) -> Any:
    stripped = text.lstrip()
    if not required and not stripped.startswith("["):
        if not stripped.startswith("{"):
            return None
        try:
            first = json.loads(text)
        except json.JSONDecodeError:
            return None  # several objects: JSONL
        return first
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValidationError(
            f"line {error.lineno}, column {error.colno}: not JSON ({error.msg})", field="text"
        ) from None


def _detect(document: Any) -> str:
    conversations = document if isinstance(document, list) else [document] if isinstance(document, dict) else []
    first = next((c for c in conversations if isinstance(c, dict)), None)
    if first is not None and "mapping" in first:
        return "chatgpt"
    if first is not None and "chat_messages" in first:
        return "claude"
    return "jsonl"


# --- JSONL ---------------------------------------------------------------------------------------


def _jsonl(text: str) -> ChatLog:
    conversations: list[ChatConversation] = []
    current: object = object()  # no conversation yet
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValidationError(f"{where}: not JSON ({error.msg}, column {error.colno})", field="text") from None
        if not isinstance(row, dict):
            raise ValidationError(f"{where}: a message must be a JSON object", field="text")
        unknown = sorted(set(row) - {"content", "text", "role", "speaker", "at", "meta", "conversation", "title"})
        if unknown:
            raise ValidationError(
                f"{where}: unknown keys {', '.join(unknown)} (a message takes content, role, speaker, at, meta,"
                " conversation, title)",
                field="text",
            )
        key = row.get("conversation")
        if not conversations or key != current:
            title = row.get("title", "" if key is None else str(key))
            conversations.append(ChatConversation(_name(title, where, "title"), where))
            current = key
        content = row.get("content", row.get("text"))
        conversations[-1].turns.append(
            _turn(content, row.get("role", "user"), where, row.get("speaker", ""), row.get("at"), row.get("meta"))
        )
    return ChatLog("jsonl", conversations)


# --- the exports of ChatGPT and Claude -----------------------------------------------------------------


def _export(document: Any, format: str) -> ChatLog:
    items = document if isinstance(document, list) else [document]
    if not items or not all(isinstance(c, dict) for c in items):
        raise ValidationError(f"a {format} export is a list of conversation objects", field="text")
    log = ChatLog(format, [])
    for number, item in enumerate(items, 1):
        where = f"conversation {number}"
        title = _name(item.get("title") if format == "chatgpt" else item.get("name"), where, "title")
        conversation = ChatConversation(title, where + (f" ({title!r})" if title else ""))
        read = _chatgpt_messages(item, conversation.where) if format == "chatgpt" else _claude_messages(item)
        for index, (content, role, speaker, at) in enumerate(read, 1):
            place = f"{conversation.where}, message {index}"
            if not isinstance(content, str) or not content.strip():
                log.skipped += 1
                continue
            conversation.turns.append(_turn(content, role, place, speaker, at, {"imported_from": format}))
        log.conversations.append(conversation)
    return log


def _chatgpt_messages(item: Mapping[str, Any], where: str) -> Iterator[tuple[Any, Any, str, Any]]:
    """(text, role, speaker, time) along the branch that ends at ``current_node``, oldest first."""
    mapping = item.get("mapping")
    if not isinstance(mapping, dict):
        raise ValidationError(f"{where}: a ChatGPT conversation has a mapping of messages", field="text")
    node_id = item.get("current_node")
    if node_id not in mapping:  # no current node: the last leaf
        leaves = [k for k, v in mapping.items() if isinstance(v, dict) and not v.get("children")]
        node_id = leaves[-1] if leaves else None
    branch: list[dict[str, Any]] = []
    seen: set[str] = set()
    while isinstance(node_id, str) and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise ValidationError(f"{where}: mapping entry {node_id!r} is not an object", field="text")
        branch.append(node)
        node_id = node.get("parent")
    for node in reversed(branch):
        message = node.get("message")
        if not isinstance(message, dict):
            continue
        meta = _mapping(message.get("metadata"))
        author = _mapping(message.get("author"))
        role = author.get("role", "user")
        if meta.get("is_visually_hidden_from_conversation") or (role == "system" and not _chatgpt_text(message)):
            yield "", role, "", None
            continue
        yield _chatgpt_text(message), role, str(author.get("name") or ""), message.get("create_time")


def _mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _chatgpt_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if not isinstance(content, dict):
        return ""
    parts = content.get("parts")
    if isinstance(parts, list):
        return "\n".join(p for p in parts if isinstance(p, str)).strip()
    text = content.get("text")
    return text.strip() if isinstance(text, str) else ""


def _claude_messages(item: Mapping[str, Any]) -> Iterator[tuple[Any, Any, str, Any]]:
    messages = item.get("chat_messages")
    if not isinstance(messages, list):
        return
    for message in messages:
        if not isinstance(message, dict):
            yield None, "user", "", None
            continue
        text = message.get("text")
        if not isinstance(text, str) or not text.strip():
            content = message.get("content")
            blocks = content if isinstance(content, list) else []
            text = "\n".join(
                b["text"]
                for b in blocks
                if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
            )
        yield text, message.get("sender", "user"), "", message.get("created_at")


# --- one message ------------------------------------------------------------------------------------


def _turn(content: Any, role: Any, where: str, speaker: Any, at: Any, meta: Any) -> ChatTurn:
    """One message, checked as ``remember`` checks it; errors say where it is."""
    try:
        text = require_message(content, "content")
    except ValidationError as error:
        raise ValidationError(f"{where}: {error}", field="text") from None
    named = ROLES.get(role) if isinstance(role, str) else None
    if named is None:
        choices = ", ".join(r.value for r in Role)
        raise ValidationError(f"{where}: role must be one of {choices} (or human, ai); got {role!r}", field="text")
    if meta is not None and not isinstance(meta, dict):
        raise ValidationError(f"{where}: meta must be an object", field="text")
    try:
        check_value(meta or {}, "meta")
    except ValidationError as error:
        raise ValidationError(f"{where}: {error}", field="text") from None
    return ChatTurn(text, named, where, _name(speaker, where, "speaker"), _time(at, where), dict(meta or {}))


def _name(value: Any, where: str, what: str) -> str:
    """A speaker or title, checked as ``remember`` checks a speaker (a NUL or a lone surrogate stored here would
    make the user's own export impossible to import again)."""
    if value is None:
        return ""
    if not isinstance(value, str | int) or isinstance(value, bool) or len(str(value)) > MAX_NAME:
        raise ValidationError(f"{where}: {what} must be text of at most {MAX_NAME} characters", field="text")
    try:
        return require_unicode(str(value), what).strip()
    except ValidationError as error:
        raise ValidationError(f"{where}: {error}", field="text") from None


def _time(value: Any, where: str) -> datetime | None:
    """ISO 8601 text or seconds since 1970 (ChatGPT's), in UTC; None when absent."""
    if value is None or value == "":
        return None
    moment: datetime | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            moment = datetime.fromtimestamp(float(value), UTC)
        except (OverflowError, OSError, ValueError):
            moment = None
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            moment = None
    if moment is None or not 1000 <= moment.year < 9000:
        raise ValidationError(
            f"{where}: at must be a time (ISO 8601, or seconds since 1970); got {value!r}", field="text"
        )
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


# --- what the user holds already -----------------------------------------------------------------------------

PAGE = 1000  # conversations read at a time when looking for those already imported


def held_already(store: Store, user_id: str, conversations: list[ChatConversation]) -> list[bool]:
    """For each conversation of a log, whether the user holds it already: a stored conversation (or one earlier
    in the log) with the same title and, message for message, the same role, text, speaker and time where the
    log gives them.  Importing a log twice, or a newer export that still holds the old conversations, stores
    each conversation once: stored again, every fact would be found twice.  Only the user's conversations of
    the same title and size are read."""
    known: dict[tuple[str, int], list[int]] = {}
    offset = 0
    while page := store.list_conversations(user_id, limit=PAGE, offset=offset):
        for stored in page:
            known.setdefault((stored.title, stored.message_count), []).append(stored.id)
        offset += PAGE
    held: list[bool] = []
    kept: list[ChatConversation] = []
    for conversation in conversations:
        size = (conversation.title, len(conversation.turns))
        same = any(
            _same(store.list_messages(user_id, conversation_id=candidate), conversation)
            for candidate in known.get(size, [])
        ) or any(_same_turns(earlier, conversation) for earlier in kept if (earlier.title, len(earlier.turns)) == size)
        held.append(same)
        if not same:
            kept.append(conversation)
    return held


def _same(stored: list[Message], conversation: ChatConversation) -> bool:
    return len(stored) == len(conversation.turns) and all(
        message.role.value == turn.role
        and message.content == turn.content
        and (not turn.speaker or message.speaker == turn.speaker)
        and (turn.at is None or message.created_at == turn.at)
        for message, turn in zip(stored, conversation.turns, strict=True)
    )


def _same_turns(earlier: ChatConversation, later: ChatConversation) -> bool:
    return [(t.role, t.content, t.speaker, t.at) for t in earlier.turns] == [
        (t.role, t.content, t.speaker, t.at) for t in later.turns
    ]
