"""FASTQ reading: magic bytes, decompression errors, absolute error lines, the quality checks."""

from __future__ import annotations

import bz2
import gzip
import io
import itertools
import lzma
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from seqlake.base.errors import BadInputError
from seqlake.reads import fastq, gzindex

RECORDS = b"".join(b"@r%d extra\nACGTN%s\n+\nII#~!%s\n" % (i, b"A" * (i % 7), b"5" * (i % 7))
                  for i in range(40))


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"@r1\nACGT\n", "plain"),
        (b"", "plain"),
        (gzip.compress(b"@r\nA\n+\nI\n")[:32], "gzip"),
        (bz2.compress(b"@r\nA\n+\nI\n")[:32], "bz2"),
        (lzma.compress(b"@r\nA\n+\nI\n")[:32], "xz"),
        (b"\x28\xb5\x2f\xfd\x00\x00", "zstd"),
        # BGZF: gzip with FEXTRA and a BC subfield (the empty EOF block of the SAM spec)
        (bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000"), "bgzf"),
    ],
    ids=["plain", "empty", "gzip", "bz2", "xz", "zstd", "bgzf"],
)
def test_sniff_compression(head: bytes, expected: str) -> None:
    assert fastq.sniff_compression(head) == expected


def test_name_does_not_decide_compression(tmp_path: Path) -> None:
    p = tmp_path / "reads.fastq"  # gzip content under a plain name
    p.write_bytes(gzip.compress(RECORDS))
    assert sum(1 for _ in fastq.read_records(str(p))) == 40


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress], ids=["gzip", "bz2", "xz"])
def test_truncated_stream_names_the_file(tmp_path: Path, compress: object) -> None:
    data = compress(RECORDS * 50)  # type: ignore[operator]
    p = tmp_path / "cut.fastq.x"
    p.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(BadInputError) as info:
        list(fastq.read_records(str(p)))
    assert info.value.path == str(p)
    assert "truncated" in info.value.message or "corrupt" in info.value.message


@pytest.mark.parametrize("keep", [0.3, 0.9, 0.999])
def test_truncated_gzip_rejected_by_the_index_pass(tmp_path: Path, keep: float) -> None:
    data = gzip.compress(RECORDS * 200, compresslevel=1)
    p = tmp_path / "cut.fastq.gz"
    p.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(BadInputError) as info:
        gzindex.index_gzip(str(p))
    assert info.value.path == str(p)


