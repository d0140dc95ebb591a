"""Structure-aware inputs for the fuzz targets (Hypothesis strategies).

Inputs are built as a user's files are: FASTQ records field by field (names with comments, ``+`` lines
empty, repeating or contradicting the name, qualities across the whole byte range, CRLF, zero-length and
very long reads), then containers around them (gzip members split anywhere, empty members, header-only
files, zero padding, BGZF blocks of any size with or without their EOF block), then the mutations that
real files suffer: cut at any byte (every field boundary is a candidate), bytes flipped, NUL inserted,
trailing bytes. Seeds are the real files of ``tests/data/`` and ``../shared/data/edge`` (when present),
mutated the same way.
"""

from __future__ import annotations

import gzip
import io
import json
import struct
import zlib
from functools import cache
from pathlib import Path

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
SEED_DIRS = [ROOT / "tests" / "data", ROOT.parent / "shared" / "data" / "edge"]
#: the largest seed read (bigger files are skipped: one example must stay fast)
SEED_MAX = 256 << 10


@cache
def seeds() -> tuple[bytes, ...]:
    """The plain bytes of every seed file (decompressed when gzip / BGZF), sorted by path."""
    out = []
    for d in SEED_DIRS:
        if not d.is_dir():
            continue
        for p in sorted(d.rglob("*")):
            if not p.is_file() or p.stat().st_size > SEED_MAX or "fuzz" in p.parts:
                continue
            data = p.read_bytes()
            if data[:2] == b"\x1f\x8b":
                try:
                    data = gzip.decompress(data)
                except (OSError, EOFError, zlib.error):
                    continue
            if data[:1] in (b"@", b"") and len(data) <= SEED_MAX:
                out.append(data)
    return tuple(out)


# ------------------------------------------------------------------------------ FASTQ


_BASES = st.sampled_from(list(b"ACGTNacgtn.-*"))
_QUAL_OK = st.integers(33, 126)
_QUAL_ANY = st.integers(0, 255)


@st.composite
def record(draw: st.DrawFn) -> bytes:
    name = draw(st.binary(max_size=12).map(lambda b: bytes(33 + c % 94 for c in b)))
    if draw(st.booleans()):
        name += b" " + draw(st.sampled_from([b"1:N:0:ATCACG", b"length=5", b"", b"\t x"]))
    n = draw(st.one_of(st.integers(0, 30), st.integers(0, 30), st.integers(100, 3000), st.just(0)))
    seq = bytes(draw(st.lists(_BASES, min_size=n, max_size=n)))
    qlen = n if draw(st.integers(0, 15)) else max(0, n + draw(st.integers(-2, 2)))
    qual = bytes(draw(st.lists(_QUAL_OK if draw(st.integers(0, 9)) else _QUAL_ANY, min_size=qlen, max_size=qlen)))
    plus = draw(st.sampled_from([b"+", b"+", b"+" + name, b"+other", b"-"]))
    head = b"@" + name if draw(st.integers(0, 20)) else draw(st.sampled_from([b"", b">" + name, name]))
    end = draw(st.sampled_from([b"\n", b"\n", b"\n", b"\r\n"]))
    return end.join([head, seq, plus, qual]) + end


