"""Each sample's coordinate-sorted BAM and its ``.bai``, or ``.csi`` when a contig is over 2^29 bases
(docs/INTERNALS.md, "Read slices and the per-sample BAM"): the reducers' side (:func:`reduce_region_bams`: a
region's BAM records of each sample, merged from the children's slices, as BGZF blocks with their index
piece) and the commit's (:func:`write_bams`: the header, the regions' pieces in order, the unplaced reads,
the EOF member, joined by :func:`seqlake.base.storage.concatenate`, server-side copies on S3; the index from
the pieces' entries shifted by where each piece lands, binned at :func:`seqlake.formats.bai.index_depth` of
the run's contigs). :func:`write_bams` is one function the commit calls, whatever commits the tables.

Duplicates are not marked. Read groups: one per sample and lane (:mod:`seqlake.lake.readgroups`), as the
children's manifests list them.

With ``--cram`` (docs/INTERNALS.md, "The per-sample CRAM"): the reducers' blocks are encoded as CRAM by
:mod:`seqlake.reduce.cramencode` instead of uploaded (:func:`_finish_crams`), and the commit writes each sample's
CRAM and ``.crai`` (:func:`write_crams`: framing and server-side copies only, no pysam) and copies the run's
reference beside them (:func:`write_reference`, staged by reducer 0).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from seqlake.base import storage
from seqlake.base.errors import SeqlakeError
from seqlake.base.layout import BAI_SUFFIX, BAM_SUFFIX, CRAI_SUFFIX, CRAM_SUFFIX, CSI_SUFFIX, RunLayout
from seqlake.formats import bai, bam, bgzf, cram
from seqlake.formats.sam import read_group_ids
from seqlake.lake.parquet_io import put_file
from seqlake.lake.readgroups import ReadGroup, read_group
from seqlake.lake.regions import ReducePlan
from seqlake.lake.slices import (
    SliceEntry,
    SliceLayout,
    child_samples,
    merge_sorted,
    read_region_entries,
    read_runs,
    read_window_bytes,
)
from seqlake.plan.planfile import Plan

if TYPE_CHECKING:
    from seqlake.reduce.cramencode import RegionCrams as RegionCramsT


def _layouts(plan: Plan, rp: ReducePlan, children: range | None = None) -> list[
        tuple[str, int, SliceLayout, list[str]]]:
    """Each of ``children``'s (default: every child's) slices object, index, layout and samples."""
    out = []
    for c in range(plan.array_size) if children is None else children:
        samples = child_samples(plan, c)
        out.append((plan.layout.reads_slices(c), c, SliceLayout(tuple(rp.regions), rp.window, len(samples)), samples))
    return out


#: a child's placed run of one sample in one window: (its object, its entry, the bytes read, where they start)
_Run = tuple[str, SliceEntry, bytes, int]
Children = Sequence[tuple[str, int, SliceLayout, list[str]]]


def _window_runs(children: Children, entries: Sequence[Sequence[Sequence[SliceEntry]]], w: int) -> dict[
        str, list[_Run]]:
    """Per sample, its children's placed runs of window ``w`` of the region (one ranged GET per child that has
    any record there), in child order."""
    out: dict[str, list[_Run]] = {}
    got = read_window_bytes([uri for uri, _, _, _ in children], entries, w)
    for (uri, _, _, samples), ents, read in zip(children, entries, got, strict=True):
        if read is None:
            continue
        for sample, e in zip(samples, ents[w], strict=True):
            if e.placed:
                out.setdefault(sample, []).append((uri, e, read[0], read[1]))
    return out


def _referenced(run: _Run) -> tuple[bytes, npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """One child's run as it is: its records and their virtual offsets in its blocks."""
    _, e, data, start = run
    compressed = memoryview(data)[e.offset - start : e.offset - start + e.placed_bytes]
    plain = bgzf.decompress(compressed)
    starts = bam.record_starts(plain)
    ends = np.append(starts[1:], len(plain)).astype(np.int64)
    return plain, starts, bgzf.virtual_offsets(compressed, starts), bgzf.virtual_offsets(compressed, ends)


