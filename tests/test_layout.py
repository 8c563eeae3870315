"""The layout's rules, read from the source: imports point one way, no circles, small modules.

Every module of the four packages (and the `plangate` root) is parsed, and every import in it is
counted: at the top, inside functions, under `if TYPE_CHECKING:`. An import that a reader sees
is an arrow, whether or not it runs at import time. The rules:

- the packages form layers, harness ← replay ← evaluators ← ci: a package imports only those
  before it, and nothing imports the `plangate` root;
- evaluators take from replay only its trace-table schema, and from harness only the two shared
  pieces (the run detector and the base error);
- library code in ci never imports the command line (`ci/cli/`), and the gate (`ci/gate/`) never
  imports Phoenix (`ci/phoenix/`);
- a private module (`_name`) is imported only from inside the package that holds it: others go
  through the package's root or a public module;
- no two modules import each other, directly or around a circle;
- no module (tests included) is over 500 lines.
"""

from __future__ import annotations

import ast
import importlib
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "replay", "evaluators", "ci")
"""The layers, lowest first: folders of the repository, installed as `plangate.<folder>`."""
MAX_LINES = 500

EVALUATORS_FROM_HARNESS = frozenset({"call_runs", "PlangateError", "read_text"})
"""What evaluators may take from harness: the run detector, the base error, reading a file."""
JUDGE_CALLS = "plangate.evaluators._judge_cassette"
"""The one evaluator module that talks to the world: the judge's model calls and its cassette."""
JUDGE_FROM_HARNESS = frozenset(
    {"ConfigError", "ModelError", "SystemMessage", "UserMessage", "write_text_atomic"}
)
"""What the judge's calls take from harness besides the OpenAI-compatible model itself."""


@dataclass(frozen=True, slots=True)
class Import:
    """One import statement's target, resolved to a module of ours."""

    source: str
    """The importing module (dotted, installed name)."""
    target: str
    """The imported module (a package's `__init__` is the package's name)."""
    names: tuple[str, ...]
    """The names taken from the target (`from target import a, b`); empty for `import x`."""
    line: int

    def __str__(self) -> str:
        names = f" ({', '.join(self.names)})" if self.names else ""
        return f"{self.source}:{self.line} imports {self.target}{names}"


def module_files() -> dict[str, Path]:
    """Every module of ours by its installed dotted name."""
    found = {"plangate": REPO / "plangate" / "__init__.py"}
    for path in (REPO / "plangate").glob("*.py"):
        if path.stem != "__init__":
            found[f"plangate.{path.stem}"] = path
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(("plangate", *parts))] = path
    return found


MODULES = module_files()


def is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def resolve(module: str, node: ast.ImportFrom) -> str:
    """The absolute name of a `from ... import` statement's module."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package(module):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(module: str) -> Iterator[Import]:
    """Every import of ours that `module` makes, anywhere in its text."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield Import(module, alias.name, (), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            target = resolve(module, node)
            if target not in MODULES:
                continue
            names = []
            for alias in node.names:
                child = f"{target}.{alias.name}"
                if child in MODULES:  # `from package import submodule`
                    yield Import(module, child, (), node.lineno)
                else:
                    names.append(alias.name)
            if names:
                yield Import(module, target, tuple(names), node.lineno)


IMPORTS = [found for module in MODULES for found in imports_of(module)]


def layer(module: str) -> int | None:
    """0 for harness up to 3 for ci; None for the `plangate` root package and its modules."""
    parts = module.split(".")
    return PACKAGES.index(parts[1]) if len(parts) > 1 and parts[1] in PACKAGES else None


def inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_every_package_is_found() -> None:
    assert {"plangate.harness", "plangate.replay", "plangate.evaluators", "plangate.ci"} <= set(
        MODULES
    )
    assert len(IMPORTS) > 100


def test_imports_point_one_way() -> None:
    wrong = [
        str(i)
        for i in IMPORTS
        if i.target == "plangate"
        or (
            layer(i.source) is not None
            and layer(i.target) is not None
            and layer(i.target) > layer(i.source)  # type: ignore[operator]
        )
    ]
    assert wrong == [], "imports against harness ← replay ← evaluators ← ci:\n" + "\n".join(wrong)