@st.composite
def fastq(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 3)) == 0 and seeds():
        data = draw(st.sampled_from(seeds()))
    else:
        data = b"".join(draw(st.lists(record(), max_size=12)))
    return draw(mutated(data))


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with up to three of: a cut (often at a field boundary), a flipped byte, an inserted
    NUL / CR / newline / non-ASCII byte, trailing bytes, a missing final newline, a very long line."""
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["cut", "flip", "insert", "trail", "strip", "long", "none"]))
        if kind == "cut" and data:
            bounds = [i + 1 for i, c in enumerate(data) if c == 10]
            at = draw(st.sampled_from(bounds)) if bounds and draw(st.booleans()) else draw(
                st.integers(0, len(data)))
            data = data[:at]
        elif kind == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]
        elif kind == "insert":
            i = draw(st.integers(0, len(data)))
            data = data[:i] + draw(st.sampled_from([b"\0", b"\r", b"\n", b"\xff", b"@", b"+", b"\n\n"])) + data[i:]
        elif kind == "trail":
            data += draw(st.sampled_from([b"\n", b"\n\n", b"\0", b"@", b"garbage", b"\r\n"]))
        elif kind == "strip":
            data = data.rstrip(b"\n")
        elif kind == "long":
            n = draw(st.sampled_from([70_000, 70_000, 300_000, (1 << 20) + 1]))
            data += b"@long\n" + b"A" * n + b"\n+\n" + b"I" * n + b"\n"
    return data


# ------------------------------------------------------------------------------ gzip and BGZF


def _member(plain: bytes, level: int, header: int) -> bytes:
    """One gzip member; ``header`` picks optional header fields (FNAME, FEXTRA, FCOMMENT)."""
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = c.compress(plain) + c.flush()
    flags, extra = 0, b""
    if header & 1:
        flags |= 8
        extra += b"reads.fastq\0"
    if header & 2:
        flags |= 4
        extra = struct.pack("<H", 4) + b"AB\0\0" + extra
    if header & 4:
        flags |= 16
        extra += b"comment\0"
    head = b"\x1f\x8b\x08" + bytes([flags]) + b"\0\0\0\0\0\xff" + extra
    return head + body + struct.pack("<II", zlib.crc32(plain), len(plain) & 0xFFFFFFFF)


@st.composite
def gzip_file(draw: st.DrawFn) -> bytes:
    plain = draw(fastq())
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.sampled_from([_member(b"", 6, 0), _member(b"", 6, 0)[:10], _member(b"", 6, 1)[:22]]))
    cuts = sorted(draw(st.lists(st.integers(0, len(plain)), max_size=4)))
    parts = [plain[a:b] for a, b in zip([0, *cuts], [*cuts, len(plain)], strict=True)]
    level = draw(st.sampled_from([0, 1, 6, 9]))
    data = b"".join(_member(p, level, draw(st.integers(0, 7))) for p in parts)
    return draw(container_mutated(data))


@st.composite
def container_mutated(draw: st.DrawFn, data: bytes) -> bytes:
    kind = draw(st.sampled_from(["none", "none", "cut", "flip", "trail", "zeros", "empty-member"]))
    if kind == "cut" and data:
        data = data[:draw(st.integers(0, len(data) - 1))]
    elif kind == "flip" and data:
        i = draw(st.integers(0, len(data) - 1))
        data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]
    elif kind == "trail":
        data += draw(st.sampled_from([b"x", b"\x1f\x8b", b"\x1f\x8b\x08\0\0\0\0\0\0\xff", b"junk" * 10]))
    elif kind == "zeros":
        data += b"\0" * draw(st.integers(1, 600))
    elif kind == "empty-member":
        data = _member(b"", 6, 0) + data
    return data


BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


def bgzf_block(plain: bytes, level: int = 6) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = c.compress(plain) + c.flush()
    size = 18 + len(body) + 8
    head = b"\x1f\x8b\x08\x04\0\0\0\0\0\xff\x06\0BC\x02\0" + struct.pack("<H", size - 1)
    return head + body + struct.pack("<II", zlib.crc32(plain), len(plain))


@st.composite
def bgzf_file(draw: st.DrawFn) -> bytes:
    plain = draw(fastq())
    if draw(st.integers(0, 9)) == 0:
        return BGZF_EOF
    # tiny blocks only for small files: a block costs ~50 bytes of header and footer
    size = draw(st.sampled_from([7, 50, 300, 4096, 65280] if len(plain) < 20_000 else [4096, 65280]))
    blocks = [bgzf_block(plain[i:i + size]) for i in range(0, len(plain), size)]
    if draw(st.booleans()) and blocks:
        blocks.insert(draw(st.integers(0, len(blocks))), bgzf_block(b""))
    data = b"".join(blocks) + (BGZF_EOF if draw(st.integers(0, 4)) else b"")
    return draw(container_mutated(data))


@st.composite
def any_file(draw: st.DrawFn) -> bytes:
    return draw(st.one_of(fastq(), gzip_file(), bgzf_file()))


# ------------------------------------------------------------------------------ samplesheets, JSON


_CELLS = st.sampled_from(["s1", "s 2", "", "a.fastq.gz", "b_R2.fastq.gz", "../x.fastq.gz", "/abs.fq.gz",
                          "s3://other/x.fastq.gz", "http://x/y.fq", "r1.fq", "1", "NA", "\ufeffsample",
                          "x" * 200, "é.fastq.gz", "s1,", "\"q\"", "a\nb", "\0", "lane", "control"])


@st.composite
def samplesheet(draw: st.DrawFn) -> bytes:
    header = draw(st.sampled_from([["sample", "fastq_1", "fastq_2"], ["sample", "fastq_1"],
                                   ["sample", "fastq_1", "fastq_2", "lane"], ["fastq_1"], []]))
    rows = draw(st.lists(st.lists(_CELLS, min_size=0, max_size=5), max_size=5))
    out = io.StringIO()
    import csv

    w = csv.writer(out, lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    w.writerow(header)
    for r in rows:
        w.writerow(r)
    data = out.getvalue().encode("utf-8")
    return draw(mutated(data))


_JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=8),
                       st.sampled_from(["s3://b/k.fastq.gz", "b", "r", "incoming/x.fastq.gz"]))
_JSON = st.recursive(_JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=8)


def _replace_somewhere(draw: st.DrawFn, doc: object) -> object:
    """``doc`` with one value somewhere in it replaced by an arbitrary JSON value, or a key removed."""
    if isinstance(doc, dict) and doc and draw(st.integers(0, 2)):
        key = draw(st.sampled_from(sorted(doc)))
        doc = dict(doc)
        if draw(st.integers(0, 3)) == 0:
            del doc[key]
        else:
            doc[key] = _replace_somewhere(draw, doc[key])
        return doc
    if isinstance(doc, list) and doc and draw(st.booleans()):
        i = draw(st.integers(0, len(doc) - 1))
        return [*doc[:i], _replace_somewhere(draw, doc[i]), *doc[i + 1:]]
    return draw(_JSON)


GOOD_REQUEST = {
    "run_id": "r", "bucket": "bkt",
    "samples": [{"name": "s", "r1": "s3://bkt/incoming/s_R1.fastq.gz", "r2": "s3://bkt/incoming/s_R2.fastq.gz"}],
    "inputs": [{"uri": "s3://bkt/incoming/s_R1.fastq.gz", "bucket": "bkt", "key": "incoming/s_R1.fastq.gz",
                "etag": "e", "size": 1}],
    "samplesheet": None, "reference": None, "parameters": {},
}
GOOD_EVENT = {
    "version": "0", "id": "e-1", "detail-type": "Object Created", "source": "aws.s3", "account": "1",
    "time": "2026-01-01T00:00:00Z", "region": "us-east-1", "resources": ["arn:aws:s3:::b"],
    "detail": {"version": "0", "bucket": {"name": "b"},
               "object": {"key": "incoming/s_R1.fastq.gz", "size": 10, "etag": "abc", "sequencer": "1"},
               "request-id": "x", "requester": "y", "source-ip-address": "1.2.3.4", "reason": "PutObject"},
}


@st.composite
def request_json(draw: st.DrawFn) -> bytes:
    doc = GOOD_REQUEST
    for _ in range(draw(st.integers(0, 3))):
        doc = _replace_somewhere(draw, doc)
    text = json.dumps(doc).encode()
    return draw(mutated(text)) if draw(st.integers(0, 4)) == 0 else text


@st.composite
def event_json(draw: st.DrawFn) -> bytes:
    doc = GOOD_EVENT
    for _ in range(draw(st.integers(0, 3))):
        doc = _replace_somewhere(draw, doc)
    return json.dumps(doc).encode()


BED = ROOT / "tests" / "data" / "nCoV-2019.V3.primer.bed"


@st.composite
def primer_bed(draw: st.DrawFn) -> bytes:
    lines = BED.read_bytes().splitlines(keepends=True) if BED.is_file() else [b"MN908947.3\t30\t54\tx_1_LEFT\t1\t+\n"]
    start = draw(st.integers(0, max(0, len(lines) - 1)))
    picked = lines[start:start + draw(st.integers(0, 8))]
    if picked and draw(st.booleans()):  # one field of one line replaced
        i = draw(st.integers(0, len(picked) - 1))
        fields = picked[i].rstrip(b"\n").split(b"\t")
        j = draw(st.integers(0, len(fields) - 1))
        fields[j] = draw(st.sampled_from([b"", b"-1", b"99999999", b"1e3", b" 7", b"x_LEFT", b"x_RIGHT_alt1",
                                           b"+", b"*", b"chr1", b"\x0c", b"\xff", b"10\r"]))
        picked[i] = b"\t".join(fields) + b"\n"
    extra = draw(st.sampled_from([b"", b"# comment\n", b"track name=x\n", b"\n", b"\r\n"]))
    return draw(mutated(extra + b"".join(picked)))


STRATEGIES = {
    "chunk": fastq(),
    "gzindex": gzip_file(),
    "bgzf": bgzf_file(),
    "span": any_file(),
    "samplesheet": samplesheet(),
    "request": request_json(),
    "event": event_json(),
    "primers": primer_bed(),
}
