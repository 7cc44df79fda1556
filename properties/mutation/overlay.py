"""A copy of the runtime's package that a mutant is written into, imported first.

The mutation driver copies ``src/agent_runtime`` into a temporary directory and puts
that directory first on ``PYTHONPATH`` for the killing command: the command's process,
every worker it forks and every interpreter it starts import the copy, SQL files
included (the runtime reads ``agent_runtime/sql`` through ``importlib.resources``). A
mutant is written into the copy, the command runs, the copy's file is put back. The
worktree itself is never edited, so a run killed halfway leaves nothing behind there,
and other commands can run in the same tree meanwhile.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import agent_runtime

from .mutants import Mutant

SOURCE = Path(agent_runtime.__file__).resolve().parent


class Overlay:
    def __init__(self, source: Path = SOURCE) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="mutation-overlay-"))
        self.package = self.root / source.name
        shutil.copytree(source, self.package, ignore=shutil.ignore_patterns("__pycache__"))

    def environ(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's) with the copy first on ``PYTHONPATH``."""
        env = dict(os.environ if base is None else base)
        rest = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(self.root) + (os.pathsep + rest if rest else "")
        return env

    @contextmanager
    def applied(self, mutant: Mutant) -> Iterator[Path]:
        """The copy with ``mutant`` written into it; put back afterwards, whatever happens."""
        path = self.package / mutant.path
        original = path.read_text("utf-8")
        path.write_text(mutant.mutated, "utf-8")
        try:
            yield path
        finally:
            path.write_text(original, "utf-8")

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
