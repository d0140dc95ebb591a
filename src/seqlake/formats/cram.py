"""CRAM 3.0's framing, without an encoder: the file definition, a header container, the EOF container and the
``.crai`` (CRAM spec 3.0, sections 6-9 and 12). The records' containers are htslib's (the reducers encode them
with pysam, :mod:`seqlake.reduce.cramencode`); the commit, which runs where pysam is not, frames them: the file
definition and header container written here, the reducers' containers copied in order, :data:`EOF`, and the
``.crai`` from each piece's lines shifted by where the piece lands (:func:`shift_crai`).

A container holds no absolute offset (its landmarks are relative to its own data), so containers cut from one
file are valid in another with the same ``@SQ`` order and ``@RG`` list (the record's reference id and read
group are indexes into them); the container's record counter is not read back when read names are stored.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

#: the CRAM 3.0 EOF container (spec 9: an empty container, reference id -1, start 0x454f46 "EOF"), 38 bytes
EOF = bytes.fromhex("0f000000ffffffff0fe0454f4600000000010005bdd94f0001000606010001000100ee63014b")
MAJOR, MINOR = 3, 0
#: the file definition: "CRAM", the version, a 20-byte file id
FILE_ID_BYTES = 20


def itf8(value: int) -> bytes:
    """``value`` (a 32-bit integer; negative ones as their two's complement) as ITF8."""
    v = value & 0xFFFFFFFF
    if v < 0x80:
        return bytes([v])
    if v < 0x4000:
        return bytes([0x80 | v >> 8, v & 0xFF])
    if v < 0x200000:
        return bytes([0xC0 | v >> 16, v >> 8 & 0xFF, v & 0xFF])
    if v < 0x10000000:
        return bytes([0xE0 | v >> 24, v >> 16 & 0xFF, v >> 8 & 0xFF, v & 0xFF])
    return bytes([0xF0 | v >> 28 & 0x0F, v >> 20 & 0xFF, v >> 12 & 0xFF, v >> 4 & 0xFF, v & 0x0F])


def ltf8_zero() -> bytes:
    return b"\0"


def file_definition(name: str) -> bytes:
    """The 26-byte file definition: ``CRAM``, 3, 0 and the file id (``name`` cut or NUL-padded to 20 bytes)."""
    ident = name.encode()[:FILE_ID_BYTES]
    return b"CRAM" + bytes([MAJOR, MINOR]) + ident + b"\0" * (FILE_ID_BYTES - len(ident))


def _block(content_type: int, data: bytes) -> bytes:
    """A raw (uncompressed) block of ``content_type``, content id 0, with its CRC32."""
    head = bytes([0, content_type]) + itf8(0) + itf8(len(data)) + itf8(len(data))
    body = head + data
    return body + struct.pack("<I", zlib.crc32(body))


def header_container(text: str) -> bytes:
    """The SAM header ``text`` as CRAM's header container: one raw FILE_HEADER block (its length, int32, then
    the text), as htslib writes it less its padding block."""
    raw = text.encode()
    block = _block(0, struct.pack("<i", len(raw)) + raw)
    # length, reference id, start, span, records, record counter (LTF8), bases (LTF8), blocks, landmarks
    head = (struct.pack("<i", len(block)) + itf8(0) + itf8(0) + itf8(0) + itf8(0) + ltf8_zero() + ltf8_zero()
            + itf8(1) + itf8(1) + itf8(0))
    return head + struct.pack("<I", zlib.crc32(head)) + block


def head(name: str, text: str) -> bytes:
    """A CRAM file's first bytes: the file definition and the header container of ``text``."""
    return file_definition(name) + header_container(text)


@dataclass(frozen=True)
class CraiLine:
    """One ``.crai`` line (spec 12): a slice's reference id, alignment start and span, its container's byte
    offset in the file, the slice's offset from the container's data and its size."""

    ref: int
    start: int
    span: int
    container: int
    slice_offset: int
    slice_size: int

    def text(self) -> str:
        return f"{self.ref}\t{self.start}\t{self.span}\t{self.container}\t{self.slice_offset}\t{self.slice_size}\n"


def parse_crai(data: bytes) -> list[CraiLine]:
    """The lines of a ``.crai`` (gzip-compressed, as htslib writes it, or plain)."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    out = []
    for line in data.decode().splitlines():
        if line.strip():
            a, b, c, d, e, f = (int(x) for x in line.split("\t"))
            out.append(CraiLine(a, b, c, d, e, f))
    return out


def shift_crai(lines: Iterable[CraiLine], by: int) -> list[CraiLine]:
    """``lines`` of containers moved ``by`` bytes."""
    return [replace(x, container=x.container + by) for x in lines]


def crai_bytes(lines: Sequence[CraiLine]) -> bytes:
    """A ``.crai`` of ``lines``, gzip-compressed as ``samtools index`` writes it."""
    return gzip.compress("".join(x.text() for x in lines).encode(), mtime=0)


def data_span(size: int, lines: Sequence[CraiLine]) -> tuple[int, int] | None:
    """Where a CRAM file of ``size`` bytes, indexed by ``lines``, keeps its records' containers: from the first
    container to the EOF container; None when it has none."""
    if not lines:
        return None
    return min(x.container for x in lines), size - len(EOF)
