"""Issue 35: the reducer counts alleles and indels from the children's sorted records (reduce/record_counts),
a window at a time. Window by window (reads crossing a window's edge as carried copies, a pair's records in
two children, windows of several contigs), the rows it keeps add up, sample by sample, to the counts of all
the sample's records counted in one go, as one child holding every read counted them before the switch
(and the records count as the rows they were made of: tests/core/test_bam_rows.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.demo_data.simulate import write_pairs
from seqlake.formats import bam
from seqlake.lake.bamrows import counting_inputs
from seqlake.lake.pileup import AlleleAccumulator
from seqlake.lake.regions import load_reduce_plan, plan_reduce, windows
from seqlake.lake.slices import SliceLayout, child_samples, read_region_entries, read_runs
from seqlake.lake.tables import ALLELES, INDELS
from seqlake.plan.planner import make_plan
from seqlake.plan.refindex import indexed_reference
from seqlake.reduce import record_counts
from seqlake.reduce.record_counts import sample_records, window_allele_tables, window_reads


def _rows(table: pa.Table) -> list[dict[str, object]]:
    """A table's rows with the contig as text (the reducer codes it per window) and without the sample."""
    t = table.drop_columns(["sample"])
    return t.set_column(t.schema.get_field_index("contig"), "contig", t.column("contig").cast(pa.string())).to_pylist()


def _reference(tmp_path: Path, contigs: int) -> Path:
    if contigs == 1:
        from seqlake.demo_data import paths as demo_paths

        return demo_paths()[2]
    rng = np.random.default_rng(3)  # three contigs, one shorter than a window: windows of several contigs
    lengths = {"chrA": 12_000, "chrB": 2_500, "chrC": 1_200}
    reference = tmp_path / "ref.fa"
    reference.write_text("".join(f">{name}\n{''.join(rng.choice(list('ACGT'), n))}\n" for name, n in lengths.items()))
    return reference


@pytest.mark.parametrize("contigs", [1, 3])
def test_window_counts_from_records_add_up_to_one_count_of_every_record(tmp_path: Path, contigs: int,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from seqlake.child import worker

    monkeypatch.setattr(worker, "window_size", lambda _bin_width: 4_000)  # many reads cross a window's edge
    monkeypatch.setattr(record_counts, "RECORDS_PER_BATCH", 700)  # a window's records counted in several batches
    reference = _reference(tmp_path, contigs)
    samples = []
    for i in range(2):
        r1, r2 = tmp_path / f"s{i}_R1.fastq.gz", tmp_path / f"s{i}_R2.fastq.gz"
        write_pairs(reference, r1, r2, 3_000, seed=20 + i)
        samples.append(Sample(f"s{i}", str(r1), str(r2)))
    params = Params(reads_per_shard=1_000, **({} if contigs == 1 else {"region_size": 10_000}))
    plan = make_plan("rc", samples, out_prefix=str(tmp_path / "lake"), reference=indexed_reference(str(reference)),
                     params=params)
    assert plan.array_size > 2
    for child in range(plan.array_size):
        worker.process_child(plan, child)
    plan_reduce(plan)
    rp = load_reduce_plan(plan)
    assert rp.window == 4_000
    children = [(plan.layout.reads_slices(c), child_samples(plan, c)) for c in range(plan.array_size)]
    layouts = [(u, c, SliceLayout(tuple(rp.regions), rp.window, len(s))) for c, (u, s) in enumerate(children)]
    windowed: dict[str, dict[str, list[pa.Table]]] = {s: {ALLELES.name: [], INDELS.name: []} for s in ("s0", "s1")}
    placed: dict[str, list[bytes]] = {"s0": [], "s1": []}
    several_contigs = carried = 0
    for r, region in enumerate(rp.regions):
        entries = read_region_entries(layouts, r, plan.run_id)
        for w, win in enumerate(windows(region, rp.window)):
            several_contigs += len(win.pieces) > 1
            reads = window_reads(children, entries, w)
            for sample in ("s0", "s1"):
                for (data, start), entry in reads.get(sample, []):
                    placed[sample].append(read_runs(data, start, entry)[0])
                    carried += entry.carried
                got = window_allele_tables(sample_records(reads.get(sample, [])), win, rp.contigs,
                                           plan.params.min_base_quality, sample)
                for name, table in got.items():
                    windowed[sample][name].append(table)
    assert carried > 100 and (several_contigs > 0) == (contigs == 3)
    for sample in ("s0", "s1"):
        every = b"".join(placed[sample])  # each mapped or mate-placed record once
        acc = AlleleAccumulator(list(rp.contigs), plan.params.min_base_quality)
        acc.add(*counting_inputs(bam.decode(every, bam.record_starts(every))))
        whole = dict(zip((ALLELES.name, INDELS.name), acc.tables(sample), strict=True))
        for name in (ALLELES.name, INDELS.name):
            got = [row for t in windowed[sample][name] for row in _rows(t)]
            assert got == _rows(whole[name]), (sample, name)
        assert len(_rows(whole[ALLELES.name])) > 5_000 and whole[INDELS.name].num_rows > 0
