"""The error :mod:`numptx.torch` raises for bad input."""
from __future__ import annotations

from numptx.errors import NumptxError

__all__ = ["PairwiseError"]


class PairwiseError(NumptxError, ValueError):
    """Bad input to :func:`numptx.torch.pairwise`; ``argument`` names the argument at fault
    (``"A"``, ``"B"``, ``"formula"``, ``"reduce"``, ``"finish"`` or a hyperparameter)."""

    def __init__(self, message: str, *, argument: str | None = None):
        self.argument = argument
        super().__init__(message)
