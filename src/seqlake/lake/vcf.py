"""A sample's variants as VCF 4.2, bgzipped and tabix-indexed without htslib (the commit Lambda has none).

- :func:`vcf_text`: one record per ``variants`` row (several ALTs at one position are several records,
  as nf-core/viralrecon's ivar-to-VCF conversion writes them), haploid ``GT`` 1, the ivar numbers in
  ``FORMAT`` and the filters of :mod:`seqlake.lake.alleles` in ``FILTER``; ``##reference`` names the
  reference. ``AD`` is ivar's REF_DP, ALT_DP for an SNV (the other bases are other records); an indel's
  ``DP`` is every read over its anchor (ivar's TOTAL_DP), so its ``AD`` is the reads without the indel and
  those with it, which sum to ``DP`` (ivar's REF_DP counts only the good-quality reference bases).
- :func:`bgzf_compress`: BGZF as the SAM/BAM specification (section 4.1) defines it: gzip members of at
  most 64 KiB holding at most 0xff00 bytes each (htslib's ``BGZF_BLOCK_SIZE``), the ``BC`` extra field
  with the member's size, and the 28-byte empty end-of-file member.
- pieces: a region's records are BGZF blocks without the EOF member (``bgzf_compress(eof=False)``) and their
  index entries relative to the piece's first byte (:func:`tabix_entries`); joined after a header and
  other pieces, the entries are shifted by the piece's byte offset (:meth:`JoinedIndex.add`: a virtual
  offset is the block's byte offset << 16 | the offset inside it) and added up in file order, compact.
- :func:`tabix_index`: the ``.tbi`` of the tabix specification (htslib ``tbx.c`` / ``hts.c``): the
  UCSC binning scheme (min_shift 14, 5 levels), one chunk per run of records in one bin, the 16 kb linear
  index, and per contig htslib's pseudo-bin (37450: the contig's first and last virtual offsets, its record
  count and 0 unplaced), which ``bcftools index -n`` / ``--stats`` read. ``tabix`` reads it (the tests query
  it).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from seqlake.lake.alleles import CallParams

#: htslib ``BGZF_BLOCK_SIZE``: plain bytes per member
BGZF_BLOCK = 0xFF00
BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
_MIN_SHIFT, _LEVELS = 14, 5
#: a linear index window no record touches (yet)
_NONE = -1
_TBX_VCF = 2
#: htslib's pseudo-bin of a contig's offsets and counts: one past the last bin of 5 levels (``hts_bin_maxpos``)
_PSEUDO_BIN = ((1 << 18) - 1) // 7 + 1


def vcf_text(sample: str, contigs: Sequence[tuple[str, int]], variants: Mapping[str, Sequence[Any]],
             params: CallParams, reference: str | None = None) -> str:
    """The VCF of one sample's ``variants`` columns (rows in contig order, then position)."""
    return vcf_header(sample, contigs, params, reference) + vcf_records(contigs, variants)


def vcf_header(sample: str, contigs: Sequence[tuple[str, int]], params: CallParams,
               reference: str | None = None) -> str:
    """A sample's VCF header (every line, the ``#CHROM`` line last)."""
    head = [
        "##fileformat=VCFv4.2",
        "##source=seqlake (ivar 1.3.1 variants semantics over samtools mpileup -A -x -B -d 0 -Q 0)",
        *([f"##reference={reference}"] if reference else []),
        *(f"##contig=<ID={name},length={length}>" for name, length in contigs),
        '##INFO=<ID=DP,Number=1,Type=Integer,Description="Depth (ivar TOTAL_DP)">',
        '##INFO=<ID=TYPE,Number=1,Type=String,Description="snv, ins or del">',
        f'##FILTER=<ID=ft,Description="Alternate allele fraction below {params.call_freq}">',
        '##FILTER=<ID=pv,Description="ivar Fisher exact test p-value above 0.01 (ivar PASS=FALSE)">',
        '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype (haploid: the alternate allele)">',
        '##FORMAT=<ID=DP,Number=1,Type=Integer,Description="Depth (ivar TOTAL_DP)">',
        '##FORMAT=<ID=AD,Number=R,Type=Integer,Description="Reference and alternate counts (SNV: ivar REF_DP, ALT_DP; '
        'indel: DP - ALT_DP, ALT_DP)">',
        '##FORMAT=<ID=AF,Number=A,Type=Float,Description="Alternate allele fraction (ivar ALT_FREQ)">',
        '##FORMAT=<ID=REF_RV,Number=1,Type=Integer,Description="Reference bases on the reverse strand">',
        '##FORMAT=<ID=ALT_RV,Number=1,Type=Integer,Description="Alternate alleles on the reverse strand">',
        '##FORMAT=<ID=REF_QUAL,Number=1,Type=Integer,Description="Mean reference base quality">',
        '##FORMAT=<ID=ALT_QUAL,Number=1,Type=Integer,Description="Mean alternate base quality">',
        '##FORMAT=<ID=PVAL,Number=1,Type=Float,Description="ivar PVAL">',
        "\t".join(("#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", sample)),
    ]
    return "\n".join(head) + "\n"


