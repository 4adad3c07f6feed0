"""docs/design/README.md's "Every module" section lists every file of the package, the C cores
and the generators (issue 24, item 6): a module missing from the map, or a listed file that no
longer exists, fails here."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "design" / "README.md"


def _listed() -> set[str]:
    text = MAP.read_text()
    assert "## Every module" in text, "docs/design/README.md lost its 'Every module' section"
    section = text.split("## Every module", 1)[1]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.M))


def _files() -> set[str]:
    out = {p.relative_to(ROOT).as_posix() for p in (ROOT / "numptx").rglob("*.py")}
    native = ROOT / "native"
    out |= {p.relative_to(ROOT).as_posix() for p in native.glob("*.h")}
    out |= {p.relative_to(ROOT).as_posix() for p in native.glob("*.py")}
    out |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "tools").glob("*.py")}
    return out


def test_every_module_is_in_the_map():
    missing = sorted(_files() - _listed())
    assert not missing, ("add a row to docs/design/README.md, 'Every module', for: "
                         + ", ".join(missing))


def test_every_listed_file_exists():
    stale = sorted(p for p in _listed() if not (ROOT / p).is_file())
    assert not stale, "docs/design/README.md lists files that do not exist: " + ", ".join(stale)
