"""The layering of cep, read from the source (#15): each layer imports only the ones below.

    cep            the language: patterns, expressions, conditions, skip strategies, match
                   values, serialisation, errors (the modules directly in cep/)
    cep.nfa        how to match: the compiler and the engines (nfa/)
    cep.runtime    when and where: sources, the operator, checkpoints, sinks, replay, Spark,
                   and on top of them the ``cep`` command and its plots (runtime/)
    cep.patterns   the pattern library, written in the language (patterns/)

Every .py file of cep/, nfa/, runtime/ (with runtime/spark) and patterns/ (with
patterns/synthetic) is parsed with :mod:`ast`, never imported, and named as installed
(setup.cfg ``package_dir``: nfa/compiler.py is ``cep.nfa.compiler``).  An ``import a.b.c``
or ``from a.b import c`` imports the project's module ``a.b.c`` if there is one, else
``a.b`` (taking the name ``c`` from it); relative imports are resolved against the
importing module's package.  An import is *module-level* when it runs as the module is
imported: not inside a function body, and not under ``if TYPE_CHECKING:``.

The rules:

1. the language imports neither cep.nfa nor cep.runtime at module level (inside a function
   body, lazily, it may: ``Pattern.explain()`` compiles the pattern when it is called);
2. cep.nfa imports nothing from cep.runtime or cep.patterns, at any level (lazy and
   ``TYPE_CHECKING`` imports included);
3. cep.patterns imports only the language (and itself) at module level;
4. the module-level import graph between the project's modules has no cycle;
5. no module imports a private name (``_x``, or anything of a private module such as
   ``cep.patterns._params``) from a module of another layer, at any level;
6. nothing imports the old top-level names ``nfa``, ``runtime`` or ``patterns`` (the
   packages, the tests, the examples and the benchmarks are searched).

``KNOWN`` lists the violations that lie in files being rewritten as this test is written;
they are allowed for now, and the list only shrinks: an entry whose violation no longer
occurs fails :func:`test_known_violations_still_occur`, so whoever fixes one deletes it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: folder in the repository -> the package it installs as (setup.cfg package_dir)
FOLDERS = {"cep": "cep", "nfa": "cep.nfa", "runtime": "cep.runtime", "patterns": "cep.patterns"}
#: the layers, named by their package; the language is every module directly in cep/
LANGUAGE, NFA, RUNTIME, PATTERNS = "cep", "cep.nfa", "cep.runtime", "cep.patterns"
#: the folders' names before #15 item 5, no longer importable
OLD_NAMES = ("nfa", "runtime", "patterns")
#: where else old names are looked for (rule 6)
OTHER_FOLDERS = ("tests", "examples", "benchmarks")

#: A violation: (rule, importing module, imported module, name taken from it or None when
#: the module itself is imported).  Rules: "language", "nfa", "patterns", "private",
#: "old-name"; a cycle is ("cycle", its modules in order, joined by " -> ", None, None).
Violation = tuple[str, str, str | None, str | None]

#: Violations allowed for now (none: the engine interface work of #15 removed the last);
#: the list only shrinks, add none.
KNOWN: set[Violation] = set()


# ----------------------------------------------------------------- reading the source
@dataclass(frozen=True)
class Import:
    importer: str  # the importing module
    module: str  # the project module imported
    name: str | None  # the name taken from it; None when the module itself is imported
    lazy: bool  # inside a function body: runs when the function is called
    typing_only: bool  # under `if TYPE_CHECKING:`: never runs
    line: int

    @property
    def module_level(self) -> bool:
        return not self.lazy and not self.typing_only

    def __str__(self) -> str:
        what = self.module if self.name is None else f"{self.module}.{self.name}"
        return f"{self.importer} imports {what} (line {self.line})"


def module_files() -> dict[str, Path]:
    """Every module of the project, by its import name."""
    modules: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        base = ROOT / folder
        files = base.glob("*.py") if folder == "cep" else base.rglob("*.py")
        for path in sorted(files):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


MODULES = module_files()


def layer(module: str) -> str:
    """The layer a module belongs to: its package name, the language for cep's own."""
    for package in (NFA, RUNTIME, PATTERNS):
        if module == package or module.startswith(package + "."):
            return package
    return LANGUAGE


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.Module) -> Iterator[tuple[ast.stmt, bool, bool]]:
    """Every import statement with (lazy, typing_only)."""

    def walk(node: ast.AST, lazy: bool, typing_only: bool) -> Iterator[tuple[ast.stmt, bool, bool]]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, lazy, typing_only
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from walk(child, lazy, True)
            for child in node.orelse:
                yield from walk(child, lazy, typing_only)
            return
        inner = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            yield from walk(child, inner, typing_only)

    yield from walk(tree, False, False)


