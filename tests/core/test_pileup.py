"""The child's allele counts (seqlake.lake.pileup) against a slow, obvious reference: each row's CIGAR
walked base by base in Python, htslib's overlapping-mates rule applied pair by pair, on random batches
(both strands, soft clips, insertions, deletions, skips, IUPAC and lower-case bases, qualities around the
threshold, overlapping and wild pairs, skipped flags, two contigs far apart)."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest

from seqlake.lake import pileup
from seqlake.lake.pileup import (
    COUNT_COLUMNS,
    SKIP_FLAGS,
    AlignmentRows,
    AlleleAccumulator,
    BatchReads,
    x31_wang_parity,
)

MIN_QUALITY = 20
CONTIGS = [("chrA", 400), ("chrB", 10_000_000)]
ENTRIES = ("a", "c", "g", "t", "n", "del")
COMPLEMENT = bytes.maketrans(b"ACGTNacgtn", b"TGCANtgcan")
NT16 = {ch: k for k, ch in enumerate("=ACMGRSVTWYHKDBN")}


def _code(byte: int) -> int:
    return "acgt".find(chr(byte).lower()) if chr(byte).lower() in "acgt" else 4


def _nt16(byte: int) -> int:
    return NT16.get(chr(byte).upper(), 15)


def _cigar_ops(cigar: str) -> list[tuple[int, str]]:
    ops, num = [], ""
    for ch in cigar:
        if ch.isdigit():
            num += ch
        else:
            ops.append((int(num), ch))
            num = ""
    return ops


class _Row:
    """One alignment row walked: SEQ (a reverse row's read reverse-complemented), its qualities, and its
    entries in reference order."""

    def __init__(self, rows: AlignmentRows, reads: BatchReads, i: int, offsets: list[int]) -> None:
        data = reads.data.tobytes()
        s, q, n = int(reads.seq_start[i]), int(reads.qual_start[i]), int(reads.length[i])
        self.rev = bool(rows.flag[i] & 0x10)
        self.seq = data[s : s + n].translate(COMPLEMENT)[::-1] if self.rev else data[s : s + n]
        self.qual = [b - 33 for b in (data[q : q + n][::-1] if self.rev else data[q : q + n])]
        self.key0 = offsets[rows.contig[i]] + int(rows.start[i])
        self.start, self.ops = int(rows.start[i]), _cigar_ops(rows.cigar[i])
        self.aligned: dict[int, int] = {}  # reference position -> query position
        #: (reference position, query position of the next read base, reference position of the next aligned
        #: base when it follows the deletion directly, else -1)
        self.dels: list[tuple[int, int, int]] = []
        self.indels: list[tuple[int, int, bytes]] = []
        p, qpos = self.start, 0
        for k, (length, op) in enumerate(self.ops):
            if op in "M=X":
                self.aligned.update({p + j: qpos + j for j in range(length)})
                p, qpos = p + length, qpos + length
            elif op == "I":
                if p > self.start:
                    self.indels.append((p - 1, 0, self.seq[qpos : qpos + length]))
                qpos += length
            elif op == "D":
                after = p + length if k + 1 < len(self.ops) and self.ops[k + 1][1] in "M=X" else -1
                self.dels += [(p + j, qpos, after) for j in range(length)]
                if p > self.start:
                    self.indels.append((p - 1, length, b""))
                p += length
            elif op == "N":
                p += length
            elif op == "S":
                qpos += length
        self.end = p


Counts = dict[tuple[int, int], list[int]]
Indels = dict[tuple[int, int, int, str], list[int]]


def overlap_qualities(rows: AlignmentRows, reads: BatchReads, walked: dict[int, _Row]) -> dict[tuple[int, int], int]:
    """(row, reference position) -> the base's quality after the overlapping-mates rule, where it applies."""
    olap_q: dict[tuple[int, int], int] = {}
    pairable = [i for i in walked if not rows.flag[i] & (0x800 | 0x8) and rows.flag[i] & 0x2 and rows.pair[i] >= 0
                and rows.mate_contig[i] == rows.contig[i]
                and not (abs(rows.tlen[i]) >= 2 * reads.length[i] and rows.mate_start[i] >= walked[i].end)]
    # htslib's hash of read names, walked in coordinate order: a row waits there if its mate starts at or after
    # it, and the next row of its name is its mate
    pairable.sort(key=lambda i: (rows.start[i], rows.flag[i] & 0x10, i))
    waiting: dict[int, int] = {}
    mates = []
    for i in pairable:
        if rows.pair[i] in waiting:
            mates.append((waiting.pop(rows.pair[i]), i))
        elif rows.mate_start[i] >= rows.start[i]:
            waiting[rows.pair[i]] = i
    for a, b in mates:
        ra, rb = walked[a], walked[b]
        keeps = bool(x31_wang_parity([rows.names[a].as_py()])[0])
        for p in range(max(ra.start, rb.start), min(ra.end, rb.end)):
            if p not in ra.aligned or p not in rb.aligned:
                continue
            qa, qb = ra.qual[ra.aligned[p]], rb.qual[rb.aligned[p]]
            if _nt16(ra.seq[ra.aligned[p]]) == _nt16(rb.seq[rb.aligned[p]]):
                new_a, new_b = (min(qa + qb, 200), 0) if keeps else (0, min(qa + qb, 200))
            elif qa > qb or (qa == qb and keeps):
                new_a, new_b = int(0.8 * qa), 0
            else:
                new_a, new_b = 0, int(0.8 * qb)
            olap_q[(a, p)], olap_q[(b, p)] = new_a, new_b
    return olap_q


def reference_counts(rows: AlignmentRows, reads: BatchReads) -> tuple[Counts, Indels]:
    """(contig, pos) -> the count columns, and (contig, pos, deleted, inserted) -> [fwd, rev]."""
    offsets = [0, CONTIGS[0][1]]
    counted = [i for i in range(len(rows.flag)) if rows.contig[i] >= 0 and not rows.flag[i] & SKIP_FLAGS]
    walked = {i: _Row(rows, reads, i, offsets) for i in counted}
    olap_q = overlap_qualities(rows, reads, walked)
    counts: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0] * len(COUNT_COLUMNS))
    col = {c: k for k, c in enumerate(COUNT_COLUMNS)}
    indels: dict[tuple[int, int, int, str], list[int]] = defaultdict(lambda: [0, 0])

    def where(r: _Row, p: int) -> tuple[int, int]:
        key = r.key0 - r.start + p
        contig = 0 if key < offsets[1] else 1
        return contig, key - offsets[contig]

    def add(at: tuple[int, int], entry: str, r: _Row, q: int, q_after: int) -> None:
        c = counts[at]
        c[col[f"{entry}_all"]] += 1
        if q >= MIN_QUALITY:
            c[col[f"{entry}_{'rev' if r.rev else 'fwd'}"]] += 1
            if entry != "del":
                c[col[f"{entry}_qual"]] += q
        c[col[f"{entry}_olap"]] += q_after >= MIN_QUALITY

    for i, r in walked.items():
        counts[where(r, r.start)][col["read_starts"]] += 1
        for p, qpos in r.aligned.items():
            add(where(r, p), ENTRIES[_code(r.seq[qpos])], r, r.qual[qpos], olap_q.get((i, p), r.qual[qpos]))
        for p, qpos, next_aligned in r.dels:  # the quality of the read base after the deletion
            q = r.qual[qpos]
            add(where(r, p), "del", r, q, olap_q.get((i, next_aligned), q))
        if r.aligned:
            last = max(r.aligned)
            counts[where(r, last)][col["read_ends"]] += 1
            after = olap_q.get((i, last), r.qual[r.aligned[last]])
            counts[where(r, last)][col["read_ends_olap"]] += after >= MIN_QUALITY
        for p, deleted, inserted in r.indels:
            indels[(*where(r, p), deleted, inserted.decode("latin-1").upper())][int(r.rev)] += 1
    return dict(counts), dict(indels)


