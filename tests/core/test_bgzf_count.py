"""The BGZF counting pass on several processes gives what it gives on one: counts, checkpoints, errors."""

from __future__ import annotations

import gzip
import os
import subprocess
from pathlib import Path

import pytest

from seqlake import demo_data
from seqlake.base import clients, forked, storage
from seqlake.base.errors import BadInputError
from seqlake.reads import bgzf

#: small chunks, so that the ~1.5 MB demo file is counted in many chunks on every process
CHUNK = 64 << 10
SPACING = 64 << 10


@pytest.fixture(scope="module")
def demo_bgzf(tmp_path_factory: pytest.TempPathFactory, bgzip: str) -> tuple[Path, bytes]:
    """The bundled demo R1 (20,000 x 150 bp, MIT) recompressed with ``bgzip``, and its plain data."""
    plain = gzip.decompress(demo_data.paths()[0].read_bytes())
    path = tmp_path_factory.mktemp("bgzf") / "R1.fastq"
    path.write_bytes(plain)
    subprocess.run([bgzip, "-f", str(path)], check=True)
    return Path(f"{path}.gz"), plain


@pytest.fixture
def counted_in_processes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Small chunks; the list fills with one entry per chunk a forked process counted and this one joined."""
    monkeypatch.setattr(bgzf, "CHUNK_BYTES", CHUNK)
    received: list[int] = []
    receive = bgzf._receive

    def spy(helper: forked.Helper, fd: int, uri: str) -> list[bgzf._Block]:
        blocks = receive(helper, fd, uri)
        received.append(len(blocks))
        return blocks

    monkeypatch.setattr(bgzf, "_receive", spy)
    return received


@pytest.mark.parametrize("threads", [2, 3, 64])
def test_processes_give_the_counts_and_checkpoints_of_one(demo_bgzf: tuple[Path, bytes],
                                                          counted_in_processes: list[int], threads: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path, plain = demo_bgzf
    alone = bgzf.count_records(str(path), spacing=SPACING, threads=1)
    assert not counted_in_processes
    forks: list[int] = []
    fork = os.fork

    def counting_fork() -> int:
        pid = fork()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", counting_fork)
    together = bgzf.count_records(str(path), spacing=SPACING, threads=threads)
    assert together == alone
    assert (alone.records, alone.plain_size) == (plain.count(b"\n") // 4, len(plain))
    assert len(alone.checkpoints) > 50
    # chunk k is process k % procs's (no more processes than chunks): every chunk counted once
    chunks = -(-path.stat().st_size // CHUNK)
    procs = min(threads, chunks)
    assert len(forks) == procs - 1
    assert len(counted_in_processes) == chunks - len(range(0, chunks, procs)) and sum(counted_in_processes) > 0


def _corrupt_block_past_the_first_chunks(data: bytes) -> bytes:
    """``data`` with one deflate byte flipped in the first block after three chunks (a forked process's)."""
    q = 0
    while q < 3 * CHUNK:
        size = bgzf.bgzf_block_size(data, q)
        assert size is not None
        q += size
    flipped = bytearray(data)
    flipped[q + 40] ^= 0xFF
    return bytes(flipped)


@pytest.mark.parametrize("damage", ["corrupt", "cut", "gzip member"])
def test_processes_raise_the_error_of_one(demo_bgzf: tuple[Path, bytes], counted_in_processes: list[int],
                                         tmp_path: Path, damage: str) -> None:
    path, plain = demo_bgzf
    data = path.read_bytes()
    bad = tmp_path / "bad.fastq.gz"
    if damage == "corrupt":
        bad.write_bytes(_corrupt_block_past_the_first_chunks(data))
    elif damage == "cut":
        bad.write_bytes(data[: len(data) * 2 // 3])
    else:  # the EOF block dropped, then a plain gzip member
        bad.write_bytes(data[:-28] + gzip.compress(plain))
    errors = []
    for threads in (1, 2):
        with pytest.raises((BadInputError, bgzf.NotBgzfError)) as info:
            bgzf.count_records(str(bad), spacing=SPACING, threads=threads)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


def test_an_s3_object_is_read_once_and_counted_on_threads(demo_bgzf: tuple[Path, bytes],
                                                          counted_in_processes: list[int],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    moto = pytest.importorskip("moto")
    path, _ = demo_bgzf
    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    for var, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(var, value)
    with moto.mock_aws():
        clients.reset()
        try:
            storage.s3_client().create_bucket(Bucket="bgzf-count")
            storage.write_bytes("s3://bgzf-count/R1.fastq.gz", path.read_bytes())
            on_s3 = bgzf.count_records("s3://bgzf-count/R1.fastq.gz", spacing=SPACING, threads=2)
        finally:
            clients.reset()
    assert on_s3 == bgzf.count_records(str(path), spacing=SPACING, threads=1)
    assert not counted_in_processes  # threads: no forked process shares this one's S3 client