def _load_compiled_helpers() -> None:
    """seqlake's mappy build and ISA-L loaded where the stage has them (a reducer runs in the worker image): the
    compiled record walk (:func:`seqlake.formats.bam.record_starts`) and ISA-L's inflate
    (:func:`seqlake.formats.bgzf.blocks`) are used once they are loaded; the formats never load them themselves,
    as the Lambdas that share those modules must not (tests/aws/test_layers.py: Batch only)."""
    with contextlib.suppress(ImportError):
        import mappy  # noqa: F401
    with contextlib.suppress(ImportError):
        from isal import isal_zlib  # noqa: F401


def reduce_region_bams(plan: Plan, rp: ReducePlan, reducer: int, tmp: Path) -> None:
    """Reducer ``reducer``'s BAM records (its region, the samples of its group), window by window: each
    sample's placed runs of its children (child order) merged in ``samtools sort`` order and compressed into
    BGZF blocks (no EOF) with their ``.bai`` piece, into ``region=NNNNN.bam`` (NNNNN the reducer's index); a
    window only one child has records of is that child's run as it is, referenced, not rewritten (the commit
    copies it). What is where: ``region=NNNNN.bam.json``."""
    _load_compiled_helpers()
    red = rp.reducer(reducer)
    region = red.region
    depth = bai.index_depth(n for _, n in rp.contigs)  # the commit writes a .bai or a .csi of the same pieces
    children = _layouts(plan, rp, red.children if rp.groups else None)
    entries = read_region_entries([(u, c, lay) for u, c, lay, _ in children], region, plan.run_id)
    first, stop = children[0][2].region_windows(region) if children else (0, 0)
    # per sample, its body's segments in this region, in order: ("", start, stop) of this reducer's object,
    # or (a child's object, start, stop)
    segments: dict[str, list[tuple[str, int, int]]] = {}
    pieces: dict[str, list[bai.IndexPiece]] = {}
    sizes: dict[str, int] = {}
    local = tmp / "region.bam"
    crams = _region_crams(plan, rp, tmp)
    with local.open("wb") as f:
        for w in range(stop - first):
            runs = _window_runs(children, entries, w)
            for sample in plan.samples:
                if sample not in runs:
                    continue
                plain: bytes | bytearray
                if len(runs[sample]) == 1:
                    plain, starts, vs, ve = _referenced(runs[sample][0])
                    uri, e, _, _ = runs[sample][0]
                    segment = (uri, e.offset, e.offset + e.placed_bytes)
                else:
                    plain, starts = merge_sorted([read_runs(d, s, e)[0] for _, e, d, s in runs[sample]])
                    out, vs, ve = bgzf.compress_records(plain, starts)
                    segment = ("", f.tell(), f.tell() + len(out))
                    f.write(out)
                at = sizes.get(sample, 0)
                placement = bam.decode_placement(plain, starts)
                if crams is not None:
                    if segment[0]:
                        _, e, data, start = runs[sample][0]
                        crams.add(sample, memoryview(data)[e.offset - start : e.offset - start + e.placed_bytes],
                                  placement)
                    else:
                        crams.add(sample, out, placement)
                entry = bai.piece(placement, vs, ve, depth)
                pieces.setdefault(sample, []).append(entry.shifted(at))
                segments.setdefault(sample, []).append(segment)
                sizes[sample] = at + segment[2] - segment[1]
        offsets: dict[str, dict[str, object]] = {}
        for sample, segs in segments.items():
            index = bai.join(pieces[sample]).to_bytes()
            offsets[sample] = {"segments": segs, "index": [f.tell(), len(index)]}
            f.write(index)
    if crams is None:
        put_file(local, plan.layout.region_bams(reducer))
        storage.write_bytes(plan.layout.region_bams_offsets(reducer), json.dumps(offsets).encode())
        return
    _finish_crams(plan, rp, reducer, children, crams)


