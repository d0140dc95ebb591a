"""Helpers that report (docs/FAULTS.md, "Helper processes"): a forked helper's exception reaches its
parent with its traceback and exit status; nothing forks while other threads run."""

from __future__ import annotations

import gzip
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from seqlake.base import forked
from seqlake.base.model import Sample
from seqlake.child import align
from seqlake.plan.planner import make_plan
from seqlake.plan.reference import local_index
from seqlake.plan.refindex import indexed_reference
from seqlake.reads import bgzf, gzindex

RECORDS = b"".join(b"@r%d\nACGTACGTAC\n+\nIIIIIIIIII\n" % i for i in range(4000))


class HelperBugError(Exception):
    """What a helper raises in these tests (a bug, not bad input)."""


@pytest.fixture
def other_thread() -> Iterator[threading.Thread]:
    """A thread that runs until the test ends."""
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="a-scan-thread")
    t.start()
    yield t
    stop.set()
    t.join()


def test_a_helpers_exception_is_raised_in_the_parent_with_its_traceback_and_status() -> None:
    def work() -> None:
        raise HelperBugError("the helper's own words")

    helper = forked.fork_helper("a test helper", work)
    with pytest.raises(HelperBugError, match="the helper's own words") as info:
        helper.join()
    note = "\n".join(info.value.__notes__)
    assert f"raised in a test helper (pid {helper.pid}, exit status 1)" in note
    assert "Traceback" in note and "in work" in note


def test_a_helper_killed_by_a_signal_is_named_with_it() -> None:
    helper = forked.fork_helper("a doomed helper", lambda: os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(forked.HelperError, match=f"a doomed helper \\(pid {helper.pid}\\) was killed by signal 9"):
        helper.join()


def test_nothing_forks_while_another_thread_runs(other_thread: threading.Thread) -> None:
    assert not forked.can_fork()
    with pytest.raises(RuntimeError, match="a-scan-thread"):
        forked.fork_helper("a helper", lambda: None)


def test_the_gzip_counting_process_reports_what_it_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.fastq.gz"
    path.write_bytes(gzip.compress(RECORDS))
    parent, feed = os.getpid(), gzindex._RecordScan.feed

    def failing_in_the_helper(self: gzindex._RecordScan, buf: bytearray, n: int) -> None:
        if os.getpid() != parent:
            raise HelperBugError("counting failed in the helper")
        feed(self, buf, n)

    monkeypatch.setattr(gzindex._RecordScan, "feed", failing_in_the_helper)
    with pytest.raises(HelperBugError, match="counting failed in the helper") as info:
        gzindex.index_gzip(str(path), threads=2)
    assert "raised in the counting process of the index pass" in info.value.__notes__[0]


def test_a_bgzf_counting_process_reports_what_it_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A helper's bug is raised, not hidden behind a silent recount on one vCPU."""
    path = tmp_path / "r.fastq.gz"
    plain = RECORDS * 8
    blocks = [plain[i:i + 4000] for i in range(0, len(plain), 4000)]
    path.write_bytes(b"".join(_bgzf_block(b) for b in blocks) + _bgzf_block(b""))
    monkeypatch.setattr(bgzf, "CHUNK_BYTES", 4096)
    parent, count = os.getpid(), bgzf._count_batch

    def failing_in_a_helper(buf: bytes, base: int, path: str) -> list[bgzf._Block]:
        if os.getpid() != parent:
            raise HelperBugError("a BGZF helper's bug")
        return count(buf, base, path)

    monkeypatch.setattr(bgzf, "_count_batch", failing_in_a_helper)
    assert bgzf.count_records(str(path), threads=1).records == 4000 * 8
    with pytest.raises(HelperBugError, match="a BGZF helper's bug") as info:
        bgzf.count_records(str(path), threads=2)
    assert "raised in BGZF counting process 1" in info.value.__notes__[0]


def _bgzf_block(plain: bytes) -> bytes:
    import struct
    import zlib

    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = c.compress(plain) + c.flush()
    head = b"\x1f\x8b\x08\x04\0\0\0\0\0\xff\x06\0BC\x02\0" + struct.pack("<H", 18 + len(body) + 8 - 1)
    return head + body + struct.pack("<II", zlib.crc32(plain), len(plain))


def test_the_planner_never_forks_from_its_scan_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two inputs scanned at once on 2 vCPUs: one vCPU each and no fork; one input: both vCPUs, and its
    counting helper forked from the only thread."""
    r1, r2 = tmp_path / "s_R1.fastq.gz", tmp_path / "s_R2.fastq.gz"
    r1.write_bytes(gzip.compress(RECORDS))
    r2.write_bytes(gzip.compress(RECORDS))
    forks: list[list[str]] = []
    fork = os.fork

    def watched_fork() -> int:
        forks.append(forked.other_threads())
        return fork()

    monkeypatch.setattr(os, "fork", watched_fork)
    monkeypatch.setenv("SEQLAKE_THREADS", "2")
    plan = make_plan("pair", [Sample("s", str(r1), str(r2))], out_prefix=str(tmp_path / "pair"))
    assert [i.records for i in plan.inputs] == [4000, 4000]
    assert forks == []
    # two shards: the file is indexed (a small one-shard sample its sniff read whole would not be)
    make_plan("one", [Sample("s", str(r1))], out_prefix=str(tmp_path / "one"), shards=2)
    assert forks == [[]], "one scan: its counting helper forked, from a process of one thread"


def test_the_aligner_refuses_to_fork_beside_another_thread(reference: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          other_thread: threading.Thread) -> None:
    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(tmp_path / "refcache"))
    index = local_index(indexed_reference(str(reference)))
    with pytest.raises(RuntimeError, match="the aligner's fork: cannot fork while other threads run"):
        align.ReadAligner(index, threads=2)
