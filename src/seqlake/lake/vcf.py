"""A sample's variants as VCF 4.2, bgzipped and tabix-indexed without htslib (the commit Lambda has none).

- :func:`vcf_text`: one record per ``variants`` row (several ALTs at one position are several records,
  as nf-core/viralrecon's ivar-to-VCF conversion writes them), haploid ``GT`` 1, the ivar numbers in
  ``FORMAT`` and the filters of :mod:`seqlake.lake.alleles` in ``FILTER``.
- :func:`bgzf_compress`: BGZF as the SAM/BAM specification (section 4.1) defines it: gzip members of at
  most 64 KiB holding at most 0xff00 bytes each (htslib's ``BGZF_BLOCK_SIZE``), the ``BC`` extra field
  with the member's size, and the 28-byte empty end-of-file member.
- :func:`tabix_index`: the ``.tbi`` of the tabix specification (htslib ``tbx.c`` / ``hts.c``): the
  UCSC binning scheme (min_shift 14, 5 levels), one chunk per run of records in one bin, the 16 kb linear
  index; without htslib's optional pseudo-bin of counts. ``tabix`` reads it (the tests query it).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from seqlake.lake.alleles import CallParams

#: htslib ``BGZF_BLOCK_SIZE``: plain bytes per member
BGZF_BLOCK = 0xFF00
BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
_MIN_SHIFT, _LEVELS = 14, 5
_TBX_VCF = 2


def vcf_text(sample: str, contigs: Sequence[tuple[str, int]], variants: Mapping[str, Sequence[Any]],
             params: CallParams) -> str:
    """The VCF of one sample's ``variants`` columns (rows in contig order, then position)."""
    head = [
        "##fileformat=VCFv4.2",
        "##source=seqlake (ivar 1.3.1 variants semantics over samtools mpileup -A -x -B -d 0 -Q 0)",
        *(f"##contig=<ID={name},length={length}>" for name, length in contigs),
        '##INFO=<ID=DP,Number=1,Type=Integer,Description="Depth (ivar TOTAL_DP)">',
        '##INFO=<ID=TYPE,Number=1,Type=String,Description="snv, ins or del">',
        f'##FILTER=<ID=ft,Description="Alternate allele fraction below {params.call_freq}">',
        '##FILTER=<ID=pv,Description="ivar Fisher exact test p-value above 0.01 (ivar PASS=FALSE)">',
        '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype (haploid: the alternate allele)">',
        '##FORMAT=<ID=DP,Number=1,Type=Integer,Description="Depth (ivar TOTAL_DP)">',
        '##FORMAT=<ID=AD,Number=R,Type=Integer,Description="Reference and alternate counts (ivar REF_DP, ALT_DP)">',
        '##FORMAT=<ID=AF,Number=A,Type=Float,Description="Alternate allele fraction (ivar ALT_FREQ)">',
        '##FORMAT=<ID=REF_RV,Number=1,Type=Integer,Description="Reference bases on the reverse strand">',
        '##FORMAT=<ID=ALT_RV,Number=1,Type=Integer,Description="Alternate alleles on the reverse strand">',
        '##FORMAT=<ID=REF_QUAL,Number=1,Type=Integer,Description="Mean reference base quality">',
        '##FORMAT=<ID=ALT_QUAL,Number=1,Type=Integer,Description="Mean alternate base quality">',
        '##FORMAT=<ID=PVAL,Number=1,Type=Float,Description="ivar PVAL">',
        "\t".join(("#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", sample)),
    ]
    order = {name: k for k, name in enumerate(n for n, _ in contigs)}
    v = variants
    rows = sorted(range(len(v["pos"])), key=lambda i: (order.get(v["contig"][i], len(order)), v["pos"][i], i))
    body = [
        "\t".join((v["contig"][i], str(v["pos"][i]), ".", v["ref"][i], v["alt"][i], ".", v["filters"][i],
                   f"DP={v['depth'][i]};TYPE={v['type'][i]}", "GT:DP:AD:AF:REF_RV:ALT_RV:REF_QUAL:ALT_QUAL:PVAL",
                   f"1:{v['depth'][i]}:{v['ref_count'][i]},{v['alt_count'][i]}:{v['alt_fraction'][i]:.6g}:"
                   f"{v['ref_rev'][i]}:{v['alt_rev'][i]}:{v['ref_qual'][i]}:{v['alt_qual'][i]}:{v['pval'][i]:.6g}"))
        for i in rows
    ]
    return "\n".join(head + body) + "\n"


def _member(plain: bytes) -> bytes:
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = deflate.compress(plain) + deflate.flush()
    header = struct.pack("<BBBBIBBHBBHH", 31, 139, 8, 4, 0, 0, 255, 6, 66, 67, 2, len(data) + 25)
    return header + data + struct.pack("<II", zlib.crc32(plain), len(plain))


def bgzf_compress(plain: bytes) -> bytes:
    """``plain`` as BGZF, ending with the EOF member."""
    return b"".join(_member(plain[i : i + BGZF_BLOCK]) for i in range(0, len(plain), BGZF_BLOCK)) + BGZF_EOF


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
    """htslib ``hts_reg2bin`` (0-based, end exclusive)."""
    end -= 1
    s, t = _MIN_SHIFT, ((1 << (_LEVELS * 3)) - 1) // 7
    for level in range(_LEVELS, 0, -1):
        if beg >> s == end >> s:
            return t + (beg >> s)
        s += 3
        t -= 1 << (level * 3)
    return 0


def tabix_index(bgzf: bytes, contigs: Sequence[str]) -> bytes:
    """The ``.tbi`` index of a bgzipped, sorted VCF (see the module docstring), BGZF-compressed."""
    bins: dict[str, dict[int, list[list[int]]]] = {}
    linear: dict[str, list[int]] = {}
    names: list[str] = []
    for line, vstart, vend in _lines(bgzf):
        if line.startswith(b"#") or not line:
            continue
        chrom, pos, _, ref = line.decode().split("\t", 4)[:4]
        if chrom not in bins:
            names.append(chrom)
            bins[chrom], linear[chrom] = {}, []
        beg = int(pos) - 1
        end = beg + max(len(ref), 1)
        chunks = bins[chrom].setdefault(reg2bin(beg, end), [])
        if chunks and chunks[-1][1] == vstart:
            chunks[-1][1] = vend
        else:
            chunks.append([vstart, vend])
        windows = linear[chrom]
        for w in range(beg >> _MIN_SHIFT, ((end - 1) >> _MIN_SHIFT) + 1):
            windows.extend([0] * (w + 1 - len(windows)))
            if windows[w] == 0:
                windows[w] = vstart
    ordered = [c for c in contigs if c in bins] + [c for c in names if c not in contigs]
    nm = b"".join(n.encode() + b"\0" for n in ordered)
    out = [b"TBI\1", struct.pack("<8i", len(ordered), _TBX_VCF, 1, 2, 0, ord("#"), 0, len(nm)), nm]
    for name in ordered:
        out.append(struct.pack("<i", len(bins[name])))
        for b, chunks in sorted(bins[name].items()):
            out.append(struct.pack("<Ii", b, len(chunks)))
            out.extend(struct.pack("<QQ", s, e) for s, e in chunks)
        windows = linear[name]
        for w in range(1, len(windows)):
            if windows[w] == 0:
                windows[w] = windows[w - 1]
        out.append(struct.pack("<i", len(windows)))
        out.extend(struct.pack("<Q", w) for w in windows)
    return bgzf_compress(b"".join(out))
