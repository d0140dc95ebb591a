"""The fuzz targets: one function per reader a user's bytes reach, each checking the invariant.

Every ``check_*`` takes the input's bytes and a scratch folder and raises AssertionError when the
reader breaks its promise (docs/FAULTS.md, "What the readers promise"):

- accepted input gives the reads and bases of the plain reference parser (:mod:`tests.fuzz.reference`),
  read whole and cut into several shards;
- rejected input raises :class:`~seqlake.base.errors.BadInputError` naming the file and a line, a record
  or a byte offset, and the reference rejects it too;
- anything else (another exception type, a hang, a crash of a helper process) is a failure.

Time is checked by the driver (``tests/fuzz/run.py``), never here: these checks also replay the kept
inputs in ``make test``, where no assertion may be timed.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from seqlake.base.errors import BadInputError

from . import reference
from .reference import BadGzipError, Counts, Rejected

Check = Callable[[bytes, Path], None]
#: plain bytes between checkpoints in the targets that cut shards (the app's 256 KiB would leave
#: every small input one shard)
SPACING = 64
_OFFSET = re.compile(r"\bbyte \d+\b")


def located(err: BadInputError, path: str) -> None:
    """A rejection names the file and a line, a record or a byte offset."""
    assert err.path == path, f"the error names {err.path!r}, not the file {path!r}"
    assert "\n" not in str(err), f"the error is not one line: {err!s}"
    assert err.line is not None or err.record is not None or _OFFSET.search(err.message), (
        f"the error names no line, record or byte offset: {err!s}")


@contextlib.contextmanager
def rejected_like(expect: Counts | Rejected | BadGzipError, path: str) -> Iterator[None]:
    """The reader's rejection must be located and agree with the reference's verdict."""
    try:
        yield
    except BadInputError as err:
        located(err, path)
        assert not isinstance(expect, Counts), f"the reader rejects what the reference accepts ({expect}): {err}"
        return
    assert not isinstance(expect, Rejected | BadGzipError), f"the reader accepts what the reference rejects: {expect}"


def _verdict(parse: Callable[[], Counts]) -> Counts | Rejected | BadGzipError:
    try:
        return parse()
    except (Rejected, BadGzipError) as why:
        return why


# ------------------------------------------------------------------------------ FASTQ chunks and QC


def _record_cuts(data: bytes, pieces: int) -> list[bytes]:
    """``data`` cut into ``pieces`` runs of whole 4-line groups (the last holds any rest)."""
    ends = [m.end() for m in re.finditer(b"\n", data)][3::4]
    if not ends or pieces <= 1:
        return [data]
    step = max(1, len(ends) // pieces)
    cuts = [0, *ends[step - 1::step][:pieces - 1], len(data)]
    return [data[a:b] for a, b in itertools.pairwise(cuts) if b > a] or [data]


def check_chunk(data: bytes, tmp: Path) -> None:
    """parse_chunk + the QC's quality check, whole and in record-aligned pieces (as shards cut it)."""
    from seqlake.lake.qc import QCAccumulator
    from seqlake.reads.chunks import parse_chunk

    path = str(tmp / "reads.fastq")
    expect = _verdict(lambda: reference.fastq_counts(data))
    for pieces in (1, 3):
        acc, first = QCAccumulator(), 0
        with rejected_like(expect, path):
            for piece in _record_cuts(data, pieces):
                recs = parse_chunk(piece, path, first)
                acc.add_chunk(recs)
                first += len(recs)
            got = Counts(acc.reads, acc.bases)
            assert got == expect, f"{pieces} piece(s): the QC counts {got}, the reference {expect}"


# ------------------------------------------------------------------------------ gzip index pass


@contextlib.contextmanager
def _threads(n: int) -> Iterator[None]:
    from seqlake.base.cpus import THREADS_VAR

    with _env(THREADS_VAR, str(n)):
        yield


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    import os

    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _gzip_expect(data: bytes) -> tuple[int, bytes] | Rejected | BadGzipError:
    try:
        plain = reference.gunzip(data)
        return reference.newline_records(plain), plain
    except (Rejected, BadGzipError) as why:
        return why