def vcf_records(contigs: Sequence[tuple[str, int]], variants: Mapping[str, Sequence[Any]]) -> str:
    """The records of some ``variants`` rows, in contig order, then position."""
    order = {name: k for k, name in enumerate(n for n, _ in contigs)}
    v = variants
    rows = sorted(range(len(v["pos"])), key=lambda i: (order.get(v["contig"][i], len(order)), v["pos"][i], i))
    body = [
        "\t".join((v["contig"][i], str(v["pos"][i]), ".", v["ref"][i], v["alt"][i], ".", v["filters"][i],
                   f"DP={v['depth'][i]};TYPE={v['type'][i]}", "GT:DP:AD:AF:REF_RV:ALT_RV:REF_QUAL:ALT_QUAL:PVAL",
                   f"1:{v['depth'][i]}:{_ref_depth(v, i)},{v['alt_count'][i]}:{v['alt_fraction'][i]:.6g}:"
                   f"{v['ref_rev'][i]}:{v['alt_rev'][i]}:{v['ref_qual'][i]}:{v['alt_qual'][i]}:{v['pval'][i]:.6g}"))
        for i in rows
    ]
    return "".join(line + "\n" for line in body)


def _ref_depth(v: Mapping[str, Sequence[Any]], i: int) -> int:
    """AD's first value: an SNV's reference count, an indel's reads without it (see the module docstring)."""
    return int(v["ref_count"][i]) if v["type"][i] == "snv" else int(v["depth"][i]) - int(v["alt_count"][i])


def _member(plain: bytes) -> bytes:
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = deflate.compress(plain) + deflate.flush()
    header = struct.pack("<BBBBIBBHBBHH", 31, 139, 8, 4, 0, 0, 255, 6, 66, 67, 2, len(data) + 25)
    return header + data + struct.pack("<II", zlib.crc32(plain), len(plain))


def bgzf_compress(plain: bytes, *, eof: bool = True) -> bytes:
    """``plain`` as BGZF, ending with the EOF member (``eof=False``: a piece that others follow)."""
    blocks = b"".join(_member(plain[i : i + BGZF_BLOCK]) for i in range(0, len(plain), BGZF_BLOCK))
    return blocks + BGZF_EOF if eof else blocks


def _lines(bgzf: bytes) -> Iterator[tuple[bytes, int, int]]:
    """Each line of a BGZF file with the virtual offsets of its start and of the byte after its newline."""
    pending, start = b"", -1
    at = 0
    while at < len(bgzf):
        (bsize,) = struct.unpack_from("<H", bgzf, at + 16)
        plain = zlib.decompress(bgzf[at + 18 : at + bsize + 1 - 8], -15)
        pos = 0
        while pos < len(plain):
            if start < 0:
                start = at << 16 | pos
            nl = plain.find(b"\n", pos)
            if nl < 0:
                pending += plain[pos:]
                break
            yield pending + plain[pos:nl], start, at << 16 | (nl + 1)
            pending, start, pos = b"", -1, nl + 1
        at += bsize + 1


def reg2bin(beg: int, end: int) -> int:
    """htslib ``hts_reg2bin`` (0-based, end exclusive): the smallest bin holding the interval; the first bin
    of the level with windows of ``1 << s`` bases is ``((1 << 3 * level) - 1) // 7``."""
    end -= 1
    s = _MIN_SHIFT
    for level in range(_LEVELS, 0, -1):
        if beg >> s == end >> s:
            return ((1 << (level * 3)) - 1) // 7 + (beg >> s)
        s += 3
    return 0


