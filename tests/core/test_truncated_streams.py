"""A compressed FASTQ cut short (a partial upload or copy): the one-line error names the file, says the
stream is truncated and names the last complete record before the cut, on the planning path (the
plan-time sniff, the gzip index pass) and on the worker path (streams the planner only sampled), and
the exit code is 65 (bad input: not retried).

The inputs are the bundled demo reads. For gzip the expected record is known by construction: the
file is written with a full flush after every block of records, and cut at a flush point (everything
before it decodes, nothing after it does) or a few bytes past one (inside the next deflate block).
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import lzma
import zlib
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest

from seqlake.base.errors import EXIT_BAD_INPUT, BadInputError, TruncatedStreamError
from seqlake.base.model import Sample
from seqlake.child import worker, worker_main
from seqlake.cli import main as cli_main
from seqlake.plan.planner import make_plan
from seqlake.reads import fastq, gzindex

#: the demo records (6.7 MB of plain FASTQ, 337 bytes a record). The planner's sniff reads about the
#: first 2 MiB (its 1 MiB sample and a read-ahead buffer): a cut after that is found by the gzip index
#: pass, or for bz2 / xz (sampled, not read through at plan time) by the worker
RECORDS = 20_000
#: records between full flush points of the gzip files
FLUSH_EVERY = 250


@pytest.fixture(scope="module")
def records() -> list[bytes]:
    raw = resources.files("seqlake.demo_data").joinpath("demo_R1.fastq.gz").read_bytes()
    lines = gzip.decompress(raw).split(b"\n")[: 4 * RECORDS]
    return [b"\n".join(lines[i : i + 4]) + b"\n" for i in range(0, len(lines), 4)]


@pytest.fixture(scope="module")
def flushed_gzip(records: list[bytes]) -> tuple[bytes, dict[int, int]]:
    return gzip_with_flush_points(records)


def gzip_with_flush_points(records: list[bytes]) -> tuple[bytes, dict[int, int]]:
    """A gzip member of ``records`` with a full flush every ``FLUSH_EVERY`` records, and
    ``{records before the point: compressed offset of the point}``."""
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    out = bytearray()
    points = {}
    for i in range(0, len(records), FLUSH_EVERY):
        out += c.compress(b"".join(records[i : i + FLUSH_EVERY]))
        out += c.flush(zlib.Z_FULL_FLUSH)
        points[i + FLUSH_EVERY] = len(out)
    out += c.flush()
    return bytes(out), points


def expected(path: Path, compression: str, whole_records: int) -> str:
    return (
        f"{path}: {compression} stream truncated after record {whole_records} (line {4 * whole_records}), "
        "the last complete record"
    )


def cut_gzip(tmp_path: Path, flushed: tuple[bytes, dict[int, int]], whole: int, extra: int = 0) -> Path:
    """The gzip file cut ``extra`` bytes after the flush point that follows record ``whole - 1``."""
    data, points = flushed
    path = tmp_path / f"R1-{whole}-{extra}.fastq.gz"
    path.write_bytes(data[: points[whole] + extra])
    return path


def test_flush_points_decode_exactly_the_records_before_them(
    records: list[bytes], flushed_gzip: tuple[bytes, dict[int, int]]
) -> None:
    data, points = flushed_gzip
    assert gzip.decompress(data) == b"".join(records)
    d = zlib.decompressobj(31)
    assert d.decompress(data[: points[5000]]) == b"".join(records[:5000])


# ------------------------------------------------------------------------------------ planning path
@pytest.mark.parametrize(
    ("whole", "extra"),
    [(500, 0), (500, 40), (12_000, 0), (12_000, 40), (RECORDS - FLUSH_EVERY, 40)],
    ids=[
        "in the sniff",
        "in the sniff, mid-block",
        "in the index pass",
        "in the index pass, mid-block",
        "near the end, mid-block",
    ],
)
def test_planner_names_the_last_complete_record(
    tmp_path: Path, flushed_gzip: tuple[bytes, dict[int, int]], whole: int, extra: int
) -> None:
    # Given a gzip file cut inside its deflate stream after `whole` complete records
    path = cut_gzip(tmp_path, flushed_gzip, whole, extra)
    # When the run is planned (the sniff reads the first MiB; the index pass reads the rest)
    with pytest.raises(TruncatedStreamError) as info:
        make_plan("cut", [Sample("s", str(path))], out_prefix=str(tmp_path / "out"))
    # Then one line names the file, the truncation and the last whole record; it is bad input
    assert str(info.value) == expected(path, "gzip", whole)
    assert isinstance(info.value, BadInputError) and info.value.record == whole
    assert not (tmp_path / "out" / "runs" / "cut" / "plan.json").exists()


@pytest.mark.parametrize("whole", [250, 8000, 16_000, RECORDS - FLUSH_EVERY])
def test_index_pass_names_the_record_whichever_way_rapidgzip_meets_the_cut(
    tmp_path: Path, flushed_gzip: tuple[bytes, dict[int, int]], whole: int
) -> None:
    """rapidgzip may return the data so far (then the footer check or the record count fails) or call
    the cut corrupt: either way the index pass reports the truncation with the record."""
    for extra in (0, 3, 40):
        path = cut_gzip(tmp_path, flushed_gzip, whole, extra)
        with pytest.raises(TruncatedStreamError) as info:
            gzindex.index_gzip(str(path))
        assert str(info.value) == expected(path, "gzip", whole)


def test_cut_inside_the_first_record(tmp_path: Path, records: list[bytes]) -> None:
    path = tmp_path / "tiny.fastq.gz"
    path.write_bytes(gzip.compress(b"".join(records[:10]))[:25])
    with pytest.raises(TruncatedStreamError) as info:
        make_plan("tiny", [Sample("s", str(path))], out_prefix=str(tmp_path / "out"))
    assert str(info.value) == f"{path}: gzip stream truncated before the end of the first record"


def test_corrupt_gzip_is_not_called_truncated(tmp_path: Path, records: list[bytes]) -> None:
    data = bytearray(gzip.compress(b"".join(records[:2000])))
    data[len(data) // 2] ^= 0xFF
    path = tmp_path / "bad.fastq.gz"
    path.write_bytes(bytes(data))
    for read in (lambda: gzindex.index_gzip(str(path)), lambda: list(fastq.read_records(str(path)))):
        with pytest.raises(BadInputError) as info:
            read()
        assert not isinstance(info.value, TruncatedStreamError), str(info.value)
        assert fastq.find_truncation(str(path)) is None


def test_intact_streams_are_not_truncated(tmp_path: Path, records: list[bytes]) -> None:
    plain = b"".join(records[:100])
    for name, data in (
        ("a.gz", gzip.compress(plain[:5000]) + gzip.compress(plain[5000:])),
        ("b.bz2", bz2.compress(plain)),
        ("c.xz", lzma.compress(plain)),
        ("d.fq", plain),
    ):
        (tmp_path / name).write_bytes(data)
        assert fastq.find_truncation(str(tmp_path / name)) is None, name


def test_cli_exits_65_with_the_one_line(
    tmp_path: Path, flushed_gzip: tuple[bytes, dict[int, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    path = cut_gzip(tmp_path, flushed_gzip, 12_000, 40)
    code = cli_main(["process", str(path), "--out", str(tmp_path / "out"), "--jobs", "1"])
    assert code == EXIT_BAD_INPUT
    assert capsys.readouterr().err.strip() == f"seqlake: bad input: {expected(path, 'gzip', 12_000)}"


# -------------------------------------------------------------------------------------- worker path
def decodable_records(data: bytes, new: Callable[[], bz2.BZ2Decompressor | lzma.LZMADecompressor]) -> int:
    """Whole records in what the standard library's decompressor decodes of a cut stream."""
    return new().decompress(data).count(b"\n") // 4


