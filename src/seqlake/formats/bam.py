"""BAM (SAM/BAM specification 4.2): records encoded and decoded a batch at a time with NumPy, the binary
header, the coordinate sort key.

A batch is :class:`Records`: one entry per record in parallel arrays, and the variable-length fields
(read names, CIGAR operations, bases, qualities, aux tags) as :class:`Ragged` arrays (all rows' bytes end to
end and ``n + 1`` offsets). Encoding scatters every field of every record into one buffer by computed
indices; decoding walks the records' sizes once (``block_size`` chains them) and gathers the rest. Nothing is
done per base in Python. Bases are SAM's: reverse-strand rows hold the reverse complement of the read.
"""

from __future__ import annotations

import itertools
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from seqlake.formats.cigar import CONSUMES_QUERY, CONSUMES_REF

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
MAGIC = b"BAM\1"
#: the fixed part of a record after ``block_size``: refID .. tlen (SAM spec 4.2)
_FIXED = np.dtype([("block_size", "<i4"), ("tid", "<i4"), ("pos", "<i4"), ("l_name", "u1"), ("mapq", "u1"),
                   ("bin", "<u2"), ("n_cigar", "<u2"), ("flag", "<u2"), ("l_seq", "<i4"), ("next_tid", "<i4"),
                   ("next_pos", "<i4"), ("tlen", "<i4")])
FIXED_SIZE = _FIXED.itemsize  # 36 bytes, block_size included
#: htslib ``seq_nt16_table``: ASCII base -> 4-bit code (anything else is N, 15)
NT16 = np.full(256, 15, dtype=np.uint8)
for _k, _b in enumerate("=ACMGRSVTWYHKDBN"):
    NT16[ord(_b)] = NT16[ord(_b.lower())] = _k
#: 4-bit code -> ASCII base (``seq_nt16_str``)
NT16_STR = np.frombuffer(b"=ACMGRSVTWYHKDBN", dtype=np.uint8)
#: ASCII complement (reverse-strand rows hold the reverse complement of the read)
COMPLEMENT = np.arange(256, dtype=np.uint8)
for _x, _y in zip("ACGTNacgtnRYKMBVDHrykmbvdh", "TGCANtgcanYRMKVBHDyrmkvbhd", strict=True):
    COMPLEMENT[ord(_x)] = ord(_y)
FLAG_REVERSE = 0x10
FLAG_UNMAPPED = 0x4


@dataclass(frozen=True)
class Ragged:
    """Variable-length rows: row ``i`` is ``data[offsets[i]:offsets[i + 1]]``."""

    data: npt.NDArray[np.generic]
    offsets: I64

    @property
    def lengths(self) -> I64:
        return np.diff(self.offsets)

    @classmethod
    def of(cls, rows: Sequence[bytes]) -> Ragged:
        lens = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        return cls(np.frombuffer(b"".join(rows), dtype=np.uint8), np.concatenate(([0], np.cumsum(lens))))

    def rows(self) -> list[bytes]:
        raw = self.data.tobytes() if self.data.dtype == np.uint8 else self.data.view(np.uint8).tobytes()
        scale = self.data.dtype.itemsize
        o = (self.offsets * scale).tolist()
        return [raw[a:b] for a, b in itertools.pairwise(o)]

    def take(self, order: I64) -> Ragged:
        """The rows ``order`` names, in that order."""
        lens = self.lengths[order]
        src = _gather_index(self.offsets[order], lens)
        return Ragged(self.data[src], np.concatenate(([0], np.cumsum(lens))).astype(np.int64))


