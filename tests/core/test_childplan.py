"""What a Batch child reads of its run: its todo entry, its part of the plan and of each seek index.

The bytes a child reads of the plan and the gzip seek indexes must grow with its shard, not with the
run: the same shard size over a 10x larger input costs a child about the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from seqlake.base import storage
from seqlake.base.layout import RunLayout
from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.child import worker_main
from seqlake.plan import childplan, fixedwidth, shards
from seqlake.plan.planner import make_plan
from seqlake.reads import seekindex

READ_LENGTH = 150
#: records per shard in the byte-counting test (~1 MB of plain FASTQ: about one seek point's worth)
SHARD_RECORDS = 3_000


def random_fastq(records: int, seed: int, mate: int) -> bytes:
    """Paired records with random bases and qualities: they compress about as real reads do, so the
    seek index has a point about every megabyte of plain data, as for real data."""
    rng = np.random.default_rng(seed)
    names = np.frombuffer(b"".join(b"@r%09d/%d\n" % (i, mate) for i in range(records)), dtype=np.uint8)
    rows = [names.reshape(records, -1),
            np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, (records, READ_LENGTH))],
            np.frombuffer(b"\n+\n", dtype=np.uint8)[None, :].repeat(records, axis=0),
            rng.integers(53, 74, (records, READ_LENGTH), dtype=np.uint8),
            np.full((records, 1), ord("\n"), dtype=np.uint8)]
    return np.hstack(rows).tobytes()


def paired_gzip(folder: Path, records: int) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for mate in (1, 2):
        path = folder / f"s_R{mate}.fastq.gz"
        path.write_bytes(gzip.compress(random_fastq(records, seed=mate, mate=mate), compresslevel=1))
        paths.append(path)
    return paths[0], paths[1]


class Reads:
    """Bytes and requests read through the storage layer, per object."""

    def __init__(self) -> None:
        self.bytes: dict[str, int] = {}
        self.requests: dict[str, int] = {}

    def add(self, uri: str, n: int) -> None:
        self.bytes[uri] = self.bytes.get(uri, 0) + n
        self.requests[uri] = self.requests.get(uri, 0) + 1

    def of(self, *prefixes: str) -> tuple[int, int]:
        keys = [k for k in self.bytes if k.startswith(prefixes)]
        return sum(self.bytes[k] for k in keys), sum(self.requests[k] for k in keys)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Reads:
    """Count what is read of every object; the run's own objects (plan, todo, index) must be read by
    ``read_bytes`` / ``read_range`` only, never streamed whole through ``open_read``."""
    seen = Reads()
    read_bytes, read_range, open_read = storage.read_bytes, storage.read_range, storage.open_read

    def counted_bytes(uri: str) -> bytes:
        data = read_bytes(uri)
        seen.add(uri, len(data))
        return data

    def counted_range(uri: str, start: int, stop: int) -> bytes:
        data = read_range(uri, start, stop)
        seen.add(uri, len(data))
        return data

    def checked_open(uri: str, *args: Any, **kwargs: Any) -> Any:
        assert "/runs/" not in uri, f"a run object is read as a stream: {uri}"
        return open_read(uri, *args, **kwargs)

    monkeypatch.setattr(storage, "read_bytes", counted_bytes)
    monkeypatch.setattr(storage, "read_range", counted_range)
    monkeypatch.setattr(storage, "open_read", checked_open)
    return seen


def run_middle_child(tmp_path: Path, records: int, reads: Reads,
                     monkeypatch: pytest.MonkeyPatch) -> tuple[tuple[int, int], int, int]:
    """Plan a paired gzip run of ``records`` pairs in shards of SHARD_RECORDS, then run its middle child
    as Batch does (``seqlake worker`` with the plan and todo URIs); (bytes, requests) it read of the
    plan, todo and indexes, the run's array size and the size of its whole index objects."""
    r1, r2 = paired_gzip(tmp_path / "in", records)
    plan = make_plan(f"run{records}", [Sample("s", str(r1), str(r2))], out_prefix=str(tmp_path / "lake"),
                     params=Params(reads_per_shard=SHARD_RECORDS, trim=False))
    todo = tmp_path / "todo.json"
    todo.write_bytes(childplan.todo_bytes(list(range(plan.array_size))))
    index_bytes = sum(Path(i.index_uri).stat().st_size for i in plan.inputs if i.index_uri)
    run_prefix = plan.layout.prefix
    reads.bytes.clear()
    reads.requests.clear()
    monkeypatch.setenv(worker_main.PLAN_VAR, plan.plan_uri)
    monkeypatch.setenv(worker_main.TODO_VAR, str(todo))
    monkeypatch.setenv("AWS_BATCH_JOB_ARRAY_INDEX", str(plan.array_size // 2))
    args = argparse.Namespace(plan=None, shard=None)
    assert worker_main.worker_command(args) == 0
    # nothing the run planned is read but through the counted readers (the todo list included)
    return reads.of(run_prefix, str(todo)), plan.array_size, index_bytes


def test_a_childs_plan_and_index_reads_grow_with_its_shard_not_the_input(
        tmp_path: Path, reads: Reads, monkeypatch: pytest.MonkeyPatch) -> None:
    (small, small_requests), small_children, small_index = run_middle_child(
        tmp_path / "small", 4 * SHARD_RECORDS, reads, monkeypatch)
    (large, large_requests), large_children, large_index = run_middle_child(
        tmp_path / "large", 40 * SHARD_RECORDS, reads, monkeypatch)
    assert (small_children, large_children) == (4, 40)
    assert large_index > 8 * small_index, "the larger input's index is ~10x larger"
    # the same shard size costs a child about the same bytes and requests, whatever the input's size
    assert large <= 1.3 * small, (small, large)
    # the todo entry, the line's offsets, the line; per mate the index's head and the span's points (one
    # read when they touch)
    assert small_requests <= 7 and large_requests <= 7
    assert large < large_index / 5, "a child reads a small part of the whole index"


def test_every_childs_part_reads_exactly_its_records(tmp_path: Path) -> None:
    """Reading every child through its own part of the plan and of the indexes gives back both files."""
    r1, r2 = paired_gzip(tmp_path / "in", 12_000)
    plan = make_plan("r", [Sample("s", str(r1), str(r2))], out_prefix=str(tmp_path / "lake"), shards=9)
    joined: dict[int, list[bytes]] = {1: [], 2: []}
    for child in range(plan.array_size):
        part = childplan.load_child_plan(plan.plan_uri, child)
        assert part.child_shards(child) == plan.child_shards(child)
        assert set(part.inputs) == {sp.input for i in part.child_shards(child) for sp in plan.shards[i].spans}
        for i in part.child_shards(child):
            for chunks in shards.iter_shard_chunks(part, i):
                for chunk in chunks:
                    joined[chunk.mate].append(chunk.data)
    assert b"".join(joined[1]) == gzip.decompress(r1.read_bytes())
    assert b"".join(joined[2]) == gzip.decompress(r2.read_bytes())
    with pytest.raises(ValueError, match="child 9 is not in the plan"):
        childplan.load_child_plan(plan.plan_uri, plan.array_size)


def test_an_index_part_ends_at_its_last_point(tmp_path: Path) -> None:
    """A part is a valid index; the reader stops at its last point (past it, rapidgzip would decode the
    rest of the file as one chunk)."""
    data = random_fastq(40_000, seed=3, mate=1)
    gz = tmp_path / "r.fastq.gz"
    gz.write_bytes(gzip.compress(data, compresslevel=1))
    plan = make_plan("r", [Sample("s", str(gz))], out_prefix=str(tmp_path / "lake"), shards=5)
    inp = plan.inputs[0]
    assert inp.index_uri is not None and inp.index_head is not None and inp.plain_size == len(data)
    index = Path(inp.index_uri).read_bytes()
    points = seekindex.index_points(index)
    assert len(points) >= 8
    begin = points[1].plain + 10
    start, stop = seekindex.span_range(points, len(index), begin, points[2].plain + 1)
    assert (start, stop) == (points[1].start, points[3].stop)
    part = seekindex.read_part(inp.index_uri, inp.index_head, start, stop, len(data))
    assert part.limit == points[3].plain
    # the first point, then the span's: the one before its start through the first after its end
    assert [p.plain for p in seekindex.index_points(part.index)] == [0, *(p.plain for p in points[1:4])]
    with shards._open_index_part(inp, shards.Span(input=0, mate=1, offset=begin, index_start=start,
                                                  index_stop=stop)) as f:
        f.seek(begin)
        assert f.read() == data[begin:points[3].plain]
    # the last span's part reaches the trailer: no limit
    start, stop = seekindex.span_range(points, len(index), points[-1].plain + 5, len(data))
    assert stop == len(index)
    assert seekindex.read_part(inp.index_uri, inp.index_head, start, stop, len(data)).limit is None


def test_fixed_width_entries(tmp_path: Path) -> None:
    path = tmp_path / "todo.json"
    path.write_bytes(childplan.todo_bytes([3, 17, 9999]))
    assert json.loads(path.read_bytes()) == {"children": [3, 17, 9999]}
    assert [childplan.todo_child(str(path), k) for k in range(3)] == [3, 17, 9999]
    for k in (3, -1):
        with pytest.raises(IndexError):
            childplan.todo_child(str(path), k)
    with pytest.raises(IndexError):
        fixedwidth.read_entries(str(path), "children", 2, 5, count=2)
    with pytest.raises(ValueError, match="does not fit"):
        childplan.todo_bytes([100_000])


@pytest.mark.parametrize("root", ["s3://bucket", "/lake", "lake"])
def test_layout_of_a_plan_uri(root: str) -> None:
    run = RunLayout(root, "r-1")
    assert RunLayout.of_plan(run.plan) == run
    with pytest.raises(ValueError):
        RunLayout.of_plan(run.request)
