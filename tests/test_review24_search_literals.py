"""Review of issue 24's Literal types: resume's ``device`` is the same Literal as the searches'
(it was a plain ``str``), and every string option of the public search functions is typed
by the Literal that holds its checked values."""
from __future__ import annotations

import importlib
import typing

from numptx.search.config import Build, Device, FitMethod, Loss, Survivors
from numptx.search.evaluate import Evaluate

searches = importlib.import_module("numptx.search.searches")
resume_mod = importlib.import_module("numptx.search.resume")


def test_resume_device_is_the_device_literal():
    hints = typing.get_type_hints(resume_mod.resume)
    assert hints["device"] == Device
    assert hints["evaluate"] == Evaluate | None and hints["build"] == Build | None


def test_the_searches_string_options_are_literals():
    want = {"loss": Loss, "device": Device, "evaluate": Evaluate, "fit_method": FitMethod,
            "build": Build}
    for fn in (searches.regress, searches.map_elites):
        hints = typing.get_type_hints(fn)
        assert {k: hints[k] for k in want} == want, fn.__name__
    assert typing.get_type_hints(searches.regress)["survivors"] == Survivors
    assert typing.get_type_hints(searches.evolve)["build"] == Build
