"""Review 41: the Target seam refused a user's delegating wrapper (a class whose ``__getattr__``
forwards to a template: a logging or counting proxy). pack and evolve took one before the seam
came in (they read the members they use), ``isinstance(proxy, Target)`` is True, yet
``missing_members`` (``inspect.getattr_static``, which sees no dynamic attribute) said it lacks
every member: a false refusal. Members a class provides through ``__getattr__`` count; a proxy
that lacks one is still refused naming it. NVRTC and nvJitLink for real, no GPU."""
from __future__ import annotations

import pytest

import numptx as nx
from numptx import search
from numptx.jit.populations.pack import PackError, pack, pack_many
from numptx.jit.targets import SiteTarget, Target, missing_members
from numptx.jit.templates.template import Variant

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


class Proxy:
    """Forwards every attribute to the template it wraps, counting the reads."""

    def __init__(self, t):
        self._t, self.reads = t, []

    def __getattr__(self, name):
        self.reads.append(name)
        return getattr(self._t, name)


class NoInject(Proxy):
    def __getattr__(self, name):
        if name == "inject":
            raise AttributeError(name)
        return super().__getattr__(name)


@pytest.fixture(scope="module")
def tmpl():
    return nx.CudaTemplate(SRC, entry="fit", cache=False)


def test_a_delegating_proxy_is_a_target(tmpl):
    p = Proxy(tmpl)
    assert isinstance(p, Target)
    assert missing_members(p, Target) == () and missing_members(p, SiteTarget) == ()
    assert missing_members(NoInject(tmpl), Target) == ("inject",)


def test_a_delegating_proxy_packs_and_evolves(tmpl):
    p = Proxy(tmpl)
    one = pack(p, "f", [ADD, MUL], select="cand")
    assert one.errors == {} and one.cubin[:4] == b"\x7fELF" and "inject" in p.reads
    packs = pack_many(p, "f", [ADD, MUL, ADD], select="cand", per_module=2)
    assert [q.offset for q in packs] == [0, 2] and all(q.cubin[:4] == b"\x7fELF" for q in packs)
    r = search.evolve(p, "f", lambda packs: [0.0] * sum(len(q) for q in packs),
                      ops=["add", "mul"], population=4, generations=1, seed=1)
    assert r.best is not None


def test_a_proxy_lacking_a_member_is_refused_naming_it(tmpl):
    with pytest.raises(PackError, match=r"NoInject is not a template or a kernel: it lacks "
                                        r"inject \(give"):
        pack(NoInject(tmpl), "f", [ADD], select="cand")


def test_a_template_is_still_checked_without_reading_a_member(tmpl, monkeypatch):
    """missing_members reads no property of a template (nothing is built)."""
    v = tmpl.inject(f=ADD)
    monkeypatch.setattr(Variant, "cubin", property(lambda self: pytest.fail("built")))
    from numptx.jit.targets import TargetVariant
    assert missing_members(v, TargetVariant) == () and missing_members(tmpl, SiteTarget) == ()