def random_cigar(rng: random.Random, n: int) -> str:
    """A CIGAR of ``n`` query bases: a soft clip or none, aligned runs (M, =, X) with D, I and N between."""
    ops, left = [], n
    clip = rng.choice([0, 0, 3])
    if clip:
        ops.append(f"{clip}S")
        left -= clip
    first = True
    while left > 0:
        if not first and rng.random() < 0.3:
            ops.append(f"{rng.randint(1, 4)}{rng.choice('DDIN')}")
            if ops[-1].endswith("I"):
                size = min(int(ops[-1][:-1]), left - 1)
                if size <= 0:
                    ops.pop()
                    continue
                ops[-1] = f"{size}I"
                left -= size
                continue
        m = min(left, rng.randint(3, 30))
        ops.append(f"{m}{rng.choice('MMM=X')}")
        left -= m
        first = False
    return "".join(ops)


def random_batch(rng: random.Random, pairs: int,
                 read_length: int | None = None) -> tuple[AlignmentRows, BatchReads]:
    """Pairs of reads (and a few single-end rows, secondary, supplementary, unmapped and duplicate rows)
    with random CIGARs on two contigs; reads of random lengths, or all of ``read_length`` (then every read's
    qualities are as far from its bases, which the counting reads with one index)."""
    buf = bytearray()
    seq_start, qual_start, length = [], [], []
    contig, start, flag, cigar, pair, mate_start, mate_contig, tlen, names = ([] for _ in range(9))

    def read(n: int) -> int:
        seq = bytes(rng.choice(b"ACGTACGTACGTNacgtRY") for _ in range(n))
        qual = bytes(33 + rng.choice([2, 10, 19, 20, 21, 30, 38, 40]) for _ in range(n))
        seq_start.append(len(buf))
        qual_start.append(len(buf) + n + 3)
        length.append(n)
        buf.extend(seq + b"\n+\n" + qual + b"\n")
        return len(length) - 1

    for k in range(pairs):
        c = rng.choice([0, 0, 1])
        base = rng.randint(0, 300) + (9_000_000 if c == 1 and rng.random() < 0.5 else 0)
        n1, n2 = (read_length, read_length) if read_length else (rng.randint(20, 60), rng.randint(20, 60))
        s1, s2 = base, base + rng.randint(0, 40)
        read(n1)
        read(n2)
        fl = [0x1 | 0x2 | 0x40 | (0x20 if rng.random() < 0.8 else 0), 0x1 | 0x2 | 0x80 | 0x10]
        if rng.random() < 0.5:
            fl = [fl[0] ^ 0x10 ^ 0x20, fl[1] ^ 0x10]
        if rng.random() < 0.1:
            fl = [f & ~0x2 for f in fl]
        if rng.random() < 0.05:
            fl[1] |= rng.choice([0x100, 0x200, 0x400, 0x4, 0x800])
        wild = 1000 if rng.random() < 0.05 else 0
        for j in (0, 1):
            contig.append(c if not fl[j] & 0x4 else -1)
            start.append((s1, s2)[j])
            flag.append(fl[j])
            cigar.append(random_cigar(rng, (n1, n2)[j]) if not fl[j] & 0x4 else "")
            pair.append(k)
            mate_start.append((s2, s1)[j] + (wild if j == 0 else 0))
            mate_contig.append(c)
            tlen.append(wild + s2 - s1 + 60 if j == 0 else -(s2 - s1 + 60))
            names.append(f"read{k}:{rng.randint(0, 10**6)}")
        if rng.random() < 0.1:  # a single-end row of its own read
            r = read(read_length or rng.randint(10, 50))
            contig.append(c)
            start.append(rng.randint(0, 300))
            flag.append(rng.choice([0, 0x10]))
            cigar.append(random_cigar(rng, length[r]))
            pair.append(-1)
            mate_start.append(-1)
            mate_contig.append(-1)
            tlen.append(0)
            names.append(f"single{k}")
    def ints(xs: list[int]) -> npt.NDArray[np.int64]:
        return np.array(xs, dtype=np.int64)

    rows = AlignmentRows(contig=ints(contig), start=ints(start), flag=ints(flag), cigar=cigar, pair=ints(pair),
                         mate_start=ints(mate_start), mate_contig=ints(mate_contig), tlen=ints(tlen),
                         names=pa.array(names))
    reads = BatchReads(np.frombuffer(bytes(buf), dtype=np.uint8), ints(seq_start), ints(qual_start), ints(length))
    return rows, reads


