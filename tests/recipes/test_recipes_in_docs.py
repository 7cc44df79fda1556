"""Every recipe in the docs is, to the character, the test file CI runs."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "02-the-harness.md"
RECIPE = re.compile(r"<!-- no-run: (tests/recipes/test_recipe_\w+\.py), run by CI as it stands -->")


def recipes_in(text: str) -> dict[str, str]:
    """The code block after each recipe marker, by the file it names."""
    found: dict[str, str] = {}
    for marker in RECIPE.finditer(text):
        start = text.index("```python\n", marker.end()) + len("```python\n")
        found[marker.group(1)] = text[start : text.index("\n```\n", start) + 1]
    return found


def test_every_recipe_file_is_in_the_docs_exactly_as_it_is() -> None:
    shown = recipes_in(PAGE.read_text(encoding="utf-8"))

    files = sorted(
        str(p.relative_to(REPO)) for p in (REPO / "tests/recipes").glob("test_recipe_*.py")
    )
    assert sorted(shown) == files
    for name, code in shown.items():
        assert code == (REPO / name).read_text(encoding="utf-8"), f"{PAGE.name}: {name} differs"


def test_a_changed_line_is_caught() -> None:
    name = "tests/recipes/test_recipe_pydantic_ai.py"
    text = (REPO / name).read_text(encoding="utf-8")
    page = f"<!-- no-run: {name}, run by CI as it stands -->\n```python\n{text}```\n"

    assert recipes_in(page)[name] == text
    assert recipes_in(page.replace("Provision", "Provide", 1))[name] != text
