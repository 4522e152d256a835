"""A Griffe extension for the API reference: cep's docstrings are written for
``help()`` and doctest (reStructuredText roles, bare ``>>>`` examples); this turns
them into Markdown when the site is built, without touching the code.

- a run of doctest lines (from ``>>>`` to the next blank line) becomes a fenced
  ``pycon`` block, with ``# doctest:`` flags removed;
- ``:meth:`x```, ``:class:`x```, ``:func:`x``` and the other roles become code.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:meth|class|func|mod|attr|data|exc|obj):`~?([^`]+)`")
_FLAGS = re.compile(r"\s*#\s*doctest:.*$")


def markdown(text: str) -> str:
    """The docstring ``text`` with doctests fenced and roles as code."""
    out: list[str] = []
    block: list[str] = []
    indent = ""
    fence = False  # inside a fence the docstring already has
    for line in text.split("\n"):
        stripped = line.strip()
        if block:
            if stripped:
                body = line[len(indent):] if line.startswith(indent) else line.lstrip()
                block.append(_FLAGS.sub("", body))
                continue
            out.extend(["```pycon", *block, "```"])
            block = []
        if stripped.startswith("```"):
            fence = not fence
        if not fence and stripped.startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            if out and out[-1].strip():
                out.append("")  # a fence needs a blank line before it in a paragraph
            block = [_FLAGS.sub("", line[len(indent):])]
            continue
        out.append(line if fence else _ROLE.sub(r"`\1`", line))
    if block:
        out.extend(["```pycon", *block, "```"])
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Rewrite every object's docstring with :func:`markdown` as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
