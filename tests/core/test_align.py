"""Alignment rows match ``minimap2 -ax sr``; coverage is exact."""

from __future__ import annotations

import collections
import ctypes
import itertools
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import align_reference
import numpy as np
import pyarrow as pa
import pytest

from seqlake.child import align
from seqlake.formats import cigar as cigar_format
from seqlake.lake import coverage
from seqlake.lake.staging import AlignStats
from seqlake.plan.reference import local_index
from seqlake.plan.refindex import indexed_reference
from seqlake.reads import chunks, fastq

Key = tuple[str, int]


@pytest.fixture
def ref_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "refcache"
    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(cache))
    return cache


def _index(reference: Path) -> str:
    """The reference's minimap2 index, built once in the test's reference cache (as the planner does)."""
    return local_index(indexed_reference(str(reference)))


def _collect(pending: list[align.PendingBatch]) -> tuple[pa.Table, list[AlignStats]]:
    """Submitted calls' rows, in the order submitted, and their counts per mate summed."""
    batches = [p.result() for p in pending]
    stats = [AlignStats() for _ in batches[0].stats]
    for batch in batches:
        for total, counts in zip(stats, batch.stats, strict=True):
            total.merge(counts)
    return pa.concat_tables([b.rows for b in batches]), stats


def _align_files(r1: Path, r2: Path | None, index: str, threads: int = 1) -> tuple[pa.Table, list[AlignStats]]:
    """Every read of a file (or pair of files) through the child's aligning path: one call per chunk."""
    with align.ReadAligner(index, threads=threads) as aligner:
        pending = []
        first = 0
        chunks2 = fastq.iter_file_chunks(str(r2)) if r2 else None
        for c1 in fastq.iter_file_chunks(str(r1)):
            rec1 = chunks.parse_chunk(c1, "R1", first)
            index_range = range(first, first + len(rec1))
            if chunks2 is not None:
                rec2 = chunks.parse_chunk(next(chunks2), "R2", first)
                pending.append(aligner.submit_pairs(rec1.names(), rec1.sequences(), rec2.sequences(), index_range,
                                                    "s"))
            else:
                pending.append(aligner.submit_single(rec1.names(), rec1.sequences(), index_range, "s"))
            first += len(rec1)
        return _collect(pending)


def _rows(table: pa.Table) -> dict[str, list[Any]]:
    rows: dict[str, list[Any]] = table.select(list(align.ROW_COLUMNS)).to_pydict()
    return rows


def _align_miseq(
    miseq: tuple[Path, Path], index: str, threads: int = 1
) -> tuple[pa.Table, list[AlignStats]]:
    return _align_files(miseq[0], miseq[1], index, threads)


