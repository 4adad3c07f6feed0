"""nx.autotune that says what it did (issue 22): the missing GPU named before missing arguments,
excluded candidates warned and returned (``Tuned.excluded``), and ``@nx.autotuned`` kernels that
run under numba-cuda's simulator, ranked by nvJitLink's register counts of their sites.

Real components: NVRTC, nvJitLink and numba-cuda's simulator (in a fresh process, as a user
runs it with ``NUMBA_ENABLE_CUDASIM=1``)."""
from __future__ import annotations

import dataclasses
import json
import warnings

import numpy as np
import pytest

import numptx as nx
from numba import cuda  # noqa: F401 - a module global, as nx.kernel needs
from numptx.jit.tune.autotune import AutotuneWarning, Excluded, Tuned, autotune

from conftest import SPINE_SRC, gpu_available, run_script

ADD = "add.f32 %v_z, %v_x, %v_y;"
DIV = "div.rn.f32 %v_z, %v_x, %v_y;"          # the IEEE division: 24 registers on sm_90, not 8


@pytest.fixture(scope="module")
def tmpl(tmp_path_factory):
    return nx.CudaTemplate(SPINE_SRC, arch="sm_90",
                           cache=nx.CubinCache(str(tmp_path_factory.mktemp("cubins"))))


# ------------------------------------------------------------------ item 14: what comes first
@pytest.mark.skipif(gpu_available(), reason="checks the order of the errors without a GPU")
def test_no_gpu_is_said_before_missing_launch_arguments(tmpl):
    with pytest.raises(nx.LaunchError, match="no CUDA GPU is available: pass cost='sass'"):
        autotune(tmpl, [{"combine": ADD}])                  # cost="time", nothing else given
    with pytest.raises(nx.LaunchError, match="check=None"):
        autotune(tmpl, [{"combine": ADD}], cost="registers", check=np.zeros(4))
    args = (np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32), 4)
    with pytest.raises(nx.NumptxError, match="no index"):     # a wrong value still comes first
        autotune(tmpl, [{"combine": ADD}], args=args, check=np.zeros(4), output=7)


# ------------------------------------------------------------------ item 14: excluded candidates
def test_excluded_candidates_are_warned_and_returned(tmpl, tmp_path):
    cands = [{"combine": "bogus.f32 %v_z;"}, {"combine": ADD}, {"nosite": ADD}]
    with pytest.warns(AutotuneWarning, match=r"2 of 3 candidate\(s\) excluded") as rec:
        best = autotune(tmpl, cands, cost="registers", cache_dir=tmp_path)
    text = str(rec[0].message)
    assert "[build] candidate 0: LinkError" in text and "[stubs] candidate 2: RenderError" in text
    assert issubclass(AutotuneWarning, nx.NumptxWarning)
    assert rec[0].filename == __file__                      # the user's line, not numptx's
    assert best.index == 1
    assert [(e.index, e.stage) for e in best.excluded] == [(0, "build"), (2, "stubs")]
    assert all(isinstance(e, Excluded) and e.reason == best.failed[e.index]
               for e in best.excluded)
    assert "excluded" in {f.name for f in dataclasses.fields(Tuned)}   # a declared field
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutotuneWarning)     # nothing excluded: no warning
        again = autotune(tmpl, [{"combine": ADD}], cost="registers", cache_dir=tmp_path)
    assert again.excluded == ()


