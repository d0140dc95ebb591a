"""A reducer reads its own region's block of each child's positions index: bytes that grow with its region,
not with the genome; a missing, foreign, older or differently cut child's object fails naming it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from seqlake.base import storage
from seqlake.base.errors import SeqlakeError
from seqlake.base.layout import child_of
from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.child import worker
from seqlake.demo_data import paths
from seqlake.demo_data.simulate import write_pairs
from seqlake.lake import positions
from seqlake.lake.positions import IndexLayout, dictionary_column, table_from_arrays, write_positions
from seqlake.lake.regions import ReducePlan, plan_reduce, regions
from seqlake.lake.tables import DEPTH_RUNS
from seqlake.plan.planfile import Plan
from seqlake.plan.planner import make_plan
from seqlake.plan.refindex import indexed_reference
from seqlake.reduce import reducer as reduce


@pytest.fixture(autouse=True)
def _ref_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(tmp_path / "refcache"))


def _fasta(path: Path, contigs: dict[str, str]) -> Path:
    path.write_text("".join(f">{name}\n{seq}\n" for name, seq in contigs.items()))
    return path


def _run_on_decoys(tmp: Path, decoys: int) -> Plan:
    """A run over a 4 kb contig and ``decoys`` 2 kb contigs (2 kb regions: one each), its children run for real:
    child 0 aligns sample s (the same reads on the first contig whatever the genome), the others sample t in
    shards of 200 pairs (reads on every decoy: their indexes have rows in many regions, as a human child's)."""
    tmp.mkdir()
    rng = np.random.default_rng(5)
    bases = np.array(list("ACGT"))
    chr1 = {"chr1": "".join(rng.choice(bases, 4_000))}
    decoy = {f"decoy{i}": "".join(rng.choice(bases, 2_000)) for i in range(decoys)}
    reads: list[Sample] = []
    for name, contigs, pairs in (("s", chr1, 150), ("t", decoy, 250 + 10 * decoys)):
        r1, r2 = tmp / f"{name}_R1.fastq.gz", tmp / f"{name}_R2.fastq.gz"
        write_pairs(_fasta(tmp / f"{name}.fa", contigs), r1, r2, pairs, seed=1)
        reads.append(Sample(name, str(r1), str(r2)))
    reference = indexed_reference(str(_fasta(tmp / "ref.fa", chr1 | decoy)), store=str(tmp / "refs"))
    plan = make_plan("run", reads, out_prefix=str(tmp / "lake"), reference=reference,
                     params=Params(trim=False, region_size=2_000, reads_per_shard=200, allele_counts=False))
    assert plan.array_size > 1 and [s.sample for s in plan.shards[:plan.child_shards(1).start]] == ["s"]
    for child in range(plan.array_size):
        worker.process_child(plan, child)
    return plan


def _read_by_child(plan: Plan, monkeypatch: pytest.MonkeyPatch) -> dict[int, tuple[int, int]]:
    """Per child, the GETs and bytes reducer 0 reads from the child's objects (its manifest, its positions
    object): storage's reads counted, the reducer and the objects real."""
    got: dict[int, Counter[str]] = {}
    slices: dict[int, Counter[str]] = {}
    real_range, real_bytes = storage.read_range, storage.read_bytes

    def count(uri: str, data: bytes) -> bytes:
        child = child_of(Path(uri).parent.name)
        if child is not None:  # the reads' slices (lake/slices) are counted apart, below
            (slices if uri.endswith(".slices") else got).setdefault(child, Counter()).update(gets=1, bytes=len(data))
        return data

    def read_range(uri: str, start: int, stop: int) -> bytes:  # an empty range is no request
        return count(uri, real_range(uri, start, stop)) if stop > start else b""

    def read_bytes(uri: str) -> bytes:
        return count(uri, real_bytes(uri))

    rp = plan_reduce(plan)
    assert rp is not None and rp.regions[0].contigs == ["chr1"]
    with monkeypatch.context() as m:
        m.setattr(storage, "read_range", read_range)
        m.setattr(storage, "read_bytes", read_bytes)
        reduce.reduce_region(plan, 0, rp)
    # the slices object: its header, the region's index entries, its window's records (one GET each)
    assert all(n["gets"] <= 3 and n["bytes"] < 64_000 for n in slices.values()), slices
    return {c: (n["gets"], n["bytes"]) for c, n in sorted(got.items())}


def test_a_reducer_reads_per_child_what_its_region_holds_not_the_genome(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reducer of the first contig's region reads from each child the same GETs and bytes whether the genome
    has 3 or 20 decoys besides: its block of the index and its window's streams (child 0's), never the whole
    index or the child's whole manifest."""
    small = _run_on_decoys(tmp_path / "small", 3)
    big = _run_on_decoys(tmp_path / "big", 20)
    sizes = [Path(p.layout.positions(1)).stat().st_size for p in (small, big)]
    assert sizes[1] > 3 * sizes[0]  # a child of sample t: its object (and its index) grew with the genome
    read_small, read_big = _read_by_child(small, monkeypatch), _read_by_child(big, monkeypatch)
    assert set(read_small) == set(range(small.array_size)) and set(read_big) == set(range(big.array_size))
    assert read_big[0] == read_small[0] and read_big[0][0] == 2  # its region's block, then its window
    # sample t's children have no row in region 0: one GET of its block each (a header, one window's record)
    t_reads = {read_big[c] for c in range(1, big.array_size)} | {read_small[c] for c in range(1, small.array_size)}
    assert len(t_reads) == 1 and next(iter(t_reads))[0] == 1 and next(iter(t_reads))[1] < 200


# ------------------------------------------------------------------------------ a child's index refused
WINDOW = 1_000


@pytest.fixture(scope="module")
def virus_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Plan, ReducePlan]:
    """A plan of two children over the virus in 10 kb regions (three), and its reduce plan at 1 kb windows:
    the children's objects are written by each test."""
    tmp = tmp_path_factory.mktemp("index")
    r1, r2, reference = paths()
    with pytest.MonkeyPatch.context() as m:
        m.setenv("SEQLAKE_REF_CACHE", str(tmp / "refcache"))
        pinned = indexed_reference(str(reference), store=str(tmp / "refs"))
        plan = make_plan("run", [Sample("s", str(r1), str(r2))], out_prefix=str(tmp / "lake"), reference=pinned,
                         shards=2, params=Params(region_size=10_000))
    assert plan.array_size == 2
    return plan, ReducePlan([("MN908947.3", 29_903)], 10_000, 100, WINDOW)