def _gather_index(starts: I64, lens: I64) -> I64:
    """The indexes ``starts[i] .. starts[i] + lens[i] - 1`` of every row, row after row."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift: I64 = np.repeat(starts - (np.cumsum(lens) - lens), lens)
    return np.arange(total, dtype=np.int64) + shift


@dataclass(frozen=True)
class Records:
    """A batch of BAM records, one entry per record. ``pos``/``next_pos`` are 0-based (-1: none); ``tid``
    and ``next_tid`` index the header's references (-1: none); ``cigar`` holds BAM's packed operations
    (``length << 4 | op``, uint32); ``seq`` ASCII bases as SAM shows them; ``qual`` Phred values (not +33,
    0xff throughout where absent) with ``seq``'s offsets; ``tags`` the raw aux bytes."""

    tid: I64
    pos: I64
    mapq: I64
    flag: I64
    next_tid: I64
    next_pos: I64
    tlen: I64
    names: Ragged
    cigar: Ragged
    seq: Ragged
    qual: Ragged
    tags: Ragged

    def __len__(self) -> int:
        return len(self.tid)

    def take(self, order: I64) -> Records:
        return Records(self.tid[order], self.pos[order], self.mapq[order], self.flag[order], self.next_tid[order],
                       self.next_pos[order], self.tlen[order], self.names.take(order), self.cigar.take(order),
                       self.seq.take(order), self.qual.take(order), self.tags.take(order))

    def cigar_ops(self) -> tuple[I64, I64, I64]:
        """(row, op code, length) of every CIGAR operation, in order."""
        packed = self.cigar.data.astype(np.int64)
        row = np.repeat(np.arange(len(self), dtype=np.int64), self.cigar.lengths)
        return row, packed & 0xF, packed >> 4

    def end(self) -> I64:
        """Each record's reference end (0-based, exclusive; ``pos + 1`` for a record without reference bases,
        as htslib's ``bam_endpos`` for the bins)."""
        row, op, length = self.cigar_ops()
        span = np.bincount(row, weights=length * CONSUMES_REF[op], minlength=len(self)).astype(np.int64)
        return self.pos + np.maximum(span, 1)


def reg2bin(beg: I64, end: I64, depth: int = 5) -> I64:
    """htslib ``hts_reg2bin`` (min_shift 14, ``depth`` levels: 5 for the records' bin and the ``.bai``, more
    in a ``.csi`` of a contig over 2^29; 0-based, end exclusive) of every interval."""
    last = end - 1
    out = np.zeros(len(beg), dtype=np.int64)
    done = np.zeros(len(beg), dtype=np.bool_)
    shift = 14
    for level in range(depth, 0, -1):
        same = ~done & ((beg >> shift) == (last >> shift))
        out[same] = ((1 << (3 * level)) - 1) // 7 + (beg[same] >> shift)
        done |= same
        shift += 3
    return out


def sort_key(records: Records) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``samtools sort``'s coordinate key (``bam1_cmp_core``): tid as unsigned (-1, unplaced, is last), POS,
    then forward before reverse. Sort with a stable sort over the three (``np.lexsort`` of them reversed),
    so ties keep their input order, as samtools sort's merge does."""
    return records.tid.astype(np.uint32).astype(np.uint64), records.pos, (records.flag & FLAG_REVERSE) != 0


def coordinate_order(records: Records) -> I64:
    """The stable coordinate order of ``records`` (:func:`sort_key`)."""
    tid, pos, rev = sort_key(records)
    return np.lexsort((rev, pos, tid)).astype(np.int64)


def encode(records: Records) -> tuple[bytes, I64]:
    """The records as BAM bytes (one after the other, ``block_size`` first) and each one's start."""
    n = len(records)
    l_name = records.names.lengths + 1  # NUL-terminated
    n_cigar = records.cigar.lengths
    l_seq = records.seq.lengths
    packed_seq = (l_seq + 1) // 2
    size = FIXED_SIZE + l_name + 4 * n_cigar + packed_seq + l_seq + records.tags.lengths
    starts = np.concatenate(([0], np.cumsum(size)[:-1])).astype(np.int64) if n else np.zeros(0, np.int64)
    out = np.zeros(int(size.sum()), dtype=np.uint8)
    fixed = np.zeros(n, dtype=_FIXED)
    fixed["block_size"] = size - 4
    fixed["tid"], fixed["pos"], fixed["l_name"], fixed["mapq"] = records.tid, records.pos, l_name, records.mapq
    fixed["bin"] = reg2bin(records.pos, records.end())
    fixed["n_cigar"], fixed["flag"], fixed["l_seq"] = n_cigar, records.flag, l_seq
    fixed["next_tid"], fixed["next_pos"], fixed["tlen"] = records.next_tid, records.next_pos, records.tlen
    out[_gather_index(starts, np.full(n, FIXED_SIZE, dtype=np.int64))] = fixed.view(np.uint8)
    at = starts + FIXED_SIZE
    out[_gather_index(at, l_name - 1)] = records.names.data  # the NUL is the zero already there
    at = at + l_name
    cig = records.cigar.data.astype("<u4").view(np.uint8)
    out[_gather_index(at, 4 * n_cigar)] = cig
    at = at + 4 * n_cigar
    out[_gather_index(at, packed_seq)] = _pack_seq(records.seq)
    at = at + packed_seq
    out[_gather_index(at, l_seq)] = records.qual.data
    at = at + l_seq
    out[_gather_index(at, records.tags.lengths)] = records.tags.data
    return out.tobytes(), starts


