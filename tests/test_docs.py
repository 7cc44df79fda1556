"""README and docs/ as a newcomer reads them: every link resolves, every example runs.

- Links: every relative link (and its ``#anchor``, GitHub's slug of a heading) in README.md
  and docs/*.md points at a file, and a heading, that exist.
- Code: every fenced block names its language. ``bash`` blocks run in order, README first,
  then docs/01..05, each with ``bash -euo pipefail`` in one temporary folder with a
  temporary ``CRASHRESUME_HOME`` (no ``DATABASE_URL``: the real local cluster the CLI starts
  itself), ``python`` as this environment's and the clone importable (``examples``), as at
  the clone's root. ``python`` blocks run in a fresh interpreter each: the block is
  executed, then every ``test_*`` function it defines is called (``tmp_path`` given a fresh
  folder). A block preceded by ``<!-- no-run: reason -->`` is skipped; the reason is required.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "docs" / "README.md", *sorted((REPO / "docs").glob("0*.md"))]
LANGUAGES = {"bash", "python", "text"}
NO_RUN = re.compile(r"^<!-- no-run: (\S.*\S) -->$")
FENCE = re.compile(r"^```(\S*)\s*$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
BLOCK_TIMEOUT = 120  # seconds one block may take (the demos take a few)
CLEARED = ("DATABASE_URL", "RUN_ID", "CRASH_AT", "CRASH_SEQ", "CLOUD_URL", "MODEL_URL")

PYTHON_RUNNER = """
import inspect, sys, tempfile
from pathlib import Path
code = sys.stdin.read()
scope = {"__name__": "__docs__"}
exec(compile(code, sys.argv[1], "exec"), scope)
for name, func in list(scope.items()):
    if name.startswith("test_") and inspect.isfunction(func):
        params = set(inspect.signature(func).parameters)
        if params <= {"tmp_path"}:
            with tempfile.TemporaryDirectory() as tmp:
                func(**({"tmp_path": Path(tmp)} if params else {}))
"""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    no_run: str | None  # the reason, when marked

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> Iterator[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marked = NO_RUN.match(before.strip())
        yield Block(
            page=page,
            line=i + 1,
            language=opening.group(1),
            code="\n".join(lines[i + 1 : end]) + "\n",
            no_run=marked.group(1) if marked else None,
        )
        i = end + 1


def prose(page: Path) -> str:
    """The page without its fenced blocks (a link in an example is not a link)."""
    kept, inside = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
        elif not inside:
            kept.append(line)
    return "\n".join(kept)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for line in prose(page).splitlines():
        heading = re.match(r"^#{1,6} (.+)$", line)
        if heading:
            base = slug(heading.group(1))
            name, n = base, 0
            while name in found:
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_the_readme_is_one_screen_and_the_docs_are_linked_from_it() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in readme, f"README does not link docs/{page.name}"
    for needed in ("pip install -e", "python -m agent_runtime demo", "python -m pytest"):
        assert needed in readme
    assert "CRASHRESUME_HOME" in readme and "from crashresume import conform" in readme


def test_every_block_names_its_language_and_every_no_run_says_why() -> None:
    for page in PAGES:
        for block in blocks(page):
            assert block.language in LANGUAGES, f"{block.where}: ```{block.language}"
            assert block.no_run is None or block.language in {"bash", "python"}, block.where


@pytest.fixture
def docs_home() -> Iterator[tuple[Path, dict[str, str]]]:
    """A temporary folder, the home inside it (traversable by the server account as root)."""
    work = Path(tempfile.mkdtemp(prefix="crashresume-docs-"))
    work.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["CRASHRESUME_HOME"] = str(work / "home")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    try:
        yield work, env
    finally:
        subprocess.run(
            [sys.executable, "-m", "agent_runtime", "db", "stop"],
            env=env,
            cwd=work,
            capture_output=True,
            timeout=BLOCK_TIMEOUT,
        )
        shutil.rmtree(work, ignore_errors=True)


def test_the_code_blocks_run_in_order_as_written(docs_home: tuple[Path, dict[str, str]]) -> None:
    work, env = docs_home
    ran = 0
    for page in PAGES:
        for block in blocks(page):
            if block.no_run is not None or block.language not in {"bash", "python"}:
                continue
            if block.language == "bash":
                command = ["bash", "-euo", "pipefail", "-c", block.code]
                stdin = None
            else:
                command = [sys.executable, "-c", PYTHON_RUNNER, block.where]
                stdin = block.code
            done = subprocess.run(
                command,
                input=stdin,
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=BLOCK_TIMEOUT,
            )
            assert done.returncode == 0, (
                f"{block.where} exited {done.returncode}:\n{block.code}\n"
                f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
            )
            ran += 1
    assert ran >= 10
