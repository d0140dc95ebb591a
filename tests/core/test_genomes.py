"""The commit's join of a sample's VCF index from the reducers' pieces (lake.genomes, lake.vcf.JoinedIndex):
the ``.tbi`` of the joined file, bin by bin and window by window, and memory that does not follow the records."""

from __future__ import annotations

import gzip
import itertools
import shutil
import struct
import subprocess
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import pytest

from seqlake.lake.genomes import Piece, tabix_of
from seqlake.lake.vcf import BGZF_EOF, bgzf_compress, tabix_entries, tabix_index

CONTIGS = ["chr1", "chr2", "chr3"]
HEADER = "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"


def _records(contig: str, length: int, step: int) -> list[str]:
    """A record every ``step`` bases, every seventh a deletion that may cross a 16 kb or 128 kb edge."""
    out = []
    for pos in range(1, length, step):
        ref = "ACGTACGTACG" if pos % 7 == 0 else "A"
        out.append(f"{contig}\t{pos}\t.\t{ref}\t{'A' if len(ref) > 1 else 'G'}\t.\tPASS\t.\n")
    return out


def _pieces(tmp_path: Path, regions: Sequence[list[str]]) -> tuple[list[Piece], list[Piece]]:
    """Each region's records as a reducer leaves them (BGZF blocks without EOF, then their entries as JSON) in
    an object of its own; the joined VCF's pieces (header, regions, EOF) and the index pieces."""
    vcf: list[Piece] = [bgzf_compress(HEADER.encode(), eof=False)]
    tbi: list[Piece] = []
    for k, lines in enumerate(regions):
        blocks = bgzf_compress("".join(lines).encode(), eof=False)
        entries = tabix_entries(blocks).to_json()
        path = tmp_path / f"region={k:05d}.genomes"
        path.write_bytes(blocks + entries)
        vcf.append((str(path), 0, len(blocks)))
        tbi.append((str(path), len(blocks), len(blocks) + len(entries)))
    vcf.append(BGZF_EOF)
    return vcf, tbi


def _joined(vcf: Sequence[Piece]) -> bytes:
    return b"".join(p if isinstance(p, bytes) else Path(p[0]).read_bytes()[p[1] : p[2]] for p in vcf)


def _parsed(tbi: bytes) -> dict[str, tuple[dict[int, list[tuple[int, int]]], list[int]]]:
    """A ``.tbi`` read back as the tabix specification lays it out: per contig, bin -> chunks, and windows."""
    data = gzip.decompress(tbi)
    assert data[:4] == b"TBI\1"
    n_ref, *_, l_nm = struct.unpack_from("<8i", data, 4)
    names = data[36 : 36 + l_nm].split(b"\0")[:n_ref]
    at, out = 36 + l_nm, {}
    for name in names:
        (n_bin,) = struct.unpack_from("<i", data, at)
        at += 4
        bins: dict[int, list[tuple[int, int]]] = {}
        for _ in range(n_bin):
            b, n = struct.unpack_from("<Ii", data, at)
            at += 8
            bins[b] = [struct.unpack_from("<QQ", data, at + 16 * i) for i in range(n)]
            at += 16 * n
        (n_intv,) = struct.unpack_from("<i", data, at)
        out[name.decode()] = (bins, list(struct.unpack_from(f"<{n_intv}Q", data, at + 4)))
        at += 4 + 8 * n_intv
    assert at == len(data)
    return out