def counted(batches: list[tuple[AlignmentRows, BatchReads]]) -> tuple[Counts, Indels]:
    acc = AlleleAccumulator(CONTIGS, MIN_QUALITY)
    for rows, reads in batches:
        acc.add(rows, reads)
    alleles, indels = acc.tables("s")
    names = [n for n, _ in CONTIGS]
    got = {(names.index(r["contig"]), r["pos"]): [r[c] for c in COUNT_COLUMNS] for r in alleles.to_pylist()}
    got_indels = {(names.index(r["contig"]), r["pos"], r["deleted"], r["inserted"]): [r["fwd"], r["rev"]]
                  for r in indels.to_pylist()}
    return got, got_indels


def summed(batches: list[tuple[AlignmentRows, BatchReads]]) -> tuple[Counts, Indels]:
    total: Counts = {}
    total_indels: Indels = {}
    for rows, reads in batches:
        counts, indels = reference_counts(rows, reads)
        for at, v in counts.items():
            total[at] = [a + b for a, b in zip(total.get(at, [0] * len(v)), v, strict=True)]
        for ident, v in indels.items():
            total_indels[ident] = [a + b for a, b in zip(total_indels.get(ident, [0, 0]), v, strict=True)]
    return total, total_indels


@pytest.mark.parametrize(("seed", "read_length"), [(0, None), (1, None), (2, 45)])
def test_counts_equal_the_reference_walk(seed: int, read_length: int | None) -> None:
    rng = random.Random(seed)
    batches = [random_batch(rng, rng.randint(1, 80), read_length) for _ in range(2)]
    assert counted(batches) == summed(batches)


