"""A clone named ``numptx`` in the current folder shadows the installed package (issue 22 item
17): numptx's own entry points name the cause instead of ``no attribute 'kernel'``."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import numptx
from numptx._shadow import empty_cwd, shadow_message, shadowing_folder

REPO = os.path.dirname(os.path.dirname(os.path.abspath(numptx.__file__)))


def _run(args: list[str], cwd: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def holder(tmp_path):
    """A folder that holds a clone named numptx (a link to this checkout's root)."""
    if os.path.exists(os.path.join(REPO, "__init__.py")):
        pytest.skip("the checkout's root is a package itself")
    os.symlink(REPO, tmp_path / "numptx")
    return str(tmp_path)


def test_this_process_has_the_real_package():
    assert shadowing_folder() is None


def test_the_cli_and_the_demo_step_name_a_shadowing_clone(holder):
    probe = _run(["-c", "import numptx; print(getattr(numptx, '__file__', None))"], holder)
    assert probe.returncode == 0, probe.stderr
    shadowed = probe.stdout.strip() == "None"
    cli = _run(["-m", "numptx.cli", "sites", "missing.ptx"], holder)
    step = _run(["-m", "numptx.demo", "--simulate"], holder)
    demo = _run(["-m", "numptx.demo"], holder)     # the demo itself (before: AttributeError)
    if shadowed:        # an editable install: the clone's folder imports as a namespace
        for r in (cli, step, demo):
            assert r.returncode == (1 if r is demo else 2), r.stdout + r.stderr
            assert "instead of the installed package" in r.stderr
            assert os.path.join(holder, "numptx") in r.stderr and "Run from another folder" in r.stderr
            assert "Traceback" not in r.stderr
    else:               # an installed package wins over a namespace portion: nothing to say
        assert "instead of the installed package" not in cli.stderr + step.stderr + demo.stderr


def test_the_demo_runs_its_simulator_step_where_numptx_is_the_package():
    with empty_cwd() as cwd:
        assert os.listdir(cwd) == []
        r = _run(["-c", "import numptx; print(numptx.__file__)"], cwd)
    assert r.returncode == 0 and r.stdout.strip() == numptx.__file__, r.stdout + r.stderr
    assert not os.path.exists(cwd)


def test_the_message_names_the_folder_and_both_fixes():
    msg = shadow_message("/home/u/numptx")
    assert "/home/u/numptx" in msg and "current folder (/home/u)" in msg
    assert "cd /home/u/numptx" in msg and "editable_mode=compat" in msg
