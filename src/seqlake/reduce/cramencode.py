"""The reducers' side of the per-sample CRAM (``--cram``, docs/INTERNALS.md "The per-sample CRAM"): each sample's
BAM records of the region (what :func:`seqlake.reduce.bams.reduce_region_bams` merged) encoded as CRAM 3.0 by
htslib (pysam), with the header the commit writes (the same ``@SQ`` order and ``@RG`` list: a record's reference
and read group are indexes into them), indexed (``.crai``); only the records' containers are kept (from the
first container to the EOF container) with the ``.crai``'s lines, into ``region=NNNNN.cram`` and, where each
is, ``region=NNNNN.cram.json``. The last reducer of each sample group encodes its samples' unplaced reads too
(they need no reference), so no Lambda needs pysam: the commit only frames (:mod:`seqlake.formats.cram`).

Imported only by the reducer (a Batch job: the worker image has pysam; no Lambda layer does).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from seqlake.base import storage
from seqlake.formats import bam, bgzf, cram
from seqlake.formats.sam import read_group_ids
from seqlake.lake.parquet_io import put_file
from seqlake.lake.readgroups import ReadGroup
from seqlake.plan.planfile import Plan
from seqlake.plan.reference import FastaIndex, load_contigs, load_fasta_index, read_bases

#: bases read from the reference at once while the reducer's local FASTA is written
_CHUNK = 8 << 20
#: records per CRAM container (htslib's default 10,000 per slice, one slice per container): the .crai's grain
SEQS_PER_SLICE = 10_000


def group_read_groups(plan: Plan, children: range) -> dict[str, list[ReadGroup]]:
    """Each sample's read groups as the commit lists them in its header (child, then shard order, each once),
    from the manifests of ``children`` (a group holds whole samples)."""
    from seqlake.lake.staging import ChildManifest

    out: dict[str, dict[str, ReadGroup]] = {}
    for _, data in storage.read_many(plan.layout.manifest(c) for c in children):
        if data is None:
            continue
        for r in ChildManifest.from_json(data).shards:
            for g in r.read_groups:
                out.setdefault(r.sample, {}).setdefault(g.id, g)
    return {s: list(g.values()) for s, g in out.items()}


def write_reference(index: FastaIndex, contigs: Sequence[tuple[str, int]], spans: Mapping[int, tuple[int, int]],
                    path: Path) -> None:
    """A local FASTA of the contigs the records to encode lie on (``spans``: reference id -> [start, stop)):
    each contig's real bases over its span and N elsewhere, so only those bases are read. The header the
    records are encoded with gives these contigs no ``M5`` (htslib would check it against these bases) and
    the others theirs (htslib then needs none of them); a slice's MD5 covers only its records' span, which
    is real, so the CRAM decodes with the real reference."""
    with path.open("wb") as f:
        for tid, (start, stop) in sorted(spans.items()):
            name, length = contigs[tid]
            lo, hi = max(0, min(start, length)), max(0, min(stop, length))
            f.write(b">" + name.encode() + b"\n" + b"N" * lo)
            for a in range(lo, hi, _CHUNK):
                f.write(read_bases(index, name, a, min(hi, a + _CHUNK)))
            f.write(b"N" * (length - max(lo, hi)) + b"\n")


def encode(bam_path: Path, text: str, reference: Path | None, out: Path) -> tuple[
        tuple[int, int] | None, list[cram.CraiLine]]:
    """The records of ``bam_path`` as a CRAM file ``out`` (``text`` its header), and where its containers are
    (from the first to the EOF container; None when it has none) with their ``.crai`` lines, offsets from
    the containers' first byte."""
    import pysam

    header = pysam.AlignmentHeader.from_text(text)
    with pysam.AlignmentFile(str(bam_path), "rb", check_sq=False) as src, pysam.AlignmentFile(
            str(out), "wc", header=header, reference_filename=str(reference) if reference else None,
            format_options=["version=3.0", f"seqs_per_slice={SEQS_PER_SLICE}",
                            *([] if reference else ["no_ref=1"])]) as dst:
        for record in src.fetch(until_eof=True):
            dst.write(record)
    pysam.index(str(out))
    crai = Path(str(out) + ".crai")
    lines = cram.parse_crai(crai.read_bytes())
    crai.unlink()
    size = out.stat().st_size
    with out.open("rb") as f:
        f.seek(size - len(cram.EOF))
        if f.read() != cram.EOF:
            raise ValueError(f"{out}: htslib's CRAM does not end with the CRAM 3.0 EOF container")
    span = cram.data_span(size, lines)
    return span, cram.shift_crai(lines, -span[0]) if span else []


