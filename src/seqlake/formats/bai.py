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
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from seqlake.formats.bam import FLAG_UNMAPPED, Records, reg2bin

I64 = npt.NDArray[np.int64]
MAGIC = b"BAI\1"
PSEUDO_BIN = 37450
LINEAR_SHIFT = 14
#: a reference over 2^29 bases cannot be binned by a .bai (a .csi is needed)
MAX_BAI_LENGTH = 1 << 29


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


def piece(records: Records, vstart: I64, vend: I64) -> IndexPiece:
    """The index entries of sorted records whose virtual offsets are ``vstart``/``vend`` (from the piece's
    first byte)."""
    placed = records.tid >= 0
    unplaced = int((~placed).sum())
    tid, beg = records.tid[placed], records.pos[placed]
    end = records.end()[placed]
    vs, ve = vstart[placed], vend[placed]
    unmapped = (records.flag[placed] & FLAG_UNMAPPED) != 0
    bins = reg2bin(beg, end)
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
        lin = linear[linear[:, 0] == ref]
        n_intv = int(lin[:, 1].max()) + 1 if len(lin) else 0
        windows = np.full(n_intv, -1, dtype=np.int64)
        windows[lin[:, 1]] = lin[:, 2]
        touched = np.maximum.accumulate(np.where(windows >= 0, np.arange(n_intv), -1)) if n_intv else windows
        filled = np.where(touched >= 0, windows[np.maximum(touched, 0)], 0).astype("<u8")
        words.append(struct.pack("<i", n_intv) + filled.tobytes())
        out.extend(words)
    out.append(struct.pack("<Q", index.unplaced))
    return b"".join(out)
