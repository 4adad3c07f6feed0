"""Ready pairwise formulas for :func:`numptx.torch.pairwise` (the "semiring zoo" of kernel
methods), each a :class:`~numptx.torch.formulas.Pairwise`; ``x = A[i]``, ``y = B[j]``, norms
over the features ``k``::

    from numptx.torch import pairwise, zoo
    pairwise(X, Z, zoo.gaussian, sigma=0.5)

Distances are not differentiable where ``x == y`` (``||x - y||_2``, ``||x - y||_p`` for
``p > 1``); there their gradient is taken as 0, as ``torch.cdist``'s is (the formulas select 0
with ``nx.where`` at a zero sum, and ``nx.grad`` takes the selected branch's derivative); a NaN
sum stays NaN, as in ``torch.cdist``.
Hyperparameters (``sigma``, ``p``...) are run-time values: numbers, or tensors that get
gradients.
"""
from __future__ import annotations

import numptx as nx

from .formulas import Pairwise

__all__ = ["l1", "l2", "sqeuclidean", "lp", "laplace", "laplace_l1", "gaussian", "matern12",
           "cosine", "ZOO"]


def _absdiff(a, b):
    return nx.abs(a - b)


def _sqdiff(a, b):
    d = a - b
    return d * d


def _powdiff(a, b, p=2.0):
    return nx.abs(a - b) ** p


def _root(s):
    return nx.where(s == 0, 0.0, nx.sqrt(s))


def _proot(s, p=2.0):
    return nx.where(s == 0, 0.0, s ** (1.0 / p))


def _laplace(s, sigma=1.0):
    return nx.exp(-nx.where(s == 0, 0.0, nx.sqrt(s)) / sigma)


def _laplace_l1(s, sigma=1.0):
    return nx.exp(-s / sigma)


def _gaussian(s, sigma=1.0):
    return nx.exp(s * (-0.5 / (sigma * sigma)))


def _matern12(s, lengthscale=1.0, variance=1.0):
    return variance * nx.exp(-nx.where(s == 0, 0.0, nx.sqrt(s)) / lengthscale)


def _products(a, b):
    return a * b, a * a, b * b


def _cosine(s0, s1, s2, eps=1e-8):
    return s0 * nx.rsqrt(nx.maximum(s1 * s2, eps * eps))


l1 = Pairwise(_absdiff, name="l1", doc="""L1 (Manhattan) distance
``||x - y||_1 = sum_k |x_k - y_k|`` (``torch.cdist(A, B, p=1)``).""")
l2 = Pairwise(_sqdiff, finish=_root, name="l2", doc="""Euclidean distance
``||x - y||_2 = sqrt(sum_k (x_k - y_k)^2)`` (``torch.cdist(A, B, p=2)``); gradient 0 at
``x == y``.""")
sqeuclidean = Pairwise(_sqdiff, name="sqeuclidean", doc="""Squared Euclidean distance
``||x - y||_2^2 = sum_k (x_k - y_k)^2``.""")
lp = Pairwise(_powdiff, finish=_proot, name="lp", doc="""Minkowski distance
``||x - y||_p = (sum_k |x_k - y_k|^p)^(1/p)``, hyperparameter ``p`` (default 2; ``p >= 1`` for
a metric; gradient 0 at ``x == y``).""")
laplace = Pairwise(_sqdiff, finish=_laplace, name="laplace", doc="""Laplace kernel
``k(x, y) = exp(-||x - y||_2 / sigma)`` (the kernel-methods Laplace kernel, Euclidean norm),
bandwidth ``sigma`` (default 1).""")
laplace_l1 = Pairwise(_absdiff, finish=_laplace_l1, name="laplace_l1", doc="""Laplace kernel
with the L1 norm ``k(x, y) = exp(-||x - y||_1 / sigma)`` (scikit-learn's
``laplacian_kernel`` with ``gamma = 1 / sigma``), bandwidth ``sigma`` (default 1).""")
gaussian = Pairwise(_sqdiff, finish=_gaussian, name="gaussian", doc="""Gaussian (RBF) kernel
``k(x, y) = exp(-||x - y||_2^2 / (2 sigma^2))``, bandwidth ``sigma`` (default 1).""")
matern12 = Pairwise(_sqdiff, finish=_matern12, name="matern12", doc="""Matérn kernel of
smoothness 1/2 (the exponential kernel) ``k(x, y) = variance * exp(-||x - y||_2 / lengthscale)``,
``lengthscale`` and ``variance`` (defaults 1); with ``variance = 1`` it is :data:`laplace`.""")
cosine = Pairwise(_products, finish=_cosine, name="cosine", doc="""Cosine similarity
``k(x, y) = <x, y> / max(||x||_2 ||y||_2, eps)``, three sums per pair (``x.y``, ``x.x``,
``y.y``) combined by the finishing formula; ``eps`` (default 1e-8) keeps zero rows finite (0).""")

#: every formula of the zoo by name
ZOO = {z.name: z for z in (l1, l2, sqeuclidean, lp, laplace, laplace_l1, gaussian, matern12,
                           cosine)}
