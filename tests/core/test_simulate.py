"""The read simulator and the bundled demo data: determinism, truth, and the error model."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import dnaio
import mappy
import numpy as np
import pytest

from seqlake import demo_data
from seqlake.demo_data.simulate import (
    ADAPTER_R1,
    SimConfig,
    main,
    read_reference,
    simulate,
    simulate_chunk,
    write_pairs,
)

REF = demo_data.reference_path()
COMPLEMENT = bytes.maketrans(b"ACGTN", b"TGCAN")


def revcomp(s: bytes) -> bytes:
    return s.translate(COMPLEMENT)[::-1]


def test_paths_are_the_bundled_files() -> None:
    r1, r2, ref = demo_data.paths()
    assert (r1.name, r2.name, ref.name) == ("demo_R1.fastq.gz", "demo_R2.fastq.gz", "MN908947.3.fasta")
    assert ref.read_bytes().startswith(b">MN908947.3")
    reference = read_reference(ref)
    assert reference.names == ("MN908947.3",) and int(reference.lengths[0]) == 29_903
    for path in (r1, r2):
        assert path.read_bytes()[:2] == b"\x1f\x8b"


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    outs = []
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        r1, r2 = tmp_path / f"{name}_R1.fastq.gz", tmp_path / f"{name}_R2.fastq.gz"
        write_pairs(REF, r1, r2, 1_000, seed=seed)
        outs.append((r1.read_bytes(), r2.read_bytes()))
    assert outs[0] == outs[1]
    assert outs[0][0] != outs[2][0] and outs[0][1] != outs[2][1]


def test_bundled_demo_reads_are_what_the_simulator_makes(tmp_path: Path) -> None:
    """The committed demo files must be regenerable: `python -m seqlake.demo_data DIR`."""
    assert main(demo_data.simulate_args(tmp_path)) == 0
    r1, r2, _ = demo_data.paths()
    for bundled, fresh in ((r1, tmp_path / "demo_R1.fastq.gz"), (r2, tmp_path / "demo_R2.fastq.gz")):
        # compare the text, not the gzip bytes, which may differ between zlib builds
        assert gzip.decompress(bundled.read_bytes()) == gzip.decompress(fresh.read_bytes())


def test_bundled_demo_shape() -> None:
    r1, r2, _ = demo_data.paths()
    header = re.compile(r"^SIM:1:FC:1:1:(\d+):(\d+) ([12]):N:0:1$")
    n = 0
    with dnaio.open(r1, r2) as reader:
        for n, (a, b) in enumerate(reader, start=1):
            ma, mb = header.match(a.name), header.match(b.name)
            assert ma and mb and ma.group(3) == "1" and mb.group(3) == "2"
            assert int(ma.group(1)) == n and ma.group(1, 2) == mb.group(1, 2)
            assert len(a.sequence) == len(b.sequence) == 150
    assert n == demo_data.DEMO_PAIRS


def test_reads_map_back_to_where_they_were_simulated(tmp_path: Path) -> None:
    r1, r2 = tmp_path / "m_R1.fastq.gz", tmp_path / "m_R2.fastq.gz"
    truth = write_pairs(REF, r1, r2, 2_000, seed=11)
    aligner = mappy.Aligner(str(REF), preset="sr")
    left = truth.start
    right = truth.start + truth.insert  # 0-based, exclusive
    hits_ok = [0, 0]
    with dnaio.open(r1, r2) as reader:
        for i, (a, b) in enumerate(reader):
            for h in aligner.map(a.sequence, b.sequence):
                if not h.is_primary:
                    continue
                mate = h.read_num - 1
                # R1 is on the forward strand when the fragment is; its mate is on the other one
                on_forward = bool(truth.forward[i]) == (mate == 0)
                if on_forward:
                    hits_ok[mate] += h.strand == 1 and abs(h.r_st - left[i]) <= 5
                else:
                    hits_ok[mate] += h.strand == -1 and abs(h.r_en - right[i]) <= 5
    # a few short-insert reads (mostly adapter) cannot map; everything else lands where it came from
    assert hits_ok[0] >= 0.95 * 2_000 and hits_ok[1] >= 0.95 * 2_000, hits_ok


def test_substitution_rate_follows_the_quality_scores() -> None:
    ref = read_reference(REF)
    seq = ref.contig(0).tobytes()
    config = SimConfig()
    length = config.read_length
    chunk = simulate_chunk(ref, 6_000, np.random.default_rng(3), config)
    t = chunk.truth
    errors_by_q = np.zeros(42)
    bases_by_q = np.zeros(42)
    n_calls = 0
    for i in np.flatnonzero((t.insert >= length) & (t.indels_r1 == 0)):
        s, e = int(t.start[i]), int(t.start[i] + t.insert[i])
        expected = seq[s : s + length] if t.forward[i] else revcomp(seq[e - length : e])
        got = chunk.r1_seq[i]
        q = chunk.r1_qual[i]
        called = got != ord("N")
        n_calls += int((~called).sum())
        wrong = (got != np.frombuffer(expected, dtype=np.uint8)) & called
        np.add.at(bases_by_q, q[called], 1)
        np.add.at(errors_by_q, q[wrong], 1)
    p = 10.0 ** (-np.arange(42) / 10.0)
    expected_errors = float((bases_by_q * p).sum())
    assert errors_by_q.sum() == pytest.approx(expected_errors, rel=0.05)
    # per quality value too, where there are enough expected errors for the test to have power
    for q in np.flatnonzero(bases_by_q * p >= 100):
        mean = bases_by_q[q] * p[q]
        assert abs(errors_by_q[q] - mean) <= 5 * np.sqrt(mean), (q, errors_by_q[q], mean)
    # N calls at about n_rate
    assert 0.2 * config.n_rate < n_calls / bases_by_q.sum() < 5 * config.n_rate


def test_quality_declines_along_the_read_and_r2_is_worse() -> None:
    ref = read_reference(REF)
    chunk = next(simulate(ref, 3_000, seed=5))
    q1, q2 = chunk.r1_qual.astype(float), chunk.r2_qual.astype(float)
    assert q1[:, :10].mean() > q1[:, -10:].mean() + 5
    assert q2[:, :10].mean() > q2[:, -10:].mean() + 10
    assert q2.mean() < q1.mean() - 2
    assert q1.min() >= 2 and q1.max() <= 41


def test_short_inserts_read_through_into_the_adapter() -> None:
    ref = read_reference(REF)
    config = SimConfig()
    chunk = next(simulate(ref, 8_000, seed=9, config=config))
    short = np.flatnonzero(chunk.truth.insert <= config.read_length - 13)
    frac = len(short) / len(chunk)
    assert 0.5 * config.short_insert_fraction < frac < 1.5 * config.short_insert_fraction
    adapter = ADAPTER_R1[:13].encode()
    found = sum(
        chunk.r1_seq[i, chunk.truth.insert[i] : chunk.truth.insert[i] + 13].tobytes() == adapter
        for i in short
    )
    # exact matches only: an error or indel in those 13 bases hides some of them
    assert found >= 0.8 * len(short)
    long_reads = np.flatnonzero(chunk.truth.insert >= config.read_length + 20)
    assert not any(adapter in chunk.r1_seq[i].tobytes() for i in long_reads[:2_000])


def test_cli_writes_the_named_pair(tmp_path: Path) -> None:
    argv = [
        "--out",
        str(tmp_path / "o"),
        "--pairs",
        "10",
        "--seed",
        "1",
        "--prefix",
        "x",
        "--read-length",
        "50",
        "--reference",
        str(REF),
    ]
    assert main(argv) == 0
    with dnaio.open(tmp_path / "o" / "x_R1.fastq.gz", tmp_path / "o" / "x_R2.fastq.gz") as reader:
        pairs = list(reader)
    assert len(pairs) == 10 and {len(a.sequence) for a, _ in pairs} == {50}
