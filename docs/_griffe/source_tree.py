"""mkdocs hook: the installed package layout for mkdocstrings to read.

The repository keeps one folder per layer (cep, nfa, runtime, patterns); installed,
setup.cfg's ``package_dir`` makes the last three ``cep.nfa``, ``cep.runtime`` and
``cep.patterns``.  griffe finds modules by walking folders, so it gets a tree of that
shape: ``build/api-src/cep`` holding links to cep's files and to the other folders.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "build" / "api-src"
#: folder in the repository -> its name inside the cep package
MAPPED = {"nfa": "nfa", "runtime": "runtime", "patterns": "patterns"}


def on_startup(command: str, dirty: bool) -> None:
    # before mkdocstrings reads its configuration: it drops search paths that do not exist
    build()


def build() -> None:
    """(Re)build the tree."""
    if TREE.exists():
        shutil.rmtree(TREE)
    package = TREE / "cep"
    package.mkdir(parents=True)
    for item in (ROOT / "cep").iterdir():
        if item.name != "__pycache__":
            (package / item.name).symlink_to(item)
    for folder, name in MAPPED.items():
        (package / name).symlink_to(ROOT / folder, target_is_directory=True)
