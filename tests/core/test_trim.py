"""Trimming equals the cutadapt command line (sequences and counts), single-end and paired-end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import dnaio
import numpy as np
import pytest

from seqlake.base.params import Params
from seqlake.child import trim
from seqlake.reads import chunks, fastq


def _cutadapt() -> str:
    exe = shutil.which("cutadapt") or str(Path(sys.executable).parent / "cutadapt")
    if not Path(exe).exists():
        pytest.skip("the cutadapt command line is not installed")
    return exe


def _cutadapt_args(p: Params) -> list[str]:
    args = [
        "-q",
        f"{p.quality_cutoff_5p},{p.quality_cutoff}",
        "-m",
        str(p.min_length),
        "-e",
        str(p.adapter_max_error_rate),
        "-O",
        str(p.adapter_min_overlap),
    ]
    for a in p.adapters:
        args += ["-a", a]
    return args


def _records(path: Path) -> list[chunks.ChunkRecords]:
    out, first = [], 0
    for chunk in fastq.iter_file_chunks(str(path)):
        recs = chunks.parse_chunk(chunk, str(path), first)
        first += len(recs)
        out.append(recs)
    return out


def _trimmed(trimmer: trim.Trimmer, recs: list[chunks.ChunkRecords]) -> tuple[list[str], trim.TrimStats]:
    seqs_out: list[str] = []
    stats = trim.TrimStats()
    for r in recs:
        seqs = r.sequences()
        t = trimmer.trim_mate(seqs, r.qualities())
        keep = trimmer.filter([t])
        trim.add_stats(stats, t, keep)
        seqs_out += [
            s[a:b] for s, a, b, k in zip(seqs, t.start.tolist(), t.stop.tolist(), keep.tolist(), strict=True) if k
        ]
    return seqs_out, stats


def test_single_end_equals_cutadapt(adapter_reads: Path, tmp_path: Path) -> None:
    params = Params()
    out, report = tmp_path / "out.fastq", tmp_path / "report.json"
    subprocess.run(
        [_cutadapt(), *_cutadapt_args(params), "--json", str(report), "-o", str(out), str(adapter_reads)],
        check=True,
        capture_output=True,
    )
    with dnaio.open(out) as reader:
        expected = [r.sequence for r in reader]
    ours, stats = _trimmed(trim.Trimmer(params), _records(adapter_reads))
    assert ours == expected
    rep = json.loads(report.read_text())
    assert stats.reads_adapter_trimmed == rep["read_counts"]["read1_with_adapter"] > 0
    assert stats.bases_quality_trimmed == rep["basepair_counts"]["quality_trimmed"] > 0
    assert stats.reads_too_short == rep["read_counts"]["filtered"]["too_short"] > 0
    written = rep["basepair_counts"]["output"]
    assert 100 * 101 - stats.bases_quality_trimmed - stats.bases_adapter_trimmed - stats.bases_too_short == written


def test_paired_end_equals_cutadapt(miseq: tuple[Path, Path], tmp_path: Path) -> None:
    params = Params()
    args = _cutadapt_args(params)
    for a in params.adapters:
        args += ["-A", a]
    args += ["-Q", f"{params.quality_cutoff_5p},{params.quality_cutoff}"]
    o1, o2, report = tmp_path / "1.fastq", tmp_path / "2.fastq", tmp_path / "r.json"
    subprocess.run(
        [_cutadapt(), *args, "--json", str(report), "-o", str(o1), "-p", str(o2), *map(str, miseq)],
        check=True,
        capture_output=True,
    )
    trimmer = trim.Trimmer(params)
    ours: tuple[list[str], list[str]] = ([], [])
    stats = (trim.TrimStats(), trim.TrimStats())
    for r1, r2 in zip(_records(miseq[0]), _records(miseq[1]), strict=True):
        recs = (r1, r2)
        seqs = [r.sequences() for r in recs]
        mates = [trimmer.trim_mate(s, r.qualities()) for s, r in zip(seqs, recs, strict=True)]
        keep = trimmer.filter(mates)
        for k in range(2):
            trim.add_stats(stats[k], mates[k], keep)
            ours[k].extend(
                s[a:b]
                for s, a, b in zip(
                    np.asarray(seqs[k])[keep].tolist(),
                    mates[k].start[keep].tolist(),
                    mates[k].stop[keep].tolist(),
                    strict=True,
                )
            )
    for k, out in enumerate((o1, o2)):
        with dnaio.open(out) as reader:
            assert ours[k] == [r.sequence for r in reader]
    rep = json.loads(report.read_text())
    assert stats[0].reads_too_short == stats[1].reads_too_short == rep["read_counts"]["filtered"]["too_short"] > 0
    assert stats[0].reads_adapter_trimmed == rep["read_counts"]["read1_with_adapter"] > 0
    assert stats[1].reads_adapter_trimmed == rep["read_counts"]["read2_with_adapter"] > 0
    q = rep["basepair_counts"]
    assert (stats[0].bases_quality_trimmed, stats[1].bases_quality_trimmed) == (
        q["quality_trimmed_read1"],
        q["quality_trimmed_read2"],
    )


def test_disabled_trimming_keeps_every_read() -> None:
    trimmer = trim.Trimmer(Params(trim=False))
    t = trimmer.trim_mate(["ACGTAGATCGGAAGAGC", ""], ["!!!!!!!!!!!!!!!!!", ""])
    assert t.start.tolist() == [0, 0] and t.stop.tolist() == [17, 0]
    assert trimmer.filter([t]).tolist() == [True, True]
    assert repr(trimmer) == "Trimmer(disabled)"


def test_steps_have_precise_reprs() -> None:
    assert repr(trim.Trimmer(Params())) == (
        "Trimmer([QualityTrimmer(cutoff_front=0, cutoff_back=20, base=33), "
        "AdapterTrimmer(adapters=['AGATCGGAAGAGC', 'CTGTCTCTTATACACATCT'], max_error_rate=0.1, "
        "min_overlap=3), "
        "MinimumLengthFilter(min_length=20)])"
    )


def test_trim_file_counts(adapter_reads: Path) -> None:
    stats = trim.trim_file(str(adapter_reads))
    assert (stats.reads_adapter_trimmed, stats.bases_quality_trimmed, stats.reads_too_short) == (6, 434, 3)


def test_adapter_matching_equals_cutadapt_multiple_adapters() -> None:
    """The inlined matcher equals cutadapt's ``MultipleAdapters.match_to`` (best score, then fewest
    errors, first adapter on ties) on reads holding either adapter, mutated, partial or absent."""
    from cutadapt.adapters import BackAdapter, MultipleAdapters

    params = Params()
    ours = trim.AdapterTrimmer(params.adapters, params.adapter_max_error_rate, params.adapter_min_overlap)
    theirs = MultipleAdapters(
        [BackAdapter(a, max_errors=0.1, min_overlap=3, name=f"a{i}") for i, a in enumerate(params.adapters)]
    )
    rng = np.random.default_rng(7)
    bases = np.array(list("ACGT"))
    found = 0
    reads: list[str] = []
    cuts: list[int] = []
    for i in range(3000):
        read = list(bases[rng.integers(0, 4, int(rng.integers(0, 80)))])
        kind = i % 4
        if kind < 3:  # one adapter (or both, the second after the first), cut short at random
            for a in params.adapters[: 1 + (kind == 2)][:: -1 if i % 8 < 4 else 1]:
                ad = list(a)
                for _ in range(int(rng.integers(0, 3))):  # mismatches, insertions, deletions
                    p = int(rng.integers(0, len(ad)))
                    op = int(rng.integers(0, 3))
                    if op == 0:
                        ad[p] = str(bases[rng.integers(0, 4)])
                    elif op == 1:
                        ad.insert(p, str(bases[rng.integers(0, 4)]))
                    else:
                        del ad[p]
                read += ad[: int(rng.integers(1, len(ad) + 1))]
        seq = "".join(read)
        match = theirs.match_to(seq)
        expected = None if match is None else match.remainder_interval()[1]
        assert ours(seq) == expected, seq
        found += expected is not None
        reads.append(seq)
        cuts.append(len(seq) if expected is None else expected)
    assert found > 1500
    # the same matcher, inlined in Trimmer.trim_mate (qualities high: no quality trimming)
    t = trim.Trimmer(params).trim_mate(reads, ["I" * len(r) for r in reads])
    assert t.stop.tolist() == cuts and t.start.tolist() == [0] * len(reads)
    assert t.adapter_hits == sum(c < len(r) for c, r in zip(cuts, reads, strict=True))


def test_trimmed_sequences_are_the_kept_intervals(miseq: tuple[Path, Path]) -> None:
    trimmer = trim.Trimmer(Params())
    recs = _records(miseq[1])[0]
    seqs = recs.sequences()
    t = trimmer.trim_mate(seqs, recs.qualities())
    assert t.sequences == [s[a:b] for s, a, b in zip(seqs, t.start.tolist(), t.stop.tolist(), strict=True)]
    assert t.adapter_hits > 0 and t.bases_quality > 0