def test_evaluators_take_only_the_schema_the_run_detector_and_the_base_error() -> None:
    """Evaluators are pure functions of a table; only the judge's calls reach a model."""
    wrong = []
    for found in IMPORTS:
        if not inside(found.source, "plangate.evaluators"):
            continue
        judge = found.source == JUDGE_CALLS
        if judge and found.target == "plangate.harness.models":
            allowed = set(found.names) == {"OpenAIModel"}
        elif inside(found.target, "plangate.harness"):
            allowed = found.target == "plangate.harness" and set(found.names) <= (
                EVALUATORS_FROM_HARNESS | (JUDGE_FROM_HARNESS if judge else frozenset())
            )
        elif judge and found.target == "plangate.replay":
            allowed = set(found.names) == {"default_redactor"}
        elif inside(found.target, "plangate.replay"):
            allowed = found.target == "plangate.replay.schema"
        else:
            allowed = True
        if not allowed:
            wrong.append(str(found))
    assert wrong == [], "evaluators reach past the schema and the shared pieces:\n" + "\n".join(
        wrong
    )


def owner(module: str) -> str | None:
    """The package whose private module `module` is (None: `module` is public)."""
    parts = module.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:index])
    return None


def test_private_modules_are_imported_only_from_inside_their_package() -> None:
    wrong = [
        str(i)
        for i in IMPORTS
        if (home := owner(i.target)) is not None and not inside(i.source, home)
    ]
    assert wrong == [], "private modules imported from outside their package:\n" + "\n".join(wrong)


def test_library_code_never_imports_the_command_line() -> None:
    wrong = [
        str(i)
        for i in IMPORTS
        if inside(i.target, "plangate.ci.cli")
        and not inside(i.source, "plangate.ci.cli")
        and layer(i.source) is not None
    ]
    assert wrong == [], "library code imports ci.cli:\n" + "\n".join(wrong)


def test_the_gate_never_imports_phoenix() -> None:
    wrong = [
        str(i)
        for i in IMPORTS
        if inside(i.source, "plangate.ci.gate") and inside(i.target, "plangate.ci.phoenix")
    ]
    assert wrong == [], "the gate imports Phoenix code:\n" + "\n".join(wrong)


def graph() -> dict[str, set[str]]:
    """Each module's imported modules."""
    edges: dict[str, set[str]] = {name: set() for name in MODULES}
    for found in IMPORTS:
        if found.target != found.source:
            edges[found.source].add(found.target)
    return edges


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    """Every module `start` imports, directly or through others."""
    seen: set[str] = set()
    todo = list(edges[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(edges[name])
    return seen


def cycles() -> list[list[str]]:
    """Every group of modules that import each other around a circle."""
    edges = graph()
    reach = {name: reachable(edges, name) for name in edges}
    groups = {
        tuple(sorted({name} | {other for other in reach[name] if name in reach[other]}))
        for name in edges
        if name in reach[name]
    }
    return sorted(list(group) for group in groups)


def test_no_import_cycles() -> None:
    found = cycles()
    shown = [
        " → ".join(group)
        + "\n    "
        + "\n    ".join(
            str(i)
            for i in IMPORTS
            if i.source in group and i.target in group and i.source != i.target
        )
        for group in found
    ]
    assert found == [], "modules that import each other:\n" + "\n".join(shown)


def test_the_distribution_lists_every_package() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    packages = {name for name in MODULES if is_package(name)}
    data_only = set(config["tool"]["setuptools"]["package-data"]) - packages  # variants, workflows
    assert listed == packages | data_only


@pytest.mark.parametrize(
    "path",
    sorted(
        p.relative_to(REPO)
        for folder in (*PACKAGES, "plangate", "tests")
        for p in (REPO / folder).rglob("*.py")
    ),
    ids=str,
)
def test_no_module_is_over_500_lines(path: Path) -> None:
    lines = len((REPO / path).read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path} has {lines} lines; split it by concept"


@pytest.mark.parametrize("folder", PACKAGES)
def test_the_folders_import_only_as_plangate(folder: str) -> None:
    # tests/conftest.py refuses `import harness` & co.: the checkout is on sys.path, and a bare
    # import would load a second copy of the package beside `plangate.harness`.
    with pytest.raises(ImportError, match=f"import plangate.{folder}, not {folder}"):
        __import__(folder)


@pytest.mark.parametrize("package", sorted(name for name in MODULES if is_package(name)))
def test_every_public_name_resolves(package: str) -> None:
    # The lazy roots name their modules in strings: a moved module must not leave one dangling.
    module = importlib.import_module(package)
    names = getattr(module, "__all__", [])
    assert sorted(names) == sorted(set(names)), f"{package}.__all__ repeats a name"
    missing = [name for name in names if getattr(module, name, None) is None]
    assert missing == []