def _pack_seq(seq: Ragged) -> U8:
    """Bases two to a byte, high nibble first; an odd row's last low nibble 0."""
    lens = seq.lengths
    padded = (lens + 1) // 2 * 2
    codes = np.zeros(int(padded.sum()), dtype=np.uint8)
    codes[_gather_index(np.concatenate(([0], np.cumsum(padded)[:-1])).astype(np.int64), lens)] = NT16[seq.data]
    return ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8)


def _fixed_parts(buf: U8, starts: I64) -> npt.NDArray[np.void]:
    """The fixed part (``block_size`` .. ``tlen``) of each record at ``starts``: one 36-byte row copied per record
    from a strided window view of the bytes (an index per byte would be 36 int64s, 288 bytes, a record)."""
    if len(starts) == 0:
        return np.zeros(0, dtype=_FIXED)
    rows = np.lib.stride_tricks.sliding_window_view(buf, FIXED_SIZE)[starts]
    return np.ascontiguousarray(rows).view(_FIXED).reshape(len(starts))


def record_starts(data: bytes | bytearray | memoryview) -> I64:
    """Where each record of BAM record bytes starts (the ``block_size`` chain, walked once): in compiled code
    where seqlake's mappy build is loaded (a child that aligns: its aligner imports it; nothing here does, so
    the Lambdas and a reducer never load an alignment library), else here."""
    walk = _compiled_starts()
    if walk is not None:
        return np.frombuffer(walk(np.frombuffer(data, dtype=np.uint8)), dtype=np.int64)
    return record_starts_py(data)


def record_starts_py(data: bytes | bytearray | memoryview) -> I64:
    """:func:`record_starts` walked in Python (the Lambdas', and the compiled walk's judge in tests)."""
    view = memoryview(data)
    out = []
    at = 0
    unpack = struct.Struct("<i").unpack_from
    end = len(view)
    while at < end:
        out.append(at)
        at += unpack(view, at)[0] + 4
    if at != end:
        raise ValueError(f"BAM records cut short: the last record ends at byte {at}, the data at {end}")
    return np.array(out, dtype=np.int64)


def _compiled_starts() -> Any:
    return getattr(sys.modules.get("mappy"), "seqlake_record_starts", None)


def decode_placement(data: bytes | bytearray | memoryview, starts: I64) -> Records:
    """The records' fixed fields and CIGARs only (names, bases, qualities and tags left empty): what an index
    needs (:func:`seqlake.formats.bai.piece`), without the per-byte work and memory of :func:`decode` (a
    30 kb window of 116,000 records: ~600 MB decoded whole)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    n = len(starts)
    fixed = _fixed_parts(buf, starts)
    l_name = fixed["l_name"].astype(np.int64)
    n_cigar = fixed["n_cigar"].astype(np.int64)
    cigar = buf[_gather_index(starts + FIXED_SIZE + l_name, 4 * n_cigar)].view("<u4").astype(np.uint32)
    none = Ragged(np.zeros(0, dtype=np.uint8), np.zeros(n + 1, dtype=np.int64))
    return Records(fixed["tid"].astype(np.int64), fixed["pos"].astype(np.int64), fixed["mapq"].astype(np.int64),
                   fixed["flag"].astype(np.int64), fixed["next_tid"].astype(np.int64),
                   fixed["next_pos"].astype(np.int64), fixed["tlen"].astype(np.int64), none,
                   Ragged(cigar, np.concatenate(([0], np.cumsum(n_cigar))).astype(np.int64)), none, none, none)


def read_names(data: bytes | memoryview, starts: I64) -> Ragged:
    """The read name of each record starting at ``starts`` (without decoding the rest)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    l_name = buf[starts + 12].astype(np.int64) - 1  # l_read_name (its NUL counted): after block_size, refID and pos
    return Ragged(buf[_gather_index(starts + FIXED_SIZE, l_name)], np.concatenate(([0], np.cumsum(l_name))))


