"""Sorted runs of count rows that outgrow a child's memory: spilled to its local disk, merged back a window of
keys at a time.

A run is rows with sorted, distinct int64 keys and one row of counts per key. A child adds its batches up in
memory until the rows pass a budget (:data:`seqlake.base.limits.CHILD_ALLELE_ROWS`), writes the summed rows
to a file (:class:`FileRun`) and starts again. At the end :func:`merged` adds up the runs' rows of a key range
(one region's) a window at a time: each window ends at the smallest key some run reaches within its share of
:data:`seqlake.base.limits.CHILD_MERGE_ROWS` rows, so every run gives at most its share and the window's rows
are bounded whatever the number of runs; each run's rows of the window are found by a binary search of its
keys. A file's rows are read by ranges (``os.pread``), never mapped, so what a merge holds is its window
(file pages mapped and touched would count in the child's resident memory until unmapped).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
Counts = npt.NDArray[np.signedinteger]
Side = Literal["left", "right"]
#: a file run keeps every this-many-th key in memory: a key is found in it with one read of this many keys
SEARCH_STRIDE = 4096


class Run(Protocol):
    """Sorted rows: ``rows`` keys, each with a row of counts."""

    @property
    def rows(self) -> int: ...

    def keys(self, first: int, stop: int) -> I64: ...

    def counts(self, first: int, stop: int) -> Counts: ...

    def search(self, key: int, side: Side) -> int: ...


class MemoryRun:
    """A run held in memory (the rows summed since the last spill)."""

    def __init__(self, keys: I64, counts: Counts) -> None:
        self._keys, self._counts = keys, counts

    @property
    def rows(self) -> int:
        return len(self._keys)

    def keys(self, first: int, stop: int) -> I64:
        return self._keys[first:stop]

    def counts(self, first: int, stop: int) -> Counts:
        return self._counts[first:stop]

    def search(self, key: int, side: Side) -> int:
        return int(np.searchsorted(self._keys, key, side=side))


def stored_dtype(counts: Counts) -> np.dtype:
    """The narrowest of uint8, uint16, int32 and int64 that holds every count. On a big genome a spilled
    run's rows are nearly all one base at one position (a shard's reads are spread over the whole genome),
    so a row is its key and 32 counts of 0 or 1: 40 bytes in uint8 against 136 in int32, which decided
    whether a child of 2 M pairs over 100 Mb fit its disk (~40 GB of runs at 136 bytes)."""
    if not counts.size:
        return np.dtype(np.uint8)
    low, high = int(counts.min()), int(counts.max())
    for dtype in (np.uint8, np.uint16, np.int32):
        info = np.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


class FileRun:
    """A run in one local file: the keys (int64), then the count rows (C order, in :func:`stored_dtype`),
    read by ranges and handed back as int32 at least (what the in-memory runs hold); every ``stride``-th key
    stays in memory."""

    def __init__(self, path: Path, keys: I64, counts: Counts, stride: int = SEARCH_STRIDE) -> None:
        self.dtype = stored_dtype(counts)
        self.width = counts.shape[1]
        self.path = path
        self._rows = len(keys)
        with path.open("wb") as out:
            out.write(np.ascontiguousarray(keys, dtype=np.int64).data)
            out.write(np.ascontiguousarray(counts, dtype=self.dtype).data)
        self._stride = stride
        self._index = keys[::stride].copy()

    @property
    def rows(self) -> int:
        return self._rows

    def _read(self, offset: int, count: int, dtype: np.dtype) -> npt.NDArray[np.generic]:
        size = count * dtype.itemsize
        if size == 0:
            return np.zeros(0, dtype=dtype)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, size, offset)
        finally:
            os.close(fd)
        if len(data) != size:
            raise OSError(f"{self.path}: {len(data)} of {size} bytes at {offset}")
        return np.frombuffer(data, dtype=dtype)

    def keys(self, first: int, stop: int) -> I64:
        out: I64 = self._read(8 * first, max(stop - first, 0), np.dtype(np.int64)).astype(np.int64, copy=False)
        return out

    def counts(self, first: int, stop: int) -> Counts:
        n = max(stop - first, 0)
        flat = self._read(8 * self._rows + first * self.width * self.dtype.itemsize, n * self.width, self.dtype)
        if self.dtype.itemsize < 4:
            flat = flat.astype(np.int32)
        return flat.reshape(n, self.width)  # type: ignore[return-value]

    def search(self, key: int, side: Side) -> int:
        # the answer lies after the last sampled key before it and at or before the next sampled key
        j = int(np.searchsorted(self._index, key, side=side))
        lo, hi = max(j - 1, 0) * self._stride, min(j * self._stride, self._rows)
        return lo + int(np.searchsorted(self.keys(lo, hi), key, side=side))

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)


def _distinct(keys: I64) -> I64:
    """The distinct values of sorted runs laid end to end, sorted: a stable sort (timsort merges the runs it
    finds, O(n log runs)) then the first of each value. numpy 2.4's ``np.unique`` of int64 hashes the values
    and sorts what remains, ~100x slower here (500,000 keys of two runs: 1.7 s against 16 ms)."""
    keys.sort(kind="stable")
    first = np.ones(len(keys), dtype=bool)
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    return keys[first]


def sum_sorted(parts: Sequence[tuple[I64, Counts]], width: int) -> tuple[I64, npt.NDArray[np.int64]]:
    """Count rows of parts (each with sorted, distinct keys) added up by key; keys sorted. Each part is
    added where its keys fall among all the keys (no key twice in a part: no row adds onto itself)."""
    keys = _distinct(np.concatenate([k for k, _ in parts])) if parts else np.zeros(0, dtype=np.int64)
    counts = np.zeros((len(keys), width), dtype=np.int64)
    for k, c in parts:
        counts[np.searchsorted(keys, k)] += c
    return keys, counts


def merged(runs: Sequence[Run], lo: int, hi: int, width: int, window_rows: int) -> Iterator[tuple[I64, Counts]]:
    """The rows of ``runs`` with keys in ``[lo, hi)``, equal keys added up, in key order: a window of keys at
    a time, each of at most ``window_rows`` input rows (at least one key's)."""
    live = [(run, run.search(lo, "left"), run.search(hi, "left")) for run in runs]
    live = [(run, a, b) for run, a, b in live if b > a]
    while live:
        share = max(1, window_rows // len(live))
        # the window ends at the smallest key a run reaches with its share: no run gives more than its share
        top = min(int(run.keys(a + min(share, b - a) - 1, a + min(share, b - a))[0]) for run, a, b in live)
        parts, rest = [], []
        for run, a, b in live:
            stop = min(run.search(top, "right"), b)
            if stop > a:
                parts.append((run.keys(a, stop), run.counts(a, stop)))
            if stop < b:
                rest.append((run, stop, b))
        live = rest
        yield parts[0] if len(parts) == 1 else sum_sorted(parts, width)
