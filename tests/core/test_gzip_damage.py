"""A damaged gzip file is rejected with the byte where it stops being whole gzip members (rapidgzip's
own errors name none): trailing bytes, zero padding, a corrupt deflate block, a bad header."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from seqlake.base.errors import BadInputError, TruncatedStreamError
from seqlake.reads import gzindex

RECORDS = b"".join(b"@r%d\nACGTACGTAC\n+\nIIIIIIIIII\n" % i for i in range(300))
GOOD = gzip.compress(RECORDS, mtime=0)


def _flipped(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


@pytest.mark.parametrize(("damaged", "where"), [
    (GOOD + b"\0" * 50, f"byte {len(GOOD)}: not a gzip member"),
    (GOOD + b"junk", f"byte {len(GOOD)}: not a gzip member"),
    (b"\x1f\x8b\x09" + GOOD[3:], "unknown compression method (in the gzip member that starts at byte 0)"),
    (GOOD + _flipped(GOOD, 30), f"(in the gzip member that starts at byte {len(GOOD)})"),
], ids=["zero padding", "trailing bytes", "not deflate", "corrupt second member"])
def test_damage_is_located(tmp_path: Path, damaged: bytes, where: str) -> None:
    path = tmp_path / "d.fastq.gz"
    path.write_bytes(damaged)
    for threads in (1, 2):
        with pytest.raises(BadInputError, match="corrupt gzip stream at byte ") as info:
            gzindex.index_gzip(str(path), threads=threads)
        assert not isinstance(info.value, TruncatedStreamError)
        assert where in str(info.value)