def name_ids(names: Ragged) -> I64:
    """One id per row of ``names``, equal where the names are: the names as fixed-width byte strings (NUL
    padded: a read name holds no NUL) through one ``np.unique``, not as Python objects."""
    lengths = names.lengths
    if len(lengths) == 0:
        return np.zeros(0, dtype=np.int64)
    width = max(int(lengths.max()), 1)
    padded = np.zeros((len(lengths), width), dtype=np.uint8)
    padded[np.arange(width) < lengths[:, None]] = names.data[int(names.offsets[0]) : int(names.offsets[-1])]
    _, ids = np.unique(padded.view(f"S{width}").ravel(), return_inverse=True)
    return ids.astype(np.int64)


def decode(data: bytes | memoryview, starts: I64 | None = None) -> Records:
    """The records of BAM record bytes (no header)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    starts = record_starts(data) if starts is None else starts
    fixed = _fixed_parts(buf, starts)
    size = fixed["block_size"].astype(np.int64) + 4
    l_name = fixed["l_name"].astype(np.int64)
    n_cigar = fixed["n_cigar"].astype(np.int64)
    l_seq = fixed["l_seq"].astype(np.int64)
    packed_seq = (l_seq + 1) // 2
    at = starts + FIXED_SIZE
    names = buf[_gather_index(at, l_name - 1)]
    at = at + l_name
    cigar = buf[_gather_index(at, 4 * n_cigar)].view("<u4").astype(np.uint32)
    at = at + 4 * n_cigar
    nibbles = buf[_gather_index(at, packed_seq)]
    two = np.empty(2 * len(nibbles), dtype=np.uint8)
    two[0::2], two[1::2] = nibbles >> 4, nibbles & 0xF
    padded = 2 * packed_seq
    seq = NT16_STR[two[_gather_index(np.concatenate(([0], np.cumsum(padded)[:-1])).astype(np.int64), l_seq)]]
    at = at + packed_seq
    qual = buf[_gather_index(at, l_seq)]
    at = at + l_seq
    l_tags = starts + size - at
    tags = buf[_gather_index(at, l_tags)]

    def offsets(lens: I64) -> I64:
        return np.concatenate(([0], np.cumsum(lens))).astype(np.int64)

    seq_off = offsets(l_seq)
    return Records(fixed["tid"].astype(np.int64), fixed["pos"].astype(np.int64), fixed["mapq"].astype(np.int64),
                   fixed["flag"].astype(np.int64), fixed["next_tid"].astype(np.int64),
                   fixed["next_pos"].astype(np.int64), fixed["tlen"].astype(np.int64),
                   Ragged(names, offsets(l_name - 1)), Ragged(cigar, offsets(n_cigar)), Ragged(seq, seq_off),
                   Ragged(qual, seq_off), Ragged(tags, offsets(l_tags)))


def header(text: str, references: Sequence[tuple[str, int]]) -> bytes:
    """The BAM header: magic, the SAM header text, the references (name, length)."""
    raw = text.encode()
    out = [MAGIC, struct.pack("<i", len(raw)), raw, struct.pack("<i", len(references))]
    for name, length in references:
        b = name.encode() + b"\0"
        out.append(struct.pack("<i", len(b)) + b + struct.pack("<i", length))
    return b"".join(out)


def query_lengths(records: Records) -> I64:
    """Query bases each record's CIGAR consumes (equal to ``l_seq`` where both are given)."""
    row, op, length = records.cigar_ops()
    return np.bincount(row, weights=length * CONSUMES_QUERY[op], minlength=len(records)).astype(np.int64)


