"""Prompt templates for every LLM step, one ``NAME.txt`` file each.

File format: a ``[system]`` line, the system text, a ``[user]`` line, the user
text.  Lines starting with ``#`` before ``[system]`` are comments (who uses the
prompt, what it returns) and are not sent.

Variables use :class:`string.Template` syntax — ``$name`` or ``${name}``; a
literal dollar sign is ``$$``.  ``$``-templates were chosen over ``str.format``
because the prompts show JSON shapes full of braces.  A missing variable, an
unknown prompt name or a stray ``$`` raises :class:`ValidationError`: a
prompt with a hole in it is a programming error, never something to degrade
from.  Values that are not strings (lists, dicts, numbers) are rendered as
indented JSON so callers can pass structures straight in.

Files are read lazily on first use and cached; nothing is read at import time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from narrative.errors import ValidationError

__all__ = ["Prompt", "load_prompt", "prompt_names", "prompt_variables", "render_prompt"]

_SYSTEM_MARK = "[system]"
_USER_MARK = "[user]"


@dataclass(frozen=True)
class Prompt:
    """A parsed template: the system part and the user part."""

    name: str
    system: Template
    user: Template

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(self.system.get_identifiers()) | frozenset(self.user.get_identifiers())


def prompt_names() -> tuple[str, ...]:
    """Every bundled prompt, sorted."""
    folder = resources.files(__name__)
    return tuple(sorted(p.name[: -len(".txt")] for p in folder.iterdir() if p.name.endswith(".txt")))


@cache
def load_prompt(name: str) -> Prompt:
    """Read and parse ``NAME.txt``; unknown names raise ValidationError."""
    if not name.isidentifier():
        raise ValidationError(f"invalid prompt name {name!r}", field="prompt_name")
    resource = resources.files(__name__) / f"{name}.txt"
    if not resource.is_file():
        raise ValidationError(f"unknown prompt {name!r}; known: {', '.join(prompt_names())}", field="prompt_name")
    return _parse(name, resource.read_text(encoding="utf-8"))


def _parse(name: str, text: str) -> Prompt:
    lines = text.splitlines()
    try:
        system_at = lines.index(_SYSTEM_MARK)
        user_at = lines.index(_USER_MARK)
    except ValueError:
        raise ValidationError(f"prompt {name!r} lacks a [system] or [user] line") from None
    if user_at < system_at or any(line.strip() and not line.startswith("#") for line in lines[:system_at]):
        raise ValidationError(f"prompt {name!r}: expected comments, [system], then [user]")
    system = "\n".join(lines[system_at + 1 : user_at]).strip()
    user = "\n".join(lines[user_at + 1 :]).strip()
    prompt = Prompt(name=name, system=Template(system), user=Template(user))
    if not (prompt.system.is_valid() and prompt.user.is_valid()):
        raise ValidationError(f"prompt {name!r} has a malformed $ placeholder (write $$ for a dollar sign)")
    return prompt


def prompt_variables(name: str) -> frozenset[str]:
    """The variable names ``render_prompt(name, ...)`` needs."""
    return load_prompt(name).variables


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def render_prompt(name: str, variables: dict[str, Any]) -> tuple[str, str]:
    """Return ``(system, user)`` with every variable filled; a missing one raises ValidationError."""
    prompt = load_prompt(name)
    missing = sorted(prompt.variables - variables.keys())
    if missing:
        raise ValidationError(f"prompt {name!r} is missing variable(s): {', '.join(missing)}", field="variables")
    values = {key: _as_text(variables[key]) for key in prompt.variables}
    return prompt.system.substitute(values), prompt.user.substitute(values)