def check_gzindex(data: bytes, tmp: Path) -> None:
    """The gzip index pass on one vCPU and on two (its counting in a forked helper): records, plain
    size and checkpoints at record starts; then every checkpoint's seek lands on its record."""
    from seqlake.reads import gzindex
    from seqlake.reads.fastq import sniff_compression

    if sniff_compression(data[:32]) not in ("gzip", "bgzf"):
        return  # the planner indexes only what it sniffs as gzip: the span target covers the rest
    f = tmp / "reads.fastq.gz"
    f.write_bytes(data)
    path = str(f)
    expect = _gzip_expect(data)
    for threads in (1, 2):
        try:
            res = gzindex.index_gzip(path, spacing=SPACING, threads=threads)
        except BadInputError as err:
            located(err, path)
            assert not isinstance(expect, tuple), f"threads={threads}: rejects a good gzip file: {err}"
            continue
        assert isinstance(expect, tuple), f"threads={threads}: accepts what the reference rejects: {expect}"
        records, plain = expect
        assert (res.scan.records, res.scan.plain_size) == (records, len(plain)), (
            f"threads={threads}: {res.scan.records} records / {res.scan.plain_size} bytes, "
            f"the reference {records} / {len(plain)}")
        _check_checkpoints(res.scan.checkpoints, plain)
        if res.index is not None and res.scan.plain_size:
            with gzindex.open_indexed(path, res.index) as r:
                for offset, _ in res.scan.checkpoints:
                    r.seek(offset)
                    assert r.read(64) == plain[offset:offset + 64], f"seek to {offset} reads other bytes"


def _check_checkpoints(cks: list[tuple[int, int]], plain: bytes) -> None:
    assert cks[:1] == [(0, 0)], f"checkpoints do not start at (0, 0): {cks[:3]}"
    for offset, before in cks:
        assert plain[:offset].count(b"\n") == 4 * before, f"checkpoint ({offset}, {before}) is not a record start"
        assert offset == 0 or plain[offset - 1:offset] == b"\n", f"checkpoint {offset} is not after a newline"


# ------------------------------------------------------------------------------ BGZF counting pass


def check_bgzf(data: bytes, tmp: Path) -> None:
    """The BGZF counting pass in order, on threads and in forked helpers (chunks made small)."""
    from seqlake.reads import bgzf, gzindex
    from seqlake.reads.fastq import sniff_compression

    if sniff_compression(data[:32]) != "bgzf":
        return  # the planner counts only what it sniffs as BGZF
    f = tmp / "reads.fastq.bgz"
    f.write_bytes(data)
    path = str(f)
    expect = _gzip_expect(data)
    old = bgzf.CHUNK_BYTES, gzindex.BGZF_WINDOW
    # several chunks, so the forked helpers count some of them; the window that finds a chunk's first
    # block shrunk in proportion (the app reads 256 KiB per 1 MiB chunk)
    bgzf.CHUNK_BYTES, gzindex.BGZF_WINDOW = 4096, 1024
    try:
        for threads in (1, 2):
            try:
                scan = bgzf.count_records(path, spacing=SPACING, threads=threads)
            except bgzf.NotBgzfError:
                continue  # the planner indexes it as gzip: that is check_gzindex's case
            except BadInputError as err:
                located(err, path)
                assert not isinstance(expect, tuple), f"threads={threads}: rejects a good BGZF file: {err}"
                continue
            assert isinstance(expect, tuple), f"threads={threads}: accepts what the reference rejects: {expect}"
            records, plain = expect
            assert (scan.records, scan.plain_size) == (records, len(plain)), (
                f"threads={threads}: {scan.records} records / {scan.plain_size} bytes, "
                f"the reference {records} / {len(plain)}")
            starts = _block_starts(path)
            for voffset, before in scan.checkpoints:
                block, within = bgzf.split_virtual(voffset)
                assert block in starts, f"checkpoint {voffset}: no block starts at byte {block}"
                at = starts[block] + within
                assert plain[:at].count(b"\n") == 4 * before and (at == 0 or plain[at - 1] == 10), (
                    f"checkpoint {voffset} ({before} records before) is not a record start")
    finally:
        bgzf.CHUNK_BYTES, gzindex.BGZF_WINDOW = old


