"""Review 41: a user's object with every member of :class:`numptx.jit.targets.Target` (and
``sites``: a SiteTarget) passes pack's and evolve's checks, so what they do next must work
through those members: a pack in another layout or build (``layout="kernels"``,
``build="fast"``) read the template's own ``link_options``/``plans``/``cache`` off the object,
and evolve called its ``pack_many`` method: AttributeErrors, where the template that builds
the variants is ``target.build_template()``. NVRTC and nvJitLink for real, no GPU."""
from __future__ import annotations

import pytest

import numptx as nx
from numptx import search
from numptx.jit.populations.pack import pack, pack_many
from numptx.jit.targets import SiteTarget, Target, missing_members

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


class UserTarget:
    """A user's wrapper offering exactly a SiteTarget's members."""
    per_signature = False

    def __init__(self, t):
        self._t = t
        self.language, self.strict, self.name, self.arch = t.language, t.strict, t.name, t.arch

    @property
    def sites(self):
        return self._t.sites

    def inject(self, stubs=None, /, *, missing="error"):
        return self._t.inject(stubs, missing=missing)

    def build_many(self, batch, **kw):
        return self._t.build_many(batch, **kw)

    def build_template(self, *args, device=None):
        return self._t


@pytest.fixture(scope="module")
def user():
    u = UserTarget(nx.CudaTemplate(SRC, entry="fit", cache=False))
    assert missing_members(u, SiteTarget) == () and isinstance(u, Target)
    return u


@pytest.mark.parametrize("layout,build", [("kernels", "full"), ("function", "fast"),
                                          ("kernels", "fast")])
def test_a_user_target_packs_in_every_layout_and_build(user, layout, build):
    p = pack(user, "f", [ADD, MUL], select="cand", layout=layout, build=build)
    assert p.errors == {} and p.cubin[:4] == b"\x7fELF"
    packs = pack_many(user, "f", [ADD, MUL, ADD], select="cand", per_module=2, layout=layout,
                      build=build)
    assert [q.offset for q in packs] == [0, 2] and all(q.cubin[:4] == b"\x7fELF" for q in packs)


def test_evolve_takes_a_user_site_target(user):
    seen = []

    def fitness(packs):
        seen.extend(len(p) for p in packs)
        return [0.0] * sum(len(p) for p in packs)

    r = search.evolve(user, "f", fitness, ops=["add", "mul"], population=4, generations=1,
                      seed=1)
    assert sum(seen) >= 4 and r.best is not None
