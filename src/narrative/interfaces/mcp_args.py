"""The arguments of each MCP tool, checked before the SDK sees them, and the compact form of its result.

* The published input schema refuses unknown arguments (``additionalProperties: false``) and lists the
  seeds' names a tool accepts (``act_id`` for ``storyline_id``…), each marked as the same argument.
* A bad call comes back as one plain sentence naming the tool, the argument and what is wrong, without
  pydantic's error layout or links.
* A result is sent once as structure and once as compact JSON text (the protocol asks for the text copy
  for clients that read only text), without indentation and without the ``user_id`` every record repeats.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticError


class Arguments:
    """One tool's argument check: the strict schema it publishes and the renaming of the seeds' names."""

    def __init__(self, tool: Tool, aliases: dict[str, str]) -> None:
        self.name = tool.name
        self.aliases = aliases
        base: type[BaseModel] = tool.fn_metadata.arg_model
        config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
        self.model: type[BaseModel] = type(f"{base.__name__}Strict", (base,), {"model_config": config})
        self.pre_parse = tool.fn_metadata.pre_parse_json

    def schema(self) -> dict[str, Any]:
        """The input schema: the tool's own, closed to unknown arguments, with the aliases listed."""
        schema = self.model.model_json_schema(by_alias=True)
        properties = schema.setdefault("properties", {})
        for alias, name in self.aliases.items():
            described = {k: v for k, v in properties[name].items() if k not in ("title", "description")}
            properties[alias] = {
                **described,
                "description": f"The same as {name} (another name for it); give one of the two.",
            }
        schema["additionalProperties"] = False
        schema["title"] = f"{self.name}Arguments"
        return schema

    def check(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments with aliases renamed; a ToolError in one sentence when they are wrong."""
        given = dict(arguments)
        for alias, name in self.aliases.items():
            if alias in given:
                if name in given and given[name] != given[alias]:
                    raise ToolError(f"{self.name}: give {name} or {alias} (the same argument), not both.")
                given[name] = given.pop(alias)
        try:
            self.model.model_validate(self.pre_parse(given))
        except PydanticError as error:
            allowed = sorted([*self.model.model_fields, *self.aliases])
            raise ToolError(sentence(self.name, error, allowed)) from None
        return given


def sentence(tool: str, error: PydanticError, allowed: list[str]) -> str:
    """Pydantic's errors as one sentence: 'search_memories: limit must be at most 100 (got 500).'"""
    said = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item.get("loc", ())) or "the arguments"
        kind = item.get("type", "")
        if kind == "extra_forbidden":
            said.append(f"there is no argument {where} (it takes {', '.join(allowed) or 'none'})")
        elif kind == "missing":
            said.append(f"{where} is required")
        else:
            message = str(item.get("msg", "is invalid"))
            message = message[0].lower() + message[1:] if message else "is invalid"
            message = message.replace("input should be", "must be").replace("value error, ", "")
            got = item.get("input")
            shown = "" if isinstance(got, dict | list) or got is None else f" (got {json.dumps(got)[:60]})"
            said.append(f"{where} {message}{shown}")
    return f"{tool}: " + "; ".join(said) + "."


def compact(data: dict[str, Any]) -> CallToolResult:
    """The result as structure plus the same as compact JSON text; ``user_id`` left out (one user per server)."""
    lean = without_user(data)
    text = json.dumps(lean, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=lean)


def without_user(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_user(v) for k, v in value.items() if k != "user_id"}
    if isinstance(value, list):
        return [without_user(v) for v in value]
    return value


__all__ = ["Arguments", "compact", "sentence", "without_user"]
