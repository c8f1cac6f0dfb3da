"""The README's command lines, run exactly as written: every ``$ `` line of its ``console`` blocks goes to a
shell (the real ``narrative`` script, the real local model, a fresh folder), and what the README shows under
it must be printed, in order (``…`` stands for whatever varies; lines it leaves out may appear between)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import narrative

README = Path(__file__).parent.parent / "README.md"


@dataclass
class Step:
    command: str
    expected: list[str] = field(default_factory=list)


def console_steps(text: str) -> list[Step]:
    """The ``$ `` commands of every ```console block, each with the output lines shown under it."""
    steps: list[Step] = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append(Step(line[2:]))
            elif line.strip() and steps:
                steps[-1].expected.append(line)
    return steps


def pattern(expected: str) -> re.Pattern[str]:
    parts = [re.escape(piece) for piece in expected.rstrip().split("…")]
    return re.compile("^" + ".*?".join(parts) + r"\s*$")


def assert_shows(step: Step, printed: str) -> None:
    lines = printed.splitlines()
    at = 0
    for want in step.expected:
        rule = pattern(want)
        while at < len(lines) and not rule.match(lines[at]):
            at += 1
        assert at < len(lines), f"`{step.command}` did not print {want!r}; it printed:\n{printed}"
        at += 1


def test_the_readme_has_a_walkable_example() -> None:
    steps = console_steps(README.read_text("utf-8"))
    assert len(steps) >= 8 and all(s.expected for s in steps if not s.command.startswith("export "))


def test_the_readme_command_lines_print_what_the_readme_says(tmp_path: Path) -> None:
    script = shutil.which("narrative")
    if script is None:
        pytest.skip("the narrative console script is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NARRATIVE_")}
    if "NARRATIVE_CACHE_DIR" in os.environ:  # where the prepared model lives: not a setting the README sets
        env["NARRATIVE_CACHE_DIR"] = os.environ["NARRATIVE_CACHE_DIR"]
    env["PYTHONPATH"] = str(Path(narrative.__file__).parent.parent)  # the package under test
    for step in console_steps(README.read_text("utf-8")):
        if step.command.startswith("export "):
            for assignment in shlex.split(step.command, comments=True)[1:]:
                name, _, value = assignment.partition("=")
                env[name] = value
            continue
        done = subprocess.run(
            step.command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        failed = any(line.startswith("error:") for line in step.expected)
        assert (done.returncode != 0) == failed, f"`{step.command}` exited {done.returncode}:\n{done.stderr}"
        assert_shows(step, done.stdout + done.stderr)


def test_the_readme_python_is_python_and_names_what_exists() -> None:
    """The README's ``python`` blocks parse, import only what ``narrative`` exports, and call only methods a
    Memory (``mem.…``) or an AsyncMemory (``amem.…``) has; and the README points at nothing outside the
    repository."""
    import ast

    text = README.read_text("utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 3
    for block in blocks:
        tree = compile(block, "README.md", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "narrative":
                assert all(hasattr(narrative, alias.name) for alias in node.names), ast.unparse(node)
    for name, call in re.findall(r"\b(mem|amem)\.(\w+)\(", text):
        kind = narrative.Memory if name == "mem" else narrative.AsyncMemory
        assert callable(getattr(kind, call, None)), f"README calls {name}.{call}(), which {kind.__name__} lacks"
    assert "../shared" not in text  # a clone of the repository has no such folder
