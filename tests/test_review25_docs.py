"""Review of issue 25: the options docs/learn.md and the benchmarks' docstrings give
``benchmarks/bench_learn.py`` are options its parser has (docs/learn.md and learn_search.py said
``--search``, which argparse refuses: the section is ``--section search``)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _options() -> set[str]:
    src = (ROOT / "benchmarks" / "bench_learn.py").read_text()
    return set(re.findall(r'add_argument\("(--[\w-]+)"', src))


def test_bench_learn_options_named_in_the_docs_exist():
    known = _options()
    assert "--section" in known
    for doc in ("docs/learn.md", "benchmarks/learn_search.py", "benchmarks/bench_learn.py"):
        text = (ROOT / doc).read_text()
        # a sentence naming bench_learn.py and then options, up to the paragraph's end
        for m in re.finditer(r"bench_learn\.py`?([^\n]*(?:\n[^\n]+)*)", text):
            for opt in re.findall(r"(?<![\w-])--[a-z][\w-]*", m.group(1)):
                assert opt in known, f"{doc}: {opt} is not an option of bench_learn.py"