def _write_child(plan: Plan, rp: ReducePlan, child: int, *, run_id: str | None = None, writer_child: int | None = None,
                 window: int = WINDOW) -> Path:
    """Child ``child``'s positions object: depth runs over the whole genome, written as ``writer_child`` of
    ``run_id`` (the plan's own by default) cut at ``window``."""
    starts = np.arange(0, 29_903, 50)
    runs = table_from_arrays(DEPTH_RUNS, {
        "sample": dictionary_column(np.zeros(len(starts)), ["s"]),
        "contig": dictionary_column(np.zeros(len(starts)), ["MN908947.3"]),
        "start": starts, "stop": np.minimum(starts + 50, 29_903), "depth": np.full(len(starts), 3, dtype=np.int32)})
    path = Path(plan.layout.positions(child))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_positions(path, {"depth_runs": runs}, rp.contigs, regions(rp.contigs, rp.region_size), window=window,
                    run_id=run_id or plan.run_id, child=child if writer_child is None else writer_child)
    return path


def _entries(plan: Plan, rp: ReducePlan) -> Any:
    return reduce._positions_entries(plan, rp, 2)


def test_the_plans_children_give_their_regions_entries(virus_plan: tuple[Plan, ReducePlan]) -> None:
    plan, rp = virus_plan
    for child in range(2):
        _write_child(plan, rp, child)
    got = _entries(plan, rp)
    assert [sorted(e) for e in got] == [list(range(10))] * 2  # region 2: 20,000..29,903, ten 1 kb windows
    assert got[1][9]["depth_runs"].rows == 19  # 29,000..29,903 in 50-base runs
    layout = IndexLayout.of(rp.regions, WINDOW)
    assert layout.windows == (10, 10, 10) and layout.block(2)[1] - layout.block(2)[0] < 2_000