def _copy_range(src: Path, start: int, stop: int, dst: BinaryIO) -> None:
    with src.open("rb") as f:
        f.seek(start)
        left = stop - start
        while left > 0:
            chunk = f.read(min(left, _CHUNK))
            if not chunk:
                raise ValueError(f"{src}: shorter than {stop} bytes")
            dst.write(chunk)
            left -= len(chunk)


class RegionCrams:
    """A reducer's CRAM pieces: each sample's region as BAM bytes on the local disk while the windows are
    merged (:meth:`add`), encoded at :meth:`finish`."""

    def __init__(self, plan: Plan, contigs: Sequence[tuple[str, int]], tmp: Path) -> None:
        self.plan, self.contigs, self.tmp = plan, list(contigs), tmp
        self.files: dict[str, Path] = {}
        #: reference id -> [first base, last end) of the records added
        self.spans: dict[int, tuple[int, int]] = {}

    def add(self, sample: str, blocks: bytes | memoryview, placement: bam.Records | None) -> None:
        """``blocks`` (BGZF blocks, no EOF) of the sample's records, ``placement`` their fixed fields (for
        the reference span the encoding reads)."""
        path = self.files.get(sample)
        if path is None:
            path = self.files[sample] = self.tmp / f"cram-{len(self.files)}.bam"
            path.write_bytes(bgzf.compress(bam.header("@HD\tVN:1.6\n", self.contigs), eof=False))
        with path.open("ab") as f:
            f.write(blocks)
        if placement is not None and len(placement):
            mapped = placement.tid >= 0
            tids, pos, end = placement.tid[mapped], placement.pos[mapped], placement.end()[mapped]
            for t in {int(x) for x in tids}:
                sel = tids == t
                lo, hi = int(pos[sel].min()), int(end[sel].max())
                a, b = self.spans.get(t, (lo, hi))
                self.spans[t] = (min(a, lo), max(b, hi))

    def finish(self, header: Callable[[str, Mapping[str, str]], str], object_uri: str, offsets_uri: str) -> None:
        """Encode every sample's records, into ``object_uri``; where each piece and its .crai lines are, as
        JSON, into ``offsets_uri``. ``header(sample, md5)``: the sample's header text, with ``md5`` (contig ->
        M5) the M5s it may give (every contig's but those :func:`write_reference` writes)."""
        ref = None
        md5 = {}
        if self.plan.reference is not None:
            md5 = {c.name: c.md5 for c in load_contigs(self.plan.reference)}
        if self.spans and self.plan.reference is not None:
            ref = self.tmp / "reference.fa"
            write_reference(load_fasta_index(self.plan.reference), self.contigs, self.spans, ref)
            for tid in self.spans:
                md5.pop(self.contigs[tid][0], None)
        local = self.tmp / "region.cram"
        offsets: dict[str, object] = {}
        pieces: dict[str, dict[str, object]] = {}
        with local.open("wb") as f:
            for sample, path in self.files.items():
                with path.open("ab") as g:
                    g.write(bgzf.EOF)
                text = header(sample, md5)
                piece = self.tmp / "piece.cram"
                span, lines = encode(path, text, ref, piece)
                path.unlink()
                at = f.tell()
                if span is not None:
                    _copy_range(piece, *span, f)
                piece.unlink()
                pieces[sample] = {"piece": [at, f.tell()],
                                  "crai": [[x.ref, x.start, x.span, x.container, x.slice_offset, x.slice_size]
                                           for x in lines],
                                  # what the records' read group indexes point into: the commit checks its own
                                  "read_groups": read_group_ids(text)}
        offsets["samples"] = pieces
        if ref is not None:  # (another finish in this folder writes its own, and htslib its .fai)
            ref.unlink()
            Path(f"{ref}.fai").unlink(missing_ok=True)
        put_file(local, object_uri)
        storage.write_bytes(offsets_uri, json.dumps(offsets).encode())