def _finish_crams(plan: Plan, rp: ReducePlan, reducer: int, children: Children, crams: RegionCramsT) -> None:
    """With ``--cram``: the region's records encoded by htslib (reduce/cramencode) with the header the commit
    writes, and, when this is its sample group's last reducer, its samples' unplaced reads (no Lambda encodes)."""
    from seqlake.reduce.cramencode import RegionCrams, group_read_groups

    red = rp.reducer(reducer)
    mine = red.children if rp.groups else range(plan.array_size)
    groups = group_read_groups(plan, mine)

    def header(sample: str, md5: Mapping[str, str]) -> str:
        return header_text(plan, sample, rp.contigs, md5, {}, groups=groups.get(sample, ()))

    crams.finish(header, plan.layout.region_crams(reducer), plan.layout.region_crams_offsets(reducer))
    if reducer == 0:
        write_reference(plan, plan.layout.run_reference_staged())
    if red.region != len(rp.regions) - 1:
        return
    tails = RegionCrams(plan, rp.contigs, crams.tmp)
    window = children[0][2].count - 1 if children else 0
    for (uri, _, _, ss), ents in zip(children, _unplaced_entries(children, window, plan.run_id), strict=True):
        placed = [(s, e) for s, e in zip(ss, ents, strict=True) if e.placed]
        got = storage.read_many_ranges([(uri, e.offset, e.offset + e.placed_bytes) for _, e in placed])
        for (s, _), data in zip(placed, got, strict=True):
            if data is None:
                raise FileNotFoundError(f"{uri}: the child's slices are gone")
            tails.add(s, data, None)
    tails.finish(header, plan.layout.region_crams(reducer, unplaced=True),
                 plan.layout.region_crams_offsets(reducer, unplaced=True))


def _region_crams(plan: Plan, rp: ReducePlan, tmp: Path) -> RegionCramsT | None:
    """With ``--cram``, the reducer's CRAM pieces (reduce/cramencode, which imports pysam: only then)."""
    if not plan.params.cram:
        return None
    from seqlake.reduce.cramencode import RegionCrams

    return RegionCrams(plan, rp.contigs, tmp)


def header_text(plan: Plan, sample: str, contigs: Sequence[tuple[str, int]], md5: Mapping[str, str],
                software: Mapping[str, str], *, groups: Sequence[ReadGroup] = ()) -> str:
    """The sample's SAM header: sorted by coordinate, the references with their MD5, its read groups (the
    sample's group of no lane when its children saw none: a sample with no aligned read), the programs
    (minimap2 through mappy, then seqlake)."""
    from seqlake import __version__

    lines = ["@HD\tVN:1.6\tSO:coordinate"]
    lines += [f"@SQ\tSN:{n}\tLN:{length}" + (f"\tM5:{md5[n]}" if n in md5 else "") for n, length in contigs]
    preset = plan.params.preset
    lines += [g.header_line() for g in groups or [read_group(sample, {}, {}, preset)]]
    mm = software.get("mappy", "")
    lines.append(f"@PG\tID:minimap2\tPN:minimap2\tVN:{mm}\tCL:minimap2 -ax {preset} (mappy {mm}, seqlake's pairing)")
    lines.append(f"@PG\tID:seqlake\tPN:seqlake\tVN:{__version__}\tPP:minimap2")
    return "\n".join(lines) + "\n"


