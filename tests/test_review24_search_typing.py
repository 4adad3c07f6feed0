"""Review of issue 24: the search's declared seams type-check. The strategies are frozen
dataclasses, so ``Strategy.keeps_archive`` is a read-only property in the Protocol (declared
as a settable attribute, mypy refused every strategy as a ``Strategy``)."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEAMS = ["numptx/search/strategies.py", "numptx/search/state.py", "numptx/search/scorers.py",
         "numptx/search/elites.py"]


def test_the_search_seams_type_check():
    api = pytest.importorskip("mypy.api")
    out, err, code = api.run([*(str(ROOT / p) for p in SEAMS), "--follow-imports=silent",
                              "--ignore-missing-imports", "--python-version=3.10",
                              "--no-error-summary"])
    assert code == 0, out + err


def test_a_frozen_strategy_is_a_strategy_at_run_time_too():
    from numptx.search.strategies import Evolutionary, MapElites, strategy_for
    for kind, cls in (("regress", Evolutionary), ("evolve", Evolutionary),
                      ("map_elites", MapElites)):
        s = strategy_for(kind)
        assert isinstance(s, cls) and s.keeps_archive is (cls is MapElites)