def test_the_index_joined_from_pieces_is_the_whole_files_bin_by_bin(tmp_path: Path) -> None:
    """Regions cutting contigs anywhere (a contig over three regions, a region over two contigs): the joined
    index holds, bin by bin and window by window, what the records of the whole joined file give, and is the
    index made of the whole file byte for byte; tabix finds the records with it."""
    crossing = [f"chr3\t{pos}\t.\tAGTAGT\tA\t.\tPASS\t.\n" for pos in (16_380, 131_070)]  # a 16 kb, a 128 kb edge
    chr3 = sorted([*_records("chr3", 150_000, 5_003), *crossing], key=lambda ln: int(ln.split("\t")[1]))
    lines = [*_records("chr1", 400_000, 997), *_records("chr2", 90_000, 301), *chr3]
    cuts = [0, 120, 300, 401, 500, 600, len(lines)]
    vcf, tbi = _pieces(tmp_path, [lines[a:b] for a, b in itertools.pairwise(cuts)])
    whole = _joined(vcf)
    got = tabix_of(vcf, tbi, CONTIGS)
    assert got == tabix_index(whole, CONTIGS)
    want = tabix_entries(whole)  # the records' entries, from the whole file, kept in Python's lists
    parsed = _parsed(got)
    assert list(parsed) == CONTIGS
    for contig, (bins, windows) in parsed.items():
        # htslib's pseudo-bin: the contig's first and last offsets, its records (bcftools index -n) and 0 unplaced
        chunks_of = [c for chunks in want.bins[contig].values() for c in chunks]
        assert bins.pop(37450) == [(min(c[0] for c in chunks_of), max(c[1] for c in chunks_of)),
                                   (sum(ln.startswith(contig + "\t") for ln in lines), 0)]
        assert bins == {b: [tuple(c) for c in chunks] for b, chunks in sorted(want.bins[contig].items())}
        expected = list(want.linear[contig])
        for w, v in enumerate(expected):  # a window no record touches: the offset of the one before
            expected[w] = v if v >= 0 else (expected[w - 1] if w else 0)
        assert windows == expected, contig
    assert len(parsed["chr1"][0]) == 25 and {b < 4681 for b in parsed["chr3"][0]} == {True, False}  # two levels
    tabix = shutil.which("tabix")
    if tabix is None:
        pytest.skip("tabix is not installed (make tools)")
    path = tmp_path / "joined.vcf.gz"
    path.write_bytes(whole)
    Path(f"{path}.tbi").write_bytes(got)
    for region, contig, lo, hi in (("chr1:100000-250000", "chr1", 100_000, 250_000),
                                   ("chr2:1-90000", "chr2", 1, 90_000)):
        found = subprocess.run([tabix, str(path), region], capture_output=True, text=True, check=True).stdout
        assert found.splitlines() == [ln.rstrip("\n") for ln in lines
                                      if ln.startswith(f"{contig}\t") and lo <= int(ln.split("\t")[1]) <= hi]


def _join_peak(tmp_path: Path, megabases: int) -> tuple[int, int]:
    """tracemalloc's peak while the index of one contig of ``megabases`` Mb, cut into 500 kb regions with a
    record every 5 kb, is joined (the pieces written beforehand); and its 16 kb windows."""
    regions = [[f"chr1\t{pos}\t.\tA\tG\t.\tPASS\t.\n" for pos in range(k * 500_000 + 1, (k + 1) * 500_000, 5_000)]
               for k in range(2 * megabases)]
    vcf, tbi = _pieces(tmp_path, regions)
    tracemalloc.start()
    try:
        tabix_of(vcf, tbi, ["chr1"])
        return tracemalloc.get_traced_memory()[1], megabases * 1_000_000 >> 14
    finally:
        tracemalloc.stop()


def test_joining_the_index_costs_a_few_words_per_window(tmp_path: Path) -> None:
    """The joined index grows with the genome's 16 kb windows (the ``.tbi`` holds each one), not with its
    records; per window added the join holds about its bytes in the file (a bin, its chunk, a linear entry:
    32), a few times over while packing, not the ~700 bytes of Python lists and dicts per window it took
    (40 MB more at 1.5 Gb), whatever the number of regions."""
    (tmp_path / "small").mkdir()
    (tmp_path / "large").mkdir()
    (small, small_windows), (large, large_windows) = (_join_peak(tmp_path / "small", 1),
                                                      _join_peak(tmp_path / "large", 10))
    per_window = (large - small) / (large_windows - small_windows)
    assert per_window < 250, (per_window, small, large)