def test_a_missing_child_fails_saying_it_did_not_finish(virus_plan: tuple[Plan, ReducePlan]) -> None:
    plan, rp = virus_plan
    _write_child(plan, rp, 0)
    _write_child(plan, rp, 1).unlink()
    with pytest.raises(SeqlakeError, match=r"^child 1 has no positions object at \S+child=00001/positions\.arrows: "
                                           r"it did not finish$"):
        _entries(plan, rp)


def test_another_runs_or_childs_object_fails_naming_it(virus_plan: tuple[Plan, ReducePlan]) -> None:
    plan, rp = virus_plan
    _write_child(plan, rp, 0)
    _write_child(plan, rp, 1, run_id="another")
    with pytest.raises(SeqlakeError, match=r"child=00001/positions\.arrows was written by child 1 of another run, "
                                           r"not by child 1 of this run$"):
        _entries(plan, rp)
    _write_child(plan, rp, 1, writer_child=0)  # child 0's object where child 1's belongs
    with pytest.raises(SeqlakeError, match=r"child=00001/positions\.arrows was written by child 0 of this run, "
                                           r"not by child 1 of this run$"):
        _entries(plan, rp)


def test_an_older_object_fails_saying_to_rerun_the_children(virus_plan: tuple[Plan, ReducePlan],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    plan, rp = virus_plan
    _write_child(plan, rp, 0)
    path = _write_child(plan, rp, 1)
    path.write_bytes(path.read_bytes()[IndexLayout.of(rp.regions, WINDOW).size:])  # version 5's: streams only
    with pytest.raises(SeqlakeError, match=r"child=00001/positions\.arrows has no positions index: an older "
                                           r"seqlake's object .*re-run the run's children with this version$"):
        _entries(plan, rp)
    with monkeypatch.context() as m:  # an index in another version of the format
        m.setattr(positions, "INDEX_VERSION", positions.INDEX_VERSION - 1)
        _write_child(plan, rp, 1)
    with pytest.raises(SeqlakeError, match=rf"child=00001/positions\.arrows holds positions index version "
                                           rf"{positions.INDEX_VERSION - 1} .*re-run the run's children"):
        _entries(plan, rp)


def test_children_cut_at_another_window_fail(virus_plan: tuple[Plan, ReducePlan]) -> None:
    plan, rp = virus_plan
    _write_child(plan, rp, 0)
    _write_child(plan, rp, 1, window=2 * WINDOW)  # its region 2 block is elsewhere: its first header says why
    with pytest.raises(SeqlakeError, match=r"child=00001/positions\.arrows is cut at 2000-base windows, the run's "
                                           r"reduce plan at 1000 .*different windows; re-run the run's children$"):
        _entries(plan, rp)


def test_a_cut_short_index_fails_naming_the_object(virus_plan: tuple[Plan, ReducePlan]) -> None:
    plan, rp = virus_plan
    _write_child(plan, rp, 0)
    path = _write_child(plan, rp, 1)
    path.write_bytes(path.read_bytes()[:IndexLayout.of(rp.regions, WINDOW).block(2)[1] - 8])
    with pytest.raises(SeqlakeError, match=r"child=00001/positions\.arrows: the index block of region 2 is not "
                                           r"where its layout puts it"):
        _entries(plan, rp)