@pytest.mark.parametrize(
    ("compression", "compress", "new"),
    [
        ("bz2", lambda b: bz2.compress(b, compresslevel=1), bz2.BZ2Decompressor),
        ("xz", lambda b: lzma.compress(b, preset=0), lzma.LZMADecompressor),
    ],
    ids=["bz2", "xz"],
)
def test_worker_names_the_last_complete_record_of_a_stream_cut_after_the_sample(
    tmp_path: Path,
    records: list[bytes],
    compression: str,
    compress: Callable[[bytes], bytes],
    new: Callable[[], bz2.BZ2Decompressor | lzma.LZMADecompressor],
) -> None:
    # Given a bz2 / xz file cut near its end: the planner samples its first MiB only, and plans it
    data = compress(b"".join(records))
    cut = data[: len(data) * 9 // 10]
    path = tmp_path / "R1.fastq"
    path.write_bytes(cut)
    whole = decodable_records(cut, new)
    assert 8000 < whole < RECORDS
    plan = make_plan("late", [Sample("s", str(path))], out_prefix=str(tmp_path / "out"))
    # When its one shard is processed
    with pytest.raises(TruncatedStreamError) as info:
        worker.process_child(plan, 0)
    # Then the worker names the last whole record before the cut
    assert str(info.value) == expected(path, compression, whole)


def test_worker_exit_code_and_error_record(
    tmp_path: Path, records: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(tmp_path / "refcache"))
    data = bz2.compress(b"".join(records), compresslevel=1)
    path = tmp_path / "R1.fastq"
    path.write_bytes(data[: len(data) * 9 // 10])
    plan = make_plan("late", [Sample("s", str(path))], out_prefix=str(tmp_path / "out"))
    code = worker_main.worker_command(argparse.Namespace(plan=plan.plan_uri, shard=0))
    assert code == EXIT_BAD_INPUT
    error = json.loads(Path(plan.layout.child_error(0)).read_text())
    whole = decodable_records(path.read_bytes(), bz2.BZ2Decompressor)
    assert error["text"] == expected(path, "bz2", whole) and error["record"] == whole and error["line"] is None


def test_gzip_stream_reader_names_the_last_complete_record(
    tmp_path: Path, flushed_gzip: tuple[bytes, dict[int, int]]
) -> None:
    """The reader of the worker's first gzip span (isal's stream) drops up to a buffer of decoded data
    with its EOFError; the error still names the file's real last complete record."""
    path = cut_gzip(tmp_path, flushed_gzip, 4000, 40)
    with pytest.raises(TruncatedStreamError) as info:
        list(fastq.read_records(str(path)))
    assert str(info.value) == expected(path, "gzip", 4000)