# ------------------------------------------------------------------ item 13: the simulator
SIMULATED = r'''
import os, warnings
import numpy as np
import numptx as nx
from numba import cuda
from numptx.jit.tune.autotune import AutotuneWarning, autotune

ADD, DIV = "add.f32 %v_z, %v_x, %v_y;", "div.rn.f32 %v_z, %v_x, %v_y;"
PARITY = PARITY_LIST
SUB = "sub.f32 %v_z, %v_x, %v_y;"
cache_dir = os.environ["TUNE_DIR"]

def body(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})

a = np.arange(1, 33, dtype=np.float32)
b = np.full(32, 2.0, np.float32)

# cost="registers": nvJitLink's register counts of each candidate's site; the winner runs
kern = nx.autotuned(nx.kernel(body), candidates=[{"combine": DIV}, {"combine": ADD}],
                    cost="registers", cache_dir=cache_dir)
out = np.zeros(32, np.float32)
kern[1, 32](out, a, b)
assert np.array_equal(out, a + b), out
(best,) = kern.tunings.values()
assert best.simulated and best.index == 1 and best.costs[0] > best.costs[1], best
assert best.costs == (24.0, 8.0), best.costs       # div.rn.f32 alone takes 24 on sm_90
assert not os.listdir(cache_dir)                   # site costs never enter the ranking cache

# the default cost="time": ranked by registers instead, warned once per tuning
kern = nx.autotuned(nx.kernel(body), candidates=[{"combine": DIV}, {"combine": ADD}],
                    cache_dir=cache_dir)
with warnings.catch_warnings(record=True) as rec:
    warnings.simplefilter("always")
    out = np.zeros(32, np.float32)
    kern[1, 32](out, a, b)
    kern[1, 32](out, a, b)
assert np.array_equal(out, a + b)
msgs = [str(w.message) for w in rec if issubclass(w.category, AutotuneWarning)]
assert len(msgs) == 1 and "cost='registers'" in msgs[0] and "simulator" in msgs[0], msgs

# check= runs each candidate in the simulator; what the build refuses is excluded as there
kern = nx.kernel(body)
cands = [{"combine": SUB}, {"combine": DIV}, {"combine": "bogus.f32 %v_z;"}, {"nosite": ADD},
         {"combine": ADD}]
with warnings.catch_warnings(record=True) as rec:
    warnings.simplefilter("always")
    best = autotune(kern, cands, args=(np.zeros(32, np.float32), a, b), grid=1, block=32,
                    cost="registers", check=lambda out, a, b: a + b)
assert best.index == 4, best
stages = {e.index: e.stage for e in best.excluded}
assert stages == {0: "check", 1: "check", 2: "build", 3: "stubs"}, best.excluded
assert "differ from the reference" in best.failed[0]
assert any("4 of 5 candidate(s) excluded" in str(w.message) for w in rec)

# cost="time" by the function itself: refused, naming what works here (before args=)
try:
    autotune(kern, [{"combine": ADD}])
except nx.LaunchError as e:
    assert "simulator" in str(e) and "cost='registers'" in str(e), e
else:
    raise AssertionError("cost='time' under the simulator")
try:
    autotune(kern, [{"combine": ADD}], cost="registers")
except nx.NumptxError as e:
    assert "pass args=" in str(e), e
else:
    raise AssertionError("no args= under the simulator")

# what the real build refuses, refused the same (compared with the real build by the test)
import json
best = autotune(kern, [{"combine": c} if isinstance(c, str) else c for c in PARITY],
                args=(np.zeros(32, np.float32), a, b), cost="registers")
with open(os.environ["PARITY_OUT"], "w") as f:
    json.dump([[e.index, e.stage] for e in best.excluded], f)
print("SIMULATED-AUTOTUNE-OK")
'''

#: candidates the real build and the simulator must accept and refuse alike
PARITY = [ADD, "bogus.f32 %v_z;", {"nosite": ADD}, DIV, "add.f64 %v_z, %v_x, %v_y;",
          "add.f32 %v_z, %v_x;", {}, "mov.f32 %v_q, %v_x;"]


def _body(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})


def test_autotuned_kernels_run_under_the_simulator(tmp_path, monkeypatch):
    tune_dir = tmp_path / "tunes"
    tune_dir.mkdir()
    monkeypatch.setenv("TUNE_DIR", str(tune_dir))
    monkeypatch.setenv("PARITY_OUT", str(tmp_path / "parity.json"))
    run_script(tmp_path, SIMULATED.replace("PARITY_LIST", repr(PARITY)), simulator=True,
               marker="SIMULATED-AUTOTUNE-OK")
    # the real build (numba-cuda compiles the kernel here; no GPU needed) excludes the same
    # candidates at the same stages
    a, b = np.arange(1, 33, dtype=np.float32), np.full(32, 2.0, np.float32)
    with pytest.warns(AutotuneWarning):
        real = autotune(nx.kernel(_body), [{"combine": c} if isinstance(c, str) else c
                                           for c in PARITY],
                        args=(np.zeros(32, np.float32), a, b), cost="registers",
                        cache_dir=tmp_path / "real")
    simulated = json.loads((tmp_path / "parity.json").read_text())
    assert [[e.index, e.stage] for e in real.excluded] == simulated
    assert {i for i, _ in simulated} == {1, 2, 4, 5, 6, 7}