def write_bams(plan: Plan, rp: ReducePlan, md5: Mapping[str, str], software: Mapping[str, str],
               read_groups: Mapping[str, Sequence[ReadGroup]] | None = None) -> None:
    """Join every sample's BAM and write its ``.bai`` (see the module docstring); ``read_groups``: each
    sample's, from its children's manifests."""
    layout: RunLayout = plan.layout
    # the reducers in array order: region by region, so each sample's pieces (in its group's reducers) come in
    # reference order
    regions = range(len(rp.reducers))
    offsets = [json.loads(d) if d is not None else {} for _, d in storage.read_many(
        [layout.region_bams_offsets(r) for r in regions])]
    children = _layouts(plan, rp)
    unplaced_window = children[0][2].count - 1 if children else 0
    tails = _unplaced_entries(children, unplaced_window, plan.run_id)
    for sample in plan.samples:
        text = header_text(plan, sample, rp.contigs, md5, software, groups=(read_groups or {}).get(sample, ()))
        head = bgzf.compress(bam.header(text, rp.contigs), eof=False)
        parts: list[storage.Source] = [head]
        index: list[bai.IndexPiece] = []
        at = len(head)
        for r in regions:
            o = offsets[r].get(sample)
            if not o:
                continue
            uri = layout.region_bams(r)
            raw = storage.read_range(uri, o["index"][0], o["index"][0] + o["index"][1])
            index.append(bai.IndexPiece.from_bytes(raw).shifted(at))
            for src, start, stop in o["segments"]:
                parts.append((src or uri, int(start), int(stop)))
                at += int(stop) - int(start)
        unplaced = 0
        for (uri, _, _, samples), ents in zip(children, tails, strict=True):
            for s, e in zip(samples, ents, strict=True):
                if s == sample and e.placed:
                    parts.append((uri, e.offset, e.offset + e.placed_bytes))
                    unplaced += e.placed
        parts.append(bgzf.EOF)
        storage.concatenate(layout.sample_file(sample, BAM_SUFFIX), parts)
        joined = bai.join(index)
        joined = bai.IndexPiece(joined.chunks, joined.linear, joined.stats, joined.unplaced + unplaced)
        storage.write_bytes(*_index_file(layout, sample, joined, rp.contigs))


def index_suffix(contigs: Sequence[tuple[str, int]]) -> str:
    """The sample BAM's index's suffix after ``.bam``: ``.bai``, or ``.csi`` when a contig is over 2^29 bases."""
    return CSI_SUFFIX if bai.is_csi(bai.index_depth(n for _, n in contigs)) else BAI_SUFFIX


def _index_file(layout: RunLayout, sample: str, joined: bai.IndexPiece, contigs: Sequence[tuple[str, int]]) -> tuple[
        str, bytes]:
    """Where the sample's index goes and its bytes (the pieces were binned at :func:`bai.index_depth`)."""
    depth = bai.index_depth(n for _, n in contigs)
    data = (bai.csi_bytes(joined, len(contigs), depth) if bai.is_csi(depth) else bai.bai_bytes(joined, len(contigs)))
    return layout.sample_file(sample, BAM_SUFFIX + index_suffix(contigs)), data


def _unplaced_entries(children: Sequence[tuple[str, int, SliceLayout, list[str]]], window: int,
                      run_id: str) -> list[list[SliceEntry]]:
    """Each child's entries of its unplaced reads' window (one ranged GET per child)."""
    from seqlake.lake.slices import parse_entries

    spans = [(u, *lay.index_span(window, window + 1)) for u, _, lay, _ in children]
    out = []
    for (u, _, lay, _), data in zip(children, storage.read_many_ranges(spans), strict=True):
        if data is None:
            raise FileNotFoundError(f"{u}: the child did not finish (no reads.slices)")
        out.append(parse_entries(data, lay.samples)[0])
    del run_id  # the headers were checked by the reducers
    return out