@dataclass
class TabixEntries:
    """What a ``.tbi`` holds of some records, per contig in the order first seen: each bin's chunks of
    virtual offsets ``[start, end)`` and the linear index (16 kb window -> the virtual offset of the first
    record touching it, :data:`_NONE` where none does: a piece's first record is at offset 0). One region's
    piece (the reducer's, as JSON); the commit joins the pieces in :class:`JoinedIndex`."""

    bins: dict[str, dict[int, list[list[int]]]] = field(default_factory=dict)
    linear: dict[str, list[int]] = field(default_factory=dict)
    #: records per contig (the pseudo-bin's count)
    records: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return json.dumps({"bins": {c: {str(b): v for b, v in bins.items()} for c, bins in self.bins.items()},
                           "linear": self.linear, "records": self.records}, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> TabixEntries:
        d = json.loads(data)
        return cls({c: {int(b): v for b, v in bins.items()} for c, bins in d["bins"].items()},
                   {c: list(ws) for c, ws in d["linear"].items()}, {c: int(n) for c, n in d.get("records", {}).items()})


class JoinedIndex:
    """The entries of pieces joined one after another into one file, held compact: per contig (in the order
    first seen) its chunks as rows ``(bin, start, end)`` of int64 in file order, and its linear index as one
    int64 array. A piece's entries are shifted by its byte offset in the joined file (a virtual offset is the
    block's byte offset << 16 | the offset inside it) and added after the others'; a 1.5 Gb genome's index
    is some 90,000 windows and as many bins, which as Python lists and dicts took tens of MB in the commit."""

    def __init__(self) -> None:
        self._chunks: dict[str, list[np.ndarray[Any, np.dtype[np.int64]]]] = {}
        self._linear: dict[str, np.ndarray[Any, np.dtype[np.int64]]] = {}
        self._records: dict[str, int] = {}

    def add(self, piece: TabixEntries, by: int = 0) -> None:
        """A piece's entries, for its records placed ``by`` bytes into the file (after the pieces added before)."""
        moved = by << 16
        for c, n in piece.records.items():
            self._records[c] = self._records.get(c, 0) + n
        for c, bins in piece.bins.items():
            rows = np.array([(b, s, e) for b, chunks in bins.items() for s, e in chunks], dtype=np.int64).reshape(-1, 3)
            rows[:, 1:] += moved
            self._chunks.setdefault(c, []).append(rows)
        for c, ws in piece.linear.items():
            later = np.asarray(ws, dtype=np.int64)
            later[later != _NONE] += moved
            mine = self._linear.get(c, np.empty(0, dtype=np.int64))
            if len(mine) < len(later):
                mine = np.concatenate([mine, np.full(len(later) - len(mine), _NONE, dtype=np.int64)])
            head = mine[: len(later)]  # a window keeps the first record that touches it
            head[head == _NONE] = later[head == _NONE]
            self._linear[c] = mine

    @property
    def contigs(self) -> list[str]:
        return list(self._chunks)

    def contig_bytes(self, name: str) -> bytes:
        """The contig's part of a ``.tbi``: its bins in bin order, each bin's chunks in file order, then the
        linear index, a window no record touches given the offset of the one before (0 before any); packed
        as 8-byte words (a bin's ``uint32`` number and ``int32`` count are one), never an object per chunk."""
        rows = np.concatenate(self._chunks[name])
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
        bins, first, counts = np.unique(rows[:, 0], return_index=True, return_counts=True)
        words = np.empty(len(bins) + 2 * len(rows), dtype="<u8")
        heads = np.arange(len(bins)) + 2 * first
        words[heads] = bins.astype(np.uint64) | counts.astype(np.uint64) << np.uint64(32)
        at = np.repeat(np.arange(len(bins)), counts) + 1 + 2 * np.arange(len(rows))
        words[at], words[at + 1] = rows[:, 1], rows[:, 2]
        windows = self._linear[name]
        touched = np.maximum.accumulate(np.where(windows != _NONE, np.arange(len(windows)), -1))
        filled = np.where(touched >= 0, windows[np.maximum(touched, 0)], 0).astype("<u8")
        # htslib's pseudo-bin: the contig's first and last virtual offsets, its records and 0 unplaced
        pseudo = np.array([_PSEUDO_BIN | 2 << 32, rows[:, 1].min(), rows[:, 2].max(), self._records.get(name, 0), 0],
                          dtype="<u8")
        return b"".join((struct.pack("<i", len(bins) + 1), words.tobytes(), pseudo.tobytes(),
                         struct.pack("<i", len(filled)), filled.tobytes()))


def tabix_entries(bgzf: bytes) -> TabixEntries:
    """The index entries of the records of BGZF data (offsets from its first byte; header lines skipped)."""
    out = TabixEntries()
    for line, vstart, vend in _lines(bgzf):
        if line.startswith(b"#") or not line:
            continue
        chrom, pos, _, ref = line.decode().split("\t", 4)[:4]
        beg = int(pos) - 1
        end = beg + max(len(ref), 1)
        out.records[chrom] = out.records.get(chrom, 0) + 1
        chunks = out.bins.setdefault(chrom, {}).setdefault(reg2bin(beg, end), [])
        if chunks and chunks[-1][1] == vstart:
            chunks[-1][1] = vend
        else:
            chunks.append([vstart, vend])
        windows = out.linear.setdefault(chrom, [])
        for w in range(beg >> _MIN_SHIFT, ((end - 1) >> _MIN_SHIFT) + 1):
            windows.extend([_NONE] * (w + 1 - len(windows)))
            if windows[w] == _NONE:
                windows[w] = vstart
    return out


def tabix_bytes(entries: JoinedIndex, contigs: Sequence[str]) -> bytes:
    """The ``.tbi`` of the entries (see the module docstring), BGZF-compressed; contigs in reference order."""
    names = entries.contigs
    ordered = [c for c in contigs if c in names] + [c for c in names if c not in contigs]
    nm = b"".join(n.encode() + b"\0" for n in ordered)
    out = [b"TBI\1", struct.pack("<8i", len(ordered), _TBX_VCF, 1, 2, 0, ord("#"), 0, len(nm)), nm]
    out.extend(entries.contig_bytes(name) for name in ordered)
    return bgzf_compress(b"".join(out))


def tabix_index(bgzf: bytes, contigs: Sequence[str]) -> bytes:
    """The ``.tbi`` index of a bgzipped, sorted VCF (see the module docstring), BGZF-compressed."""
    entries = JoinedIndex()
    entries.add(tabix_entries(bgzf))
    return tabix_bytes(entries, contigs)
