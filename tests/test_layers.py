"""Layers are checked, not hoped for: every ``import`` under src/narrative obeys the table below.

    interfaces  →  engine  →  read / write  →  store / providers / text  →  checks / config  →  model / errors

``read`` and ``write`` are two pipelines side by side: neither imports the other (what both need about words
and lines lives in ``narrative.text``).  Classes in ``engine`` never inherit from one another: the engine is
composed of services that receive their peers as constructor arguments.

The scan reads every module with ``ast`` and collects each import wherever it sits:
at the top, inside functions, inside ``if TYPE_CHECKING:`` blocks.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "narrative"
ROOT = "narrative"  # the package itself (its __init__ re-exports the engine); matched exactly, never as a prefix


@dataclass(frozen=True)
class Rule:
    """What the modules of one layer may import.

    ``allowed`` (when given) lists the only ``narrative.*`` packages they may import;
    ``forbidden`` lists packages they must never import, ours or third-party.
    A package name covers its submodules: ``narrative.store`` covers ``narrative.store.sqlite.base``.
    """

    layer: str
    allowed: tuple[str, ...] | None = None
    forbidden: tuple[str, ...] = ()
    excepted: tuple[str, ...] = ()  # named modules a forbidden package may still lend, each for a stated reason


BASE = ("narrative.model", "narrative.errors")
DATABASE_DRIVERS = ("sqlite3", "psycopg", "psycopg2", "pgvector")

RULES: tuple[Rule, ...] = (
    Rule("narrative.model", allowed=()),
    Rule("narrative.errors", allowed=()),
    Rule("narrative.validate", allowed=BASE),
    Rule("narrative.checks", allowed=(*BASE, "narrative.validate")),
    Rule("narrative.config", allowed=BASE),
    Rule("narrative.store", allowed=(*BASE, "narrative.checks", "narrative.validate", "narrative.store")),
    Rule(
        "narrative.providers",
        allowed=(*BASE, "narrative.checks", "narrative.validate", "narrative.config", "narrative.providers"),
    ),
    Rule("narrative.text", allowed=(*BASE, "narrative.text")),
    Rule(
        "narrative.read",
        forbidden=(ROOT, "narrative.engine", "narrative.interfaces", "narrative.write", *DATABASE_DRIVERS),
    ),
    Rule(
        "narrative.write",
        forbidden=(ROOT, "narrative.engine", "narrative.interfaces", "narrative.read", *DATABASE_DRIVERS),
    ),
    Rule("narrative.engine", forbidden=(ROOT, "narrative.interfaces")),
    Rule("narrative.interfaces", forbidden=("narrative.store", *DATABASE_DRIVERS)),
    # the benchmarks drive the engine like any user would; the single-turn BM25 baseline borrows the store's
    # tokenizer and scoring, so that both sides of the comparison cut words alike
    Rule(
        "narrative.bench",
        forbidden=("narrative.store", "narrative.interfaces", *DATABASE_DRIVERS),
        excepted=("narrative.store.keyword_index",),
    ),
)

#: Only the store talks to SQLite (bench/ and tests/ live outside src/ and are not scanned).
SQLITE_OWNER = "narrative.store"

#: Modules no rule covers, on purpose; a new top-level module must be added to RULES or here.
UNRULED = {ROOT, "narrative.demo"}


def within(module: str, package: str) -> bool:
    if package == ROOT:
        return module == ROOT
    return module == package or module.startswith(package + ".")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(module: str) -> bool:
    return modules().get(module, Path()).name == "__init__.py"


def imports_of(module: str) -> set[str]:
    """Every module ``module`` imports, absolute, with ``from pkg import submodule`` resolved."""
    path = modules()[module]
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    package = module if _is_package(module) else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            submodules = {f"{base}.{alias.name}" for alias in node.names} & set(modules())
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(base)
    return found


def violations(rule: Rule) -> list[str]:
    broken = []
    for module in modules():
        if not within(module, rule.layer):
            continue
        for imported in sorted(imports_of(module)):
            ours = imported == ROOT or imported.startswith(ROOT + ".")
            if rule.allowed is not None and ours and not any(within(imported, a) for a in rule.allowed):
                broken.append(f"{module} imports {imported}")
            if any(within(imported, f) for f in rule.forbidden) and imported not in rule.excepted:
                broken.append(f"{module} imports {imported} (forbidden)")
    return broken


# --- the scanner itself ----------------------------------------------------------------------------


def test_the_scan_sees_the_package() -> None:
    names = set(modules())
    for expected in ("narrative", "narrative.model", "narrative.store.sqlite.base", "narrative.engine.core"):
        assert expected in names


def test_the_scan_finds_imports_inside_functions_and_type_checking() -> None:
    core = imports_of("narrative.engine.core")
    assert "narrative.store.opening" in core  # imported lazily inside __init__
    assert "narrative.providers.embed" in core  # imported under TYPE_CHECKING and lazily
    assert "narrative.model" in imports_of("narrative.engine.memories")  # ``from narrative import model``


def test_every_module_is_covered_by_a_rule() -> None:
    uncovered = [
        m for m in modules() if not any(within(m, r.layer) for r in RULES) and not any(within(m, u) for u in UNRULED)
    ]
    assert uncovered == []


# --- the rules ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES, ids=[r.layer for r in RULES])
def test_layer_rule(rule: Rule) -> None:
    assert violations(rule) == []


def test_model_and_errors_import_nothing_of_ours() -> None:
    for module in ("narrative.model", "narrative.errors"):
        assert {i for i in imports_of(module) if within(i, ROOT) or i.startswith(ROOT + ".")} == set()


def test_only_the_store_imports_sqlite3() -> None:
    offenders = [
        m for m in modules() if not within(m, SQLITE_OWNER) and any(within(i, "sqlite3") for i in imports_of(m))
    ]
    assert offenders == []


def engine_classes() -> dict[str, list[ast.ClassDef]]:
    """Every class defined under ``narrative.engine``, by module."""
    found: dict[str, list[ast.ClassDef]] = {}
    for module, path in modules().items():
        if within(module, "narrative.engine"):
            tree = ast.parse(path.read_text("utf-8"), filename=str(path))
            found[module] = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    return found


def engine_inheritance() -> list[str]:
    """``module.Class inherits Base`` wherever a base class is itself a class defined in ``narrative.engine``."""
    classes = engine_classes()
    names = {c.name for defined in classes.values() for c in defined}
    broken = []
    for module, defined in classes.items():
        for cls in defined:
            for base in cls.bases:
                base_name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                if base_name in names:
                    broken.append(f"{module}.{cls.name} inherits {base_name}")
    return broken


def test_no_engine_class_inherits_from_another_engine_class() -> None:
    assert engine_inheritance() == []


# --- the engine orchestrates: it calls pipelines more than it calls the store ----------------------------


PIPELINES = ("narrative.read", "narrative.write")


def _pipeline_names(tree: ast.Module) -> set[str]:
    """Names a module binds from ``narrative.read`` / ``narrative.write`` (modules, functions, classes)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PIPELINES):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def engine_calls(module: str) -> tuple[int, int]:
    """(store calls, pipeline calls) of one engine module, counted on its syntax tree.

    A store call is a call through ``self.rt.store.…`` (the runtime's store; ``self.store.…`` or a local
    ``store.…`` count too); a pipeline call is a call
    whose callee starts with a name imported from ``narrative.read`` or ``narrative.write``
    (``close.build_preview(…)``, ``TurnWriter(…)``).
    """
    tree = ast.parse(modules()[module].read_text("utf-8"))
    pipelines = _pipeline_names(tree)
    store = pipeline = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        chain: list[str] = []
        func = node.func
        while isinstance(func, ast.Attribute):
            chain.append(func.attr)
            func = func.value
        root = func.id if isinstance(func, ast.Name) else ""
        path = [root, *reversed(chain)]  # self.rt.store.get_memory(…) → ["self", "rt", "store", "get_memory"]
        if (len(path) >= 3 and (path[:2] == ["self", "store"] or path[:3] == ["self", "rt", "store"])) or (
            root == "store" and chain
        ):
            store += 1
        elif root in pipelines:
            pipeline += 1
    return store, pipeline


def test_the_call_count_sees_both_kinds() -> None:
    store, pipeline = engine_calls("narrative.engine.closing")
    assert store > 0 and pipeline > 0


def test_deletes_and_reembedding_are_pipeline_work() -> None:
    """The delete cascade and storyline scrubbing live in write/forget.py, the routing recipe in write/embedding.py."""
    sovereignty = modules()["narrative.engine.sovereignty"].read_text("utf-8")
    for gone in ("splice_out_narratives", "reopen_resolved_by", "unused_storylines", "routing_text", "drift("):
        assert gone not in sovereignty
    maintenance = modules()["narrative.engine.maintenance"].read_text("utf-8")
    assert "drift(" not in maintenance and "blend(" not in maintenance


def test_no_engine_module_calls_the_store_more_than_the_pipelines() -> None:
    """The engine orchestrates: domain work (what a delete takes, what is embedded, …) lives in read/ and write/."""
    heavier = {m: engine_calls(m) for m in modules() if within(m, "narrative.engine")}
    assert {m: c for m, c in heavier.items() if c[0] > c[1]} == {}