def _block_starts(path: str) -> dict[int, int]:
    """Compressed offset of every BGZF block -> plain offset of its first byte."""
    from seqlake.reads import gzindex

    starts, plain = {}, 0
    with gzindex.storage.open_read(path) as raw:
        size = raw.seek(0, 2)
        pos = 0
        while pos < size:
            raw.seek(pos)
            n = gzindex.bgzf_block_size(raw.read(18), 0)
            assert n is not None
            raw.seek(pos + n - 4)
            starts[pos] = plain
            plain += int.from_bytes(raw.read(4), "little")
            pos += n
    return starts


# ------------------------------------------------------------------------------ a child's span


def _file_expect(data: bytes) -> Counts | Rejected | BadGzipError:
    from seqlake.reads.fastq import sniff_compression

    comp = sniff_compression(data[:32])
    if comp in ("gzip", "bgzf"):
        return _verdict(lambda: reference.fastq_counts(reference.gunzip(data), check_phred64=True))
    if comp != "plain":
        return Rejected(1, f"{comp} is not fuzzed here")
    return _verdict(lambda: reference.fastq_counts(data, check_phred64=True))


@contextlib.contextmanager
def small_spacing() -> Iterator[None]:
    """The planning passes take a checkpoint every ``SPACING`` bytes (their default is bound at import)."""
    from seqlake.reads import bgzf, gzindex

    saved = [(fn, fn.__defaults__) for fn in (gzindex.index_gzip, gzindex.count_plain, bgzf.count_records)]
    try:
        for fn, defaults in saved:
            assert defaults is not None
            fn.__defaults__ = (SPACING, *defaults[1:])
        yield
    finally:
        for fn, defaults in saved:
            fn.__defaults__ = defaults


def check_span(data: bytes, tmp: Path) -> None:
    """Plan the file as one sample and read every shard as a child does (seek, skip, chunks, parse,
    QC): 1 shard, 3 record shards, 3 byte-range shards. The shards' reads and bases add up to the
    reference's."""
    from seqlake.base.model import Sample
    from seqlake.lake.qc import QCAccumulator
    from seqlake.plan.childplan import load_child_plan
    from seqlake.plan.planner import make_plan
    from seqlake.plan.shards import iter_shard_chunks, rebase_error
    from seqlake.reads.chunks import parse_chunk

    f = tmp / "reads.fq"
    f.write_bytes(data)
    path = str(f)
    expect = _file_expect(data)
    if isinstance(expect, Rejected) and "not fuzzed" in str(expect):
        return
    for run, (shards, count_below) in enumerate([(1, 1 << 30), (3, 1 << 30), (3, 0)]):
        with rejected_like(expect, path), small_spacing():
            plan = make_plan(f"fuzz{run}", [Sample("s", path)], out_prefix=str(tmp / f"out{run}"),
                             shards=shards, count_plain_below=count_below)
            acc = QCAccumulator()
            for child in range(plan.array_size):
                view = load_child_plan(plan.plan_uri, child)
                for shard in view.child_shards(child):
                    for (chunk,) in iter_shard_chunks(view, shard, chunk_bytes=97):
                        try:
                            acc.add_chunk(parse_chunk(chunk.data, path, chunk.first_record, chunk.newlines))
                        except BadInputError as err:
                            if chunk.relative:
                                raise rebase_error(view, view.shards[shard].spans[0], err) from None
                            raise
            got = Counts(acc.reads, acc.bases)
            assert got == expect, f"plan {run} ({plan.array_size} children): {got}, the reference {expect}"


# ------------------------------------------------------------------------------ samplesheets