# ------------------------------------------------------------------------------- --cram: the commit's side
def write_crams(plan: Plan, rp: ReducePlan, md5: Mapping[str, str], software: Mapping[str, str],
                read_groups: Mapping[str, Sequence[ReadGroup]] | None = None) -> None:
    """With ``--cram``: every sample's CRAM joined from the reducers' containers (reduce/cramencode) and its
    ``.crai``, and the run's reference beside them (:func:`write_reference`). The commit frames and copies only
    (formats.cram: no pysam here): the file definition and header container, the regions' containers in array
    order, the sample group's unplaced reads' containers, the EOF container; each piece's ``.crai`` lines
    shifted by where it lands."""
    layout: RunLayout = plan.layout
    regions = range(len(rp.reducers))
    offsets = [_cram_pieces(u, d) for u, d in storage.read_many([layout.region_crams_offsets(r) for r in regions])]
    last = [r for r in regions if rp.reducer(r).region == len(rp.regions) - 1]
    tails: dict[str, tuple[str, dict[str, Any]]] = {}
    for r, (u, d) in zip(last, storage.read_many([layout.region_crams_offsets(r, unplaced=True) for r in last]),
                         strict=True):
        for sample, o in _cram_pieces(u, d).items():
            tails[sample] = (layout.region_crams(r, unplaced=True), o)
    for sample in plan.samples:
        text = header_text(plan, sample, rp.contigs, md5, software, groups=(read_groups or {}).get(sample, ()))
        head = cram.head(f"{sample}.cram", text)
        parts: list[storage.Source] = [head]
        lines: list[cram.CraiLine] = []
        at = len(head)
        pieces = [(layout.region_crams(r), offsets[r][sample]) for r in regions if sample in offsets[r]]
        pieces += [tails[sample]] if sample in tails else []
        ids = read_group_ids(text)  # the header's own: what the reducers' pieces must have been encoded with
        for uri, o in pieces:
            start, stop = (int(x) for x in o["piece"])
            if stop <= start:
                continue
            if o["read_groups"] != ids:  # a record's read group is an index into the list its reducer had
                raise SeqlakeError(f"{uri}: sample {sample}'s pieces were encoded with the read groups "
                                   f"{o['read_groups']}, its header lists {ids}")
            parts.append((uri, start, stop))
            lines += cram.shift_crai((cram.CraiLine(*(int(v) for v in x)) for x in o["crai"]), at)
            at += stop - start
        parts.append(cram.EOF)
        storage.concatenate(layout.sample_file(sample, CRAM_SUFFIX), parts)
        storage.write_bytes(layout.sample_file(sample, CRAM_SUFFIX + CRAI_SUFFIX), cram.crai_bytes(lines))
    # the run's reference beside the CRAMs, so they stay readable as long as the run's results are kept (the
    # FASTA the run was given may be replaced or deleted, and runs/ expires): reducer 0's copy of it (the
    # commit may not read the user's references), copied by the server
    staged = [(layout.run_reference_staged(s), layout.run_reference(s)) for s in ("", ".fai")]
    storage.copy_many((src, dst, storage.head(src).size) for src, dst in staged)


def _cram_pieces(uri: str, data: bytes | None) -> dict[str, dict[str, Any]]:
    """A reducer's CRAM pieces per sample (every reducer of a ``--cram`` run writes them before its summary)."""
    if data is None:
        raise SeqlakeError(f"{uri} is missing: its reducer did not encode its CRAM pieces (was the run started "
                           "with --cram after its reducers ran?)")
    pieces: dict[str, dict[str, Any]] = json.loads(data)["samples"]
    return pieces


def write_reference(plan: Plan, dst: str) -> None:
    """The run's reference as ``dst`` (a FASTA) and ``dst.fai``: the bases the run aligned to (checked
    unchanged against the run's pin, the content it was planned with), copied server-side contig by contig
    from the FASTA (or the store's one-line copy of a gzip-compressed one), each contig ``>name`` and its
    lines, in the reference's order. Reducer 0 writes it with ``--cram`` (:meth:`RunLayout.run_reference_staged`)
    and the commit copies it beside the CRAMs."""
    from seqlake.plan.reference import check_unchanged, load_fasta_index

    pin = plan.reference
    if pin is None:
        return
    check_unchanged(pin)
    index = load_fasta_index(pin)
    parts: list[storage.Source] = []
    fai: list[str] = []
    at = 0
    for c in index.contigs.values():
        name = b">" + c.name.encode() + b"\n"
        a, b = c.byte_range(0, c.length)
        line_bytes = c.line_bytes if c.line_bytes > c.line_bases else c.line_bases + 1
        fai.append(f"{c.name}\t{c.length}\t{at + len(name)}\t{c.line_bases}\t{line_bytes}\n")
        parts += [name, (index.uri, a, b), b"\n"] if b > a else [name, b"\n"]
        at += len(name) + b - a + 1
    storage.concatenate(dst, parts)
    storage.write_bytes(dst + ".fai", "".join(fai).encode())
