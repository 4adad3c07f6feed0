"""The declared seams of numptx/jit/targets.py (issue 24, item 1): a template and a numba kernel
are both a ``Target``, their variants both a ``TargetVariant``; pack, autotune and the search take
them through those protocols (no attribute probes) and refuse an object that lacks a member with
an error naming it. Real components: NVRTC, NVVM (numba-cuda) and nvJitLink, no GPU."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import numptx as nx
from numptx import search
from numptx import stack_ptx as sp
from numptx.jit.tune.autotune import AutotuneError, autotune
from numptx.jit.numba.kernel import Kernel, KernelVariant, NoSignatureError, NumbaTemplate
from numptx.jit.populations.pack import PackError, pack, pack_many
from numptx.jit.populations.pack_kernels import LayoutVariant
from numptx.jit.targets import (SiteTarget, Target, TargetError, TargetVariant, missing_members,
                                require_target)
from numptx.jit.templates.template import CudaTemplate, Template, Variant
from numptx.search.genes import SearchError

ROOT = Path(__file__).resolve().parents[1]

SRC = r'''
extern "C" __global__ void fit(float* out, const float* X, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned cand = blockIdx.y;
    if (i < n) {
        float x = X[i], y;
        PTX_INJECT("f", PTX_IN(U32, cand), PTX_IN(F32, x), PTX_OUT(F32, y));
        out[cand * n + i] = y;
    }
}'''

ADD = "add.rn.f32 %v_y, %v_x, %v_x;"
MUL = "mul.rn.f32 %v_y, %v_x, %v_x;"
SQUARE = [sp.input("x"), sp.input("x"), sp.instr("mul.rn.f32")]


def _numba_kernel() -> Kernel:
    cuda = pytest.importorskip("numba").cuda

    @nx.kernel
    def fitk(out, X, ncand):
        i = cuda.grid(1)
        if i < X.shape[0]:
            for c in range(ncand):
                out[c, i] = nx.site("f", cand=np.uint32(c), x=X[i], out={"y": nx.f32})
    return fitk


def _args():
    return np.zeros((2, 4), np.float32), np.zeros(4, np.float32), 2


@pytest.fixture(scope="module")
def tmpl() -> CudaTemplate:
    return nx.CudaTemplate(SRC, entry="fit", cache=False)


@pytest.fixture(scope="module")
def kern() -> Kernel:
    k = _numba_kernel()
    k.template(*_args())
    return k


# ---- what each is ----------------------------------------------------------------------------
def test_a_template_and_a_numba_kernel_are_both_targets(tmpl, kern):
    for t in (tmpl, kern, kern.template(*_args()), Template(tmpl.ptx, cache=False)):
        assert isinstance(t, Target), missing_members(t, Target)
        assert missing_members(t, Target) == ()
    assert (tmpl.language, Template(tmpl.ptx).language, kern.language) == \
        ("CUDA C++", "PTX", "Python")
    assert kern.template(*_args()).language == "Python"
    assert (tmpl.per_signature, kern.per_signature, kern.template(*_args()).per_signature) == \
        (False, True, False)
    assert (tmpl.name, kern.name) == ("fit", "fitk")
    assert isinstance(tmpl, SiteTarget) and isinstance(kern.template(*_args()), SiteTarget)


def test_build_template_is_the_template_itself_or_the_kernels_for_the_arguments(tmpl, kern):
    assert tmpl.build_template() is tmpl and tmpl.build_template(*_args(), device=(9, 0)) is tmpl
    t = kern.build_template(*_args())
    assert isinstance(t, NumbaTemplate) and t is kern.template(*_args())
    assert kern.build_template() is kern.template()          # the last compiled signature
    d = kern.build_template(*_args(), device=(8, 0))
    assert d.arch == "sm_80" and kern.template().arch == "sm_90"   # the default stays


def test_variants_of_both_have_every_member_and_none_is_read_to_check(tmpl):
    fresh = _numba_kernel()                            # no signature yet: .ptx raises
    kv = fresh.inject(f=ADD)
    with pytest.raises(NoSignatureError, match="no signature yet"):
        kv.ptx                                                         # noqa: B018
    assert missing_members(kv, TargetVariant) == ()                    # nothing built to check
    v = tmpl.inject(f=ADD)
    assert missing_members(v, TargetVariant) == ()
    assert v._ptx is None and v._cubin is None                         # still nothing built
    lv = tmpl.pack("f", [ADD, MUL], select="cand", layout="kernels", per_kernel=1).variant
    assert isinstance(lv, LayoutVariant) and missing_members(lv, TargetVariant) == ()


def test_specialize_is_the_variant_a_launch_runs(tmpl, kern):
    v = tmpl.inject(f=ADD)
    assert v.specialize(*_args()) is v
    kv = kern.inject(f=ADD)
    got = kv.specialize(*_args())
    assert isinstance(got, Variant) and got.template is kern.template(*_args())


def test_adopt_takes_a_build_made_elsewhere(tmpl, kern):
    built = tmpl.build_many([{"f": MUL}])[0]
    v = tmpl.inject(f=MUL)
    v.adopt(built)
    assert v._cubin is built.cubin and v.build_info == built.build_info and v.ptx == built.ptx
    with pytest.raises(nx.NumptxError, match="same stubs"):
        tmpl.inject(f=ADD).adopt(built)
    kv = kern.inject(f=MUL)
    other = kern.template(*_args()).build_many([{"f": MUL}])[0]
    kv.adopt(other)
    assert kv.specialize(*_args()) is other


def test_the_protocols_type_check_with_mypy(tmp_path):
    """mypy (the project's configuration) on targets.py and on assignments of the real classes
    to the protocols: a numba kernel is no SiteTarget (its sites are a method of arguments)."""
    pytest.importorskip("mypy")
    mypy_section = (ROOT / "pyproject.toml").read_text().split("[tool.mypy]", 1)[1]
    assert '"numptx/jit/targets.py"' in mypy_section.split("]", 1)[0]     # checked in CI
    snippet = tmp_path / "numptx_targets_check.py"
    snippet.write_text(textwrap.dedent("""
        from numptx.jit.numba.kernel import Kernel, KernelVariant, NumbaTemplate
        from numptx.jit.populations.pack_kernels import LayoutVariant
        from numptx.jit.targets import SiteTarget, Target, TargetVariant
        from numptx.jit.templates.template import CudaTemplate, Template, Variant


        def conforms(t: Template, c: CudaTemplate, n: NumbaTemplate, k: Kernel, v: Variant,
                     kv: KernelVariant, lv: LayoutVariant) -> None:
            targets: list[Target] = [t, c, n, k]
            with_sites: list[SiteTarget] = [t, c, n]
            variants: list[TargetVariant] = [v, kv, lv]
            print(targets, with_sites, variants)


        def refuses(k: Kernel) -> SiteTarget:
            return k
        """))
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", "pyproject.toml",
                        "--cache-dir", str(tmp_path / "cache"), "numptx/jit/targets.py",
                        str(snippet)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    errors = [line for line in r.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, r.stdout + r.stderr
    assert "numptx_targets_check.py:17" in errors[0] and '"SiteTarget"' in errors[0], errors


# ---- an object that is not one ---------------------------------------------------------------
class _Partial:
    """A template's members, less ``build_template`` and ``per_signature``."""

    def __init__(self, t: Template):
        self._t = t
        self.language, self.strict, self.name, self.arch = t.language, t.strict, t.name, t.arch

    def inject(self, stubs=None, /, *, missing="error"):
        return self._t.inject(stubs, missing=missing)

    def build_many(self, batch, **kw):
        return self._t.build_many(batch, **kw)


class _Whole(_Partial):
    """A user's wrapper with every member: what pack and autotune use, and nothing more."""
    per_signature = False

    def build_template(self, *args, device=None):
        return self._t


def test_pack_refuses_an_object_lacking_members_naming_them(tmpl):
    with pytest.raises(PackError, match=r"pack: _Partial is not a template or a kernel: it "
                                        r"lacks per_signature, build_template \(give"):
        pack(_Partial(tmpl), "f", [ADD], select="cand")
    with pytest.raises(PackError, match=r"lacks per_signature, build_template"):
        pack_many(_Partial(tmpl), "f", [ADD, MUL], select="cand")
    with pytest.raises(PackError, match=r"lacks language, per_signature, strict, name, arch, "
                                        r"inject, build_many, build_template"):
        pack(object(), "f", [ADD], select="cand")


def test_autotune_refuses_an_object_lacking_members_naming_them(tmpl):
    with pytest.raises(AutotuneError, match=r"autotune\(template=\): _Partial is not a template "
                                            r"or a kernel: it lacks per_signature, "
                                            r"build_template"):
        autotune(_Partial(tmpl), [{"f": ADD}], cost="registers", cache=False)
    with pytest.raises(AutotuneError, match=r"nx.autotuned .*lacks language, .*build_template"):
        nx.autotuned(42, candidates=[{"f": ADD}])


def test_require_target_names_the_call_and_the_members():
    with pytest.raises(TargetError, match=r"^evolve: int is not a template or a kernel: it lacks "
                                          r"language, per_signature"):
        require_target(7, "evolve")


def test_a_users_target_with_every_member_packs_and_tunes(tmpl):
    w = _Whole(tmpl)
    assert isinstance(w, Target)
    p = pack(w, "f", [ADD, SQUARE], select="cand")
    assert p.errors == {} and p.cubin[:4] == b"\x7fELF"
    packs = pack_many(w, "f", [ADD, SQUARE, "bogus.f32 %v_y;"], select="cand", per_module=2)
    assert [q.offset for q in packs] == [0, 2] and packs[0].cubin[:4] == b"\x7fELF"
    assert packs[1].empty and list(packs[1].errors) == [2]
    best = autotune(w, [{"f": ADD}, {"f": MUL}], cost="registers", cache=False)
    assert best.index in (0, 1) and best.variant.template is tmpl


def test_pack_many_leaves_each_module_its_own_variant_with_the_build(tmpl, kern):
    for target in (tmpl, kern):
        packs = target.pack_many("f", [ADD, MUL, SQUARE], select="cand", per_module=2)
        for p in packs:
            assert p.variant.build_info is not None         # adopted: built, not rebuilt
            assert p.cubin[:4] == b"\x7fELF"
        if target is kern:
            assert all(isinstance(p.variant, KernelVariant) for p in packs)


def test_a_numba_kernel_has_no_layouts_and_search_takes_its_template(kern):
    with pytest.raises(PackError, match=r"packs of CUDA C\+\+ and PTX templates only"):
        kern.template(*_args()).pack("f", [ADD], select="cand", layout="kernels")
    with pytest.raises(SearchError, match=r"nx.kernel.*k.template\(\*args\)"):
        search.evolve(kern, "f", lambda packs: [], population=4, generations=1)
    with pytest.raises(SearchError, match=r"is not a template with sites.*lacks language"):
        search.evolve(type("S", (), {"sites": {}})(), "f", lambda packs: [], population=4,
                      generations=1)


def test_a_launch_without_a_gpu_names_what_the_template_was_written_in(tmpl):
    from numptx.jit.errors import LaunchError
    from conftest import gpu_available
    if gpu_available():
        pytest.skip("a GPU launches it")
    out = np.zeros(4, np.float32)
    for t, code in ((tmpl, "CUDA C++"), (Template(tmpl.ptx, cache=False), "PTX")):
        with pytest.raises(LaunchError, match=f"{code.replace('+', '[+]')} runs only on a GPU"):
            t.inject(f=ADD)[1, 4](out, out, np.int32(4))
