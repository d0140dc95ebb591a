"""Keep a shard child's freed memory in its heap instead of handing it back to the kernel at once.

A child allocates and frees the same few megabytes for every chunk it reads (the chunk's bytes, the
numpy matrices of its QC). With glibc's default thresholds such blocks go back to the kernel when freed
(large blocks are separate mappings, and the heap's free top is trimmed), so the next chunk faults the
same pages in again, each one zeroed by the kernel: on a 273 MB shard that was about 180,000 page faults,
a quarter of the QC-only child's CPU time spent in the kernel. With higher thresholds the freed blocks
are reused; peak RSS stays the same (the child holds the same blocks at its peak), it is only not given
back between chunks, which a process that exits after its shard does not need.
"""

from __future__ import annotations

import ctypes

#: glibc's ``mallopt`` parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: blocks below this size come from the heap (glibc's default starts at 128 KiB)
MMAP_THRESHOLD = 64 << 20
#: free memory at the heap's top kept before trimming (glibc's default starts at 128 KiB)
TRIM_THRESHOLD = 256 << 20


def keep_freed_memory() -> bool:
    """Raise the C library's mmap and trim thresholds for this process. False where that is not
    possible (a C library without ``mallopt``, such as macOS's; musl's accepts and ignores it)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