def check_samplesheet(data: bytes, tmp: Path) -> None:
    """A samplesheet: its samples (one per data row, lanes merged by name), or a located rejection."""
    from seqlake.plan.samplesheet import read_samplesheet

    sheet = tmp / "sheet.csv"
    sheet.write_bytes(data)
    try:
        samples = read_samplesheet(str(sheet))
    except BadInputError as err:
        located(err, str(sheet))
        return
    assert samples, "a sheet accepted with no samples"
    for s in samples:
        assert s.r1 and (s.r2 is None or s.r2 != s.r1), f"sample {s.name}: R1 {s.r1!r}, R2 {s.r2!r}"


# ------------------------------------------------------------------------------ the run request


def check_request(data: bytes, tmp: Path) -> None:
    """The run request's JSON as the steps load it (digest, schema, fields)."""
    import hashlib

    from seqlake.aws.request import ExecutionInput

    f = tmp / "request.json"
    f.write_bytes(data)
    execution = ExecutionInput("r", "b", str(f), hashlib.sha256(data).hexdigest())
    try:
        body = json.loads(data)
        run_id = body.get("run_id") if isinstance(body, dict) else None
    except ValueError:
        run_id = None
    execution = ExecutionInput(run_id if isinstance(run_id, str) else "r", "b", str(f), execution.request_sha256)
    try:
        request = execution.load()
    except BadInputError as err:
        assert err.path == str(f) and "\n" not in str(err), f"the rejection names another file: {err}"
        assert err.line is not None or "field " in err.message or _OFFSET.search(err.message), (
            f"the rejection names no line, byte or field: {err}")
        return
    assert request.run_id == execution.run_id
    assert all(s.r1 for s in request.samples)


# ------------------------------------------------------------------------------ the S3 event


def check_event(data: bytes, tmp: Path) -> None:
    """An EventBridge event as the start function reads it: the object it names, or a located rejection."""
    from seqlake.aws.events import object_from_event

    try:
        event = json.loads(data)
    except ValueError:
        return  # EventBridge hands the function a JSON object, never bytes
    try:
        obj = object_from_event(event)
    except BadInputError as err:
        assert err.path, "the rejection names no event"
        assert err.line is not None or err.record is not None or "field" in err.message, (
            f"the rejection names no field: {err}")
        return
    detail = event["detail"]
    assert obj.uri == f"s3://{detail['bucket']['name']}/{detail['object']['key']}"


# ------------------------------------------------------------------------------ the primer BED


def check_primers(data: bytes, tmp: Path) -> None:
    """A primer BED as the planner reads it (against the reference's one contig): one primer per data
    line, each within the contig, both sides of every amplicon; or a rejection naming a line of the file."""
    from seqlake.plan.primers import load_primer_scheme

    bed = tmp / "primers.bed"
    bed.write_bytes(data)
    ref = tmp / "ref.fa"
    ref.write_bytes(b">MN908947.3\n" + b"ACGT" * 7476 + b"\n")
    lines = data.split(b"\n")
    try:
        scheme = load_primer_scheme(str(bed), str(ref))
    except BadInputError as err:
        assert err.path == str(bed) and "\n" not in str(err), f"the rejection names another file: {err}"
        if err.message != "no primer in the BED file":  # the whole file is the place
            assert err.line is not None or _OFFSET.search(err.message), f"the rejection names no line: {err}"
        assert err.line is None or 1 <= err.line <= len(lines), f"line {err.line} of a {len(lines)}-line file"
        return
    data_lines = [ln for ln in lines if ln.strip() and not ln.startswith((b"#", b"track ", b"browser "))]
    assert len(scheme.primers) == len(data_lines), f"{len(scheme.primers)} primers from {len(data_lines)} lines"
    assert all(0 <= p.start < p.end <= 4 * 7476 for p in scheme.primers)
    assert {a.name for a in scheme.amplicons} == {p.amplicon for p in scheme.primers}


TARGETS: dict[str, Check] = {
    "chunk": check_chunk,
    "gzindex": check_gzindex,
    "bgzf": check_bgzf,
    "span": check_span,
    "samplesheet": check_samplesheet,
    "request": check_request,
    "event": check_event,
    "primers": check_primers,
}
