"""Shard reading: chunks, error lines that stay absolute across chunks and shards, paired mismatches.

The truncation table follows dnaio's ``tests/test_internal.py``: a valid file cut at every byte of its
last record, read at several chunk sizes so that the cut falls at and across chunk boundaries. Every shard
is read twice: by a dnaio-based oracle and by the child's own parser (``parse_chunk``), which must agree.
"""

from __future__ import annotations

import bz2
import gzip
from collections.abc import Iterator
from pathlib import Path

import dnaio
import pytest

from seqlake.base.errors import BadInputError
from seqlake.base.model import Sample
from seqlake.lake import qc
from seqlake.plan import shards
from seqlake.plan.planfile import Plan
from seqlake.plan.planner import make_plan
from seqlake.reads import chunks, fastq

RECS = [b"@r%d\nACGT%s\n+\nIIII%s\n" % (i, b"G" * (i % 5), b"5" * (i % 5)) for i in range(60)]
LAST = b"@last\nACGTA\n+last\nIIIII\n"
CHUNK_SIZES = [1, 7, 64, 1000, 1 << 20]


@pytest.fixture(autouse=True)
def small_sniff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan-time checks read only the first record, so the errors below surface in the shard readers."""
    monkeypatch.setattr(fastq, "SNIFF_BYTES", 16)


def dnaio_batches(plan: Plan, shard_index: int, chunk_bytes: int) -> Iterator[tuple[list[dnaio.SequenceRecord], ...]]:
    """The oracle: the shard's records parsed by dnaio and checked by the plan-time checks (shape, quality
    range, mate names), an implementation independent of :func:`~seqlake.reads.chunks.parse_chunk`; errors
    carry absolute lines, also for byte-range shards."""
    shard = plan.shards[shard_index]
    for pieces in shards.iter_shard_chunks(plan, shard_index, chunk_bytes):
        try:
            batch = []
            for c, sp in zip(pieces, shard.spans, strict=True):
                path = plan.inputs[sp.input].uri
                fastq.check_quality_range(c.data, path, c.first_record)
                batch.append(fastq.parse_records(c.data, path, c.first_record))
            if len(batch) == 2:
                fastq.check_mates(batch[0], batch[1], plan.inputs[shard.spans[0].input].uri,
                                  plan.inputs[shard.spans[1].input].uri, pieces[0].first_record)
        except BadInputError as err:
            if pieces[0].relative:
                raise shards.rebase_error(plan, shard.spans[0], err) from None
            raise
        yield tuple(batch)


def chunk_reads(plan: Plan, shard_index: int, chunk_bytes: int) -> int:
    """The shard's reads as the child parses and checks them (single-end: parse_chunk, then the quality range
    in the QC); errors rebased as the child rebases them."""
    shard = plan.shards[shard_index]
    path = plan.inputs[shard.spans[0].input].uri
    n = 0
    for (c,) in shards.iter_shard_chunks(plan, shard_index, chunk_bytes):
        try:
            recs = chunks.parse_chunk(c.data, path, c.first_record, c.newlines)
            qc.QCAccumulator().add_chunk(recs)
        except BadInputError as err:
            if c.relative:
                raise shards.rebase_error(plan, shard.spans[0], err) from None
            raise
        n += len(recs)
    return n


def read_all(plan: Plan, chunk_bytes: int) -> int:
    """Reads of every shard of a single-end plan, by the dnaio oracle and by the child's parser: the same
    count, or errors naming the same file and line (the oracle's is raised)."""
    def oracle_reads(i: int) -> int:
        return sum(len(b[0]) for b in dnaio_batches(plan, i, chunk_bytes))

    outcomes: list[int | BadInputError] = []
    for count in (oracle_reads, lambda i: chunk_reads(plan, i, chunk_bytes)):
        try:
            outcomes.append(sum(count(i) for i in range(plan.array_size)))
        except BadInputError as err:
            outcomes.append(err)
    oracle, child = outcomes
    if isinstance(oracle, BadInputError):
        assert isinstance(child, BadInputError), f"the oracle rejects ({oracle}), parse_chunk accepts"
        assert (child.path, child.line, child.record) == (oracle.path, oracle.line, oracle.record)
        raise oracle
    assert child == oracle
    return oracle


def _truncations() -> list[tuple[int, int | None]]:
    """(bytes of LAST kept, expected error line or None when the file is still valid)."""
    out: list[tuple[int, int | None]] = []
    qual_start = LAST.index(b"IIIII")
    for keep in range(1, len(LAST)):
        if keep <= qual_start:
            out.append((keep, 4 * 60 + 1))  # ends inside record 60: its first line
        elif keep < qual_start + 5:
            out.append((keep, 4 * 60 + 4))  # quality shorter than the sequence
        else:
            out.append((keep, None))  # complete, with or without the final newline
    return out


@pytest.mark.parametrize("chunk_bytes", CHUNK_SIZES)
@pytest.mark.parametrize(("keep", "line"), _truncations())
def test_truncation_table(tmp_path: Path, keep: int, line: int | None, chunk_bytes: int) -> None:
    data = b"".join(RECS) + LAST[:keep]
    p = tmp_path / "t.fastq"
    p.write_bytes(data)
    # a record-number plan (counted) with 3 shards: the error is in the last shard
    plan_uri = str(tmp_path / "out")
    if line == 4 * 60 + 1:
        # the planner's line count already sees the cut record
        with pytest.raises(BadInputError) as info:
            make_plan("t", [Sample("a", str(p))], out_prefix=plan_uri, shards=3)
        assert info.value.line == line
        return
    plan = make_plan("t", [Sample("a", str(p))], out_prefix=plan_uri, shards=3)
    if line is None:
        assert read_all(plan, chunk_bytes) == 61
        return
    with pytest.raises(BadInputError) as info:
        read_all(plan, chunk_bytes)
    assert (info.value.path, info.value.line) == (str(p), line)


@pytest.mark.parametrize("layout", ["byte-ranges", "counted", "gzip"])
@pytest.mark.parametrize("chunk_bytes", CHUNK_SIZES)
@pytest.mark.parametrize("k", [1, 4, 13])
def test_error_line_absolute_in_every_layout(tmp_path: Path, chunk_bytes: int, k: int, layout: str) -> None:
    recs = list(RECS)
    recs[37] = b"@r37\nACGT\n+\nIII\n"  # quality one short: line 4*37+4
    p = tmp_path / "e.fastq"
    data = b"".join(recs)
    if layout == "gzip":
        p = tmp_path / "e.fastq.gz"
        p.write_bytes(gzip.compress(data))
    else:
        p.write_bytes(data)
    plan = make_plan("e", [Sample("a", str(p))], out_prefix=str(tmp_path / "o"), shards=k,
                     count_plain_below=0 if layout == "byte-ranges" else 1 << 30)
    assert (plan.shards[-1].spans[0].first_record is None) == (layout == "byte-ranges")
    with pytest.raises(BadInputError) as info:
        read_all(plan, chunk_bytes)
    assert (info.value.line, info.value.record) == (4 * 37 + 4, 37)


def test_quality_range_checked_in_shards(tmp_path: Path) -> None:
    recs = list(RECS)
    recs[50] = b"@r50\nACGT\n+\nII I\n"
    p = tmp_path / "q.fastq"
    p.write_bytes(b"".join(recs))
    plan = make_plan("q", [Sample("a", str(p))], out_prefix=str(tmp_path / "o"), shards=4)
    with pytest.raises(BadInputError) as info:
        read_all(plan, 100)
    assert info.value.line == 4 * 50 + 4


def test_paired_chunks_have_equal_counts(tmp_path: Path) -> None:
    r1 = [b"@p%d/1\nACGT%s\n+\nIIII%s\n" % (i, b"A" * (i % 90), b"I" * (i % 90)) for i in range(500)]
    r2 = [b"@p%d/2\nAC\n+\nII\n" % i for i in range(500)]  # very different record sizes per mate
    a, b = tmp_path / "x_R1.fastq", tmp_path / "x_R2.fastq"
    a.write_bytes(b"".join(r1))
    b.write_bytes(b"".join(r2))
    plan = make_plan("p", [Sample("x", str(a), str(b))], out_prefix=str(tmp_path / "o"), shards=3)
    total = 0
    for i in range(plan.array_size):
        for c1, c2 in shards.iter_shard_chunks(plan, i, chunk_bytes=2000):
            assert c1.records == c2.records
            assert c1.first_record == c2.first_record
            total += c1.records
    assert total == 500


def test_paired_count_mismatch_in_a_stream(tmp_path: Path) -> None:
    """bz2 inputs are not counted at plan time: the mismatch surfaces while reading the shard."""
    r1 = [b"@p%d/1\nACGT\n+\nIIII\n" % i for i in range(300)]
    r2 = [b"@p%d/2\nACGT\n+\nIIII\n" % i for i in range(299)]
    a, b = tmp_path / "x_R1.fastq.bz2", tmp_path / "x_R2.fastq.bz2"
    a.write_bytes(bz2.compress(b"".join(r1) * 20))
    b.write_bytes(bz2.compress(b"".join(r2) * 20))
    plan = make_plan("m", [Sample("x", str(a), str(b))], out_prefix=str(tmp_path / "o"))
    assert plan.inputs[0].records is None
    with pytest.raises(BadInputError) as info:
        for _ in dnaio_batches(plan, 0, chunk_bytes=4096):
            pass
    text = str(info.value)
    assert "different read counts" in text or "does not match its mate" in text
    assert str(a) in text
    assert str(b) in text


def test_replaced_input_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "r.fastq"
    p.write_bytes(b"".join(RECS))
    plan = make_plan("c", [Sample("a", str(p))], out_prefix=str(tmp_path / "o"), shards=2)
    p.write_bytes(b"".join(RECS[:-1]))
    with pytest.raises(BadInputError, match="changed after the run was planned"):
        list(shards.iter_shard_chunks(plan, 0))


@pytest.mark.parametrize("layout", ["gzip", "counted", "byte-ranges"])
@pytest.mark.parametrize("k", [1, 3])
def test_chunks_stay_bounded_in_large_shards(tmp_path: Path, layout: str, k: int) -> None:
    """A shard of ~2 MB read with 16 KiB chunks: every chunk is at most the target or one record
    (a planned record count must not turn a shard into one chunk), and together they cover the shard."""
    target = 16 << 10
    recs = [b"@r%d\n%s\n+\n%s\n" % (i, b"ACGT" * (5 + i % 40), b"I" * 4 * (5 + i % 40)) for i in range(12_000)]
    recs[777] = b"@long\n%s\n+\n%s\n" % (b"A" * 40_000, b"I" * 40_000)  # longer than a chunk: alone
    data = b"".join(recs)
    p = tmp_path / "big.fastq"
    if layout == "gzip":
        p = tmp_path / "big.fastq.gz"
        p.write_bytes(gzip.compress(data, compresslevel=1))
    else:
        p.write_bytes(data)
    plan = make_plan("b", [Sample("a", str(p))], out_prefix=str(tmp_path / "o"), shards=k,
                     count_plain_below=0 if layout == "byte-ranges" else 1 << 30)
    assert (plan.shards[0].spans[0].records is None) == (layout == "byte-ranges")
    longest = max(len(r) for r in recs if r != recs[777])
    out = []
    with_newlines = 0
    for i in range(plan.array_size):
        sizes = []
        for (c,) in shards.iter_shard_chunks(plan, i, chunk_bytes=target):
            assert c.records >= 1
            assert len(c.data) <= target or (c.records == 1 and c.data == recs[777]), (len(c.data), c.records)
            sizes.append(len(c.data))
            out.append(c.data)
            if c.newlines is not None:  # found while cutting, handed to the parser instead of a second search
                assert c.newlines.tolist() == [j for j, byte in enumerate(c.data) if byte == 10]
                with_newlines += 1
        # full chunks: nothing is left behind that could have fitted (at most one record short)
        assert all(s > target - longest - len(recs[777]) for s in sizes[:-1])
        assert len(sizes) > 100 // k
    assert b"".join(out) == data
    assert with_newlines > 100  # the usual chunk (whole records within the target) has them


def test_paired_chunks_bounded_with_counts(tmp_path: Path) -> None:
    """Paired gzip input (a counted, indexed plan): both mates' chunks stay small, equal in records."""
    target = 8 << 10
    r1 = [b"@p%d/1\n%s\n+\n%s\n" % (i, b"ACGT" * 30, b"I" * 120) for i in range(5000)]
    r2 = [b"@p%d/2\n%s\n+\n%s\n" % (i, b"GT" * 70, b"5" * 140) for i in range(5000)]
    a, b = tmp_path / "x_R1.fastq.gz", tmp_path / "x_R2.fastq.gz"
    a.write_bytes(gzip.compress(b"".join(r1), compresslevel=1))
    b.write_bytes(gzip.compress(b"".join(r2), compresslevel=1))
    plan = make_plan("p", [Sample("x", str(a), str(b))], out_prefix=str(tmp_path / "o"), shards=2)
    total = 0
    for i in range(plan.array_size):
        for c1, c2 in shards.iter_shard_chunks(plan, i, chunk_bytes=target):
            assert c1.records == c2.records
            assert len(c1.data) <= target
            assert len(c2.data) <= c1.records * max(len(r) for r in r2)  # as many records as mate 1
            assert c1.data == b"".join(r1[c1.first_record : c1.first_record + c1.records])
            assert c2.data == b"".join(r2[c2.first_record : c2.first_record + c2.records])
            total += c1.records
    assert total == 5000
