"""The integers and numbers a client sends as JSON (HTTP request bodies, MCP tool arguments).

JSON's ``true`` and ``false`` are not numbers, but pydantic's lax mode reads them as 1 and 0, and the
interfaces convert their input before the engine checks it: ``{"memory_id": true}`` read memory 1 and
``{"importance": true}`` stored importance 1, where the Python API refuses a boolean (docs/reliability.md:
"True/False are not ids").  Every id and number of a request is declared with one of these strict types, so
a value is taken only when it is what the published schema says: an integer for ``Int`` (not ``true``,
``"5"`` or ``5.0``), an integer or a decimal for ``Number`` (``1`` is still a number).

Strict is a constraint pydantic applies to the number itself, so ``Field(ge=…, le=…)`` beside it still shows
in the JSON schema as ``minimum``/``maximum``; a validator function around the number would hide them.  A
union takes it on its number: ``Int | str`` (an entity id or a preview key).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Strict

Int = Annotated[int, Strict()]
Number = Annotated[float, Strict()]

__all__ = ["Int", "Number"]