def copied_under_one_name(batch: tuple[AlignmentRows, BatchReads], rng: random.Random) -> tuple[
        AlignmentRows, BatchReads]:
    """The batch with some of its pairs' rows repeated under their own name (reads copied, as a library
    replicated by concatenating its FASTQ would give): a name then has four or six rows."""
    rows, reads = batch
    copied = [p for p in sorted(set(rows.pair.tolist()) - {-1}) if rng.random() < 0.5]
    extra = np.concatenate([np.flatnonzero(rows.pair == p) for p in copied for _ in range(rng.choice([1, 2]))])
    keep = np.concatenate([np.arange(len(rows.flag)), extra])

    def take(a: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return a[keep]

    return (AlignmentRows(contig=take(rows.contig), start=take(rows.start), flag=take(rows.flag),
                          cigar=[rows.cigar[i] for i in keep.tolist()], pair=take(rows.pair),
                          mate_start=take(rows.mate_start), mate_contig=take(rows.mate_contig), tlen=take(rows.tlen),
                          names=rows.names.take(pa.array(keep))),
            BatchReads(reads.data, take(reads.seq_start), take(reads.qual_start), take(reads.length)))


@pytest.mark.parametrize("seed", [3, 4])
def test_rows_copied_under_one_name_pair_as_htslib_pairs_them(seed: int) -> None:
    """A name on more than two rows: htslib's hash of names pairs them two by two in coordinate order (the
    reducers count from records, which know their name, not their pair); never a chain of overlaps."""
    rng = random.Random(seed)
    batches = [copied_under_one_name(random_batch(rng, 60), rng) for _ in range(2)]
    assert max(np.unique(batches[0][0].pair, return_counts=True)[1]) >= 4
    assert counted(batches) == summed(batches)


def test_two_histograms_count_what_one_packed_histogram_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch with too many rows for the packed count + quality sum takes the two-histogram path."""
    batches = [random_batch(random.Random(99), 60)]
    packed = counted(batches)
    monkeypatch.setattr(pileup, "_PACKED_ROWS", 0)
    assert counted(batches) == packed == summed(batches)


def test_blocks_of_a_few_bases_count_what_whole_batches_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-base work runs block by block (of whole aligned operations): blocks far smaller than a read."""
    batches = [random_batch(random.Random(5), 60), random_batch(random.Random(6), 40, read_length=45)]
    whole = counted(batches)
    blocks = pileup._blocks
    monkeypatch.setattr(pileup, "_blocks", lambda lens, block=None: blocks(lens, 7))
    assert counted(batches) == whole == summed(batches)


@pytest.mark.parametrize("dense_bases", [0, 1 << 40])
def test_dense_and_sparse_batches_count_alike(monkeypatch: pytest.MonkeyPatch, dense_bases: int) -> None:
    """A batch is counted by its state histogram (dense) or entry by entry into its rows (sparse), whichever its
    bases per position choose: every batch counted each way gives the reference walk's counts, packed or not."""
    batches = [random_batch(random.Random(seed), 50, length) for seed, length in ((11, None), (12, 45))]
    monkeypatch.setattr(pileup, "_DENSE_BASES", dense_bases)
    assert counted(batches) == summed(batches)
    monkeypatch.setattr(pileup, "_PACKED_ROWS", 0)
    assert counted(batches) == summed(batches)
