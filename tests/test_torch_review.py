"""Review of numptx.torch.pairwise (issue 27 item 2): NaN inputs, derivatives of the gradients
(create_graph=True), and the CPU path's memory bound."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="numptx.torch needs PyTorch: pip install numptx[torch]")

from numptx.torch import PairwiseError, pairwise, zoo       # noqa: E402
from numptx.torch import cpu as tcpu                        # noqa: E402


def _data(m, n, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, d, generator=g, dtype=torch.float64),
            torch.randn(n, d, generator=g, dtype=torch.float64))


@pytest.mark.parametrize("name", ["l2", "lp", "laplace", "matern12"])
def test_a_nan_row_gives_nan_not_a_zero_distance(name):
    # where(s > 0, sqrt(s), 0) took a NaN sum for 0: a NaN point at distance 0 from every
    # point (the Laplace kernel 1, "identical"); torch.cdist gives NaN
    A, B = _data(3, 4, 5)
    A[1, 2] = float("nan")
    out = pairwise(A, B, zoo.ZOO[name])
    assert torch.isnan(out[1]).all(), out[1]
    assert torch.isfinite(out[[0, 2]]).all()
    assert torch.isnan(torch.cdist(A, B)[1]).all()
    # the gradient at equal rows is still 0 (the selected branch of the where)
    X = A[[0, 2]].clone().requires_grad_()
    pairwise(X, X.detach().clone(), zoo.ZOO[name]).diagonal().sum().backward()
    assert torch.equal(X.grad, torch.zeros_like(X))


def test_differentiating_the_gradients_again_raises():
    # a gradient penalty: the gradients' own derivative used to count as 0 silently
    A, B = _data(5, 6, 4)
    A.requires_grad_()
    sigma = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(pairwise(A, B, zoo.gaussian, sigma=sigma).sum(), A,
                               create_graph=True)
    loss = (g ** 2).sum() + (A ** 2).sum()
    with pytest.raises(PairwiseError, match="first derivatives only"):
        loss.backward()
    # first derivatives are unchanged, with or without create_graph
    A2 = A.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(torch.exp(-torch.cdist(A2, B) ** 2 / (2 * 0.8 ** 2)).sum(), A2)
    torch.testing.assert_close(g.detach(), want)
    (plain,) = torch.autograd.grad(pairwise(A, B, zoo.gaussian, sigma=sigma).sum(), A)
    torch.testing.assert_close(plain, want)
    assert not plain.requires_grad


def test_cpu_blocks_stay_within_block_elements(monkeypatch):
    # n * d > BLOCK_ELEMENTS made one block of 1 x n x d: unbounded memory for a large B
    seen = []
    outs = tcpu._outs

    def recording(ret, shape):
        seen.append(int(np.prod(shape)))
        return outs(ret, shape)
    monkeypatch.setattr(tcpu, "BLOCK_ELEMENTS", 64)
    monkeypatch.setattr(tcpu, "_outs", recording)
    A, B = _data(5, 23, 8)
    A.requires_grad_()
    B.requires_grad_()
    for name, want in (("l1", lambda: torch.cdist(A, B, p=1)), ("l2", lambda: torch.cdist(A, B))):
        got = pairwise(A, B, zoo.ZOO[name])
        torch.testing.assert_close(got, want())
        g1 = torch.autograd.grad(got.sum(), (A, B))
        g2 = torch.autograd.grad(want().sum(), (A, B))
        for x, y in zip(g1, g2):
            torch.testing.assert_close(x, y)
    blocks = [s for s in seen if s != 5 * 23]          # the m x n finish / dfinish calls
    assert blocks and max(blocks) <= 64, max(blocks)


@pytest.mark.parametrize("name", ["out", "dh0", "dh12"])
def test_hyperparameter_names_the_cuda_sites_use_are_reserved(name):
    # "out" (the finish site's output) and "dh<N>" (dfinish's) worked on the CPU and failed
    # on a GPU with the template's "duplicate variable name"; now refused alike, everywhere
    from numptx.torch import Pairwise
    from numptx.torch.cuda import kernels
    ns: dict = {}
    exec(f"def fin(s, {name}=2.0):\n    return s * {name}\n", ns)    # noqa: S102 - ours
    spec = Pairwise(lambda a, b: (a - b) * (a - b), "sum", ns["fin"], name=f"r_{name}")
    A, B = _data(3, 4, 2)
    with pytest.raises(PairwiseError, match="reserved") as e:
        pairwise(A, B, spec)
    assert e.value.argument == name
    # a name next to them still builds for the GPU (NVRTC, nvJitLink; no launch)
    ns2: dict = {}
    exec("def fin(s, outer=2.0):\n    return s * outer\n", ns2)       # noqa: S102 - ours
    k = kernels(Pairwise(lambda a, b: a * b, "sum", ns2["fin"], name="r_ok").typed("f32"),
                "sm_90")
    assert k.forward.cubin[:4] == b"\x7fELF" and k.dfinish.cubin[:4] == b"\x7fELF"


def test_sparse_and_meta_tensors_are_refused_by_name():
    # they reached A.numpy() / .contiguous(): torch's TypeError / RuntimeError
    A, B = _data(3, 4, 2)
    meta = {"device": "meta", "dtype": torch.float64}
    for which, args in (("A", (A.to_sparse(), B)), ("A", (torch.empty(3, 2, **meta), B)),
                        ("B", (A, B.to_sparse())), ("B", (A, torch.empty(4, 2, **meta)))):
        with pytest.raises(PairwiseError, match="dense tensors on the CPU or a CUDA") as e:
            pairwise(*args, zoo.l2)
        assert e.value.argument == which


def test_the_grid_along_rows_stays_within_cudas_bound():
    """CUDA refuses grids of more than 65,535 blocks along y: the launches cap it there and the
    kernels' rows stride over it (more than ~1M rows launched, before)."""
    from numptx.torch import cuda as C
    from numptx.torch.launch import GRID_Y_MAX, _grid_y
    assert _grid_y(1) == 1 and _grid_y(10 ** 9) == GRID_Y_MAX
    assert _grid_y(GRID_Y_MAX * C.TILE) == GRID_Y_MAX          # a block per tile of rows
    assert _grid_y(GRID_Y_MAX * C.TILE - C.TILE) == GRID_Y_MAX - 1
    for kind in ("fwd", "bwd"):                 # the row tiles stride (tests/test_torch_tiles.py)
        assert "+= gridDim.y * TILE" in C.source(kind, "f32", 1, ())
