"""The error of :mod:`numptx.learn`: bad features, shapes that do not match, a model used
with genes other than the ones it learned from. Each message names the argument."""
from __future__ import annotations

from ..errors import NumptxError

__all__ = ["LearnError"]


class LearnError(NumptxError, ValueError):
    """A bad argument to a model, to :func:`numptx.learn.features`, or to a search's
    ``predictor=``/``descriptors="learned"``; the message names the argument and the fix."""
