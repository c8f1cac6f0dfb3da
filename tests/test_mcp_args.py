"""The MCP argument check in process: whatever a client sends, a tool either gets arguments its strict model
accepts or the caller gets one plain sentence (property-tested), and the published schemas are closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.server.mcpserver.exceptions import ToolError

import narrative
from narrative.interfaces.mcp import build_tools
from narrative.interfaces.mcp_args import Arguments


@pytest.fixture(scope="module")
def checks(tmp_path_factory: pytest.TempPathFactory) -> Any:
    engine = narrative.Memory(Path(tmp_path_factory.mktemp("args")) / "args.db", user="a", embedder="none", env={})
    tools, found = build_tools(engine)
    yield {t.name: t for t in tools}, found
    engine.close()


def test_every_schema_is_closed_and_lists_its_aliases(checks: Any) -> None:
    tools, found = checks
    for name, tool in tools.items():
        assert tool.parameters["additionalProperties"] is False, name
        for alias, target in found[name].aliases.items():
            assert alias in tool.parameters["properties"] and target in tool.parameters["properties"]
    assert found["confirm_memory"].aliases == {
        "memory_id": "conversation_id",
        "destination_act_id": "destination_storyline_id",
    }


def test_aliases_are_renamed(checks: Any) -> None:
    _, found = checks
    assert found["search_memories"].check({"query": "x", "act_id": 3}) == {"query": "x", "storyline_id": 3}
    assert found["confirm_memory"].check({"memory_id": 4, "destination_act_id": 5}) == {
        "conversation_id": 4,
        "destination_storyline_id": 5,
    }
    assert found["search_memories"].check({"query": "x", "act_id": 3, "storyline_id": 3})["storyline_id"] == 3


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(
        [
            "search_memories",
            "confirm_memory",
            "recall",
            "split_memory",
            "record_outcome",
            "get_open_threads",
            "narrative_update",
        ]
    ),
    arguments=st.dictionaries(
        st.sampled_from(
            [
                "query",
                "limit",
                "act_id",
                "storyline_id",
                "memory_id",
                "k",
                "parts",
                "outcome",
                "use_id",
                "summary",
                "junk",
                "entity_type",
            ]
        ),
        values,
        max_size=4,
    ),
)
def test_any_call_is_accepted_or_refused_in_one_sentence(checks: Any, name: str, arguments: dict[str, Any]) -> None:
    _, found = checks
    check: Arguments = found[name]
    try:
        given_back = check.check(arguments)
    except ToolError as error:
        said = str(error)
        assert said.startswith(f"{name}: ") and said.endswith(".") and "\n" not in said
        assert "pydantic" not in said and "errors.pydantic.dev" not in said
        return
    assert not set(given_back) & set(check.aliases)
    check.model.model_validate(given_back)
