"""Vectorised QC: equals ``seqkit stats -a`` on real files, exact in any chunks, strict on bad input."""

from __future__ import annotations

import json
import math
import subprocess
import tracemalloc
from pathlib import Path

import dnaio
import numpy as np
import pytest

from seqlake.base.errors import BadInputError
from seqlake.lake import qc, staging
from seqlake.reads import chunks, fastq

SEQKIT_COLUMNS = (
    "num_seqs",
    "sum_len",
    "min_len",
    "avg_len",
    "max_len",
    "Q1",
    "Q2",
    "Q3",
    "sum_gap",
    "N50",
    "Q20(%)",
    "Q30(%)",
    "GC(%)",
)

#: edge files seqkit reads, and the ones seqlake rejects (file, line, words of the message)
ACCEPTED = [
    "biopython/example.fastq",
    "biopython/example_dos.fastq",
    "biopython/example.fastq.bgz",
    "biopython/sanger_full_range_original_sanger.fastq",
    "biopython/zero_length.fastq",
    "cutadapt/casava.fastq",
    "cutadapt/dos.fastq",
    "cutadapt/empty.fastq",
    "cutadapt/interleaved.fastq",
    "cutadapt/multiblock.fastq.gz",
    "cutadapt/paired.1.fastq",
    "cutadapt/paired.2.fastq",
    "cutadapt/paired-swapped.1.fastq",
    "cutadapt/paired-truncated.1.fastq",
    "cutadapt/paired-truncated.2.fastq",
    "cutadapt/s_1_sequence.txt.gz",
]
REJECTED = [
    ("biopython/error_long_qual.fastq", 16, "quality has 26 characters but the sequence has 25"),
    ("biopython/error_short_qual.fastq", 12, "quality has 24 characters but the sequence has 25"),
    ("biopython/error_no_qual.fastq", 4, "quality has 0 characters"),
    ("biopython/error_trunc_at_plus.fastq", 17, "file ends inside a record"),
    ("biopython/error_trunc_in_qual.fastq", 20, "quality has 24 characters"),
    ("cutadapt/format-error.fastq", 4, "quality has 5 characters but the sequence has 3"),
    ("cutadapt/withplus.fastq", 3, "names a different read"),
]


def seqkit_stats(seqkit: str, path: Path) -> dict[str, str]:
    out = subprocess.run([seqkit, "stats", "-a", "-T", str(path)], capture_output=True, text=True, check=True)
    header, row = out.stdout.splitlines()[:2]
    return dict(zip(header.split("\t"), row.split("\t"), strict=True))


def file_qc(path: Path, buffer_size: int = 4 << 20) -> qc.QCAccumulator:
    return qc.qc_chunks(fastq.iter_file_chunks(str(path), buffer_size), str(path))


def assert_equals_seqkit(ours: dict[str, str], theirs: dict[str, str]) -> None:
    for col in SEQKIT_COLUMNS:
        if col in ("Q1", "Q3") and ours["min_len"] == ours["max_len"] != "0":
            # seqkit <= 2.3 printed len/2 when all reads have one length (fixed upstream, bio 78fefc3)
            assert theirs[col] in (ours[col], f"{int(ours['min_len']) / 2:.1f}"), col
            assert float(ours[col]) == float(ours["min_len"])
            continue
        assert ours[col] == theirs[col], (col, ours[col], theirs[col])


def test_miseq_equals_seqkit(miseq: tuple[Path, Path], seqkit: str) -> None:
    for path in miseq:
        acc = file_qc(path)
        assert_equals_seqkit(qc.seqkit_row(acc), seqkit_stats(seqkit, path))
        s = acc.summary()
        # the counts themselves, not just the rounded percentages
        assert (s["reads"], s["bases"], s["min_len"], s["max_len"]) == (5762, 1267640, 220, 220)
    r1 = file_qc(miseq[0]).summary()
    assert round(100 * r1["q30_bases"] / r1["bases"], 2) == 72.48


@pytest.mark.parametrize("name", ACCEPTED)
def test_edge_files_equal_seqkit(edge: Path, seqkit: str, name: str) -> None:
    path = edge / name
    assert_equals_seqkit(qc.seqkit_row(file_qc(path)), seqkit_stats(seqkit, path))


