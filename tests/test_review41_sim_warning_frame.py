"""Review 41: the simulator's wave warnings (numptx.jit.numba.sim_waves) name the first frame
outside numptx and numba-cuda's simulator (the user's launch). sim_waves found "numptx itself"
as the parent of its own folder; moved one level down (numptx/jit/numba/), that parent became
numptx/jit/, and a numptx frame outside jit (numptx/search, numptx/torch, ...) between the user
and the launch was named instead of the user's line."""
from __future__ import annotations

import os
import warnings

import numptx
from numptx.jit.numba import sim_waves

PKG = os.path.dirname(os.path.abspath(numptx.__file__))

# run() of a wave (in sim_waves' own file) warns; a numptx caller outside jit launched it
_WAVE = '''
def run():
    warnings.warn("freed", RuntimeWarning, stacklevel=_caller_level())
'''
_LAUNCHER = '''
def launch():
    run()
'''


def _frames(launcher_file: str):
    ns = {"warnings": warnings, "_caller_level": sim_waves._caller_level}
    exec(compile(_WAVE, sim_waves.__file__, "exec"), ns)
    exec(compile(_LAUNCHER, launcher_file, "exec"), ns)
    return ns["launch"]


def test_a_numptx_frame_outside_jit_is_skipped():
    for launcher in (os.path.join(PKG, "search", "review41_probe.py"),
                     os.path.join(PKG, "torch", "review41_probe.py"),
                     os.path.join(PKG, "jit", "populations", "review41_probe.py")):
        launch = _frames(launcher)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            launch()                                    # this line is the user's launch
        assert [w.filename for w in caught] == [__file__], (launcher, caught[0].filename)


def test_the_users_own_frame_is_named():
    launch = _frames(__file__)                          # the user's code calls run directly
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        launch()
    assert [w.filename for w in caught] == [__file__]
    assert caught[0].lineno == 3                        # the launcher's line, in the user's file
