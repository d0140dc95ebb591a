"""A child's reads cut by window (seqlake.lake.slices): each window's placed records are the records whose
POS lies in it in ``samtools sort`` order (ties in the child's output order), whatever the sort budget
(runs spilled and merged); carried records are the earlier windows' records reaching into it; unplaced
records come last; the object's index is where the layout says."""

from __future__ import annotations

import io
import random
from pathlib import Path

import numpy as np
import pytest

from seqlake.formats import bam, sam
from seqlake.lake import slices
from seqlake.lake.regions import regions
from seqlake.lake.slices import SliceLayout, SliceSorter, parse_entries, read_runs

CONTIGS = [("chrA", 5_000), ("chrB", 300), ("chrC", 200), ("chrD", 12_000)]
WINDOW = 1_000


def _sam(rng: random.Random, n: int) -> list[str]:
    lines = []
    for k in range(n):
        c = rng.randrange(len(CONTIGS))
        name, length = CONTIGS[c]
        pos = rng.randrange(1, length - 50)
        span = rng.choice([50, 80, 3_000]) if name != "chrC" else 50
        span = min(span, length - pos + 1)
        flag = rng.choice([0, 16, 0, 16, 4, 2048])
        if flag == 4 and rng.random() < 0.5:
            lines.append(f"u{k}\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII")
            continue
        cigar = f"{span}M" if flag != 4 else "*"
        seq = "A" * (span if flag != 4 else 4)
        lines.append(f"r{k}\t{flag}\t{name}\t{pos}\t60\t{cigar}\t*\t0\t0\t{seq}\t{'I' * len(seq)}")
    return lines


@pytest.mark.parametrize(("budget", "piece"), [(1 << 30, 16 << 20), (3_000, 16 << 20), (1 << 30, 700)],
                         ids=["one-run", "spilled", "in-pieces"])
def test_windows_hold_sorted_placed_and_carried_records(tmp_path: Path, budget: int, piece: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the budget (one run, or runs merged at the write) and the pieces a spill compresses its
    records in (a window's records in several pieces of blocks: the same records, the same order)."""
    monkeypatch.setattr(slices, "SPILL_PIECE_BYTES", piece)
    rng = random.Random(3)
    tids = {c: k for k, (c, _) in enumerate(CONTIGS)}
    rs = regions(CONTIGS, 4_000)
    layout = SliceLayout(tuple(rs), WINDOW, 2)
    sorter = SliceSorter(CONTIGS, layout, ["s0", "s1"], tmp_path, budget=budget)
    batches = {s: [sam.records(_sam(rng, 60), tids) for _ in range(4)] for s in ("s0", "s1")}
    for k in range(4):
        for s in ("s0", "s1"):
            sorter.add(s, batches[s][k])
    if budget < 1 << 20:
        assert len(sorter.runs) > 1
    out = io.BytesIO()
    written = sorter.write(out, "run", 7)
    data = out.getvalue()
    assert data[:8] == b"SQLKREAD" and not list(tmp_path.glob("reads-run-*"))
    lo, hi = layout.index_span(0, layout.count)
    assert parse_entries(data[lo:hi], 2) == written
    from seqlake.lake.positions import WindowAxis, all_windows
    cut_at = all_windows(layout.regions, WINDOW)[0]
    axis = WindowAxis(CONTIGS, cut_at)
    for s, name in enumerate(("s0", "s1")):
        allrec = list(batches[name])
        data_all, _ = zip(*(bam.encode(b) for b in allrec), strict=True)
        every = bam.decode(b"".join(data_all))
        order = bam.coordinate_order(every)
        every = every.take(order)
        placed = every.tid >= 0
        win = np.full(len(every), layout.count - 1)
        win[placed] = axis.region[axis.window(every.tid[placed], every.pos[placed])]
        mapped = placed & ((every.flag & 4) == 0)
        last = win.copy()
        last[mapped] = axis.region[axis.window(every.tid[mapped], every.end()[mapped] - 1)]
        names = every.names.rows()
        seen_carried = 0
        for w in range(layout.count):
            e = written[w][s]
            p, c = read_runs(data, 0, e)
            got = bam.decode(p).names.rows() if p else []
            assert got == [names[i] for i in np.flatnonzero(win == w)], (w, s)
            carried = bam.decode(c).names.rows() if c else []
            assert sorted(carried) == sorted(names[i] for i in np.flatnonzero((win < w) & (last >= w)))
            seen_carried += len(carried)
        assert seen_carried > 0


def test_pieces_cut_records_into_ranges_of_at_most_the_limit() -> None:
    sizes = np.array([5, 5, 5, 30, 5, 5, 1], dtype=np.int64)
    assert slices._pieces(sizes, 0, 7, 10) == [(0, 2), (2, 3), (3, 4), (4, 6), (6, 7)]
    assert slices._pieces(sizes, 2, 5, 100) == [(2, 5)]
    assert slices._pieces(sizes, 3, 3, 10) == []
