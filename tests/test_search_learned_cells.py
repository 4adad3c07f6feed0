"""MAP-Elites with learned behaviour descriptors (``descriptors="learned"``, issue 25): the
two principal components of the programs' outputs on probe rows, refitted every REFIT
generations with the archive filed again. Real runs on the CPU interpreter."""
from __future__ import annotations

import json

import numpy as np
import pytest

from numptx import search
from numptx import stack_ptx as sp
from numptx.search import learned_cells as L
from numptx.search.checkpoint import CheckpointError
from numptx.search.genes import SearchError

OPS = ["add", "sub", "mul", "sin"]


def _data(n: int = 200):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (n, 2)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + np.sin(X[:, 0])).astype(np.float32)
    return X, y


def _run(generations: int = 12, **kw):
    X, y = _data()
    args = dict(descriptors="learned", bins=5, batch=150, generations=generations, seed=4,
                device="cpu", evaluate="interpret")
    return search.map_elites(X, y, OPS, **(args | kw))


def test_the_archive_is_filed_by_the_learned_basis():
    r = _run()
    s = r._search
    assert s.learned is not None and s.learned.fitted_at == 10       # fitted at 0, again at 10
    assert len(r.archive) > 5 and all(0 <= i < 5 and 0 <= j < 5 for i, j in r.archive)
    # every elite sits in the cell its outputs give (the run's archive: the returned one has
    # the linear scaling written into its programs, as a named descriptor's lengths do)
    cells = s.learned.cells([c.program for c in s.archive.values()])
    assert cells == list(s.archive) and list(s.archive) == list(r.archive)
    assert [d.name for d in s.descriptors] == list(L.AXES)


def test_programs_of_equal_outputs_share_a_cell():
    X, _ = _data()
    genes = search.Genes(OPS, 2)
    cells = L.LearnedCells(genes, X, 6, seed=0)
    a = [sp.input("x0"), sp.input("x1"), *genes.op_words("mul")]
    b = [sp.input("x1"), sp.input("x0"), *genes.op_words("mul")]
    c = [sp.input("x0"), *genes.op_words("sin")]
    cells.fit([a, c, [sp.input("x1")], [sp.input("x0"), sp.input("x0"), *genes.op_words("add")]],
              0)
    got = cells.cells([a, b, c])
    assert got[0] == got[1] and got[0] != got[2]


def test_the_same_seed_gives_the_same_archive():
    a, b = _run(), _run()
    assert list(a.archive) == list(b.archive)
    assert [c.loss for c in a.archive.values()] == [c.loss for c in b.archive.values()]


def test_resume_across_a_refit_is_exact(tmp_path):
    whole = _run(12)
    half = _run(6)
    path = tmp_path / "run.nxck"
    half.save(path)
    resumed = search.resume(path, generations=6)
    assert list(resumed.archive) == list(whole.archive)
    assert [c.program for c in resumed.archive.values()] == \
        [c.program for c in whole.archive.values()]
    assert resumed.best.loss == whole.best.loss


def test_resume_takes_descriptors_learned_as_map_elites_does(tmp_path):
    """resume(descriptors="learned") is the run's own setting, not a refused bare string; other
    descriptors than the run's are refused naming both."""
    path = tmp_path / "run.nxck"
    _run(3).save(path)
    again = search.resume(path, generations=1, descriptors="learned")
    assert len(again.history) == 4
    with pytest.raises(SearchError, match="was run with descriptors"):
        search.resume(path, generations=1, descriptors=("length", "op_mix"))
    with pytest.raises(SearchError, match="give a sequence of descriptor"):
        search.resume(path, generations=1, descriptors="length")


def _forge(path, edit):
    """Rewrite a checkpoint's JSON state with ``edit`` (the checksum recomputed)."""
    from numptx.search import checkpoint as ck
    st = ck.read(str(path))
    edit(st)
    ck.write(str(path), st)


@pytest.mark.parametrize("edit", [
    lambda st: st.pop("learned"),
    lambda st: st["learned"].update(fitted_at=10 ** 9),
    lambda st: st["learned"].update(extra=1),
    lambda st: st["learned"].update(low=st["learned"]["high"]),
    lambda st: st["learned"].update(mean=st["learned"]["low"]),
])
def test_a_forged_learned_state_is_refused_naming_the_field(tmp_path, edit):
    path = tmp_path / "run.nxck"
    _run(3).save(path)
    _forge(path, edit)
    with pytest.raises(CheckpointError, match="learned"):
        search.resume(path, generations=1)


def test_learned_stands_alone_and_needs_two_rows():
    X, y = _data()
    with pytest.raises(SearchError, match="give it alone"):
        search.map_elites(X, y, OPS, descriptors=("learned", "length"), batch=20,
                          generations=1, device="cpu")
    with pytest.raises(SearchError, match="at least 2"):
        search.map_elites(X[:1], y[:1], OPS, descriptors="learned", batch=20, generations=1,
                          device="cpu")


def test_a_checkpoint_state_round_trips_through_json():
    r = _run(3)
    from numptx.search.checkpoint import encode_array
    st = r._search.learned.state(encode_array)
    assert json.loads(json.dumps(st)) == st
