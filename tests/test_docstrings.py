"""Docstring examples are tests: every ``>>>`` example in the packages runs here.

Each module of cep, cep.nfa, cep.runtime (with cep.runtime.spark), cep.patterns and examples is
searched with :class:`doctest.DocTestFinder` and run with a
:class:`doctest.DocTestRunner` in the module's own globals, in a fresh temporary
working directory (examples that write files leave nothing behind).  A failure
names the module and shows the failing example, what it expected and what it got.
Modules under cep.runtime.spark get the session-wide ``spark`` fixture as ``spark``.

The public API must also be documented: every public function, class and method
of cep, runtime, patterns and examples has a docstring (a method may inherit its
base class's, as ``help()`` shows it).
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import tempfile
import types
from pathlib import Path

import pytest

#: cep.nfa, cep.runtime and cep.patterns live in folders of their own: walked one by one
PACKAGES = ("cep", "cep.nfa", "cep.runtime", "cep.patterns", "examples")
#: packages whose public names must all have docstrings (nfa is the engines' internals)
DOCUMENTED = ("cep", "cep.runtime", "cep.patterns", "examples")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def module_names(packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """Every module of ``packages`` (walk_packages imports subpackages to find theirs)."""
    names: list[str] = []
    for package in packages:
        root = importlib.import_module(package)
        names.append(package)
        names += [info.name for info in pkgutil.walk_packages(root.__path__, package + ".")]
    return sorted(set(names))


MODULES = module_names()


def _uses_spark(name: str) -> bool:
    return name == "cep.runtime.spark" or name.startswith("cep.runtime.spark.")


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                request: pytest.FixtureRequest) -> None:
    module = importlib.import_module(name)
    extra = {"spark": request.getfixturevalue("spark")} if _uses_spark(name) else {}
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # mkdtemp() in examples lands here
    finder = doctest.DocTestFinder()
    tests = [t for t in finder.find(module, name, globs=dict(vars(module)), extraglobs=extra)
             if t.examples]
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    for test in tests:
        runner.run(test, out=report.append, clear_globs=True)
    if runner.failures:
        pytest.fail(f"{name}: {runner.failures} of {runner.tries} docstring examples failed:\n"
                    + "".join(report), pytrace=False)


def test_every_module_is_searched() -> None:
    """A module that cannot be imported, or a package missed, would hide its examples."""
    assert {"cep.skip", "cep.nfa.kernel", "cep.runtime.job", "cep.runtime.spark.stream",
            "cep.patterns.fraud", "cep.patterns.synthetic.fraud", "examples.demo"} <= set(MODULES)


# ------------------------------------------------------------- docstrings exist
def _documented(obj: object) -> bool:
    return bool((inspect.getdoc(obj) or "").strip())


def _own_class_doc(cls: type) -> bool:
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or not doc.strip():
        return False
    # a dataclass without a docstring gets its signature as one
    return not doc.startswith(cls.__name__ + "(")


def _undocumented(module: types.ModuleType) -> list[str]:
    missing: list[str] = []
    for attr, obj in vars(module).items():
        if attr.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue  # private, or imported from elsewhere (checked where it is defined)
        if inspect.isfunction(obj) and not _documented(obj):
            missing.append(attr)
        elif inspect.isclass(obj):
            if not _own_class_doc(obj):
                missing.append(attr)
            for member, value in vars(obj).items():
                if member.startswith("_"):
                    continue
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                if not (inspect.isfunction(value) or isinstance(value, property)):
                    continue
                # inspect.getdoc finds a base class's docstring for an override
                if not _documented(getattr(obj, member)):
                    missing.append(f"{attr}.{member}")
    return missing


def test_public_names_have_docstrings() -> None:
    missing = [f"{name}.{attr}" for name in module_names(DOCUMENTED)
               if not name.rsplit(".", 1)[-1].startswith("_")
               for attr in _undocumented(importlib.import_module(name))]
    assert not missing, f"public names without a docstring: {missing}"