@pytest.mark.parametrize(("name", "line", "words"), REJECTED)
@pytest.mark.parametrize("buffer_size", [1 << 20, 256])
def test_edge_files_rejected_with_line(edge: Path, name: str, line: int, words: str, buffer_size: int) -> None:
    with pytest.raises(BadInputError) as err:
        file_qc(edge / name, buffer_size)
    assert err.value.line == line
    assert words in err.value.message
    assert str(err.value).startswith(f"{edge / name}:{line}: ")


def test_crlf_equals_lf(edge: Path) -> None:
    unix = file_qc(edge / "biopython/example.fastq").to_state()
    dos = file_qc(edge / "biopython/example_dos.fastq").to_state()
    assert unix == dos


def test_quality_outside_range_is_rejected() -> None:
    data = b"@r1\nACGT\n+\nIIII\n@r2\nACGT\n+\nII\x7fI\n"
    recs = chunks.parse_chunk(data, "x.fastq")
    with pytest.raises(BadInputError) as err:
        qc.QCAccumulator().add_chunk(recs)
    assert err.value.line == 8
    assert "outside '!'..'~'" in err.value.message


def test_chunking_and_merging_are_exact(miseq: tuple[Path, Path]) -> None:
    whole = file_qc(miseq[1]).to_state()
    small = file_qc(miseq[1], buffer_size=50_000)
    assert small.to_state() == whole
    merged = qc.QCAccumulator()
    first = 0
    for chunk in fastq.iter_file_chunks(str(miseq[1]), 120_000):
        part = qc.QCAccumulator()
        recs = chunks.parse_chunk(chunk, "R2", first)
        part.add_chunk(recs)
        first += len(recs)
        merged.merge(part)
    assert merged.to_state() == whole


