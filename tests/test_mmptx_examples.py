"""The mm-ptx parity examples (issue 16, item 6): examples/philox.py computes Random123's known
answers through the emulator (and a wrong constant does not), examples/domain_coloring.py
renders random programs whose emulated values match an independent NumPy evaluation. On a GPU
both run their kernels too."""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from conftest import run_script
from numptx.errors import NumptxError

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def _load(name: str):
    path = os.path.join(EXAMPLES, f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_example_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def philox():
    return _load("philox")


@pytest.fixture(scope="module")
def dc():
    return _load("domain_coloring")


# ================================================================================ philox
def test_philox_known_answers_through_the_emulator(philox):
    results = philox.check_kat(philox.stub())
    assert [name for name, _, _ in results] == ["zeros", "ones", "pi"]
    for name, got, want in results:
        assert got.dtype == np.uint32 and got.shape == (4,)
        assert np.array_equal(got, want), name
    # one vector spelled out, straight through nx.emulate (Random123 kat_vectors, the pi line)
    got = philox.emulate(philox.stub(), [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
                         [0xA4093822, 0x299F31D0])
    assert [int(w) for w in got[0]] == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


@pytest.mark.parametrize("constant", ["m0", "m1", "w0", "w1"])
def test_philox_a_corrupted_constant_fails_the_known_answers(philox, constant):
    right = {"m0": philox.M0, "m1": philox.M1, "w0": philox.W0, "w1": philox.W1}[constant]
    results = philox.check_kat(philox.stub(**{constant: right ^ 0x100}))
    assert not any(np.array_equal(got, want) for _, got, want in results)


def test_philox_rounds_and_reference(philox):
    # the NumPy reference gives the known answers too (an independent implementation)
    ref = philox.reference([k[1] for k in philox.KAT], [k[2] for k in philox.KAT])
    assert np.array_equal(ref, np.array([k[3] for k in philox.KAT], np.uint32))
    rng = np.random.default_rng(7)
    ctr = rng.integers(0, 1 << 32, (64, 4), dtype=np.uint64).astype(np.uint32)
    key = rng.integers(0, 1 << 32, (64, 2), dtype=np.uint64).astype(np.uint32)
    for rounds in (1, 7, 10):
        got = philox.emulate(philox.stub(rounds), ctr, key)
        assert np.array_equal(got, philox.reference(ctr, key, rounds)), rounds
    assert not np.array_equal(philox.emulate(philox.stub(9), ctr, key), philox.reference(ctr, key))


def test_philox_stub_is_one_routine_library(philox):
    prog = philox.program()
    assert sum(op.kind == "routine" for op in prog) == philox.ROUNDS
    st = philox.stub()
    assert st.diagnostics == ()
    text = str(st)
    assert text.count("mul.hi.u32") == text.count("mul.lo.u32") == 2 * philox.ROUNDS
    assert text.count("xor.b32") == 4 * philox.ROUNDS
    assert text.count("add.u32") == 2 * (philox.ROUNDS - 1)


@pytest.mark.parametrize("call", [lambda p: p.stub(0), lambda p: p.stub(2.5),
                                  lambda p: p.routines(m0=-1), lambda p: p.routines(w1=1 << 32),
                                  lambda p: p.routines(m1="0xCD9E8D57")])
def test_philox_bad_input(philox, call):
    with pytest.raises(NumptxError, match="philox: "):
        call(philox)


def test_philox_main_builds_the_kernel(philox, capsys):
    philox.main(n_random=64, gpu=False)
    out = capsys.readouterr().out
    assert out.count(" ok") == 3 and "MISMATCH" not in out
    assert "KAT pi    got d16cfe09 94fdcceb 5001e420 24126ea1" in out
    assert "kernel variant assembled" in out


@pytest.mark.gpu
def test_philox_on_the_gpu(philox, capsys):
    philox.main(n_random=4096, gpu=True)
    assert "GPU kernel == known answers" in capsys.readouterr().out


# ================================================================================ domain colouring
def _numpy_eval(dc, prog, t, x, y):
    """An independent float64 evaluation of a generated program; returns (f, g, largest
    |sin/cos argument|)."""
    stack, worst = [], 0.0
    feeds = {"t": np.full_like(x, t, dtype=np.float64), "x": x.astype(np.float64),
             "y": y.astype(np.float64)}
    for op in prog:
        if op.kind == "input":
            stack.append(feeds[op.name])
        elif op.kind == "const":
            stack.append(float(np.uint32(op.word >> 32).view(np.float32)))
        elif op == dc.ADD or op == dc.MUL:
            b, a = stack.pop(), stack.pop()
            stack.append(a + b if op == dc.ADD else a * b)
        elif op == dc.SIN or op == dc.COS:
            a = stack.pop()
            worst = max(worst, float(np.max(np.abs(a))))
            stack.append(np.sin(a) if op == dc.SIN else np.cos(a))
        elif op == dc.sp.dup("f32"):
            stack.append(stack[-1])
        else:
            raise AssertionError(f"unexpected op {op!r}")
    assert len(stack) == 2
    return stack[1], stack[0], worst       # f takes the top


def test_domain_coloring_values_match_numpy(dc, tmp_path, capsys):
    res = dc.main(programs=3, size=12, out=str(tmp_path / "m.png"), seed=5, build=False, gpu=False)
    x, y = dc.plane(12)
    assert x.reshape(12, 12)[0, 0] == -8 and y.reshape(12, 12)[0, 0] > 0   # top left: (-8, +)
    for prog, (f, g), t in zip(res["programs"], res["fields"], [0.4, 0.75, 1.1]):
        rf, rg, worst = _numpy_eval(dc, prog, t, x, y)
        assert worst <= 48.0                      # the generator's documented bound
        np.testing.assert_allclose(f.ravel(), rf, atol=1e-3)
        np.testing.assert_allclose(g.ravel(), rg, atol=1e-3)
    assert all(img.shape == (12, 12, 3) and img.dtype == np.uint8 for img in res["images"])
    assert res["montage"].shape == (2 + 14, 2 + 3 * 14, 3)
    assert len({img.tobytes() for img in res["images"]}) == 3            # different programs
    out = capsys.readouterr().out
    if res["writer"] is None:
        assert "pip install pillow" in out and not (tmp_path / "m.png").exists()
    else:
        assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_domain_coloring_says_what_to_install(dc, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(dc, "write_png", lambda path, rgb: None)
    res = dc.main(programs=1, size=8, out=str(tmp_path / "m.png"), build=False, gpu=False)
    assert res["images"][0].shape == (8, 8, 3)
    out = capsys.readouterr().out
    assert "pip install pillow" in out and "pip install matplotlib" in out


def test_domain_coloring_bad_input(dc):
    for kw in ({"programs": 0}, {"size": 1}, {"size": 9.5}):
        with pytest.raises(NumptxError, match="domain_coloring: "):
            dc.main(build=False, gpu=False, **kw)


def test_domain_coloring_script_builds_variants(tmp_path):
    """As a script with flags (a fresh process): tiny sizes, the kernel variants assembled."""
    path = os.path.join(EXAMPLES, "domain_coloring.py")
    out = tmp_path / "tiny.png"
    src = (f"import runpy, sys\nsys.argv = [{path!r}, '--programs', '2', '--size', '8', "
           f"'--out', {str(out)!r}, '--no-gpu']\nrunpy.run_path({path!r}, run_name='__main__')\n")
    run_script(tmp_path, src, simulator=False, marker="2 kernel variants assembled")


@pytest.mark.gpu
def test_domain_coloring_on_the_gpu(dc, tmp_path, capsys):
    res = dc.main(programs=4, size=64, out=str(tmp_path / "m.png"), gpu=True)
    assert res["gpu"] and "GPU == emulator" in capsys.readouterr().out
