"""The CPU cores this process may run on: what thread pools and work splits size themselves by.

``os.cpu_count()`` counts the machine's cores; a process pinned with ``taskset`` (or a
container's CPU set) may run on fewer, and threads beyond those only take turns::

    from numptx._cores import usable_cores
    usable_cores()          # 1 under `taskset -c 0 python ...` on any machine
"""
from __future__ import annotations

import os

__all__ = ["usable_cores"]


def usable_cores() -> int:
    """Cores in this process's CPU affinity set (``os.sched_getaffinity``, where the platform
    has it), else ``os.cpu_count()``; at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
