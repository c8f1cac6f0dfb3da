"""MCP resources and prompts: what a client can attach to a conversation, and the two rituals of a session.

Resources (JSON, ``application/json``; records without ``user_id``, as tool results):

    narrative://your-story                     Your Story and its newest current memories
    narrative://storylines                     every storyline, most recently active first
    narrative://storylines/{storyline_id}      one storyline and its newest memories
    narrative://conversations/{conversation_id}  one conversation: its transcript and the memories made from it

Prompts (messages a client hands the model, e.g. as slash commands):

    greeting        where things stand (the startup greeting), and how to open the session
    close_review    the preview of a conversation waiting for review, and how to go through it with the user

Engine errors come back as the resource's or prompt's error with the engine's message (``NotFound: …``): a
resource's as the SDK's ``ResourceError`` (``-32603``), a prompt's as a JSON-RPC error the SDK passes through as it
is (``-32602``, invalid params: the id or the state the client asked about; ``-32603`` when the store or a
provider failed).  Any other exception in a prompt became the SDK's bare "Error rendering prompt …" (code 0)
and a traceback on the server's stderr.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS

from narrative.errors import NarrativeError, ProviderError, StoreError, ValidationError
from narrative.interfaces.mcp_args import without_user
from narrative.interfaces.serialize import plain

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from narrative.engine import Memory

T = TypeVar("T")
JSON = "application/json"
RECENT = 50


def _said(failure: NarrativeError) -> str:
    return f"{type(failure).__name__}: {failure}"


def _resource_error(failure: NarrativeError) -> Exception:
    return ResourceError(_said(failure))


def _prompt_error(failure: NarrativeError) -> Exception:
    """A prompt's refusal as a protocol error with the engine's message: the SDK passes an ``MCPError`` through
    untouched and without logging a traceback (it wraps anything else as "Error rendering prompt …")."""
    internal = isinstance(failure, StoreError | ProviderError)
    return MCPError(code=INTERNAL_ERROR if internal else INVALID_PARAMS, message=_said(failure))


def _serialised(
    lock: threading.Lock, read: Callable[[], T], error: Callable[[NarrativeError], Exception] = _resource_error
) -> T:
    """Run one engine read under the server's lock; an engine error becomes ``error(failure)``."""
    with lock:
        try:
            return read()
        except NarrativeError as failure:
            raise error(failure) from None


def _json(value: Any) -> str:
    return json.dumps(without_user(plain(value)), ensure_ascii=False, separators=(",", ":"))


def _number(value: str, name: str) -> int:
    if not value.isdigit() or not 1 <= int(value) < 2**63:
        raise ValidationError(f"{name} must be an id (an integer from 1), got {value!r}", field=name)
    return int(value)


def add_resources(server: MCPServer, memory: Memory, lock: threading.Lock) -> None:
    @server.resource(
        "narrative://your-story",
        name="your_story",
        title="Your Story",
        description="The permanent storyline of who the user is, with its newest current memories.",
        mime_type=JSON,
    )
    def your_story() -> str:
        def read() -> dict[str, Any]:
            story = memory.your_story()
            found = memory.list_memories(storyline_id=story.id, current_only=True, limit=RECENT)
            return {"storyline": story, "memories": found}

        return _json(_serialised(lock, read))

    @server.resource(
        "narrative://storylines",
        name="storylines",
        title="Storylines",
        description="Every storyline (topic), most recently active first, with its summary and keywords.",
        mime_type=JSON,
    )
    def storylines() -> str:
        return _json({"storylines": _serialised(lock, memory.list_storylines)})

    @server.resource(
        "narrative://storylines/{storyline_id}",
        name="storyline",
        title="A storyline",
        description="One storyline with its newest memories.",
        mime_type=JSON,
    )
    def storyline(storyline_id: str) -> str:
        def read() -> dict[str, Any]:
            found = memory.get_storyline(_number(storyline_id, "storyline_id"))
            return {"storyline": found, "memories": memory.list_memories(storyline_id=found.id, limit=RECENT)}

        return _json(_serialised(lock, read))

    @server.resource(
        "narrative://conversations/{conversation_id}",
        name="conversation",
        title="A conversation",
        description="One conversation: its transcript and the memories made from it.",
        mime_type=JSON,
    )
    def conversation(conversation_id: str) -> str:
        return _json(_serialised(lock, lambda: memory.get_conversation_archive(_number(conversation_id, "id"))))


def add_prompts(server: MCPServer, memory: Memory, lock: threading.Lock) -> None:
    @server.prompt(
        name="greeting",
        title="Where we left off",
        description="Start a session: where things stand (last conversation, open threads, waiting-ons, stale goals)"
        " and how to greet the user.",
    )
    def greeting() -> list[UserMessage]:
        said = _serialised(lock, memory.greet, _prompt_error)
        return [
            UserMessage(
                "This is where we left off, from my narrative memory:\n\n"
                f"{said.text}\n\n"
                "Greet me in a sentence or two that picks up from there: name what is open or waiting, and ask"
                " what I want to do now. Do not repeat the whole list."
            )
        ]

    @server.prompt(
        name="close_review",
        title="Review what will be remembered",
        description="Go through the memory preview of a conversation waiting for review (after close_conversation)"
        " with the user, then confirm, edit, redirect or split it.",
    )
    def close_review(conversation_id: str | None = None) -> list[UserMessage]:
        def read() -> Any:
            chosen = None if not conversation_id else _number(conversation_id, "conversation_id")
            return memory.get_memory_preview(chosen)

        preview = _serialised(lock, read, _prompt_error)
        return [
            UserMessage(
                f"Conversation {preview.conversation_id} is closing. This is what would be remembered:\n\n"
                f"{preview.text()}\n\n"
                "Show me this in plain words and ask whether it is right. Then, as I answer: confirm_memory to keep"
                " it; edit_memory_preview to reword it or drop an extracted item (by its key, e1, e2…);"
                " redirect_memory to file it under another storyline; split_memory to keep it as several memories;"
                f" resume_conversation to keep talking instead. Use conversation_id {preview.conversation_id}."
            )
        ]


__all__ = ["add_prompts", "add_resources"]