def _package_of(module: str) -> str:
    """The package a module's relative imports start from."""
    path = MODULES[module]
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _resolve(dotted: str) -> tuple[str, str | None] | None:
    """``a.b.c`` -> (the longest prefix that is a project module, the name after it)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        if module in MODULES:
            rest = parts[end:]
            return module, rest[0] if rest else None
    return None


def imports_of(module: str) -> list[Import]:
    """The project modules ``module`` imports (third-party and standard ones left out)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"), str(MODULES[module]))
    found: list[Import] = []
    for node, lazy, typing_only in _statements(tree):
        targets: list[tuple[str, str | None]] = []
        if isinstance(node, ast.Import):
            for alias in node.names:
                resolved = _resolve(alias.name)
                if resolved is not None:
                    # `import a.b.c` binds a.b.c if it is a module, else whatever a.b holds
                    targets.append(resolved)
        else:
            assert isinstance(node, ast.ImportFrom)
            base = node.module or ""
            if node.level:
                package = _package_of(module).split(".")
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            for alias in node.names:
                if alias.name == "*":
                    resolved = _resolve(base)
                    if resolved is not None:
                        targets.append((resolved[0], "*"))
                    continue
                resolved = _resolve(f"{base}.{alias.name}")
                if resolved is not None and resolved[0] == f"{base}.{alias.name}":
                    targets.append(resolved)  # a submodule: `from cep.nfa import kernel`
                else:
                    resolved = _resolve(base)
                    if resolved is not None:
                        targets.append((resolved[0], alias.name if resolved[1] is None
                                        else resolved[1]))
        found += [Import(module, target, name, lazy, typing_only, node.lineno)
                  for target, name in targets]
    return found


IMPORTS = {module: imports_of(module) for module in MODULES}


def _all_imports() -> Iterator[Import]:
    for found in IMPORTS.values():
        yield from found


# ----------------------------------------------------------------- the rules
def language_violations() -> set[Violation]:
    """Rule 1: the language imports neither cep.nfa nor cep.runtime at module level."""
    return {("language", i.importer, i.module, i.name) for i in _all_imports()
            if layer(i.importer) == LANGUAGE and i.module_level
            and layer(i.module) in (NFA, RUNTIME)}


def nfa_violations() -> set[Violation]:
    """Rule 2: cep.nfa imports nothing of cep.runtime or cep.patterns, at any level."""
    return {("nfa", i.importer, i.module, i.name) for i in _all_imports()
            if layer(i.importer) == NFA and layer(i.module) in (RUNTIME, PATTERNS)}


def patterns_violations() -> set[Violation]:
    """Rule 3: cep.patterns imports only the language (and itself) at module level."""
    return {("patterns", i.importer, i.module, i.name) for i in _all_imports()
            if layer(i.importer) == PATTERNS and i.module_level
            and layer(i.module) not in (LANGUAGE, PATTERNS)}


def private_violations() -> set[Violation]:
    """Rule 5: no private name, nor anything of a private module, across layers."""
    return {("private", i.importer, i.module, i.name) for i in _all_imports()
            if layer(i.importer) != layer(i.module)
            and (any(_private(part) for part in i.module.split("."))
                 or (i.name is not None and _private(i.name)))}


def graph() -> dict[str, set[str]]:
    """The module-level import graph between the project's modules."""
    edges: dict[str, set[str]] = {module: set() for module in MODULES}
    for i in _all_imports():
        if i.module_level and i.module != i.importer:
            edges[i.importer].add(i.module)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (its modules in import order, the first repeated at the end) per strongly
    connected component of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:  # the graph is small: recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(edges):
        if v not in index:
            connect(v)
    found = []
    for component in components:
        members = set(component)
        start = min(component)
        # the shortest way from start back to itself inside the component
        paths = {start: [start]}
        frontier = [start]
        cycle: list[str] | None = None
        while frontier and cycle is None:
            nxt = []
            for v in frontier:
                for w in sorted(edges[v] & members):
                    if w == start:
                        cycle = [*paths[v], start]
                        break
                    if w not in paths:
                        paths[w] = [*paths[v], w]
                        nxt.append(w)
                if cycle is not None:
                    break
            frontier = nxt
        assert cycle is not None
        found.append(cycle)
    return sorted(found)