def int_tag(name: str, values: I64) -> Ragged:
    """One ``i`` tag per record, in the smallest of ``CcSsIi`` that holds it (as htslib stores a SAM text
    ``NM:i:3``), built a type at a time: no loop over records."""
    v = values.astype(np.int64)
    kinds = [(b"C", "<u1", 0, 255), (b"c", "<i1", -128, -1), (b"S", "<u2", 256, 65535),
             (b"s", "<i2", -32768, -129), (b"I", "<u4", 65536, 2**32 - 1), (b"i", "<i4", -(2**31), -32769)]
    lens = np.zeros(len(v), dtype=np.int64)
    kind = np.full(len(v), -1, dtype=np.int64)
    for k, (_, dtype, lo, hi) in enumerate(kinds):
        pick = (kind < 0) & (v >= lo) & (v <= hi)
        kind[pick] = k
        lens[pick] = 3 + np.dtype(dtype).itemsize
    offsets = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    out = np.zeros(int(lens.sum()), dtype=np.uint8)
    for k, (code, dtype, _, _) in enumerate(kinds):
        at = np.flatnonzero(kind == k)
        if not len(at):
            continue
        width = 3 + np.dtype(dtype).itemsize
        rows = np.empty((len(at), width), dtype=np.uint8)
        rows[:, :3] = np.frombuffer(name.encode() + code, dtype=np.uint8)
        rows[:, 3:] = v[at].astype(dtype).view(np.uint8).reshape(len(at), -1)
        out[_gather_index(offsets[at], np.full(len(at), width, dtype=np.int64))] = rows.ravel()
    return Ragged(out, offsets)


def constant_tag(name: str, value: str, n: int) -> Ragged:
    """The same ``Z`` tag on ``n`` records (a read group)."""
    one = np.frombuffer(name.encode() + b"Z" + value.encode() + b"\0", dtype=np.uint8)
    return Ragged(np.tile(one, n), np.arange(n + 1, dtype=np.int64) * len(one))


def coded_tag(name: str, values: Sequence[str], codes: I64) -> Ragged:
    """A ``Z`` tag per record, record ``i``'s ``values[codes[i]]`` (a read group per lane): the few values
    encoded once, gathered per record."""
    return string_tag(name, values).take(codes)


def string_tag(name: str, values: Sequence[str]) -> Ragged:
    """One ``Z`` tag per value (a record's, or one of a few a batch's records share: :func:`coded_tag`)."""
    return Ragged.of([name.encode() + b"Z" + s.encode() + b"\0" for s in values])


def concat_tags(*tags: Ragged) -> Ragged:
    """Each record's tags of ``tags``, in that order."""
    n = len(tags[0].offsets) - 1
    lens = sum((t.lengths for t in tags), np.zeros(n, dtype=np.int64))
    offsets = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    out = np.zeros(int(lens.sum()), dtype=np.uint8)
    at = offsets[:-1].copy()
    for t in tags:
        out[_gather_index(at, t.lengths)] = t.data
        at = at + t.lengths
    return Ragged(out, offsets)


def fixed_fields(data: bytes | memoryview, starts: I64) -> tuple[I64, I64, I64]:
    """(tid, pos, flag) of the records at ``starts``: what the coordinate order needs, nothing else decoded."""
    buf = np.frombuffer(data, dtype=np.uint8)
    fixed = _fixed_parts(buf, starts)
    return fixed["tid"].astype(np.int64), fixed["pos"].astype(np.int64), fixed["flag"].astype(np.int64)


def gather(data: bytes | bytearray | memoryview, starts: I64, sizes: I64) -> tuple[bytes | bytearray, I64]:
    """The records of ``sizes`` bytes at ``starts``, in that order, end to end: the bytes and their starts.
    Copied in compiled code where seqlake's mappy build is loaded (``mappy.seqlake_gather``: a child that
    aligns, a reducer), else joined slice by slice (a per-byte index array would be 8 bytes of memory for each
    byte moved)."""
    copy = getattr(sys.modules.get("mappy"), "seqlake_gather", None)
    if copy is not None:
        out: bytes | bytearray = copy(np.frombuffer(data, dtype=np.uint8), np.ascontiguousarray(starts, np.int64),
                                      np.ascontiguousarray(sizes, np.int64))
    else:
        view = memoryview(data)
        out = b"".join([view[a : a + n] for a, n in zip(starts.tolist(), sizes.tolist(), strict=True)])
    return out, np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64) if len(sizes) else sizes


def reorder(data: bytes | bytearray | memoryview, starts: I64, order: I64) -> tuple[bytes | bytearray, I64]:
    """The records of ``data`` (at ``starts``) in ``order``: the bytes and the records' new starts."""
    sizes = np.diff(np.append(starts, len(data))).astype(np.int64)
    return gather(data, starts[order], sizes[order])