# ------------------------------------------------------------------ review: simulator parity
SIMULATED_REFUSALS = r'''
import json, os, warnings
import numpy as np
import numptx as nx
from numba import cuda
from numptx.jit.tune.autotune import autotune

warnings.simplefilter("ignore")
ADD, SUB = "add.f32 %v_z, %v_x, %v_y;", "sub.f32 %v_z, %v_x, %v_y;"
CANDS = CANDIDATE_LIST

def body(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})

a = np.arange(1, 33, dtype=np.float32)
b = np.full(32, 2.0, np.float32)
results = {}
for name, strict in (("plain", False), ("strict", True)):
    best = autotune(nx.kernel(body, strict=strict), CANDS, args=(np.zeros(32, np.float32), a, b),
                    cost="registers")
    results[name] = [[e.index, e.stage] for e in best.excluded]
try:                                  # too few arguments: refused as the real build refuses it
    autotune(nx.kernel(body), [{"combine": ADD}], args=(np.zeros(32, np.float32), a),
             cost="registers")
except nx.NumptxError as e:
    results["nargs"] = str(e)

# the simulator's device arrays, an in-place kernel and check=: every candidate starts from the
# same inputs, the caller's arrays are left as they were, then the decorator's winner runs once
def inplace(out, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("combine", x=out[i], y=b[i], out={"z": nx.f32})

dout, db = cuda.to_device(a.copy()), cuda.to_device(b)
best = autotune(nx.kernel(inplace), [{"combine": SUB}, {"combine": ADD}, {"combine": ADD}],
                args=(dout, db), grid=1, block=32, cost="registers",
                check=lambda out, b: out + b)
assert [(e.index, e.stage) for e in best.excluded] == [(0, "check")], best.excluded
assert np.array_equal(dout.copy_to_host(), a)
tuned = nx.autotuned(nx.kernel(inplace), candidates=[{"combine": SUB}, {"combine": ADD}],
                     check=lambda out, b: out + b)
tuned[1, 32](dout, db)
assert np.array_equal(dout.copy_to_host(), a + b), dout.copy_to_host()
with open(os.environ["REFUSALS_OUT"], "w") as f:
    json.dump(results, f)
print("SIMULATED-REFUSALS-OK")
'''

#: stubs refused before any assembling (stage "stubs") and by nvJitLink (stage "build")
REFUSED = [ADD, 42, "// numptx module: .global .u32 g;\n" + ADD,
           "{ .reg .f32 %q; mov.f32 %q, %v_x; }", "bogus.f32 %v_z;"]


def test_simulated_autotune_refuses_at_the_real_builds_stages(tmp_path, monkeypatch):
    """Under the simulator a candidate is excluded at the stage the real build excludes it at
    (a stub of the wrong type, a reserved line, an unwritten out under strict=True: "stubs"),
    too few arguments are a NumptxError naming args= (not the simulator's TypeError), and the
    simulator's device arrays are copied per candidate for check= (an in-place kernel)."""
    monkeypatch.setenv("REFUSALS_OUT", str(tmp_path / "refusals.json"))
    cands = [{"combine": c} for c in REFUSED]
    run_script(tmp_path, SIMULATED_REFUSALS.replace("CANDIDATE_LIST", repr(cands)),
               simulator=True, marker="SIMULATED-REFUSALS-OK")
    simulated = json.loads((tmp_path / "refusals.json").read_text())
    a, b = np.arange(1, 33, dtype=np.float32), np.full(32, 2.0, np.float32)
    for name, strict in (("plain", False), ("strict", True)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            real = autotune(nx.kernel(_body, strict=strict), cands,
                            args=(np.zeros(32, np.float32), a, b), cost="registers",
                            cache_dir=tmp_path / "real")
        assert [[e.index, e.stage] for e in real.excluded] == simulated[name], name
    assert [s for _, s in simulated["strict"]] == ["stubs", "stubs", "stubs", "build"]
    assert "args=" in simulated["nargs"] and "3 argument(s), 2 given" in simulated["nargs"]
