"""The ``.bai`` of a coordinate-sorted BAM (SAM specification 5.2), built from its records' virtual offsets,
in pieces: a piece is some consecutive records of the file with offsets relative to the piece's first byte;
joined pieces are shifted by where each lands (:meth:`IndexPiece.shifted`) and concatenated in file order
(:func:`join`), which gives the index of the joined file.

Per reference: the UCSC bins (min_shift 14, 5 levels) with one chunk per run of consecutive records in one
bin, the 16 kb linear index (each window: the virtual offset of the first record touching it; a window no
record touches takes the one before it, 0 before any), htslib's pseudo-bin 37450 (the reference's first and
last offsets, its mapped and unmapped-but-placed records), and after the references the count of unplaced
records. htslib's optional merging of nearby chunks and of small bins into their parents is not done: the
index answers the same queries with a few more chunks.

A reference over 2^29 bases cannot be binned in 5 levels: its BAM gets a ``.csi`` (CSI specification v1)
instead, from the same pieces: min_shift 14 and the depth ``samtools index -c`` picks (:func:`csi_depth`: the
fewest levels whose top bin holds the longest reference), the chunks' bins of that depth (so a piece is made
for one depth: :func:`index_depth` of the run's references), no linear index but each bin's ``loffset`` (the
linear index's entry at the bin's first 16 kb window, as htslib's ``update_loff``), BGZF-compressed
(:func:`csi_bytes`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from seqlake.formats import bgzf
from seqlake.formats.bam import FLAG_UNMAPPED, Records, reg2bin

I64 = npt.NDArray[np.int64]
MAGIC = b"BAI\1"
PSEUDO_BIN = 37450
LINEAR_SHIFT = 14
#: a reference over 2^29 bases cannot be binned by a .bai (a .csi is needed)
MAX_BAI_LENGTH = 1 << 29
#: the ``.bai``'s levels (and the records' bin field's)
BAI_DEPTH = 5
CSI_MAGIC = b"CSI\1"
MIN_SHIFT = LINEAR_SHIFT


def csi_depth(max_length: int) -> int:
    """The levels ``samtools index -c`` (min_shift 14) bins a reference of ``max_length`` in (htslib's
    ``sam_index_build3``: the longest reference plus 256, within 2^(14 + 3 depth))."""
    depth, span = 0, 1 << MIN_SHIFT
    while max_length + 256 > span:
        depth, span = depth + 1, span << 3
    return depth


def index_depth(lengths: Iterable[int]) -> int:
    """The depth a run's index pieces are binned at: :data:`BAI_DEPTH` (a ``.bai``) unless a reference is over
    :data:`MAX_BAI_LENGTH`, then the ``.csi``'s."""
    longest = max(lengths, default=0)
    return BAI_DEPTH if longest <= MAX_BAI_LENGTH else csi_depth(longest)


def is_csi(depth: int) -> bool:
    """Pieces binned at ``depth`` make a ``.csi`` (:func:`csi_bytes`), else a ``.bai`` (:func:`bai_bytes`)."""
    return depth != BAI_DEPTH


@dataclass(frozen=True)
class IndexPiece:
    """What the ``.bai`` holds of some consecutive records: ``chunks`` rows (tid, bin, start, end), ``linear``
    rows (tid, window, offset of the first record touching it), ``stats`` rows (tid, first offset, last end,
    mapped, unmapped), and the unplaced records counted."""

    chunks: I64
    linear: I64
    stats: I64
    unplaced: int

    def shifted(self, by: int) -> IndexPiece:
        """The piece's entries for its first byte at byte ``by`` of the joined file."""
        moved = by << 16
        chunks, linear, stats = self.chunks.copy(), self.linear.copy(), self.stats.copy()
        chunks[:, 2:] += moved
        linear[:, 2] += moved
        stats[:, 1:3] += moved
        return IndexPiece(chunks, linear, stats, self.unplaced)

    def to_bytes(self) -> bytes:
        head = struct.pack("<4q", len(self.chunks), len(self.linear), len(self.stats), self.unplaced)
        return head + b"".join(a.astype("<i8").tobytes() for a in (self.chunks, self.linear, self.stats))

    @classmethod
    def from_bytes(cls, data: bytes) -> IndexPiece:
        nc, nl, ns, unplaced = struct.unpack_from("<4q", data)
        words = np.frombuffer(data, dtype="<i8", offset=32).astype(np.int64)
        return cls(words[: 4 * nc].reshape(nc, 4), words[4 * nc : 4 * nc + 3 * nl].reshape(nl, 3),
                   words[4 * nc + 3 * nl : 4 * nc + 3 * nl + 5 * ns].reshape(ns, 5), unplaced)


