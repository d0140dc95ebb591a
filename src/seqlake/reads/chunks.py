"""The FASTQ chunk parser: a buffer of whole 4-line records -> numpy offsets of every field, validated.

A chunk (a ``bytes`` buffer holding whole records, cut by :mod:`seqlake.reads.fastq` or a child's span
reader) is parsed once into numpy arrays of line offsets (:func:`parse_chunk`) and validated as a whole
(one comparison per record field, not per character). Every rejection is a
:class:`~seqlake.base.errors.BadInputError` naming the file, the record and its line. The QC
(:mod:`seqlake.lake.qc`), the trimmer and the aligner read the records through these offsets, never
through a copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from seqlake.base.errors import BadInputError

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

_NL, _CR, _AT, _PLUS = 10, 13, 64, 43
#: Phred+33 covers quality bytes '!'..'~', i.e. Phred 0..93.
QMIN, QMAX = 33, 126
#: the bytes ``str.split()`` treats as whitespace (read as latin-1): where a read name ends
_IS_SPACE: npt.NDArray[np.bool_] = np.array([chr(c).isspace() for c in range(256)], dtype=np.bool_)


@dataclass(frozen=True)
class ChunkRecords:
    """Offsets of the records of one chunk into its buffer (``data``, as uint8)."""

    data: U8
    name_start: I64  # first byte after '@'
    name_end: I64  # end of the header line (CR excluded)
    seq_start: I64
    qual_start: I64
    length: I64
    first_record: int
    path: str

    def __len__(self) -> int:
        return len(self.length)

    @cached_property
    def text(self) -> str:
        # latin-1 maps each byte to one character: str offsets equal byte offsets
        return self.data.tobytes().decode("latin-1")

    def _slices(self, starts: I64, lengths: I64) -> list[str]:
        text = self.text
        return [text[s : s + n] for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)]

    def names(self) -> list[str]:
        """Read names up to the first whitespace (as SAM's QNAME): ``header.split(None, 1)[0]``,
        with the name ends found for the whole chunk at once (one slice per read, no split)."""
        hs, he = self.name_start, self.name_end
        lens = he - hs
        heads = _gather(self.data, hs, lens)
        # the names are sliced from the header lines alone, back to back (not from the whole chunk's text)
        text = heads.tobytes().decode("latin-1")
        offs = np.cumsum(lens) - lens
        space = np.flatnonzero(_IS_SPACE[heads])
        ends = offs + lens
        lead: list[int] = []
        if len(space):
            first = np.append(space, len(heads))[np.searchsorted(space, offs)]
            ends = offs + np.minimum(first - offs, lens)
            # a header that starts with whitespace: split() skips it first (rare, so per read)
            lead = np.flatnonzero((lens > 0) & (first == offs)).tolist()
        names = [text[s:e] for s, e in zip(offs.tolist(), ends.tolist(), strict=True)]
        for i in lead:
            names[i] = (text[int(offs[i]) : int(offs[i] + lens[i])].split(None, 1) or [""])[0]
        return names

    def first_name(self) -> str:
        """``names()[0]`` without the others (a child that neither aligns nor pairs needs only this one)."""
        header = self.data[int(self.name_start[0]) : int(self.name_end[0])].tobytes().decode("latin-1")
        return (header.split(None, 1) or [""])[0]

    def sequences(self) -> list[str]:
        return self._slices(self.seq_start, self.length)

    def sequence_bytes(self) -> list[bytes]:
        """:meth:`sequences` as ``bytes``, what mappy maps (it would encode a ``str`` read by read)."""
        raw = self.data.tobytes()
        return [raw[s : s + n] for s, n in zip(self.seq_start.tolist(), self.length.tolist(), strict=True)]

    def qualities(self) -> list[str]:
        return self._slices(self.qual_start, self.length)


def _line_bounds(arr: U8, newlines: I64 | None = None) -> tuple[I64, I64]:
    nl = np.flatnonzero(arr == _NL) if newlines is None else newlines
    if len(arr) and arr[-1] != _NL:  # a missing final newline is accepted: the last record is complete without it
        nl = np.append(nl, len(arr))
    starts = np.empty_like(nl)
    if len(nl):
        starts[0] = 0
        starts[1:] = nl[:-1] + 1
    ends = nl.copy()
    nonempty = ends > starts
    # CRLF line ends: the CR belongs to no field
    ends -= nonempty & (arr[np.maximum(ends - 1, 0)] == _CR)
    return starts, ends


def parse_chunk(
    data: bytes | bytearray | memoryview | U8, path: str, first_record: int = 0, newlines: I64 | None = None
) -> ChunkRecords:
    """Split a record-aligned chunk into fields and validate it as a whole.

    Checks (the bad-input policy of :mod:`seqlake.reads.fastq`): four lines per record, ``@`` headers, ``+``
    separators (a ``+`` line that repeats a name must repeat the header), equal sequence and quality
    lengths, quality bytes in ``!``..``~`` (that one in :meth:`QCAccumulator.add_chunk`, which gathers
    the qualities anyway). The offending line number is computed only once a violation is known.
    ``newlines``: the offsets of the chunk's newline bytes, when the caller has found them already.
    """
    arr = np.frombuffer(data, dtype=np.uint8)
    starts, ends = _line_bounds(arr, newlines)
    nlines = len(starts)
    if nlines % 4:
        rec = nlines // 4
        # an earlier defect in the complete records is the one to report (it comes first)
        parse_chunk(arr[: starts[4 * rec]] if rec else arr[:0], path, first_record)
        raise BadInputError(
            path,
            f"file ends inside a record: {nlines % 4} of its 4 lines present",
            line=4 * (first_record + rec) + 1,
            record=first_record + rec,
        )
    hs, he = starts[0::4], ends[0::4]
    ss, se = starts[1::4], ends[1::4]
    ps, pe = starts[2::4], ends[2::4]
    qs, qe = starts[3::4], ends[3::4]
    lens = se - ss
    n = len(hs)
    recs = ChunkRecords(arr, hs + 1, he, ss, qs, lens, first_record, path)
    if n == 0:
        return recs
    bad_header = (he == hs) | (arr[np.minimum(hs, len(arr) - 1)] != _AT)
    bad_plus = (pe == ps) | (arr[np.minimum(ps, len(arr) - 1)] != _PLUS)
    bad_len = (qe - qs) != lens
    if bad_header.any() or bad_plus.any() or bad_len.any():
        _raise_first(path, first_record, recs, bad_header=bad_header, bad_plus=bad_plus, bad_len=bad_len, qlen=qe - qs)
    named_plus = np.flatnonzero(pe - ps > 1)
    if len(named_plus):
        _check_plus_names(path, first_record, arr, (hs, he), (ps, pe), idx=named_plus)
    if int(arr.max()) >= 0x80:  # one pass; the planner's sniff (dnaio) rejects the same in the first MiB
        _raise_non_ascii(path, first_record, arr)
    return recs


def _raise_non_ascii(path: str, first: int, arr: U8) -> None:
    pos = int(np.argmax(arr >= 0x80))
    rel_line = int(np.count_nonzero(arr[:pos] == _NL))
    raise BadInputError(path, f"non-ASCII byte 0x{int(arr[pos]):02x} (FASTQ is ASCII)",
                        line=4 * first + rel_line + 1, record=first + rel_line // 4)


def _raise_first(
    path: str,
    first: int,
    recs: ChunkRecords,
    *,
    bad_header: npt.NDArray[np.bool_],
    bad_plus: npt.NDArray[np.bool_],
    bad_len: npt.NDArray[np.bool_],
    qlen: I64,
) -> None:
    # the first violation in file order: header (line 1) before '+' (line 3) before quality (line 4)
    candidates: list[tuple[int, int, str]] = []
    if bad_header.any():
        i = int(np.argmax(bad_header))
        candidates.append((4 * i, i, "header line does not start with '@'"))
    if bad_plus.any():
        i = int(np.argmax(bad_plus))
        candidates.append((4 * i + 2, i, "third line of the record does not start with '+'"))
    if bad_len.any():
        i = int(np.argmax(bad_len))
        candidates.append(
            (
                4 * i + 3,
                i,
                f"quality has {int(qlen[i])} characters but the sequence has {int(recs.length[i])}",
            )
        )
    offset, i, msg = min(candidates)
    raise BadInputError(
        path,
        f"{msg} (record {first + i + 1}{_quote_name(recs, i)})",
        line=4 * first + offset + 1,
        record=first + i,
    )


def _quote_name(recs: ChunkRecords, i: int) -> str:
    s, e = int(recs.name_start[i]), int(recs.name_end[i])
    name = recs.data[s - 1 : e].tobytes()[:60].decode("ascii", "replace")
    return f", {name!r}" if name.startswith("@") else ""


def _check_plus_names(
    path: str, first: int, arr: U8, header: tuple[I64, I64], plus: tuple[I64, I64], *, idx: I64
) -> None:
    (hs, he), (ps, pe) = header, plus
    hlen, plen = he[idx] - hs[idx] - 1, pe[idx] - ps[idx] - 1
    differs = hlen != plen
    same_len = idx[~differs]
    if len(same_len):
        a = _gather(arr, hs[same_len] + 1, plen[~differs])
        b = _gather(arr, ps[same_len] + 1, plen[~differs])
        mismatch = np.flatnonzero(a != b)
        if len(mismatch):
            bounds = np.cumsum(plen[~differs])
            differs[np.flatnonzero(~differs)[np.searchsorted(bounds, mismatch, side="right")]] = True
    if differs.any():
        i = int(idx[int(np.argmax(differs))])
        plus_line = arr[ps[i] : pe[i]].tobytes()[:60].decode("ascii", "replace")
        header_line = arr[hs[i] : he[i]].tobytes()[:60].decode("ascii", "replace")
        raise BadInputError(
            path,
            f"'+' line {plus_line!r} names a different read than the header {header_line!r}",
            line=4 * (first + i) + 3,
            record=first + i,
        )


def raise_bad_quality(path: str, first: int, arr: U8, qs: I64, lens: I64) -> None:
    qual = _gather(arr, qs, lens)
    pos = int(np.flatnonzero((qual < QMIN) | (qual > QMAX))[0])
    i = int(np.searchsorted(np.cumsum(lens), pos, side="right"))
    ch = int(qual[pos])
    raise BadInputError(
        path,
        f"quality character {chr(ch)!r} (byte {ch}) is outside '!'..'~'",
        line=4 * (first + i) + 4,
        record=first + i,
    )


def _gather(arr: U8, starts: I64, lens: I64) -> U8:
    """Concatenate ``arr[s:s+n]`` for every (s, n): one fancy index, no Python loop."""
    total = int(lens.sum())
    if total == 0:
        return np.empty(0, dtype=np.uint8)
    off = np.cumsum(lens) - lens
    idx = np.arange(total, dtype=np.int64)
    idx += np.repeat(starts - off, lens)
    return arr[idx]
