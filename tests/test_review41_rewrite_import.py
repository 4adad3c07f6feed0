"""Review 41: nx.site's numba IR rewrite moved to a module of its own (numba_rewrite), which
imports numba-cuda's compiler at its import. Importing that module before numba.cuda (as its
docstring shows, ``from numptx.jit import numba_rewrite``) ran numba.cuda's post-import hook
while numba_rewrite was half-initialised: the hook failed (a RuntimeWarning) and was gone, so
nx.site stayed unknown to numba-cuda for the whole process (a TypingError at every compile).
Fresh interpreters; NVVM for real, no GPU."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

COMPILE = r'''
import warnings
warnings.simplefilter("error")          # a failed post-import hook is a RuntimeWarning
{first}
import numptx as nx
from numba import cuda
from numba.cuda import types as nbt
assert nx.jit.numba_site._registered

def apply(out, a, b):                    # a plain numba-cuda function, no @nx.kernel
    i = cuda.grid(1)
    out[i] = nx.site("combine", x=a[i], y=b[i], out={{"z": nx.f32}})

ptx, _ = cuda.compile_ptx(apply, (nbt.float32[:],) * 3, cc=(9, 0))
assert "// PTX_INJECT_BEGIN combine" in ptx, ptx
print("OK")
'''


def _real_numba_only():
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        pytest.skip("needs the real numba-cuda")
    pytest.importorskip("numba.cuda")


@pytest.mark.parametrize("first", [
    "import numptx.jit.numba.numba_rewrite",
    "from numptx.jit import numba_rewrite",              # the module docstring's line
    "from numptx.jit.numba.numba_rewrite import SiteRewrite",
])
def test_importing_the_rewrite_first_keeps_sites_compiling(first):
    _real_numba_only()
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(COMPILE.format(first=first))],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr[-3000:]
