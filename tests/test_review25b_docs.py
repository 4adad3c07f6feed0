"""Review 25b: docs/learn.md said "`evolve` does not take it yet" of ``predictor=`` after
evolve took it (with ``survivors="plus"``, screening by the words alone). The claim is checked
against what evolve's signature and option checks do."""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from numptx import search
from numptx.search.genes import SearchError

ROOT = Path(__file__).resolve().parent.parent
_SRC = r'''
extern "C" __global__ void fit(float* out, const float* X, int n) {
    unsigned cand = blockIdx.y;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float t = X[i], p;
        PTX_INJECT("f", PTX_IN(U32, cand), PTX_IN(F32, t), PTX_OUT(F32, p));
        out[(size_t)cand * n + i] = p;
    }
}'''


def test_learn_md_says_what_evolve_does_with_a_predictor():
    text = " ".join((ROOT / "docs" / "learn.md").read_text().split())
    takes = "predictor" in inspect.signature(search.evolve).parameters
    assert takes
    assert "does not take it" not in text
    assert "`evolve` takes it" in text and "words" in text
    # the condition the docs give: survivors="plus" (evolve's default is "children")
    import numptx as nx
    tmpl = nx.CudaTemplate(_SRC, entry="fit")
    with pytest.raises(SearchError, match="survivors='plus'"):
        search.evolve(tmpl, "f", lambda packs: [], predictor=True, population=8,
                      generations=1)
