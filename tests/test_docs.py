"""The documentation is a specification: every ```python block in README.md and
docs/**/*.md runs here, and the site builds with ``mkdocs build --strict``.

A page's blocks run in order in one namespace, in a fresh temporary working
directory, so a later block can use what an earlier one defined.  A failing
block is reported with its page and line.  Blocks tagged ``java``, ``bash``,
``text`` and the like are not Python and are not run; every fence must carry a
language, so no Python example can slip past untested.  Pages whose examples use
Spark get the session-wide ``spark`` fixture as ``spark``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import traceback
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

#: fenced blocks that run
PYTHON = {"python", "py", "python3"}
#: fenced blocks that are shown, never run
SHOWN = {"java", "bash", "sh", "console", "text", "sql", "yaml", "json", "dot", "ini", "toml"}

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # 1-based line of the opening fence
    code: str


def blocks(path: Path) -> list[Block]:
    """Every fenced code block of a Markdown page, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        opened = _OPEN.match(lines[i])
        if opened is None:
            i += 1
            continue
        indent, fence = len(opened["indent"]), opened["fence"]
        info = opened["info"].strip()
        lang = info.split()[0].lstrip(".{").rstrip("}").lower() if info else ""
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                break
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        else:
            raise AssertionError(f"{path.relative_to(ROOT)}:{i + 1}: code fence never closed")
        out.append(Block(lang, i + 1, "\n".join(body) + "\n"))
        i = j + 1
    return out


def python_blocks(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.lang in PYTHON]


def _uses_spark(code: list[Block]) -> bool:
    return any(re.search(r"\bspark\.|runtime\.spark\b", b.code) for b in code)


PAGES_WITH_CODE = [p for p in PAGES if python_blocks(p)]


def test_every_fence_names_a_known_language() -> None:
    """An unlabelled or oddly labelled fence could hide an example that never runs."""
    bad = [
        f"{page.relative_to(ROOT)}:{b.line}: ```{b.lang or '(none)'}"
        for page in PAGES
        for b in blocks(page)
        if b.lang not in PYTHON | SHOWN
    ]
    assert not bad, "fences must be tagged python (run) or one of " f"{sorted(SHOWN)}: {bad}"


def test_every_page_with_examples_checks_something() -> None:
    """Examples are specifications: each page's Python says what it expects."""
    silent = [
        str(p.relative_to(ROOT))
        for p in PAGES_WITH_CODE
        if not any("assert" in b.code for b in python_blocks(p))
    ]
    assert not silent, f"pages whose examples assert nothing: {silent}"


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                      request: pytest.FixtureRequest) -> None:
    code = python_blocks(page)
    name = str(page.relative_to(ROOT))
    # a real module, so classes defined by examples (dataclasses, pickling) can find it
    module = types.ModuleType("cep_docs_example")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    if _uses_spark(code):
        namespace["spark"] = request.getfixturevalue("spark")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # mkdtemp() in examples lands here
    for block in code:
        failure = None
        try:
            # blank lines keep the page's line numbers in tracebacks
            exec(compile("\n" * block.line + block.code, name, "exec"), namespace)
        except Exception:
            failure = traceback.format_exc()
        if failure is not None:
            pytest.fail(f"{name}:{block.line}: the example starting at line {block.line} "
                        f"failed:\n{failure}", pytrace=False)


def test_site_builds_strict_without_warnings(tmp_path: Path) -> None:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
         "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "WARNING" not in output, output
    assert (tmp_path / "site" / "index.html").exists()