def piece(records: Records, vstart: I64, vend: I64, depth: int = BAI_DEPTH) -> IndexPiece:
    """The index entries of sorted records whose virtual offsets are ``vstart``/``vend`` (from the piece's
    first byte), their bins of ``depth`` levels (:func:`index_depth`)."""
    placed = records.tid >= 0
    unplaced = int((~placed).sum())
    tid, beg = records.tid[placed], records.pos[placed]
    end = records.end()[placed]
    vs, ve = vstart[placed], vend[placed]
    unmapped = (records.flag[placed] & FLAG_UNMAPPED) != 0
    bins = reg2bin(beg, end, depth)
    # a chunk per run of consecutive records with one (tid, bin)
    new = np.ones(len(tid), dtype=np.bool_)
    new[1:] = (tid[1:] != tid[:-1]) | (bins[1:] != bins[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(tid)) - 1
    chunks = (np.stack([tid[first], bins[first], vs[first], ve[last]], axis=1) if len(first)
              else np.zeros((0, 4), np.int64))
    # the linear index: every (tid, window) a record touches, the first such record's start
    w0, w1 = beg >> LINEAR_SHIFT, (end - 1) >> LINEAR_SHIFT
    count = w1 - w0 + 1
    row = np.repeat(np.arange(len(tid), dtype=np.int64), count)
    window = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count) + w0[row]
    key = tid[row] << 32 | window
    _, at = np.unique(key, return_index=True)
    linear = np.stack([tid[row[at]], window[at], vs[row[at]]], axis=1) if len(at) else np.zeros((0, 3), np.int64)
    # per reference: first offset, last end, mapped and unmapped-but-placed records
    refs, rfirst = np.unique(tid, return_index=True)
    rlast = np.append(rfirst[1:], len(tid)) - 1
    mapped = np.bincount(np.searchsorted(refs, tid), weights=~unmapped, minlength=len(refs)).astype(np.int64)
    stats = (np.stack([refs, vs[rfirst], ve[rlast], mapped, (rlast - rfirst + 1) - mapped], axis=1)
             if len(refs) else np.zeros((0, 5), np.int64))
    return IndexPiece(chunks.astype(np.int64), linear.astype(np.int64), stats.astype(np.int64), unplaced)


def join(pieces: Iterable[IndexPiece]) -> IndexPiece:
    """Pieces already shifted, in file order, as one."""
    ps = list(pieces)
    if not ps:
        return IndexPiece(np.zeros((0, 4), np.int64), np.zeros((0, 3), np.int64), np.zeros((0, 5), np.int64), 0)
    chunks = np.concatenate([p.chunks for p in ps])
    linear = np.concatenate([p.linear for p in ps])
    _, at = np.unique(linear[:, 0] << 32 | linear[:, 1], return_index=True)  # a window's first record wins
    stats = np.concatenate([p.stats for p in ps])
    refs, inverse = np.unique(stats[:, 0], return_inverse=True)
    merged = np.zeros((len(refs), 5), dtype=np.int64)
    merged[:, 0] = refs
    first = np.full(len(refs), len(stats))
    np.minimum.at(first, inverse, np.arange(len(stats)))
    last = np.zeros(len(refs), dtype=np.int64)
    np.maximum.at(last, inverse, np.arange(len(stats)))
    merged[:, 1], merged[:, 2] = stats[first, 1], stats[last, 2]
    merged[:, 3] = np.bincount(inverse, weights=stats[:, 3], minlength=len(refs))
    merged[:, 4] = np.bincount(inverse, weights=stats[:, 4], minlength=len(refs))
    return IndexPiece(chunks, linear[np.sort(at)], merged, sum(p.unplaced for p in ps))


