"""A child keeps its freed memory: repeated large allocations stop faulting pages in."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# 48 MiB blocks: above glibc's largest default mmap threshold (32 MiB), so by default each one is a
# fresh mapping whose pages the kernel faults in (and zeroes) again
_ALLOCATE = """
import resource, sys
from seqlake.child.heap import keep_freed_memory
kept = sys.argv[1] == "keep" and keep_freed_memory()
b"x" * (48 << 20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    b"x" * (48 << 20)
print(int(kept), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> tuple[bool, int]:
    out = subprocess.run([sys.executable, "-c", _ALLOCATE, mode], capture_output=True, text=True, check=True)
    kept, faults = out.stdout.split()
    return kept == "1", int(faults)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's thresholds are glibc's")
def test_freed_blocks_are_reused_without_page_faults() -> None:
    pages = (48 << 20) // 4096
    kept, faults = _faults("keep")
    assert kept
    assert faults < pages  # 20 allocations, not one of them faulted in again
    _, default_faults = _faults("default")
    assert default_faults > 10 * pages  # the default: every allocation faults its pages in
