"""seqlake.formats against samtools: BAM records encoded with NumPy read back by ``samtools view`` as the
SAM they came from, ``samtools quickcheck`` passes, decoding gives the records back, and a ``.bai`` built
from the records' virtual offsets (whole, or joined from pieces compressed apart) answers region queries as
``samtools index``'s does."""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from bam_queries import same_answers

from seqlake import demo_data
from seqlake.formats import bai, bam, bgzf, sam

PAIRS = 3_000
REGIONS = ["MN908947.3", "MN908947.3:1-1", "MN908947.3:100-200", "MN908947.3:16000-16400", "MN908947.3:16384-16385",
           "MN908947.3:29000-29903", "MN908947.3:5000-21000", "*"]


@pytest.fixture(scope="module")
def sorted_sam(tmp_path_factory: pytest.TempPathFactory, minimap2: str, samtools: str) -> tuple[str, list[str]]:
    """The first demo pairs through ``minimap2 -ax sr | samtools sort``, as SAM text, with some reads
    unmapped (their bases scrambled) so the file has placed-unmapped and unplaced records."""
    tmp = tmp_path_factory.mktemp("bam")
    r1, r2, ref = demo_data.paths()
    fastqs = []
    for k, src in enumerate((r1, r2)):
        out = subprocess.run(["zcat", str(src)], capture_output=True, check=True).stdout.decode().splitlines()
        out = out[: 4 * PAIRS]
        for i in range(0, len(out), 4):
            if (i // 4) % 97 == 0 or ((i // 4) % 89 == 0 and k == 1):  # random bases: unmapped
                out[i + 1] = "".join("ACGT"[(j * 7 + i) % 4] for j in range(len(out[i + 1])))
        path = tmp / f"r{k + 1}.fastq"
        path.write_text("\n".join(out) + "\n")
        fastqs.append(str(path))
    aligned = subprocess.run([minimap2, "-ax", "sr", "-t1", str(ref), *fastqs], capture_output=True, check=True).stdout
    text = subprocess.run([samtools, "sort", "-O", "sam", "-"], input=aligned, capture_output=True, check=True).stdout
    lines = text.decode().splitlines()
    return "\n".join(line for line in lines if line.startswith("@")) + "\n", [x for x in lines if not x.startswith("@")]


def _keep(line: str) -> str:
    """The SAM fields a record holds that seqlake writes: the 11 columns and NM (the tags it writes)."""
    f = line.split("\t")
    return "\t".join(f[:11] + [t for t in f[11:] if t.startswith("NM:i:")])


def _write(path: Path, head: str, records: bam.Records, pieces: int = 1) -> None:
    """A BAM of ``records`` whose body is compressed in ``pieces`` parts apart, and its ``.bai`` joined from
    the parts' index pieces."""
    header = bgzf.compress(bam.header(head, [("MN908947.3", 29903)]), eof=False)
    data, _ = bam.encode(records)
    cuts = np.linspace(0, len(records), pieces + 1).astype(np.int64)
    body, index_pieces = [header], []
    at = len(header)
    for lo, hi in itertools.pairwise(cuts.tolist()):
        part = records.take(np.arange(lo, hi, dtype=np.int64))
        raw, st = bam.encode(part)
        blocks, vs, ve = bgzf.compress_records(raw, st)
        index_pieces.append(bai.piece(part, vs, ve).shifted(at))
        body.append(blocks)
        at += len(blocks)
    path.write_bytes(b"".join(body) + bgzf.EOF)
    Path(f"{path}.bai").write_bytes(bai.bai_bytes(bai.join(index_pieces), 1))
    assert data  # the whole batch encodes too


def test_records_round_trip_through_samtools(sorted_sam: tuple[str, list[str]], samtools: str, tmp_path: Path) -> None:
    head, lines = sorted_sam
    lines = [_keep(x) for x in lines]
    records = sam.records(lines, {"MN908947.3": 0})
    assert (records.flag & 0x4).any() and (records.tid < 0).any()  # unmapped reads, placed and unplaced
    out = tmp_path / "x.bam"
    _write(out, head, records)
    subprocess.run([samtools, "quickcheck", "-v", str(out)], check=True)
    back = subprocess.run([samtools, "view", str(out)], capture_output=True, check=True, text=True).stdout.splitlines()
    assert back == lines
    data, starts = bam.encode(records)
    again = bam.decode(data)
    assert np.array_equal(bam.record_starts(data), starts)
    for name in ("tid", "pos", "mapq", "flag", "next_tid", "next_pos", "tlen"):
        assert np.array_equal(getattr(again, name), getattr(records, name)), name
    for name in ("names", "cigar", "seq", "qual", "tags"):
        assert getattr(again, name).rows() == getattr(records, name).rows(), name
    assert bam.encode(again)[0] == data
    placed = bam.decode_placement(data, starts)  # what an index reads: the same fields, CIGARs and ends
    for name in ("tid", "pos", "mapq", "flag", "next_tid", "next_pos", "tlen"):
        assert np.array_equal(getattr(placed, name), getattr(records, name)), name
    assert placed.cigar.rows() == records.cigar.rows() and np.array_equal(placed.end(), records.end())


@pytest.mark.parametrize("pieces", [1, 3])
def test_index_answers_as_samtools_index(sorted_sam: tuple[str, list[str]], samtools: str, tmp_path: Path,
                                         pieces: int) -> None:
    head, lines = sorted_sam
    records = sam.records([_keep(x) for x in lines], {"MN908947.3": 0})
    ours = tmp_path / "ours.bam"
    _write(ours, head, records, pieces)
    theirs = tmp_path / "theirs.bam"
    shutil.copyfile(ours, theirs)
    subprocess.run([samtools, "index", str(theirs)], check=True)
    assert same_answers(samtools, ours, theirs, list(REGIONS)) >= len(REGIONS) - 2  # the queries are not all empty
    stats = [subprocess.run([samtools, "idxstats", str(p)], capture_output=True, check=True).stdout
             for p in (ours, theirs)]
    assert stats[0] == stats[1]


def test_a_record_larger_than_a_block(tmp_path: Path, samtools: str) -> None:
    """A 100 kb read spans blocks; the records after it start in a new block (their offsets as htslib's)."""
    long_seq = ("ACGTTGCA" * 12_500).encode()
    lines = [f"long\t0\tMN908947.3\t1\t60\t{len(long_seq)}S\t*\t0\t0\t{long_seq.decode()}\t{'I' * len(long_seq)}",
             "short\t0\tMN908947.3\t20000\t60\t4M\t*\t0\t0\tACGT\tIIII"]
    records = sam.records(lines, {"MN908947.3": 0})
    out = tmp_path / "long.bam"
    _write(out, "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:MN908947.3\tLN:29903\n", records)
    subprocess.run([samtools, "quickcheck", "-v", str(out)], check=True)
    assert subprocess.run([samtools, "view", str(out), "MN908947.3:20000-20001"], capture_output=True, check=True,
                          text=True).stdout.split("\t")[0] == "short"


def test_name_ids_are_equal_where_the_names_are() -> None:
    """bam.name_ids (the reducers' pair key and batching) numbers names as np.unique of the names would, a name
    that is another's prefix included; read_names reads them from record bytes as decode does."""
    names = [b"r1", b"r10", b"r1", b"", b"a:b:c/1", b"r10", b"r"]
    expected = np.unique(np.array(names, dtype=object), return_inverse=True)[1]
    assert bam.name_ids(bam.Ragged.of(names)).tolist() == expected.tolist()
    assert bam.name_ids(bam.Ragged.of([])).tolist() == []
    lines = [f"{n}\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII" for n in ("q2", "q10", "q2")]
    data, starts = bam.encode(sam.records(lines, {}))
    assert bam.read_names(data, starts).rows() == bam.decode(data, starts).names.rows() == [b"q2", b"q10", b"q2"]


@pytest.mark.parametrize("codec", ["zlib", "isal"])
def test_virtual_offsets_from_the_members_footers_are_those_of_the_decompressed_blocks(codec: str) -> None:
    """``bgzf.virtual_offsets`` takes each block's plain size from its footer (ISIZE), decompressing nothing: the
    offsets equal those counted from the decompressed blocks, and those compress_records wrote, for records
    of every size (one larger than a block) and at the end of the data."""
    import zlib

    from isal import isal_zlib

    rng = np.random.default_rng(3)
    sizes = rng.integers(40, 900, 400)
    sizes[200] = 3 * bgzf.BLOCK
    plain = rng.integers(0, 4, int(sizes.sum()), dtype=np.uint8).tobytes()
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    data, vstart, vend = bgzf.compress_records(plain, starts, codec=(isal_zlib if codec == "isal" else zlib, 2))
    counted_at, counted_plain, total = [], [], 0
    for at, block in bgzf.blocks(data):
        counted_at.append(at)
        counted_plain.append(total)
        total += len(block)
    assert total == len(plain) and bgzf.decompress(data) == plain
    assert [size for _, _, size in bgzf.members(data)] == np.diff([*counted_plain, total]).tolist()
    np.testing.assert_array_equal(bgzf.virtual_offsets(data, starts), vstart)
    ends = np.append(starts[1:], len(plain)).astype(np.int64)
    np.testing.assert_array_equal(bgzf.virtual_offsets(data, ends), vend)
    assert int(bgzf.virtual_offsets(data, np.array([len(plain)]))[0]) == len(data) << 16


def test_the_compiled_record_walk_finds_the_starts_the_python_walk_finds() -> None:
    """``bam.record_starts`` walks the ``block_size`` chain in compiled code where seqlake's mappy build is
    installed: the starts of the Python walk, on records of every size and none; both refuse a chain cut
    short."""
    rng = np.random.default_rng(9)
    sizes = rng.integers(36, 700, 500)
    parts = []
    for size in sizes.tolist():
        parts.append(int(size - 4).to_bytes(4, "little", signed=True) + bytes(rng.integers(0, 256, size - 4,
                                                                                           dtype=np.uint8)))
    data = b"".join(parts)
    import mappy  # loaded, as a child's aligner loads it

    assert mappy.seqlake_record_starts is not None and bam._compiled_starts() is not None
    np.testing.assert_array_equal(bam.record_starts(data), bam.record_starts_py(data))
    assert len(bam.record_starts(b"")) == 0
    for walk in (bam.record_starts, bam.record_starts_py):
        with pytest.raises(ValueError, match="cut short"):
            walk(data[:-1])


def test_the_compiled_gather_copies_what_the_slices_join() -> None:
    """``bam.gather`` copies records in compiled code where seqlake's mappy build is loaded: the bytes the
    Python join of the slices gives, records of every size in any order, none at all."""
    import mappy  # loaded, as a child's aligner and a reducer load it

    assert mappy.seqlake_gather is not None
    rng = np.random.default_rng(4)
    data = rng.integers(0, 256, 50_000, dtype=np.uint8).tobytes()
    starts = rng.integers(0, 49_000, 300).astype(np.int64)
    sizes = rng.integers(0, 1_000, 300).astype(np.int64)
    got, at = bam.gather(data, starts, sizes)
    assert bytes(got) == b"".join(data[a : a + n] for a, n in zip(starts.tolist(), sizes.tolist(), strict=True))
    assert at.tolist() == np.concatenate(([0], np.cumsum(sizes)[:-1])).tolist()
    assert bytes(bam.gather(data, starts[:0], sizes[:0])[0]) == b""
    with pytest.raises(ValueError, match="outside the data"):
        bam.gather(data, np.array([49_990]), np.array([20]))
