"""numptx._cores.usable_cores: pools and work splits follow the CPU affinity set, not the
machine's core count (a process pinned to one core ran the interpreter on 2 threads that only
took turns)."""
import os
import subprocess
import sys

import pytest

from numptx._cores import usable_cores


def test_usable_cores_is_the_affinity_set():
    assert usable_cores() == len(os.sched_getaffinity(0)) >= 1


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_pinned_process_sees_one_core():
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from numptx._cores import usable_cores; print(usable_cores())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "1"