def _cli(minimap2: str, reference: Path, miseq: tuple[Path, Path]) -> list[list[str]]:
    sam = subprocess.run(
        [minimap2, "-ax", "sr", "-t", "1", str(reference), *map(str, miseq)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split("\t") for line in sam.splitlines() if not line.startswith("@")]


def test_alignments_equal_minimap2_cli(
    miseq: tuple[Path, Path], reference: Path, minimap2: str, ref_cache: Path
) -> None:
    out, stats = _align_miseq(miseq, _index(reference))
    cli_all: dict[Key, set[tuple[str, int, str]]] = collections.defaultdict(set)
    cli_primary: dict[Key, tuple[str, int, str]] = {}
    cli_flags: dict[Key, int] = {}
    mapped_cli = [0, 0]
    for f in _cli(minimap2, reference, miseq):
        flag = int(f[1])
        key = (f[0], 1 if flag & 0x40 else 2)
        assert not flag & 0x100, "the sr preset prints no secondary alignments"
        if not flag & 0x800:
            cli_flags[key] = flag
        if flag & 0x4:
            continue
        hit = (f[2], int(f[3]), "-" if flag & 0x10 else "+")
        cli_all[key].add(hit)
        if not flag & 0x800:
            cli_primary[key] = hit
            mapped_cli[key[1] - 1] += 1
    ours: dict[Key, set[tuple[str, int, str]]] = collections.defaultdict(set)
    our_primary: dict[Key, tuple[str, int, str]] = {}
    our_flags: dict[Key, int] = {}
    for row in zip(*_rows(out).values(), strict=True):
        r = dict(zip(align.ROW_COLUMNS, row, strict=True))
        key = (r["read_name"], r["mate"])
        if r["is_primary"]:
            our_flags[key] = r["flag"]
        if r["contig"] is None:
            continue
        hit = (r["contig"], r["pos"], r["strand"])
        ours[key].add(hit)
        if r["is_primary"]:
            our_primary[key] = hit
        # soft clips: the CIGAR spans the whole read
        assert sum(int(n) for n, op in re.findall(r"(\d+)([MIS=X])", r["cigar"])) == r["read_len"]
    reads = set(cli_flags) | set(our_flags)
    assert len(reads) == 2 * 5762
    same = sum(cli_all.get(k, set()) == ours.get(k, set()) for k in reads)
    assert same / len(reads) >= 0.999
    assert [s.mapped_reads for s in stats] == mapped_cli
    # the SAM primary and the flags (proper pair, mate strand, ...) as the command line decides them
    primary_differs = sum(cli_primary.get(k) != our_primary.get(k) for k in reads)
    flags_differ = sum(cli_flags.get(k) != our_flags.get(k) for k in reads)
    assert primary_differs <= 0.001 * len(reads)
    assert flags_differ <= 0.001 * len(reads)
    cli_proper = sum(1 for k, f in cli_flags.items() if k[1] == 1 and f & 0x2)
    assert stats[0].properly_paired == sum(1 for k, f in our_flags.items() if k[1] == 1 and f & 0x2)
    assert abs(stats[0].properly_paired - cli_proper) <= flags_differ


def test_single_end_unmapped_and_empty_reads(reference: Path, ref_cache: Path) -> None:
    aligner = align.ReadAligner(_index(reference))
    seq = "ATTAAAGGTTTATACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTG"
    table, (stats,) = _collect([aligner.submit_single(["hit", "none", "empty"], [seq, "ACGT" * 20, ""], [0, 1, 2],
                                                      "s")])
    cols = _rows(table)
    assert cols["flag"] == [0, 4, 4]
    assert cols["contig"] == ["MN908947.3", None, None]
    assert cols["pos"][0] == 1 and cols["end_pos"][0] == len(seq) and cols["cigar"][0] == f"{len(seq)}M"
    spans = [(c, s.tolist(), e.tolist()) for c, s, e in align.alignment_spans(table)]
    assert stats.mapped_reads == 1 and spans == [("MN908947.3", [0], [len(seq)])]


def test_threads_give_the_same_rows_in_the_same_order(
    miseq: tuple[Path, Path], reference: Path, ref_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    index = _index(reference)
    ran_in = tmp_path / "pids"
    pairs = align.ReadAligner._pairs

    def recorded(self: align.ReadAligner, *args: object) -> align.AlignedBatch:
        with ran_in.open("a") as log:  # the alignment processes are forked: they log to a file
            log.write(f"{os.getpid()}\n")
        return pairs(self, *args)  # type: ignore[arg-type]

    one, stats_one = _align_miseq(miseq, index)
    monkeypatch.setattr(align.ReadAligner, "_pairs", recorded)
    three, stats_three = _align_miseq(miseq, index, threads=3)
    pids = set(ran_in.read_text().split())
    assert len(pids - {str(os.getpid())}) == 2, "aligned in two forked processes (and here, parts taken back)"
    assert one.num_rows > 2 * 5762
    assert three.equals(one)
    assert stats_three == stats_one
    # single-end reads, including an empty one, cut into parts the same way, in one call or two
    c1 = next(fastq.iter_file_chunks(str(miseq[0])))
    recs = chunks.parse_chunk(c1, "R1", 0)
    seqs = [*recs.sequences()[:-1], ""]
    names = recs.names()
    half = len(recs) // 2
    outs = []
    for threads, cuts in ((1, (0, len(recs))), (4, (0, len(recs))), (1, (0, half, len(recs))),
                          (2, (0, half, len(recs)))):
        with align.ReadAligner(index, threads=threads) as aligner:
            outs.append(_collect([aligner.submit_single(names[a:b], seqs[a:b], range(a, b), "s1")
                                  for a, b in itertools.pairwise(cuts)]))
    for table, stats in outs[1:]:
        assert table.equals(outs[0][0]) and stats == outs[0][1]
    assert outs[0][1][0].mapped_reads > 0.9 * len(recs)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _malloc_in_use() -> int:
    """Bytes the C heap has handed out and not had back (glibc ``mallinfo2``: every arena, mmapped blocks)."""
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("not glibc >= 2.33: no mallinfo2 to count the C heap")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def test_aligning_pairs_keeps_no_memory_per_pair(reference: Path, ref_cache: Path) -> None:
    """mappy's paired-end map leaked its copy of mate 2 (~240 bytes a 2x220 bp pair: a worker's memory grew
    with its shard); the build scripts/install_mappy.py installs frees it. The C heap after aligning 20,000
    pairs is what it was after the first 1,000 (give or take a few bytes a pair for Python's own lists)."""
    aligner = align.ReadAligner(_index(reference))
    genome = "".join(line.strip() for line in reference.read_text().splitlines()[1:])
    rng = np.random.default_rng(5)
    comp = str.maketrans("ACGT", "TGCA")
    starts = rng.integers(0, len(genome) - 500, 1000).tolist()
    mate1 = [genome[s : s + 150] for s in starts]
    mate2 = [genome[s + 300 : s + 450].translate(comp)[::-1] for s in starts]
    names = [f"r{i}" for i in range(len(starts))]

    def align_all() -> int:
        return aligner.submit_pairs(names, mate1, mate2, range(len(names)), "s").result().stats[0].properly_paired

    assert align_all() > 990, "the pairs map as proper pairs: every step of the paired path runs"
    before = _malloc_in_use()
    for _ in range(20):
        align_all()
    grown = _malloc_in_use() - before
    assert grown < 20_000 * 16, f"the C heap grew by {grown} bytes over 20,000 pairs"


def _reference_rows(r1: Path, r2: Path | None, index: str, edit: Any = None) -> tuple[
        tuple[pa.Table, list[AlignStats]], tuple[pa.Table, list[AlignStats]]]:
    """Every read of a file (or pair) through the child's aligner and through the per-hit Python reference
    (tests/core/align_reference.py), one call per chunk; ``edit`` may change a chunk's reads first."""
    import mappy

    reference = mappy.Aligner(index, preset="sr", n_threads=1)
    ours, theirs = [], []
    with align.ReadAligner(index) as aligner:
        first = 0
        chunks2 = fastq.iter_file_chunks(str(r2)) if r2 else None
        for c1 in fastq.iter_file_chunks(str(r1)):
            rec1 = chunks.parse_chunk(c1, "R1", first)
            names, idx = rec1.names(), list(range(first, first + len(rec1)))
            if chunks2 is not None:
                seqs = [rec1.sequences(), chunks.parse_chunk(next(chunks2), "R2", first).sequences()]
                if edit is not None:
                    edit(seqs)
                ours.append(aligner.submit_pairs(names, seqs[0], seqs[1], idx, "s").result())
                theirs.append(align_reference.map_pairs(reference, names, seqs[0], seqs[1], idx, "s"))
            else:
                seqs = [rec1.sequences()]
                if edit is not None:
                    edit(seqs)
                ours.append(aligner.submit_single(names, seqs[0], idx, "s").result())
                theirs.append(align_reference.map_single(reference, names, seqs[0], idx, "s"))
            first += len(rec1)

    def summed(batches: list[tuple[pa.Table, Any]]) -> tuple[pa.Table, list[AlignStats]]:
        stats = [AlignStats() for _ in batches[0][1]]
        for _, counts in batches:
            for total, c in zip(stats, counts, strict=True):
                total.merge(c)
        return pa.concat_tables([t for t, _ in batches]), stats

    for b in ours:  # the packed CIGARs the child encodes its BAM records from are the text column's
        row, op, length = cigar_format.parse([c or "" for c in b.rows.column("cigar").to_pylist()])
        np.testing.assert_array_equal(b.cigar[0], np.bincount(row, minlength=b.rows.num_rows))
        np.testing.assert_array_equal(b.cigar[1], (length << 4 | op).astype(np.uint32))
    return summed([(b.rows, b.stats) for b in ours]), summed(theirs)


def _cut_some_mates(seqs: list[list[str]]) -> None:
    """Empty mate 1 of every 7th pair, mate 2 of every 11th, both of every 13th; reverse every 5th mate 2
    (pairs the wrong way round: no proper pair); random bases for every 17th mate 1 (unmapped)."""
    rng = np.random.default_rng(17)
    for i in range(len(seqs[0])):
        if i % 5 == 0 and len(seqs) == 2:
            seqs[1][i] = seqs[1][i][::-1]
        if i % 7 == 0:
            seqs[0][i] = ""
        if i % 11 == 0 and len(seqs) == 2:
            seqs[1][i] = ""
        if i % 13 == 0:
            seqs[0][i] = ""
            if len(seqs) == 2:
                seqs[1][i] = ""
        if i % 17 == 0:
            seqs[0][i] = "".join(rng.choice(list("ACGT"), 150))


@pytest.mark.parametrize("case", ["miseq-pairs", "miseq-single", "miseq-cut", "repeats-pairs", "repeats-single"])
def test_batch_mapping_writes_the_rows_of_the_per_hit_reference(
    case: str, request: pytest.FixtureRequest, reference: Path, ref_cache: Path, tmp_path: Path
) -> None:
    """``mappy.seqlake_map_batch`` (C, compiled into mappy by scripts/install_mappy.py) writes the rows and
    counts the per-hit Python reference writes from mappy's own ``map``: the MiSeq pair (164 supplementary
    rows), its mate 1 alone, the pair with empty, reversed and random mates, and reads in a repeat with
    chimeric mates (several primaries per mate: the pairing step's choice of SAM primary)."""
    if case.startswith("miseq"):
        r1, r2 = request.getfixturevalue("miseq")
        index = _index(reference)
    else:
        ref, r1, r2 = _repeat_genome_and_reads(tmp_path)
        index = _index(ref)
    (ours, our_stats), (theirs, their_stats) = _reference_rows(
        r1, None if case.endswith("single") else r2, index, _cut_some_mates if case.endswith("cut") else None)
    assert ours.num_rows >= 1_500 and ours.num_rows == theirs.num_rows
    for name in ours.column_names:  # column by column: a difference names its column
        assert ours.column(name).equals(theirs.column(name)), name
    assert ours.equals(theirs)
    assert our_stats == their_stats
    flags = ours.column("flag").to_numpy()
    if case == "miseq-pairs":
        assert ((flags & 0x800) != 0).sum() > 150
    if case == "miseq-cut":
        assert ((flags & 0x4) != 0).sum() > 1_000 and ((flags & 0x8) != 0).sum() > 1_000
    if case == "repeats-pairs":
        assert ((flags & 0x802) == 0x802).sum() == 0 and ((flags & 0x800) != 0).sum() >= 75


# -- coverage ---------------------------------------------------------------------------------------


def _brute_depth(length: int, spans: np.ndarray) -> np.ndarray:
    depth = np.zeros(length, dtype=np.int64)
    for s, e in spans:  # test oracle: a per-base loop over a small contig
        depth[s:e] += 1
    return depth


def test_coverage_bins_are_exact_and_additive_across_shards() -> None:
    rng = np.random.default_rng(3)
    length, width = 10_007, 100
    starts = rng.integers(0, length - 1, 400)
    spans = np.stack([starts, np.minimum(starts + rng.integers(1, 300, 400), length)], axis=1)
    depth = _brute_depth(length, spans)
    whole = coverage.CoverageAccumulator([("c", length)], width)
    whole.add_spans(("c", int(s), int(e)) for s, e in spans)
    edges = coverage.bin_edges(length, width)
    expect_sum = np.add.reduceat(depth, edges[:-1])
    expect_cov = np.add.reduceat((depth > 0).astype(np.int64), edges[:-1])
    cols = whole.rows("s")
    assert cols["depth_sum"] == expect_sum.tolist()
    assert cols["covered_bases"] == expect_cov.tolist()
    assert cols["bin_end"][-1] == length
    # three shards merged as the commit step does: depth adds up, covered intervals are unioned
    merged = coverage.CoverageAccumulator([("c", length)], width)
    for part in np.array_split(spans, 3):
        shard = coverage.CoverageAccumulator([("c", length)], width)
        shard.add_spans(("c", int(s), int(e)) for s, e in part)
        cc = merged.contigs["c"]
        cc.depth_sum += shard.contigs["c"].depth_sum
        cc.add_union(shard.contigs["c"].union_start, shard.contigs["c"].union_end)
    assert merged.rows("s") == cols
    mean, breadth = merged.mean_depth_and_breadth()
    assert mean == pytest.approx(depth.sum() / length)
    assert breadth == pytest.approx(np.count_nonzero(depth) / length)


def test_files_count_mapped_reads(miseq: tuple[Path, Path], reference: Path, ref_cache: Path) -> None:
    index = _index(reference)
    paired = _align_files(miseq[0], miseq[1], index)[1]
    single = _align_files(miseq[0], None, index)[1]
    assert [s.mapped_reads for s in paired] == [5745, 5673]  # = minimap2 -ax sr (test above)
    assert single[0].mapped_reads > 0.99 * 5762 and len(single) == 1


def _repeat_genome_and_reads(tmp_path: Path, pairs: int = 1_500) -> tuple[Path, Path, Path]:
    """A 29 kb contig holding the same 3 kb segment three times, and pairs drawn from the copies: a read
    there has equally good places, which minimap2 chooses between by a hash of the read's name. One pair in
    five has a short insert (30-50 bp) that both mates read through into other bases, and one mate's last
    bases are genome from elsewhere (a chimera): minimap2 splits that mate into two hits, and its pairing
    step decides which of the two is the SAM primary."""
    rng = np.random.default_rng(7)
    bases = np.array(list("ACGT"))
    unique = ["".join(rng.choice(bases, 5_000)) for _ in range(4)]
    copy = "".join(rng.choice(bases, 3_000))
    genome = unique[0] + copy + unique[1] + copy + unique[2] + copy + unique[3]
    reference = tmp_path / "repeats.fa"
    reference.write_text(">rep\n" + "\n".join(genome[i:i + 60] for i in range(0, len(genome), 60)) + "\n")
    comp = str.maketrans("ACGT", "TGCA")
    starts = [5_000, 13_000, 21_000]
    with (tmp_path / "r1.fq").open("w") as f1, (tmp_path / "r2.fq").open("w") as f2:
        for i in range(pairs):
            at = starts[i % 3] + int(rng.integers(0, 3_000 - 300))
            frag = genome[at:at + 300]
            mates = [frag[:100], frag[-100:].translate(comp)[::-1]]
            if i % 5 == 1:  # a short insert: both mates read through it, then 15 random bases and a genome tail
                insert, tail = int(rng.integers(30, 51)), int(rng.integers(200, 4_000))
                frag = genome[at:at + insert]
                junk = ["".join(rng.choice(bases, 15)) for _ in range(2)]
                mates = [frag + junk[0], frag.translate(comp)[::-1] + junk[1]]
                mates[i % 2] += genome[tail:tail + 100 - insert - 15]
                mates[1 - i % 2] += "".join(rng.choice(bases, 100 - insert - 15))
            f1.write(f"@rep{i}:{at} 1:N:0:1\n{mates[0]}\n+\n{'I' * 100}\n")
            f2.write(f"@rep{i}:{at} 2:N:0:1\n{mates[1]}\n+\n{'I' * 100}\n")
    return reference, tmp_path / "r1.fq", tmp_path / "r2.fq"


@pytest.mark.parametrize("paired", [True, False], ids=["pairs", "single-end"])
def test_reads_in_repeats_land_where_the_command_line_puts_them(tmp_path: Path, minimap2: str, ref_cache: Path,
                                                                 paired: bool) -> None:
    """minimap2 seeds its choice among equal placements with a hash of the read's name: the child passes the
    name, so a read in a repeat lands on the copy ``minimap2 -ax sr`` chooses (mappy without the name chooses
    by its own seed, and many of these reads land on another copy). A chimeric mate's rows are the command
    line's too: the SAM primary its pairing step chooses (not mappy's first hit), the other hit supplementary,
    and the proper-pair flag 0x2 on the two paired rows only (``proper_frag``), never on a supplementary row."""
    reference, r1, r2 = _repeat_genome_and_reads(tmp_path)
    mates = (r1, r2) if paired else (r1,)
    out, _ = _align_files(r1, r2 if paired else None, _index(reference))
    cli: dict[Key, tuple[int, str]] = {}
    cli_rows: dict[Key, list[tuple[int, int, int]]] = collections.defaultdict(list)
    for f in _cli(minimap2, reference, mates):  # type: ignore[arg-type]
        flag = int(f[1])
        key = (f[0], 2 if flag & 0x80 else 1)
        if not flag & 0x904:
            cli[key] = (int(f[3]), "-" if flag & 0x10 else "+")
        if not flag & 0x4:
            cli_rows[key].append((int(f[3]), flag, int(f[4])))
    ours: dict[Key, tuple[int, str]] = {}
    our_rows: dict[Key, list[tuple[int, int, int]]] = collections.defaultdict(list)
    for row in zip(*_rows(out).values(), strict=True):
        r = dict(zip(align.ROW_COLUMNS, row, strict=True))
        if r["contig"] is None:
            continue
        key = (r["read_name"], r["mate"])
        if r["is_primary"]:
            ours[key] = (r["pos"], r["strand"])
        our_rows[key].append((r["pos"], r["flag"], r["mapq"]))
    assert len(cli) >= 1_400 * len(mates), "the command line places nearly every mate"
    split = [k for k, rows in cli_rows.items() if len(rows) > 1]
    assert len(split) >= 75 * len(mates), "the chimeric mates have a supplementary row"
    if paired:  # some chimeric mates' SAM primary is the paired part, not their best-scoring hit
        assert sum(any(f & 0x2 for _, f, _ in cli_rows[k]) for k in split) >= 50
    assert ours == cli
    assert {k: sorted(v) for k, v in our_rows.items()} == {k: sorted(v) for k, v in cli_rows.items()}