def _reference_qc(records: list[tuple[str, str]]) -> dict[str, object]:
    """Per-read Python reference implementation (test only)."""
    lengths = [len(s) for s, _ in records]
    quals = [ord(c) - 33 for _, q in records for c in q]
    cycles = max(lengths, default=0)
    per_cycle = [[0] * 5 for _ in range(cycles)]
    qsum = [0] * cycles
    for s, q in records:
        for i, (b, c) in enumerate(zip(s.upper(), q, strict=True)):
            per_cycle[i]["ACGT".find(b) if b in "ACGT" else 4] += 1
            qsum[i] += ord(c) - 33
    means = [sum(ord(c) - 33 for c in q) // len(q) for _, q in records if q]
    return {
        "reads": len(records),
        "bases": sum(lengths),
        "qual_counts": np.bincount(quals, minlength=qc.NQ).tolist() if quals else [0] * qc.NQ,
        "read_qual_counts": np.bincount(means, minlength=qc.NQ).tolist() if means else [0] * qc.NQ,
        "cycle_bases": [list(col) for col in zip(*per_cycle, strict=True)] if cycles else [[]] * 5,
        "cycle_qual_sum": qsum,
    }


def test_trimmed_views_equal_a_trimmed_file(miseq: tuple[Path, Path]) -> None:
    """QC of (start, length) views into the raw buffer == QC of the trimmed reads written out."""
    chunk = next(fastq.iter_file_chunks(str(miseq[1]), 300_000))
    recs = chunks.parse_chunk(chunk, "R2")
    rng = np.random.default_rng(7)
    start = rng.integers(0, 30, len(recs))
    length = np.maximum(recs.length - start - rng.integers(0, 200, len(recs)), 0)
    views = qc.QCAccumulator()
    views.add(recs.data, recs.seq_start + start, recs.qual_start + start, length)
    seqs, quals = recs.sequences(), recs.qualities()
    trimmed = [
        (s[a : a + n], q[a : a + n]) for s, q, a, n in zip(seqs, quals, start.tolist(), length.tolist(), strict=True)
    ]
    text = "".join(f"@r{i}\n{s}\n+\n{q}\n" for i, (s, q) in enumerate(trimmed)).encode()
    written = qc.QCAccumulator()
    written.add_chunk(chunks.parse_chunk(text, "trimmed"))
    state = views.to_state()
    assert state == written.to_state()
    ref = _reference_qc(trimmed)
    assert views.bases == ref.pop("bases")
    for key, value in ref.items():
        assert state[key] == value, key


def test_lowercase_and_iupac_count_as_documented() -> None:
    data = b"@a\nacgtNRYn.\n+\nIIIIIIIII\n"
    acc = qc.QCAccumulator()
    acc.add_chunk(chunks.parse_chunk(data, "x"))
    s = acc.summary()
    assert (s["gc_bases"], s["n_bases"], s["sum_gap"]) == (2, 5, 1)


def test_avg_qual_is_the_mean_error_probability(miseq: tuple[Path, Path]) -> None:
    with dnaio.open(miseq[0]) as reader:
        probs = [10 ** (-(ord(c) - 33) / 10) for rec in reader for c in rec.qualities]
    expected = -10 * math.log10(sum(probs) / len(probs))
    assert file_qc(miseq[0]).summary()["avg_qual"] == pytest.approx(expected, rel=1e-9)


def test_quartiles_and_n50_follow_seqkit() -> None:
    counts = np.bincount([1, 2, 3, 4, 8, 8, 2, 2]).astype(np.int64)
    # sorted 1 2 2 2 3 4 8 8: median (2+3)/2; lower half 1 2 2 2 -> 2; upper half 3 4 8 8 -> 6
    assert qc.length_quartiles(counts) == (2.0, 2.5, 6.0)
    assert qc.n50(counts) == 8
    odd = np.bincount([5, 1, 3, 9, 7]).astype(np.int64)
    # seqkit: Q1 = median of the lower (n+1)/2 = 1 3 5 -> 3; Q3 = median of 5 7 9 -> 7
    assert qc.length_quartiles(odd) == (3.0, 5.0, 7.0)
    assert qc.n50(odd) == 7


def test_read_names_end_at_the_first_whitespace(miseq: tuple[Path, Path]) -> None:
    """``names()`` equals ``header.split(None, 1)[0]`` (SAM's QNAME), also for tabs, ASCII separators,
    leading whitespace, CRLF and headers with no description (a non-ASCII header is rejected: FASTQ is
    ASCII, as the planner's sniff says for the first MiB)."""
    headers = [b"r1", b"r2 desc", b"r3\tx y", b"r4\x1cz", b"r5\x0bw", b" lead name", b"\t", b"r8  ", b"r9\x1fq"]
    crlf, lf = b"@%s\r\nAC\r\n+\r\nII\r\n", b"@%s\nAC\n+\nII\n"
    data = b"".join((crlf if i % 2 else lf) % h for i, h in enumerate(headers))
    recs = chunks.parse_chunk(data, "names.fastq")
    expected = [(h.decode("latin-1").split(None, 1) or [""])[0] for h in headers]
    assert recs.names() == expected
    assert expected[5] == "lead" and expected[6] == ""
    with pytest.raises(BadInputError, match="non-ASCII byte 0xa0") as info:
        chunks.parse_chunk(b"@r1\nAC\n+\nII\n@r2\xa0w\nAC\n+\nII\n", "names.fastq", 10)
    assert (info.value.line, info.value.record) == (45, 11)
    with dnaio.open(miseq[0]) as reader:
        real = [r.name.split(None, 1)[0] for r in reader]
    got: list[str] = []
    for chunk in fastq.iter_file_chunks(str(miseq[0])):
        got += chunks.parse_chunk(chunk, "R1").names()
    assert got == real


@pytest.mark.parametrize(
    ("seqs", "gaps"),
    [
        ([b"ACGTN", b"NNNN"], 0),  # N only: no gap search needed
        ([b"ACRYN", b"n"], 0),  # IUPAC codes are not gaps
        ([b"AC-T.", b"A C", b"N-"], 4),
        ([b"ACGT", b"ACGTACGT"], 0),
    ],
)
def test_gap_count_whatever_the_other_bases(seqs: list[bytes], gaps: int) -> None:
    data = b"".join(b"@r\n%s\n+\n%s\n" % (s, b"I" * len(s)) for s in seqs)
    recs = chunks.parse_chunk(data, "x")
    acc = qc.QCAccumulator()
    acc.add_chunk(recs)
    assert acc.gap_bases == gaps
    # trimmed views: gap bytes beyond a read's kept interval are not counted
    trimmed = qc.QCAccumulator()
    keep = np.minimum(recs.length, 2)
    trimmed.add(recs.data, recs.seq_start, recs.qual_start, keep)
    assert trimmed.gap_bases == sum(s[:2].count(b"-") + s[:2].count(b".") + s[:2].count(b" ") for s in seqs)


@pytest.mark.parametrize("header", [b"r1", b"r1 1:N:0:ACGT", b"r1\tx y", b" lead space", b"M1:2:FC:1:1:5:9 2:N"])
def test_a_chunk_s_first_name_is_what_names_gives(header: bytes) -> None:
    recs = chunks.parse_chunk(b"@" + header + b"\nACGT\n+\nIIII\n@second\nAC\n+\nII\n", "x.fastq", 0)
    assert recs.first_name() == recs.names()[0]


@pytest.mark.parametrize("shape", [(0, 0), (1, 1), (3, 7), (101, 150), (40, 300)])
def test_byte_histograms_count_every_byte(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(sum(shape))
    a = rng.integers(0, 256, shape, dtype=np.uint8)
    a[: shape[0] // 2] = 70  # long runs of one value, as in real qualities
    np.testing.assert_array_equal(qc.byte_histogram(a), np.bincount(a.ravel(), minlength=256))


@pytest.mark.parametrize("rows", [1, 254, 255, 256, 519, 520, 521, 1300])
def test_narrow_sums_do_not_overflow(rows: int) -> None:
    a = np.full((rows, 600), qc._QMAX, dtype=np.uint8)  # 600 x 126 overflows a uint16 row sum
    np.testing.assert_array_equal(qc._column_sums(a, qc._QMAX), np.full(600, rows * qc._QMAX))
    np.testing.assert_array_equal(qc._row_sums(a, qc._QMAX), np.full(rows, 600 * qc._QMAX))
    ones = np.ones((rows, 9), dtype=np.uint8)
    np.testing.assert_array_equal(qc._column_sums(ones, 1), np.full(9, rows))


# -- long reads: memory bounded by bytes, the same sums in any tiles ---------------------------------------


def _mixed_reads(rng: np.random.Generator, lengths: list[int]) -> list[tuple[str, str]]:
    """Reads of the given lengths: bases of every class QC counts (either case, N, IUPAC, gaps), qualities
    over the whole Phred+33 range."""
    letters = np.frombuffer(b"ACGTacgtNRn.-", dtype=np.uint8)
    return [
        (letters[rng.integers(0, len(letters), n)].tobytes().decode(),
         (rng.integers(33, 127, n).astype(np.uint8)).tobytes().decode())
        for n in lengths
    ]


def _chunk(records: list[tuple[str, str]]) -> bytes:
    return "".join(f"@r{i}\n{s}\n+\n{q}\n" for i, (s, q) in enumerate(records)).encode()


def test_tiles_give_the_same_sums_as_one_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads grouped by length and long reads cut into slabs (tiny tiles here) add up to the same integers as
    one padded matrix, and as a per-read Python count."""
    rng = np.random.default_rng(11)
    lengths = [0, 1, 3, 150, 150, 151, 2, 700, 64, 65, 129, 5000, 0, 33, 1200, 150]
    records = _mixed_reads(rng, lengths)
    recs = chunks.parse_chunk(_chunk(records), "mixed.fq")
    whole = qc.QCAccumulator()
    whole.add_chunk(recs)
    monkeypatch.setattr(qc, "QC_TILE_BYTES", 300)
    monkeypatch.setattr(qc, "QC_SLAB_CYCLES", 97)
    monkeypatch.setattr(qc, "POSITION_BLOCK", 256)
    tiled = qc.QCAccumulator()
    tiled.add_chunk(recs)
    assert tiled.to_state() == whole.to_state()
    assert tiled.gap_bases == whole.gap_bases > 0
    ref = _reference_qc(records)
    assert tiled.bases == ref.pop("bases")
    state = tiled.to_state()
    for key, value in ref.items():
        assert state[key] == value, key
    # and in the manifest's JSON, blocks and all
    assert staging.qc_from_json(json.loads(json.dumps(staging.qc_to_json(tiled)))).to_state() == state


def test_bad_quality_in_a_tile_names_its_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(qc, "QC_TILE_BYTES", 300)
    records = _mixed_reads(np.random.default_rng(2), [150, 150, 9000, 150])
    seq, qual = records[2]
    records[2] = (seq, qual[:5000] + " " + qual[5001:])
    with pytest.raises(BadInputError) as err:
        qc.QCAccumulator().add_chunk(chunks.parse_chunk(_chunk(records), "q.fq"))
    assert err.value.line == 12
    assert "outside '!'..'~'" in err.value.message


def _peak_bytes(acc: qc.QCAccumulator, recs: chunks.ChunkRecords) -> int:
    """Peak bytes allocated (numpy's buffers included: numpy reports them to tracemalloc) while adding."""
    tracemalloc.start()
    try:
        acc.add_chunk(recs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_long_read_among_short_ones_costs_its_own_bytes_not_reads_times_its_length() -> None:
    """2,000 reads of 150 bp and one of 100 kb: padding every read to the longest needed 200 MB a matrix (the
    issue's 5.48 GB was this at 20,000 reads); the QC of the chunk stays within a few tiles, and within a few
    MB of the same chunk without the long read."""
    rng = np.random.default_rng(5)
    short = _mixed_reads(rng, [150] * 2000)
    long_read = _mixed_reads(rng, [100_000])
    alone = _peak_bytes(qc.QCAccumulator(), chunks.parse_chunk(_chunk(short), "short.fq"))
    mixed = qc.QCAccumulator()
    peak = _peak_bytes(mixed, chunks.parse_chunk(_chunk(short[:1000] + long_read + short[1000:]), "mixed.fq"))
    assert peak < alone + 4 * qc.QC_TILE_BYTES, f"{peak / 1e6:.1f} MB with the long read, {alone / 1e6:.1f} without"
    assert mixed.max_cycle == 100_000 and mixed.reads == 2001
    # the per-cycle counts only the long read reaches are kept a byte a count
    assert all(block.dtype == np.uint8 for block in mixed.cycles.blocks[1:])


@pytest.mark.parametrize(("lengths", "first", "width"), [
    ([150] * 40, 0, 150), ([0, 1, 7, 150, 151, 300, 0], 0, 300), ([220, 35, 180, 5], 100, 64),
    ([1_000, 20, 999], 512, 256), ([3, 4], 10, 8)])
def test_the_compiled_tile_sums_are_the_numpy_tile_s(lengths: list[int], first: int, width: int) -> None:
    """The child's compiled QC tile (``mappy.seqlake_qc_tile``) gives what the NumPy tile gives: per-cycle
    A/C/G/T and quality sums, the quality histogram, each read's Phred sum, the N bases and the gaps, for reads
    shorter than the tile, reads past it, empty reads, every base class and the whole Phred+33 range (bytes
    outside it too, which the accumulator then reports)."""
    import mappy  # loaded, as a child's aligner loads it

    assert mappy.seqlake_qc_tile is not None
    compiled = qc._compiled_tile_sums()
    assert compiled is not None, "seqlake's mappy build (make installs it) has the compiled QC tile"
    rng = np.random.default_rng(len(lengths) + first)
    reads = _mixed_reads(rng, lengths)
    data = bytearray()
    seq_start, qual_start = [], []
    for s, q in reads:
        seq_start.append(len(data))
        data += s.encode() + b"\n"
        qual_start.append(len(data))
        data += q.encode() + b"\n"
    if lengths[0] > 5:
        data[qual_start[0] + 2] = 10  # a quality byte below '!'
    arr = np.frombuffer(bytes(data) + bytes(width + first), dtype=np.uint8)  # the NumPy tile reads past the end
    args = (arr, np.array(seq_start, dtype=np.int64), np.array(qual_start, dtype=np.int64),
            np.array(lengths, dtype=np.int64))
    want = qc.tile_sums_numpy(*args, first=first, width=width)
    got = compiled(*args, first=first, width=width)
    for k, (a, b) in enumerate(zip(got[:4], want[:4], strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"part {k}")
    other = sum(max(0, min(n - first, width)) for n in lengths) - int(want[0].sum())
    if other:  # the NumPy tile counts N and gaps only where a non-ACGT base exists
        assert got[4:] == want[4:]