def cycle_violations() -> set[Violation]:
    """Rule 4: no cycle in the module-level import graph."""
    return {("cycle", " -> ".join(cycle), None, None) for cycle in cycles(graph())}


def _old_name_imports(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            if name.split(".")[0] in OLD_NAMES:
                yield node.lineno, name


def old_name_violations() -> set[Violation]:
    """Rule 6: nobody imports ``nfa``, ``runtime`` or ``patterns`` as top-level names."""
    files = {module: path for module, path in MODULES.items()}
    for folder in OTHER_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if not any(part.startswith(".") for part in path.relative_to(ROOT).parts):
                files[str(path.relative_to(ROOT))] = path
    return {("old-name", where, name, None) for where, path in files.items()
            for _, name in _old_name_imports(path)}


RULES = {
    "language": language_violations,
    "nfa": nfa_violations,
    "patterns": patterns_violations,
    "cycle": cycle_violations,
    "private": private_violations,
    "old-name": old_name_violations,
}


def _explain(violations: set[Violation]) -> str:
    lines = []
    for rule, importer, module, name in sorted(violations, key=str):
        if rule == "cycle":
            lines.append(f"  import cycle: {importer}")
            continue
        where = [str(i) for i in IMPORTS.get(importer, [])
                 if i.module == module and i.name == name]
        lines.append(f"  {(rule, importer, module, name)!r}"
                     + (f": {'; '.join(where)}" if where else ""))
    return "\n".join(lines)


# ----------------------------------------------------------------- the tests
def test_cycles_are_found() -> None:
    """The cycle finder itself, on a small graph: one cycle per tangle, none for a chain."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"f"}, "f": {"e"}}
    assert cycles(edges) == [["a", "b", "c", "a"], ["e", "f", "e"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_source_is_read() -> None:
    """A mapping gone wrong would make every rule pass on nothing."""
    assert {"cep.pattern", "cep.nfa.compiler", "cep.runtime.job", "cep.runtime.spark.runner",
            "cep.runtime.cli", "cep.patterns.fraud", "cep.patterns.synthetic"} <= set(MODULES)
    assert layer("cep.nfa") == NFA and layer("cep.runtime.spark") == RUNTIME
    assert layer("cep") == layer("cep.pattern") == LANGUAGE


def test_resolving_imports() -> None:
    """``from a.b import c``: the module a.b.c when there is one, else the name c of a.b."""
    nfa_render = {(i.module, i.name) for i in IMPORTS["cep.nfa.render"]}
    assert ("cep.nfa.figures", "new_figure") in nfa_render  # a name of a module
    bytecode = {(i.module, i.name) for i in IMPORTS["cep.nfa.bytecode"]}
    assert ("cep.nfa.kernel", None) in bytecode  # from cep.nfa import kernel as K


@pytest.mark.parametrize("rule", sorted(RULES))
def test_rule(rule: str) -> None:
    """Each rule holds, but for the violations listed in KNOWN."""
    new = RULES[rule]() - KNOWN
    assert not new, (f"layering rule {rule!r} broken (see this module's docstring):\n"
                     + _explain(new))


def test_known_violations_still_occur() -> None:
    """KNOWN only shrinks: delete the entries whose violation is gone."""
    occurring = set().union(*(check() for check in RULES.values()))
    gone = KNOWN - occurring
    assert not gone, ("these KNOWN violations no longer occur: delete them from KNOWN in "
                      "tests/test_layering.py:\n" + "\n".join(f"  {v!r}" for v in sorted(
                          gone, key=str)))


def test_the_command_sits_above_the_runtime() -> None:
    """cep.runtime.cli -> cep.runtime.replay -> cep.runtime.specs, never back."""
    def imported(module: str) -> set[str]:
        return {i.module for i in IMPORTS[module]}

    assert "cep.runtime.specs" in imported("cep.runtime.replay")
    assert "cep.runtime.cli" not in imported("cep.runtime.replay")
    assert not imported("cep.runtime.specs") & {"cep.runtime.cli", "cep.runtime.replay"}
    assert not any(i.module in ("cep.runtime.cli", "cep.runtime.plot") for i in _all_imports()
                   if i.importer not in ("cep.runtime.cli", "cep.runtime.plot"))
