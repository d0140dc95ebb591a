"""The bridge of issue 35 (seqlake.lake.bamrows): a batch's rows and reads become BAM records and back, and
the allele and indel counts of the records, in coordinate order as a reducer merges them, are those of the
original batch; samtools reads the records as valid BAM."""

from __future__ import annotations

import dataclasses
import random
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from tests.core.test_pileup import CONTIGS, counted, random_batch, summed

from seqlake.formats import bam, bgzf
from seqlake.lake.bamrows import counting_inputs, records_of
from seqlake.lake.pileup import AlignmentRows, BatchReads


def _real_like(rows: AlignmentRows, reads: BatchReads) -> tuple[AlignmentRows, BatchReads]:
    """The random batch as reads are: both mates of a pair named alike, bases in upper case (a BAM's
    4-bit bases hold no case; the FASTQ readers hand the counting what the file has)."""
    names = [f"pair{p}" if p >= 0 else f"single{i}" for i, p in enumerate(rows.pair.tolist())]
    data = reads.data.copy()
    lower = (data >= ord("a")) & (data <= ord("z"))
    data[lower] -= 32
    return dataclasses.replace(rows, names=pa.array(names)), dataclasses.replace(reads, data=data)


def _round_trip(rows: AlignmentRows, reads: BatchReads, *, sort: bool) -> tuple[AlignmentRows, BatchReads]:
    n = len(rows.flag)
    records = records_of(rows, reads, mapq=np.full(n, 60, dtype=np.int64), nm=np.arange(n, dtype=np.int64),
                         read_group="s")
    data, starts = bam.encode(records)
    back = bam.decode(data, starts)
    if sort:
        back = back.take(bam.coordinate_order(back))
    return counting_inputs(back)


@pytest.mark.parametrize(("seed", "read_length"), [(0, None), (1, None), (2, 45), (3, None)])
def test_records_count_as_the_rows_they_came_from(seed: int, read_length: int | None) -> None:
    rng = random.Random(seed)
    batches = [_real_like(*random_batch(rng, rng.randint(20, 80), read_length)) for _ in range(2)]
    want = counted(batches)
    assert want == summed(batches)
    assert counted([_round_trip(*b, sort=False) for b in batches]) == want
    assert counted([_round_trip(*b, sort=True) for b in batches]) == want


def test_records_of_a_batch_are_valid_bam(tmp_path: Path, samtools: str) -> None:
    rows, reads = _real_like(*random_batch(random.Random(7), 50, 45))
    n = len(rows.flag)
    records = records_of(rows, reads, mapq=np.full(n, 60, dtype=np.int64), nm=np.zeros(n, dtype=np.int64),
                         read_group="s")
    records = records.take(bam.coordinate_order(records))
    data, _ = bam.encode(records)
    head = "@HD\tVN:1.6\tSO:coordinate\n" + "".join(f"@SQ\tSN:{c}\tLN:{n}\n" for c, n in CONTIGS) + "@RG\tID:s\n"
    out = tmp_path / "b.bam"
    out.write_bytes(bgzf.compress(bam.header(head, CONTIGS), eof=False) + bgzf.compress(data))
    subprocess.run([samtools, "quickcheck", "-v", str(out)], check=True)
    lines = subprocess.run([samtools, "view", str(out)], capture_output=True, check=True, text=True).stdout.splitlines()
    assert len(lines) == n
    first = next(i for i in range(n) if records.tid[i] >= 0 and records.cigar.lengths[i] > 0)
    fields = lines[first].split("\t")
    assert int(fields[3]) == records.pos[first] + 1 and fields[11:] == [f"NM:i:{0}", "RG:Z:s"]
    # SEQ is the read as sequenced on forward rows, its reverse complement on reverse ones (SAM's)
    order = bam.coordinate_order(records_of(rows, reads, mapq=np.zeros(n, dtype=np.int64),
                                            nm=np.zeros(n, dtype=np.int64), read_group="s"))
    comp = bam.COMPLEMENT.tobytes()  # IUPAC codes too: R <-> Y
    for line, i in zip(lines, order.tolist(), strict=True):
        f = line.split("\t")
        read = reads.data[reads.seq_start[i] : reads.seq_start[i] + reads.length[i]].tobytes()
        qual = reads.data[reads.qual_start[i] : reads.qual_start[i] + reads.length[i]].tobytes()
        if int(f[1]) & 0x10:
            read, qual = read.translate(comp)[::-1], qual[::-1]
        assert (f[9].encode(), f[10].encode()) == (read, qual), f[0]


@pytest.mark.parametrize(("seed", "read_length"), [(0, None), (1, None), (2, 45), (3, 1), (4, None)])
def test_the_compiled_encoder_writes_the_records_of_the_numpy_path(seed: int, read_length: int | None) -> None:
    """The child's compiled encoder (seqlake.child.bamencode, scripts/mappy/seqlake_batch.h) writes the bytes
    ``bam.encode(records_of(...))`` writes, byte for byte: bases in either case and IUPAC codes, reverse rows,
    unmapped rows placed by their mate or not at all, reads of odd and of zero length, NM values of every
    integer width, a read group per row from several lanes; and each record's start and reference end."""
    from seqlake.child.bamencode import encode_rows

    rng = random.Random(seed)
    rows, reads = random_batch(rng, rng.randint(40, 120), read_length)
    rows = dataclasses.replace(rows, names=pa.array([f"r{i}" for i in range(len(rows.flag))]))
    n = len(rows.flag)
    widths = [0, 3, 255, 256, 70_000, 2**31 + 5, -5, -200, -40_000]  # C, S, I, c, s, i
    nm = np.array([rng.choice(widths) for _ in range(n)], dtype=np.int64)
    mapq = np.array([rng.randint(0, 255) for _ in range(n)], dtype=np.int64)
    for group in ("s", (["s.L1", "s.L2", "s.L3"], np.array([rng.randint(0, 2) for _ in range(n)], dtype=np.int64))):
        want = records_of(rows, reads, mapq=mapq, nm=nm, read_group=group)
        data, starts = bam.encode(want)
        got = encode_rows(rows, reads, mapq=mapq, nm=nm, read_group=group)
        assert bytes(got.data) == data
        assert got.starts.tolist() == starts.tolist()
        assert got.end.tolist() == want.end().tolist()
        assert (got.tid.tolist(), got.pos.tolist(), got.flag.tolist()) == (
            want.tid.tolist(), want.pos.tolist(), want.flag.tolist())


def test_the_compiled_encoder_refuses_offsets_outside_its_buffers() -> None:
    """A read's bases past the end of the reads' buffer are refused, not read (no out-of-bounds access)."""
    from seqlake.child.bamencode import encode_rows

    rows, reads = random_batch(random.Random(5), 20, 30)
    rows = dataclasses.replace(rows, names=pa.array([f"r{i}" for i in range(len(rows.flag))]))
    n = len(rows.flag)
    bad = dataclasses.replace(reads, seq_start=reads.seq_start + len(reads.data))
    with pytest.raises(ValueError, match="record 0: its bases or qualities are outside the reads"):
        encode_rows(rows, bad, mapq=np.zeros(n, dtype=np.int64), nm=np.zeros(n, dtype=np.int64), read_group="s")