def test_corrupt_gzip_rejected_by_both_readers(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(RECORDS * 200))
    data[len(data) // 2] ^= 0xFF
    p = tmp_path / "bad.fastq.gz"
    p.write_bytes(bytes(data))
    with pytest.raises(BadInputError) as info:
        gzindex.index_gzip(str(p))
    assert info.value.path == str(p)
    with pytest.raises(BadInputError) as info:
        list(fastq.read_records(str(p)))
    assert info.value.path == str(p)


class _FailingSource(io.RawIOBase):
    """A compressed source whose reads fail after a few calls, the way a dropped connection does."""

    def __init__(self, data: bytes, exc: Exception) -> None:
        super().__init__()
        self._b = io.BytesIO(data)
        self._exc = exc
        self.calls = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._b.seek(offset, whence)

    def tell(self) -> int:
        return self._b.tell()

    def readinto(self, buf: Any) -> int:
        self.calls += 1
        if self.calls > 3:
            raise self._exc
        return self._b.readinto(buf)


def test_source_failure_is_not_bad_input() -> None:
    rapidgzip = pytest.importorskip("rapidgzip")
    rng = random.Random(7)  # incompressible enough that rapidgzip reads the source many times
    seqs = rng.randbytes(60 * 40_000).translate(bytes(b"ACGT"[i % 4] for i in range(256)))
    quals = rng.randbytes(60 * 40_000).translate(bytes(b"#5IF"[i % 4] for i in range(256)))
    recs = b"".join(b"@r%d\n%s\n+\n%s\n" % (i, seqs[60 * i:60 * i + 60], quals[60 * i:60 * i + 60])
                    for i in range(40_000))
    data = gzip.compress(recs, compresslevel=1)
    latch = gzindex._Latch(_FailingSource(data, ValueError("connection reset")))  # type: ignore[arg-type]
    with rapidgzip.RapidgzipFile(latch, parallelization=1, chunk_size=1 << 20) as f:
        checked = gzindex._Checked(f, latch, "x.gz")
        with pytest.raises(OSError, match="reading the compressed data failed") as info:
            gzindex.scan_records(checked, "x.gz")
    assert not isinstance(info.value, BadInputError)


def _fastq(n: int, seed: int) -> bytes:
    """Records of varied lengths, so that checkpoints fall anywhere in a record."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = rng.randrange(1, 300)
        out.append(b"@r%d x\n%s\n+\n%s\n" % (i, b"ACGT"[i % 4:i % 4 + 1] * k, b"I" * k))
    return b"".join(out)


@pytest.mark.parametrize("block", [1, 7, 1000, 1 << 16])
@pytest.mark.parametrize("final_newline", [True, False])
def test_the_counting_pass_and_its_forked_twin_find_every_checkpoint(block: int, final_newline: bool) -> None:
    # a block of 1 byte ends one at every offset already, in 300 records (about 22 checkpoints); 3,000 at one
    # byte a read took 15-20 s a case
    n = 300 if block == 1 else 3000
    data = _fastq(n, seed=block)
    if not final_newline:
        data = data[:-1]
    spacing = 4096
    serial = gzindex.scan_records(io.BytesIO(data), "x", spacing=spacing, block=block)
    aside = gzindex.scan_counting_aside(io.BytesIO(data), "x", spacing=spacing, block=block)
    assert serial == aside
    assert (serial.records, serial.plain_size) == (n, len(data))
    assert len(serial.checkpoints) > 10
    # a checkpoint is the first record start at or after each multiple of the spacing
    lines = data.split(b"\n")
    starts, at = [], 0
    for i, line in enumerate(lines):
        if i % 4 == 0 and at < len(data):
            starts.append(at)
        at += len(line) + 1
    want = [(0, 0)]
    for s in range(spacing, len(data), spacing):
        first = next((k for k, st in enumerate(starts) if st >= s), None)
        if first is not None and starts[first] != want[-1][0]:
            want.append((starts[first], first))
    assert serial.checkpoints == want


def test_forked_count_raises_the_decoders_error_and_leaves_no_process() -> None:
    data = _fastq(2000, seed=3)
    stream = _FailingSource(data, OSError("source lost"))  # its 4th read fails
    with pytest.raises(OSError, match="source lost"):
        gzindex.scan_counting_aside(stream, "x", block=1000, depth=2)  # type: ignore[arg-type]
    assert stream.calls == 4  # nothing read after the error
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # the counting process was waited for
    cut = io.BytesIO(data[:data.rindex(b"\n+\n")])  # the last record has 2 of its 4 lines
    with pytest.raises(BadInputError, match="file ends inside a record"):
        gzindex.scan_counting_aside(cut, "x", block=1000)


def test_index_pass_accepts_multi_member_and_checks_last_member_crc(tmp_path: Path) -> None:
    whole = RECORDS * 200
    cut = len(whole) // 3 + 5  # members split mid-record
    p = tmp_path / "mm.fastq.gz"
    p.write_bytes(gzip.compress(whole[:cut]) + gzip.compress(whole[cut:]))
    res = gzindex.index_gzip(str(p), spacing=1024)
    assert (res.scan.records, res.scan.plain_size) == (8000, len(whole))
    assert res.scan.checkpoints[0] == (0, 0)
    assert len(res.scan.checkpoints) > 100


def test_zstd_rejected_by_name(tmp_path: Path) -> None:
    p = tmp_path / "r.fastq.zst"
    p.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 20)
    with pytest.raises(BadInputError, match="zstd"):
        list(fastq.read_records(str(p)))


def test_parse_records_lines_are_absolute() -> None:
    bad = b"@a\nACGT\n+\nIIII\n@b\nACGT\n+\nIII\n"
    with pytest.raises(BadInputError) as info:
        fastq.parse_records(bad, "f.fq", first_record=1000)
    assert (info.value.line, info.value.record) == (4 * 1001 + 4, 1001)
    assert str(info.value).startswith("f.fq:4008: ")


def test_accepted_shapes() -> None:
    recs = fastq.parse_records(b"@a x\r\nAC\r\n+a x\r\nII\r\n@b\n\n+\n\n@c\nA\n+\nI", "f")
    assert [(r.name, r.sequence, r.qualities) for r in recs] == [("a x", "AC", "II"), ("b", "", ""),
                                                                 ("c", "A", "I")]
    assert fastq.parse_records(b"", "f") == []


@pytest.mark.parametrize(
    ("chunk", "line"),
    [
        (b"@a\nACGT\n+\nII I\n", 4),  # a space
        (b"@a\nAC\n+\nII\n@b c\nACG\n+\nI\tI\n", 8),  # a tab; the header's space is fine
        (b"@a\r\nAC\r\n+\r\nI\rI\r\n", 4),  # CR inside the line, not a line end
        (b"@a\nAC\n+\nI\x7f\n", 4),  # DEL
    ],
)
def test_quality_range_rejects(chunk: bytes, line: int) -> None:
    with pytest.raises(BadInputError) as info:
        fastq.check_quality_range(chunk, "q.fq", first_record=10)
    assert info.value.line == 40 + line
    assert "outside '!'..'~'" in info.value.message


@pytest.mark.parametrize(
    "chunk",
    [b"", b"@a b\tc\nACGT\n+\n!!~~\n", b"@a\r\nAC\r\n+\r\nII\r\n", b"@a\nAC\n+\nII", b"@a\n\n+\n\n"],
)
def test_quality_range_accepts(chunk: bytes) -> None:
    fastq.check_quality_range(chunk, "q.fq")


def test_phred_rule_accepts_real_phred33_adapter_reads(adapter_reads: Path) -> None:
    assert fastq.sniff_fastq(str(adapter_reads)).records > 0


def test_phred_rule_accepts_real_phred33_miseq_reads(miseq: tuple[Path, Path]) -> None:
    for path in miseq:
        assert fastq.sniff_fastq(str(path)).records > 0


def test_phred64_message_says_how_to_convert() -> None:
    with pytest.raises(BadInputError) as info:
        fastq.check_phred_offset(b"BBBBhhhhffff", "old.fq")
    assert "seqtk seq -Q64 -V" in str(info.value)
    # high-quality Phred+33 data with nothing below ';' but nothing above 'K' either is accepted
    fastq.check_phred_offset(b"FFFFJJJJ<<<<", "new.fq")


def test_bgzf_read_as_gzip(tmp_path: Path) -> None:
    bgzip = pytest.importorskip("shutil").which("bgzip")
    if bgzip is None:
        pytest.skip("bgzip (tabix) is not installed")
    p = tmp_path / "r.fastq"
    p.write_bytes(RECORDS * 3000)
    subprocess.run([bgzip, "-f", str(p)], check=True)
    gz = str(p) + ".gz"
    assert fastq.sniff_compression(Path(gz).read_bytes()[:32]) == "bgzf"
    assert sum(1 for _ in fastq.read_records(gz)) == 120_000


@pytest.mark.parametrize("gz", [False, True])
def test_non_ascii_byte_is_reported_with_its_line(tmp_path: Path, gz: bool) -> None:
    # dnaio says "Non-ASCII characters found in record." without a line: the core finds the line
    data = b"@r1\nACGT\n+\nIIII\n@r2\nACGT\n+\nII\xc3\xa9\n"
    path = tmp_path / ("q.fastq.gz" if gz else "q.fastq")
    path.write_bytes(gzip.compress(data) if gz else data)
    with pytest.raises(BadInputError) as info:
        list(fastq.read_records(str(path)))
    assert info.value.line == 8 and "0xc3" in str(info.value)
    with pytest.raises(BadInputError) as info:
        fastq.parse_records(data[16:], str(path), first_record=1)
    assert info.value.line == 8


@pytest.mark.parametrize("final_newline", [True, False])
@pytest.mark.parametrize("gz", [True, False])
def test_file_chunks_are_whole_records_whatever_the_buffer(tmp_path: Path, gz: bool, final_newline: bool) -> None:
    rng = random.Random(7)
    records = []
    for i in range(300):
        n = rng.choice([0, 1, 30, 151, 700])  # some records longer than the smallest buffers
        seq = "".join(rng.choice("ACGTN") for _ in range(n))
        records.append(f"@r{i} x\n{seq}\n+\n{'F' * n}\n".encode())
    data = b"".join(records)
    if not final_newline:
        data = data[:-1]
    path = tmp_path / ("r.fastq.gz" if gz else "r.fastq")
    path.write_bytes(gzip.compress(data) if gz else data)
    for buffer_size in (7, 64, 1000, 4096, 1 << 20):
        chunks = list(fastq.iter_file_chunks(str(path), buffer_size))
        assert b"".join(chunks) == data
        starts = [0]
        for chunk in chunks[:-1]:
            starts.append(starts[-1] + len(chunk))
        record_starts = set(itertools.accumulate((len(r) for r in records), initial=0))
        assert set(starts) <= record_starts  # every chunk starts (and so the one before ends) at a record
        assert all(c.count(b"\n") % 4 == 0 for c in chunks[:-1])
        for chunk, newlines in fastq.iter_file_chunk_lines(str(path), buffer_size):
            if newlines is not None:  # the offsets the parser is given instead of searching again
                assert newlines.tolist() == [i for i, b in enumerate(chunk) if b == 10]
                assert chunk.endswith(b"\n")


def test_file_chunks_hand_a_cut_record_to_the_parser(tmp_path: Path) -> None:
    path = tmp_path / "cut.fastq"
    path.write_bytes(b"@a\nAC\n+\nFF\n@b\nAC\n")
    chunks = list(fastq.iter_file_chunks(str(path), 8))
    assert b"".join(chunks) == path.read_bytes()
    assert chunks[-1] == b"@b\nAC\n"  # the incomplete record comes last, for the parser to reject