def bai_bytes(index: IndexPiece, n_references: int) -> bytes:
    """The ``.bai`` of a whole file's joined entries (not compressed: a ``.bai`` is plain)."""
    out = [MAGIC, struct.pack("<i", n_references)]
    chunks, linear, stats = index.chunks, index.linear, index.stats
    for ref in range(n_references):
        mine = chunks[chunks[:, 0] == ref]
        mine = mine[np.argsort(mine[:, 1], kind="stable")]
        bins, first, counts = np.unique(mine[:, 1], return_index=True, return_counts=True)
        st = stats[stats[:, 0] == ref]
        words = [struct.pack("<i", len(bins) + (1 if len(st) else 0))]
        for b, f, c in zip(bins.tolist(), first.tolist(), counts.tolist(), strict=True):
            words.append(struct.pack("<Ii", b, c) + mine[f : f + c, 2:].astype("<u8").tobytes())
        if len(st):
            words.append(struct.pack("<Ii4Q", PSEUDO_BIN, 2, *(int(x) for x in st[0, 1:5])))
        filled = _filled_linear(linear, ref, 0)
        words.append(struct.pack("<i", len(filled)) + filled.tobytes())
        out.extend(words)
    out.append(struct.pack("<Q", index.unplaced))
    return b"".join(out)


def _filled_linear(linear: I64, ref: int, before_first: int) -> npt.NDArray[np.uint64]:
    """Reference ``ref``'s 16 kb linear index: each window's first record's offset, a window no record touches
    the one before it, ``before_first`` before any."""
    lin = linear[linear[:, 0] == ref]
    n_intv = int(lin[:, 1].max()) + 1 if len(lin) else 0
    windows = np.full(n_intv, -1, dtype=np.int64)
    windows[lin[:, 1]] = lin[:, 2]
    touched = np.maximum.accumulate(np.where(windows >= 0, np.arange(n_intv), -1)) if n_intv else windows
    return np.where(touched >= 0, windows[np.maximum(touched, 0)], before_first).astype("<u8")


def _bin_level(bins: I64, depth: int) -> tuple[I64, I64]:
    """Each bin's level (0 the whole reference) and its first bin's number."""
    level = np.zeros(len(bins), dtype=np.int64)
    for lvl in range(1, depth + 1):
        level[bins >= ((1 << (3 * lvl)) - 1) // 7] = lvl
    return level, ((1 << (3 * level)) - 1) // 7


def csi_bytes(index: IndexPiece, n_references: int, depth: int) -> bytes:
    """The ``.csi`` of a whole file's joined entries (pieces binned at ``depth``), BGZF-compressed."""
    meta = ((1 << (3 * depth + 3)) - 1) // 7 + 1  # htslib's pseudo-bin: one past the last bin
    out = [CSI_MAGIC, struct.pack("<iii", MIN_SHIFT, depth, 0), struct.pack("<i", n_references)]
    chunks, stats = index.chunks, index.stats
    for ref in range(n_references):
        mine = chunks[chunks[:, 0] == ref]
        mine = mine[np.argsort(mine[:, 1], kind="stable")]
        bins, first, counts = np.unique(mine[:, 1], return_index=True, return_counts=True)
        st = stats[stats[:, 0] == ref]
        lin = _filled_linear(index.linear, ref, int(st[0, 1]) if len(st) else 0)
        level, level_first = _bin_level(bins, depth)
        bottom = (bins - level_first) << (3 * (depth - level))  # the bin's first 16 kb window
        # a bin starting past the linear index's last window: no lower bound (htslib's 0)
        loff = (np.where(bottom < len(lin), lin[np.minimum(bottom, len(lin) - 1)], 0) if len(lin)
                else np.zeros(len(bins), dtype=np.uint64))
        words = [struct.pack("<i", len(bins) + (1 if len(st) else 0))]
        for b, lo, f, c in zip(bins.tolist(), loff.tolist(), first.tolist(), counts.tolist(), strict=True):
            words.append(struct.pack("<IQi", b, lo, c) + mine[f : f + c, 2:].astype("<u8").tobytes())
        if len(st):
            words.append(struct.pack("<IQi4Q", meta, 0, 2, *(int(x) for x in st[0, 1:5])))
        out.extend(words)
    out.append(struct.pack("<Q", index.unplaced))
    return bgzf.compress(b"".join(out))
