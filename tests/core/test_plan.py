"""Planning: shards of real reads in every supported layout reassemble the input exactly."""

from __future__ import annotations

import bz2
import gzip
import json
import shutil
import struct
import subprocess
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from seqlake import demo_data
from seqlake.base import cpus
from seqlake.base.errors import BadInputError, TruncatedStreamError
from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.plan import planfile, shards
from seqlake.plan import planner as planmod
from seqlake.plan.planfile import load_plan
from seqlake.plan.planner import allocate_shards, make_plan
from seqlake.reads import bgzf
from seqlake.reads.chunks import parse_chunk


def reassemble(plan: planfile.Plan) -> dict[int, bytes]:
    """Concatenate every shard's chunks per mate; parse and check R1/R2 names in the middle shard."""
    parts: dict[int, list[bytes]] = {1: [], 2: []}
    for i in range(plan.array_size):
        for chunks in shards.iter_shard_chunks(plan, i):
            for c in chunks:
                parts[c.mate].append(c.data)
    for pair in shards.iter_shard_chunks(plan, plan.array_size // 2):  # shape and mate names, as the child
        names = [parse_chunk(c.data, "x", c.first_record, c.newlines).names() for c in pair]
        if len(names) == 2:
            assert [n.removesuffix("/1") for n in names[0]] == [n.removesuffix("/2") for n in names[1]]
    return {m: b"".join(p) for m, p in parts.items() if p}


@pytest.fixture(scope="module")
def miseq_plain(miseq: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    return gzip.decompress(miseq[0].read_bytes()), gzip.decompress(miseq[1].read_bytes())


@pytest.mark.parametrize("k", [1, 7, 64])
def test_miseq_gzip_pair(miseq: tuple[Path, Path], miseq_plain: tuple[bytes, bytes], tmp_path: Path,
                         k: int) -> None:
    plan = make_plan("miseq", [Sample("s1", str(miseq[0]), str(miseq[1]))], out_prefix=str(tmp_path),
                     shards=k)
    assert plan.array_size == k
    assert [i.records for i in plan.inputs] == [5762, 5762]
    assert [i.compression for i in plan.inputs] == ["gzip", "gzip"]
    assert sum(s.records or 0 for s in plan.shards) == 5762
    for s in plan.shards:  # R1 and R2 spans hold the same record numbers
        assert (s.spans[0].first_record, s.spans[0].records) == (s.spans[1].first_record, s.spans[1].records)
        assert all(sp.skip * 220 < 2 * planmod.gzindex.CHECKPOINT_SPACING for sp in s.spans)
    assert reassemble(plan) == {1: miseq_plain[0], 2: miseq_plain[1]}
    assert load_plan(plan.plan_uri) == plan
    assert Path(plan.inputs[0].index_uri or "").is_file()


def test_default_shard_count_from_reads_per_shard(miseq: tuple[Path, Path], tmp_path: Path) -> None:
    plan = make_plan("rps", [Sample("s1", str(miseq[0]), str(miseq[1]))], out_prefix=str(tmp_path),
                     params=Params(reads_per_shard=1000))
    assert plan.array_size == 6  # ceil(5762 / 1000)
    assert plan.layout.staging == str(tmp_path / "runs" / "rps" / "staging") + "/"
    assert plan.layout.lake.results_root == str(tmp_path / "results") + "/"


def test_plain_pair_uses_record_numbers(miseq_plain: tuple[bytes, bytes], tmp_path: Path) -> None:
    r1, r2 = tmp_path / "a_R1.fastq", tmp_path / "a_R2.fastq"
    r1.write_bytes(miseq_plain[0])
    r2.write_bytes(miseq_plain[1])
    plan = make_plan("plain", [Sample("a", str(r1), str(r2))], out_prefix=str(tmp_path / "out"),
                     shards=7)
    assert all(sp.first_record is not None for s in plan.shards for sp in s.spans)
    assert reassemble(plan) == {1: miseq_plain[0], 2: miseq_plain[1]}


@pytest.mark.parametrize("k", [1, 7, 64])
def test_plain_single_end_byte_ranges(miseq_plain: tuple[bytes, bytes], tmp_path: Path, k: int) -> None:
    r1 = tmp_path / "a.fastq"
    r1.write_bytes(miseq_plain[0])
    plan = make_plan("bytes", [Sample("a", str(r1))], out_prefix=str(tmp_path / "out"), shards=k,
                     count_plain_below=0)
    assert plan.array_size == k
    assert plan.inputs[0].records is None  # no full pass
    spans = [s.spans[0] for s in plan.shards]
    assert all(sp.first_record is None and sp.end_offset is not None for sp in spans)
    assert [sp.offset for sp in spans[1:]] == [sp.end_offset for sp in spans[:-1]]
    assert reassemble(plan) == {1: miseq_plain[0]}


def test_snap_to_record_skips_quality_lines_starting_with_at(tmp_path: Path) -> None:
    # qualities beginning with '@' (Q31) look like headers at a line start
    recs = [b"@r%d\nACGT\n+\n@@II\n" % i for i in range(200)]
    p = tmp_path / "at.fastq"
    p.write_bytes(b"".join(recs))
    starts = {sum(len(r) for r in recs[:i]) for i in range(200)}
    with p.open("rb") as f:
        for off in range(0, p.stat().st_size, 3):
            got = planmod.snap_to_record(f, off, p.stat().st_size, str(p))
            assert got in starts or got == p.stat().st_size
            assert got >= off
            assert not any(off <= s < got for s in starts)


def test_bgzf_and_multimember(miseq_plain: tuple[bytes, bytes], tmp_path: Path) -> None:
    data = miseq_plain[0]
    mm = tmp_path / "mm.fastq.gz"
    cut = len(data) // 2 + 17  # a member boundary inside a record
    mm.write_bytes(gzip.compress(data[:cut]) + gzip.compress(data[cut:]))
    inputs = [str(mm)]
    bgzip = shutil.which("bgzip")
    if bgzip is not None:
        bg = tmp_path / "bg.fastq"
        bg.write_bytes(data)
        subprocess.run([bgzip, "-f", str(bg)], check=True)
        inputs.append(str(bg) + ".gz")
    for n, uri in enumerate(inputs):
        plan = make_plan(f"r{n}", [Sample("a", uri)], out_prefix=str(tmp_path / "out"), shards=7)
        assert plan.array_size == 7
        assert reassemble(plan) == {1: data}


def test_index_pass_on_several_threads_gives_the_same_plan(miseq_plain: tuple[bytes, bytes], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    data = miseq_plain[0] * 3  # several rapidgzip chunks of compressed data, decoded in parallel
    gz = tmp_path / "r.fastq.gz"
    gz.write_bytes(gzip.compress(data, compresslevel=1))
    assert gz.stat().st_size > 2 * planmod.gzindex.CHUNK_SIZE
    plans = []
    assert planmod.gzindex.decode_threads(2) == 1, "on 2 vCPUs parallel decoding costs more than it saves"
    for threads in ("1", "2", "4"):  # sequential; sequential with the counting on its own thread; parallel
        monkeypatch.setenv(cpus.THREADS_VAR, threads)
        assert planmod.gzindex.index_threads() == int(threads)
        plan = make_plan(f"t{threads}", [Sample("a", str(gz))], out_prefix=str(tmp_path / threads), shards=7)
        assert reassemble(plan) == {1: data}
        plans.append(plan)
    # the same records in each shard; where the seek points lie in the index depends on the threads
    def records(plan: planmod.Plan) -> list[tuple[planmod.Span, ...]]:
        return [tuple(replace(sp, index_start=None, index_stop=None) for sp in s.spans) for s in plan.shards]

    assert records(plans[0]) == records(plans[1]) == records(plans[2])
    assert plans[0].inputs[0].records == plans[1].inputs[0].records == plans[2].inputs[0].records


@pytest.mark.parametrize("k", [1, 5, 40])
def test_bgzf_single_end_is_cut_at_blocks_without_an_index_pass(miseq_plain: tuple[bytes, bytes], tmp_path: Path,
                                                                 bgzip: str, k: int,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    data = miseq_plain[0]
    _no_index_pass(monkeypatch)
    monkeypatch.setattr(bgzf, "count_records", lambda *a, **kw: pytest.fail("a pass over the data"))
    bg = tmp_path / "bg.fastq"
    bg.write_bytes(data)
    subprocess.run([bgzip, "-f", str(bg)], check=True)
    plan = make_plan("bg", [Sample("a", f"{bg}.gz")], out_prefix=str(tmp_path / "out"), shards=k,
                     count_plain_below=0)
    assert plan.inputs[0].compression == "bgzf" and plan.inputs[0].index_uri is None
    assert plan.array_size == k or k > 5 < plan.array_size  # ranges of ~20 KB may share a block
    assert all(s.spans[0].first_record is None for s in plan.shards)
    assert reassemble(plan) == {1: data}
    # a shard's first record starts at a record boundary, whatever byte its first block starts with
    for i in range(plan.array_size):
        first = next(shards.iter_shard_chunks(plan, i), None)
        assert first is None or first[0].data.startswith(b"@M")


def test_bz2_is_one_shard(miseq_plain: tuple[bytes, bytes], tmp_path: Path) -> None:
    lines = miseq_plain[0].split(b"\n")
    data = b"".join(line + b"\n" for line in lines[: 4 * 600])
    p = tmp_path / "a.fastq.bz2"
    p.write_bytes(bz2.compress(data))
    plan = make_plan("bz", [Sample("a", str(p))], out_prefix=str(tmp_path / "out"), shards=7)
    assert plan.array_size == 1
    assert plan.inputs[0].compression == "bz2"
    assert reassemble(plan) == {1: data}


def test_empty_file_is_one_empty_shard(tmp_path: Path) -> None:
    p = tmp_path / "empty.fastq"
    p.write_bytes(b"")
    plan = make_plan("empty", [Sample("a", str(p))], out_prefix=str(tmp_path), shards=5)
    assert plan.array_size == 1
    assert plan.shards[0].records == 0
    assert list(shards.iter_shard_chunks(plan, 0)) == []


def test_many_shards_on_small_input(tmp_path: Path) -> None:
    recs = [b"@r%d\nACGTACGT\n+\nIIIIIIII\n" % i for i in range(12_000)]
    p = tmp_path / "tiny.fastq"
    p.write_bytes(b"".join(recs))
    plan = make_plan("many", [Sample("a", str(p))], out_prefix=str(tmp_path), shards=20_000)
    assert plan.array_size == 10_000
    assert sum(s.records or 0 for s in plan.shards) == 12_000
    loaded = load_plan(plan.plan_uri)
    assert loaded.array_size == 10_000
    picked = range(0, 10_000, 997)
    got = [b"".join(c.data for cs in shards.iter_shard_chunks(loaded, i) for c in cs) for i in picked]
    want = []
    for i in picked:
        first, n = plan.shards[i].spans[0].first_record or 0, plan.shards[i].records or 0
        want.append(b"".join(recs[first:first + n]))
    assert got == want
    # byte ranges: boundaries that snap to the same record collapse, never more shards than records
    ranges = make_plan("ranges", [Sample("a", str(p))], out_prefix=str(tmp_path), shards=10_000,
                       count_plain_below=0)
    assert 1 < ranges.array_size <= 10_000
    assert b"".join(c.data for i in range(ranges.array_size)
                    for cs in shards.iter_shard_chunks(ranges, i) for c in cs) == p.read_bytes()
    p3 = tmp_path / "three.fastq"
    p3.write_bytes(b"".join(recs[:3]))
    three = make_plan("three", [Sample("a", str(p3))], out_prefix=str(tmp_path), shards=50)
    assert three.array_size == 3


def test_multi_sample_plan(miseq: tuple[Path, Path], edge: Path, tmp_path: Path) -> None:
    samples = [Sample("miseq", str(miseq[0]), str(miseq[1])),
               Sample("tiny", str(edge / "cutadapt" / "paired.1.fastq"),
                            str(edge / "cutadapt" / "paired.2.fastq"))]
    plan = make_plan("multi", samples, out_prefix=str(tmp_path), shards=8)
    assert plan.samples == ("miseq", "tiny")
    by_sample = [s.sample for s in plan.shards]
    assert by_sample == sorted(by_sample, key=["miseq", "tiny"].index)
    assert set(by_sample) == {"miseq", "tiny"}
    assert [s.index for s in plan.shards] == list(range(plan.array_size))
    for s in plan.shards:
        assert {plan.inputs[sp.input].sample for sp in s.spans} == {s.sample}
    assert sum(s.records or 0 for s in plan.shards if s.sample == "tiny") == 5


def test_allocate_shards() -> None:
    assert allocate_shards([0], 100) == [1]
    assert allocate_shards([250], 100) == [3]
    assert allocate_shards([5, 5], 1, total=3) == [2, 2]  # every sample gets its share, rounded
    assert sum(allocate_shards([10**9, 10**9], 1)) <= 10_000
    assert allocate_shards([3, 10**9], 1, total=10_000)[0] == 1


@pytest.mark.parametrize("validator", ["fastjsonschema", "jsonschema"])
def test_load_plan_rejects_invalid(tmp_path: Path, edge: Path, monkeypatch: pytest.MonkeyPatch,
                                   validator: str) -> None:
    if validator == "jsonschema":
        monkeypatch.setattr(planfile, "_compiled_validator", lambda: None)
    elif planfile._compiled_validator() is None:
        pytest.skip("fastjsonschema is not installed")
    plan = make_plan("v", [Sample("a", str(edge / "cutadapt" / "paired.1.fastq"))],
                     out_prefix=str(tmp_path))
    d = json.loads(Path(plan.plan_uri).read_text())
    bad = tmp_path / "bad.json"
    for mutate, fragment in [
        (lambda d: d["shards"][0]["spans"][0].__setitem__("offset", -1), "offset"),
        (lambda d: d["shards"][0].__setitem__("index", 3), "shard indexes"),
        (lambda d: d["inputs"][0].__setitem__("compression", "zstd"), "compression"),
        (lambda d: d.__setitem__("surprise", 1), "surprise"),
    ]:
        broken = json.loads(json.dumps(d))
        mutate(broken)
        bad.write_text(json.dumps(broken))
        with pytest.raises(ValueError, match=fragment):
            load_plan(str(bad))


def test_bad_sample_name_and_same_file(tmp_path: Path, edge: Path) -> None:
    r1 = str(edge / "cutadapt" / "paired.1.fastq")
    with pytest.raises(BadInputError, match="invalid sample name"):
        make_plan("n", [Sample("../x", r1)], out_prefix=str(tmp_path))
    with pytest.raises(BadInputError, match="same file"):
        make_plan("n", [Sample("x", r1, r1)], out_prefix=str(tmp_path))


def test_phred64_rejected_at_plan_time(edge: Path, tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="Phred\\+64"):
        make_plan("p64", [Sample("a", str(edge / "cutadapt" / "illumina64.fastq"))],
                  out_prefix=str(tmp_path))


def test_tiny_whole_samples_share_children_up_to_the_cap() -> None:
    from seqlake.plan.planner import MAX_SAMPLES_PER_CHILD, pack_children

    # 100 tiny samples: packed by the sample cap, not by reads
    starts = pack_children([10] * 100, [True] * 100, reads_per_child=1_000_000)
    assert starts == tuple(range(0, 100, MAX_SAMPLES_PER_CHILD))
    # by reads first when they fill a child sooner
    assert pack_children([600, 600, 300, 100], [True] * 4, reads_per_child=1_000) == (0, 1)
    # a split sample's shards keep a child each, and nothing joins them
    assert pack_children([1_000, 1_000, 5, 5], [False, False, True, True], reads_per_child=1_000) == (0, 1, 2)


def test_more_samples_than_the_array_allows_never_plan_more_children() -> None:
    from seqlake.plan.planner import MAX_CHILDREN, pack_children

    n = 3 * MAX_CHILDREN + 7
    starts = pack_children([5_000] * n, [True] * n, reads_per_child=1_000)  # each sample fills a child
    assert len(starts) == MAX_CHILDREN and starts[0] == 0 and list(starts) == sorted(set(starts))


# ------------------------------------------------------------------ BGZF: record numbers without an index
@pytest.fixture(scope="module")
def demo_pair_bgzf(tmp_path_factory: pytest.TempPathFactory) -> tuple[tuple[Path, Path], tuple[bytes, bytes]]:
    """The bundled demo pairs (20,000 x 2x150 bp, MIT) recompressed with ``bgzip``: ~100 blocks a mate."""
    bgzip = shutil.which("bgzip")
    if bgzip is None:
        pytest.skip("bgzip is not installed (make tools installs tabix)")
    folder = tmp_path_factory.mktemp("bgzf")
    plain = []
    for mate, src in enumerate(demo_data.paths()[:2], start=1):
        data = gzip.decompress(src.read_bytes())
        (folder / f"R{mate}.fastq").write_bytes(data)
        subprocess.run([bgzip, "-f", str(folder / f"R{mate}.fastq")], check=True)
        plain.append(data)
    return (folder / "R1.fastq.gz", folder / "R2.fastq.gz"), (plain[0], plain[1])


def _no_index_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a BGZF input ran the gzip index pass")

    monkeypatch.setattr(planmod.gzindex, "index_gzip", refuse)


@pytest.mark.parametrize("k", [1, 7, 64])
def test_bgzf_pair_is_counted_not_indexed(demo_pair_bgzf: tuple[tuple[Path, Path], tuple[bytes, bytes]],
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch, k: int) -> None:
    (r1, r2), plain = demo_pair_bgzf
    _no_index_pass(monkeypatch)
    plan = make_plan("bgp", [Sample("a", str(r1), str(r2))], out_prefix=str(tmp_path), shards=k)
    assert [(i.compression, i.records, i.index_uri) for i in plan.inputs] == [("bgzf", 20_000, None)] * 2
    assert plan.array_size == k
    for s in plan.shards:  # R1 and R2 spans hold the same record numbers, from checkpoints of each file
        assert (s.spans[0].first_record, s.spans[0].records) == (s.spans[1].first_record, s.spans[1].records)
        assert all(sp.skip * 300 < 2 * planmod.gzindex.CHECKPOINT_SPACING for sp in s.spans)
    if k > 1:  # the files' blocks end at different records: their checkpoints are at different offsets
        assert plan.shards[-1].spans[0].offset != plan.shards[-1].spans[1].offset
    assert reassemble(plan) == {1: plain[0], 2: plain[1]}
    assert load_plan(plan.plan_uri) == plan


def test_bgzf_count_gives_the_index_pass_records_and_the_same_plan_on_any_thread_count(
        demo_pair_bgzf: tuple[tuple[Path, Path], tuple[bytes, bytes]], tmp_path: Path) -> None:
    r1 = str(demo_pair_bgzf[0][0])
    counted = [bgzf.count_records(r1, spacing=64 << 10, threads=t) for t in (1, 3)]
    assert counted[0] == counted[1]
    indexed = planmod.gzindex.index_gzip(r1, spacing=64 << 10, threads=1).scan
    assert (counted[0].records, counted[0].plain_size) == (indexed.records, indexed.plain_size)
    # every checkpoint is a record start: its record number matches the plain data before it
    plain = demo_pair_bgzf[1][0]
    blocks = dict(_block_starts(Path(r1).read_bytes()))
    for offset, before in counted[0].checkpoints:
        block, within = bgzf.split_virtual(offset)
        at = blocks[block] + within
        assert plain[:at].count(b"\n") == 4 * before and (at == 0 or plain[at - 1:at] == b"\n")
    assert len(counted[0].checkpoints) > 50


def _block_starts(data: bytes) -> list[tuple[int, int]]:
    """(compressed offset, plain offset) of every whole BGZF block of ``data``, and of their end."""
    out, q, plain = [], 0, 0
    while (n := planmod.gzindex.bgzf_block_size(data, q)) is not None and q + n <= len(data):
        out.append((q, plain))
        plain += struct.unpack_from("<I", data, q + n - 4)[0]
        q += n
    return [*out, (q, plain)]


def test_bgzf_followed_by_plain_gzip_members_is_indexed(demo_pair_bgzf: tuple[tuple[Path, Path], tuple[bytes, bytes]],
                                                        tmp_path: Path) -> None:
    (r1, _), plain = demo_pair_bgzf
    mixed = tmp_path / "mixed.fastq.gz"
    mixed.write_bytes(r1.read_bytes()[:-28] + gzip.compress(plain[0]))  # the EOF block dropped, a gzip member
    plan = make_plan("mixed", [Sample("a", str(mixed))], out_prefix=str(tmp_path / "out"), shards=5)
    assert plan.inputs[0].compression == "bgzf" and plan.inputs[0].index_uri is not None
    assert reassemble(plan) == {1: plain[0] * 2}


def test_cut_bgzf_pair_names_the_last_complete_record(demo_pair_bgzf: tuple[tuple[Path, Path], tuple[bytes, bytes]],
                                                      tmp_path: Path) -> None:
    (r1, r2), plain = demo_pair_bgzf
    cut = tmp_path / "R2.fastq.gz"
    data = r2.read_bytes()[: r2.stat().st_size * 2 // 3]  # inside a block, past the sniff
    cut.write_bytes(data)
    block, plain_at = _block_starts(data)[-1]  # the cut block: what of it decodes is read too
    decoded = plain[1][:plain_at] + zlib.decompressobj(-15).decompress(data[block + 18:])
    whole = decoded.count(b"\n") // 4
    with pytest.raises(TruncatedStreamError) as info:
        make_plan("cut", [Sample("a", str(r1), str(cut))], out_prefix=str(tmp_path / "out"))
    assert str(info.value) == (f"{cut}: bgzf stream truncated after record {whole} (line {4 * whole}), "
                               "the last complete record")
