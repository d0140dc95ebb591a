"""JSON arrays of fixed-width numbers: a reader takes the k-th number with one small ranged read.

``{"children":[    0,    1,   17]}`` is ordinary JSON (whoever reads the whole object gets a list), and
the k-th number lies at a position a reader computes from the key and the width alone. A Batch child
reads its entry of the todo list, and its line's offsets in the children's plan, this way: what it
reads does not grow with the number of children.
"""

from __future__ import annotations

from collections.abc import Sequence

from seqlake.base import storage


def _prefix(key: str) -> bytes:
    return b'{"' + key.encode() + b'":['


def dumps(key: str, values: Sequence[int], width: int) -> bytes:
    """``{"key":[v0,v1,...]}`` with each number right-aligned in ``width`` characters."""
    if any(v < 0 or len(str(v)) > width for v in values):
        raise ValueError(f"{key}: a value does not fit in {width} digits")
    return _prefix(key) + ",".join(f"{v:>{width}}" for v in values).encode() + b"]}"


def read_entries(uri: str, key: str, k: int, width: int, count: int = 1) -> list[int]:
    """Numbers ``k`` to ``k + count - 1`` of the array ``key`` at ``uri``; IndexError past its end."""
    if k < 0:
        raise IndexError(f"{uri}: no entry {k}")
    start = len(_prefix(key)) + k * (width + 1)
    data = storage.read_range(uri, start, start + count * (width + 1) - 1)
    fields = data.decode("ascii", errors="replace").split(",")
    try:
        values = [int(f) for f in fields]
    except ValueError:
        values = []
    if len(values) != count or any(len(f) != width for f in fields):
        raise IndexError(f"{uri}: no entries {k}..{k + count - 1} in {key!r}")
    return values
