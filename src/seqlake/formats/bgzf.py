"""BGZF as the SAM/BAM specification (section 4.1) defines it: gzip members of at most 64 KiB holding at most
0xff00 plain bytes each (htslib's ``BGZF_BLOCK_SIZE``), each with the ``BC`` extra field giving its size,
and a 28-byte empty member marking the end of the file.

A virtual offset is ``block's byte offset << 16 | offset in the block's plain bytes``. :func:`compress_records`
starts a new block where the next record would not fit (as htslib's ``bgzf_flush_try`` does for BAM
records), so a record lies in one block unless it is larger than a block, and returns every record's
virtual offset relative to the data's first byte: an index of pieces is their offsets shifted by where each
piece lands (``voffset + (byte_offset << 16)``).
"""

from __future__ import annotations

import struct
import sys
import zlib
from collections.abc import Callable, Iterator
from types import ModuleType

import numpy as np
import numpy.typing as npt

#: a deflate module (``zlib``'s interface: ``compressobj``, ``decompress``) and its level
Codec = tuple[ModuleType, int]
#: the standard library's zlib at level 6, htslib's default: what every stage has (the commit Lambda's layers
#: have no isal, tests/aws/test_layers.py); the children pass ISA-L's (``child/worker``: about zlib 6's size at
#: several times its speed: the child's CPU was 1.62x its base with zlib 6, 1.19x with ISA-L 2)
ZLIB: Codec = (zlib, 6)

#: htslib ``BGZF_BLOCK_SIZE``: plain bytes per member
BLOCK = 0xFF00
EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
_HEADER = struct.Struct("<BBBBIBBHBBHH")
I64 = npt.NDArray[np.int64]


def member(plain: bytes | memoryview, codec: Codec = ZLIB) -> bytes:
    """One BGZF member holding ``plain`` (at most :data:`BLOCK` bytes)."""
    deflate = codec[0].compressobj(codec[1], zlib.DEFLATED, -15)
    data: bytes = deflate.compress(plain) + deflate.flush()
    return (_HEADER.pack(31, 139, 8, 4, 0, 0, 255, 6, 66, 67, 2, len(data) + 25) + data
            + struct.pack("<II", zlib.crc32(plain), len(plain)))


def compress(plain: bytes | bytearray | memoryview, *, eof: bool = True, codec: Codec = ZLIB) -> bytes:
    """``plain`` as BGZF cut every :data:`BLOCK` bytes, ending with the EOF member unless ``eof=False``."""
    view = memoryview(plain)
    blocks = b"".join(member(view[i : i + BLOCK], codec) for i in range(0, len(plain), BLOCK))
    return blocks + EOF if eof else blocks


def compress_records(plain: bytes | bytearray | memoryview, starts: I64, codec: Codec = ZLIB) -> tuple[bytes, I64, I64]:
    """Records laid end to end in ``plain`` (record k at byte ``starts[k]``) as BGZF blocks cut at record
    boundaries (no EOF member): the bytes, each record's start and end as virtual offsets from the first
    byte (an end is where the next record starts: the next block's start when a block ends there)."""
    view = memoryview(plain)
    n = len(starts)
    ends = np.append(starts[1:], len(view)).astype(np.int64) if n else np.zeros(0, np.int64)
    vstart = np.zeros(n, dtype=np.int64)
    vend = np.zeros(n, dtype=np.int64)
    out: list[bytes] = []
    at = 0  # the compressed bytes so far
    first = 0  # the block's first record
    while first < n:
        lo = int(starts[first])
        # the records that fit whole; at least one (a record larger than a block is cut across blocks)
        last = max(int(np.searchsorted(ends, lo + BLOCK, side="right")), first + 1)
        hi = int(ends[last - 1])
        if hi - lo > BLOCK:  # one record larger than a block: its blocks, its end where the last one ends
            blocks = [member(view[i : min(i + BLOCK, hi)], codec) for i in range(lo, hi, BLOCK)]
            vstart[first] = at << 16
            size = sum(map(len, blocks))
            vend[first] = (at + size) << 16
            out += blocks
            at += size
        else:
            block = member(view[lo:hi], codec)
            vstart[first:last] = at << 16 | (starts[first:last] - lo)
            vend[first:last] = at << 16 | (ends[first:last] - lo)
            at += len(block)
            out.append(block)
            vend[last - 1] = at << 16  # a block's last record ends where the next block starts (as bgzf_tell)
        first = last
    return b"".join(out), vstart, vend


def members(data: bytes | memoryview) -> Iterator[tuple[int, int, int]]:
    """(byte offset, byte end, plain size) of each member of BGZF ``data``, from the members' headers (``BSIZE``)
    and footers (``ISIZE``): nothing decompressed."""
    view = memoryview(data)
    at = 0
    while at < len(view):
        if at + 18 > len(view) or view[at] != 31 or view[at + 1] != 139:
            raise ValueError(f"not a BGZF block at byte {at}")
        (bsize,) = struct.unpack_from("<H", view, at + 16)
        end = at + bsize + 1
        if end > len(view) or bsize < 25:
            raise ValueError(f"the BGZF block at byte {at} is cut short")
        yield at, end, struct.unpack_from("<I", view, end - 4)[0]
        at = end


def blocks(data: bytes | memoryview) -> Iterator[tuple[int, bytes]]:
    """(byte offset, plain bytes) of each member of BGZF ``data`` (the EOF member gives empty bytes)."""
    view = memoryview(data)
    inflate = _inflate()
    for at, end, _ in members(view):
        yield at, inflate(view[at + 18 : end - 8], -15)


def _inflate() -> Callable[[memoryview, int], bytes]:
    """ISA-L's raw inflate where the stage has loaded it (a child, a reducer: several times zlib's speed), else
    zlib's. Nothing here imports it: the Lambdas that share this module have no isal (tests/aws/test_layers.py)."""
    decompress: Callable[[memoryview, int], bytes] = getattr(sys.modules.get("isal.isal_zlib"), "decompress",
                                                             zlib.decompress)
    return decompress


def decompress(data: bytes | memoryview) -> bytes:
    """The plain bytes of BGZF ``data``."""
    return b"".join(plain for _, plain in blocks(data))


def virtual_offsets(data: bytes | memoryview, plain: I64) -> I64:
    """The virtual offsets (from ``data``'s first byte) of plain offsets ``plain`` of BGZF ``data``; the plain
    end of the data maps to the byte after its last block (``len(data) << 16``: where what follows starts).
    The blocks' plain sizes are their footers' (``ISIZE``): nothing is decompressed."""
    coffsets, starts = [], []
    total = 0
    for at, _, size in members(data):
        coffsets.append(at)
        starts.append(total)
        total += size
    co = np.array([*coffsets, len(data)], dtype=np.int64)
    ps = np.array([*starts, total], dtype=np.int64)
    k = np.searchsorted(ps, plain, side="right") - 1
    k = np.minimum(k, len(ps) - 1)
    out: I64 = (co[k] << 16) | (plain - ps[k])
    return out
