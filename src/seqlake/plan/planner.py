"""Planning: validate the inputs, choose the shards, write ``plan.json``.

How each input is cut (no copy of the data is ever written; each child reads its span in place):

- **gzip**: one streaming pass (:func:`seqlake.reads.gzindex.index_gzip`) counts the records, takes a
  checkpoint every 256 KiB of plain data and exports a GZTOOL seek index to
  ``<out>/runs/<run_id>/index/``. Shards are record ranges; each shard's span names the checkpoint before
  its first record and how many records to skip from there ("lazy" plan: pure arithmetic, the child
  does the skip).
- **plain, paired**: the same checkpoint table from a counting pass over the file (~2 GB/s), because R1
  and R2 shards must hold the same read numbers and byte offsets differ between mates.
- **BGZF, single-end**, above ``count_below``: no pass over the data. BGZF blocks are random access, so
  shards are byte ranges of the compressed file starting at block headers (:func:`_byte_spans`); a child
  reads the records whose first byte lies in its blocks (``seqlake.plan.shards``). As for plain byte ranges,
  record numbers are unknown.
- **BGZF, paired** (or single-end up to ``count_below``): R1 and R2 shards must hold the same read
  numbers, so a counting pass inflates every block (on every vCPU: blocks are independent) and takes
  the same checkpoints as the gzip pass, at BGZF virtual offsets (:func:`seqlake.reads.bgzf.count_records`).
  No seek index is exported: a child starts at its checkpoint's block.
- **plain, single-end**: byte ranges snapped to record starts with one small ranged read per boundary (no
  full pass; :func:`snap_to_record`). Record numbers of such shards are unknown until read, so error lines
  are resolved when an error happens (``seqlake.plan.shards``). Files up to ``count_plain_below`` bytes are
  counted instead (exact counts and lines, negligible cost).
- **bz2 / xz**: no random access: one shard per sample, read as a stream.

The plan's types and its file are :mod:`seqlake.plan.planfile` (what the children and the commit load).

The reference, when the run has one, comes pinned by its content and indexed (:mod:`seqlake.plan.reference`,
:mod:`seqlake.plan.refindex`): the plan records the pin, the children only load the stored index.

Shard count: ``shards`` if given (the total over all samples), else ``ceil(reads / reads_per_shard)`` per
sample (reads estimated from the first records' size for uncounted plain files), clamped to 1..10,000 in
total (the AWS Batch array limit), never more shards than reads; a zero-read input is one empty shard.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import hashlib
import itertools
import json
import math
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from seqlake.base import storage
from seqlake.base.clients import MAX_PARALLEL_REQUESTS
from seqlake.base.errors import BadInputError
from seqlake.base.layout import RunLayout
from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.plan.gff import check_gff_bytes
from seqlake.plan.planfile import InputFile, Plan, Shard, Span, write_plan
from seqlake.plan.primers import check_primer_bytes, read_primer_bed
from seqlake.plan.reference import ReferencePin, index_ready, load_contigs
from seqlake.reads import bgzf, fastq, gzindex, seekindex

#: sample names become folder names and table values (same rule as the samplesheet schema)
SAMPLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: AWS Batch's array size limit: a plan never has more children than this
MAX_CHILDREN = 10_000
#: shards per sample at most (and in total, unless samples outnumber it: then each sample is one shard)
MAX_SHARDS = MAX_CHILDREN
#: whole samples one child processes at most: a sample costs its files' round trips (a HEAD and a GET or
#: two each, some 50-100 ms on S3) however few its reads, so a child of hundreds of tiny samples would spend
#: minutes waiting on S3 while the rest of the array sits idle; 32 keep that under a few seconds a child
MAX_SAMPLES_PER_CHILD = 32
#: input files read (sniffed, counted or indexed) at once by the planner: a small file costs a GET's round
#: trip (20-50 ms on S3) and 2-4 ms of CPU, so 32 in flight keep the plan's core busy. Not the client's 64
#: (:data:`MAX_PARALLEL_REQUESTS`): measured on 2,000 ranged GETs through the local cloud, three rounds
#: each interleaved, 64 threads took about 7 % more CPU a request than 32 (the threads contend for the
#: interpreter's lock) for the same wall time
SCAN_WORKERS = min(32, MAX_PARALLEL_REQUESTS)
#: input files a batch of the sniffs reads ahead (:func:`_read_ahead`), and the bytes it holds at most: a batch
#: costs its files' round trips over :data:`clients.MANY_CONNECTIONS` connections, opened once a batch
READ_AHEAD_FILES = 4_096
READ_AHEAD_BYTES = 64 << 20
#: plain single-end files up to this size are counted (exact records) instead of cut by byte ranges
PLAIN_COUNT_BELOW = 64 << 20
#: bytes read around a byte-range boundary to find a record start (grown when a record is longer)
SNAP_WINDOW = 16 << 10


# ---------------------------------------------------------------- inputs


@dataclass
class _Scanned:
    """What planning learned about one input file."""

    info: InputFile
    sniff: fastq.Sniff
    checkpoints: list[tuple[int, int]] | None = None
    #: plain bytes per stored byte (a BGZF file cut without a pass: from its first blocks)
    expansion: float = 1.0
    #: the seek index's points and size (gzip / BGZF with an index pass)
    index_points: list[seekindex.Point] | None = None
    index_size: int = 0

    @property
    def estimated_records(self) -> int:
        if self.info.records is not None:
            return self.info.records
        if self.sniff.records == 0:
            return 0
        per_record = self.sniff.plain_bytes / self.sniff.records
        return max(self.sniff.records, round(self.info.size * self.expansion / per_record))


def _sniff_input(uri: str, sample: str, mate: int) -> _Scanned:
    """The file's size and identity (from the run's listing when it gave them: no HEAD) and its first
    records; a file the sniff read to its end has its records counted."""
    meta = storage.head(uri)
    sniff = fastq.sniff_fastq(uri)
    info = InputFile(uri=uri, sample=sample, mate=mate, size=meta.size, compression=sniff.compression,
                     etag=meta.etag, mtime=None if meta.etag else meta.mtime)
    if sniff.gzip_damage is not None:  # a file taken whole by its sniff skips the index pass that refuses it
        raise BadInputError(uri, f"corrupt {sniff.compression} stream at {sniff.gzip_damage}")
    if sniff.complete:
        info = replace(info, records=sniff.records, plain_size=sniff.plain_bytes)
    return _Scanned(info, sniff)


def _scan_input(sniffed: _Scanned, *, idx: int, layout: RunLayout, count_below: int | None,
                threads: int) -> _Scanned:
    """Index or count a sniffed file when its shards need record numbers (``count_below`` None: always
    count plain files, as paired input needs), on ``threads`` vCPUs."""
    info, sniff, uri = sniffed.info, sniffed.sniff, sniffed.info.uri
    if sniff.compression == "bgzf" and count_below is not None and info.size > count_below:
        with storage.open_read(uri, buffer_size=gzindex.BGZF_WINDOW) as f:
            expansion = gzindex.bgzf_plain_ratio(f, info.size)
        return _Scanned(info, sniff, None, expansion)
    if sniff.compression == "bgzf":
        with contextlib.suppress(bgzf.NotBgzfError):  # gzip members of another kind follow: index it
            scan = bgzf.count_records(uri, threads=threads)
            info = replace(info, records=scan.records, plain_size=scan.plain_size,
                           checkpoints_uri=_write_checkpoints(layout.checkpoints(idx), scan))
            return _Scanned(info, sniff, scan.checkpoints)
    if sniff.compression in ("gzip", "bgzf"):
        res = gzindex.index_gzip(uri, threads=threads)
        if res.index is None:  # no data, no seek point: the file is one empty span (see _open_span)
            info = replace(info, records=0, plain_size=0,
                           checkpoints_uri=_write_checkpoints(layout.checkpoints(idx), res.scan))
            return _Scanned(info, sniff, res.scan.checkpoints)
        index_uri = layout.index(idx)
        storage.write_bytes(index_uri, res.index)
        ck_uri = _write_checkpoints(layout.checkpoints(idx), res.scan)
        points = seekindex.index_points(res.index)
        info = replace(info, records=res.scan.records, plain_size=res.scan.plain_size, index_uri=index_uri,
                       checkpoints_uri=ck_uri, index_head=seekindex.head_size(points))
        return _Scanned(info, sniff, res.scan.checkpoints, index_points=points, index_size=len(res.index))
    if sniff.compression == "plain" and (count_below is None or info.size <= count_below):
        scan = gzindex.count_plain(uri)
        ck_uri = _write_checkpoints(layout.checkpoints(idx), scan)
        info = replace(info, records=scan.records, plain_size=scan.plain_size, checkpoints_uri=ck_uri)
        return _Scanned(info, sniff, scan.checkpoints)
    return sniffed


def _write_checkpoints(uri: str, scan: gzindex.ScanResult) -> str:
    body = {"records": scan.records, "plain_size": scan.plain_size, "spacing": gzindex.CHECKPOINT_SPACING,
            "checkpoints": scan.checkpoints}
    storage.write_bytes(uri, json.dumps(body, separators=(",", ":")).encode())
    return uri


# ---------------------------------------------------------------- shard counts


def allocate_shards(reads: list[int], reads_per_shard: int, total: int | None = None) -> list[int]:
    """Shards per sample: from ``total`` (split by reads) or ``ceil(reads / reads_per_shard)``;
    each sample gets 1..reads shards (1 when it has no reads), and the sum stays <= MAX_SHARDS
    unless the samples alone outnumber it (then every sample is one shard)."""
    caps = [max(1, r) for r in reads]
    if total is None:
        want = [max(1, math.ceil(r / max(1, reads_per_shard))) for r in reads]
    else:
        total = max(len(reads), min(MAX_SHARDS, total))
        all_reads = sum(reads)
        want = [max(1, round(total * r / all_reads)) if all_reads else 1 for r in reads]
    want = [min(w, c) for w, c in zip(want, caps, strict=True)]
    limit = max(MAX_SHARDS, len(reads))
    while sum(want) > limit:
        scale = limit / sum(want)
        want = [max(1, math.floor(w * scale)) for w in want]
    return want


def pack_children(shard_reads: list[int], whole_sample: list[bool], reads_per_child: int) -> tuple[int, ...]:
    """The first shard of each child: consecutive shards that are whole samples share a child while
    their reads fit in ``reads_per_child`` and they are at most MAX_SAMPLES_PER_CHILD (a split sample's
    shards keep a child each: they were cut to that size on purpose); never more than MAX_CHILDREN
    children."""
    starts: list[int] = []
    load = 0
    for i, (reads, whole) in enumerate(zip(shard_reads, whole_sample, strict=True)):
        shares = (whole and starts and whole_sample[starts[-1]] and load + reads <= reads_per_child
                  and i - starts[-1] < MAX_SAMPLES_PER_CHILD)
        if shares:
            load += reads
        else:
            starts.append(i)
            load = reads
    if len(starts) > MAX_CHILDREN:  # more samples than the array allows: equal numbers of shards each
        n = len(shard_reads)
        starts = sorted({i * n // MAX_CHILDREN for i in range(MAX_CHILDREN)})
    return tuple(starts)


# ---------------------------------------------------------------- byte-range snapping


def is_record_start(buf: bytes, p: int, at_eof: bool) -> bool | None:
    """Does a FASTQ record start at ``buf[p]``? None when ``buf`` ends too early to tell.

    A ``@`` at a line start can also begin a quality line, so check the 4-line shape: ``@`` header,
    sequence, ``+`` line, quality as long as the sequence, then a ``@`` line or the end of the data.
    A quality line starting with ``@`` fails it: its "sequence" would be the next header and its ``+``
    line the next sequence.
    """
    ends: list[int] = []
    q = p
    for _ in range(4):
        e = buf.find(b"\n", q)
        if e < 0:
            if at_eof and len(ends) == 3:
                e = len(buf)
            else:
                return None if not at_eof else False
        ends.append(e)
        q = e + 1
    if buf[p:p + 1] != b"@":
        return False
    seq = buf[ends[0] + 1:ends[1]].rstrip(b"\r")
    plus = buf[ends[1] + 1:ends[2]]
    qual = buf[ends[2] + 1:ends[3]].rstrip(b"\r")
    if plus[:1] != b"+" or len(seq) != len(qual):
        return False
    nxt = ends[3] + 1
    if nxt >= len(buf):
        return True if at_eof else None
    return buf[nxt:nxt + 1] == b"@"


def snap_to_record(f: Any, offset: int, size: int, path: str) -> int:
    """The first record start at or after ``offset`` in a plain FASTQ file (``size`` = file size).

    Reads a window of ``SNAP_WINDOW`` bytes (doubled up to 64 MiB when records are longer).
    """
    if offset <= 0:
        return 0
    window = SNAP_WINDOW
    while True:
        start = offset - 1  # include the byte before so a record starting exactly at offset is seen
        f.seek(start)
        buf: bytes = f.read(window)
        at_eof = start + len(buf) >= size
        p = 0
        undecided = False
        while True:
            nl = buf.find(b"\n", p)
            if nl < 0:
                break
            cand = nl + 1
            if cand >= len(buf):
                if at_eof:
                    return size
                undecided = True
                break
            ok = is_record_start(buf, cand, at_eof)
            if ok:
                return start + cand
            if ok is None:
                undecided = True
                break
            p = cand
        if at_eof and not undecided:
            return size
        if window >= 64 << 20:
            raise BadInputError(path, f"no FASTQ record start found within 64 MiB after byte {offset}")
        window *= 2


# ---------------------------------------------------------------- planning


def _record_spans(sc: _Scanned, idx: int, bounds: list[int]) -> list[Span]:
    assert sc.checkpoints is not None
    recs = [c[1] for c in sc.checkpoints]
    out = []
    for b, e in itertools.pairwise(bounds):
        off, rec = sc.checkpoints[bisect.bisect_right(recs, b) - 1]
        span = Span(input=idx, mate=sc.info.mate, offset=off, skip=b - rec, first_record=b, records=e - b)
        if sc.index_points is not None:
            # the span's records end at or before the first checkpoint after them (else the file's end)
            after = bisect.bisect_left(recs, e)
            end = sc.checkpoints[after][0] if after < len(recs) else sc.info.plain_size or 0
            start, stop = seekindex.span_range(sc.index_points, sc.index_size, off, end)
            span = replace(span, index_start=start, index_stop=stop)
        out.append(span)
    return out


def _byte_spans(sc: _Scanned, idx: int, k: int) -> list[Span]:
    """``k`` byte ranges (fewer when they collapse), each from the first record start at or after
    ``i * size / k``; for BGZF, from the first block header (:func:`gzindex.next_bgzf_block`)."""
    size = sc.info.size
    bgzf = sc.info.compression == "bgzf"
    snap = gzindex.next_bgzf_block if bgzf else snap_to_record
    window = gzindex.BGZF_WINDOW if bgzf else SNAP_WINDOW
    with storage.open_read(sc.info.uri, buffer_size=window, block_size=window) as f:
        starts = sorted({snap(f, i * size // k, size, sc.info.uri) for i in range(k)} | {0})
    starts = [s for s in starts if s < size] or [0]
    ends = [*starts[1:], size]
    return [Span(input=idx, mate=sc.info.mate, offset=s, first_record=None, records=None, end_offset=e)
            for s, e in zip(starts, ends, strict=True)]


def _read_whole(scans: list[_Scanned]) -> bool:
    """Every file of the sample was read to its end by its sniff (its records are counted)."""
    return all(s.sniff.complete for s in scans)


def _sample_spans(scans: list[_Scanned], first_idx: int, k: int) -> list[tuple[Span, ...]]:
    """Spans of one sample's shards (``k`` wanted; fewer for byte ranges that collapse)."""
    if any(s.info.compression not in fastq.SEEKABLE for s in scans) or (k == 1 and _read_whole(scans)):
        # one shard reading each file from its start: streams, and small files counted by their sniff
        recs = scans[0].info.records if all(s.info.records is not None for s in scans) else None
        return [tuple(Span(input=first_idx + m, mate=s.info.mate, offset=0, first_record=0, records=recs)
                      for m, s in enumerate(scans))]
    if len(scans) == 1 and scans[0].checkpoints is None:
        return [(sp,) for sp in _byte_spans(scans[0], first_idx, k)]
    n = scans[0].info.records
    assert n is not None
    k = max(1, min(k, n))
    bounds = [i * n // k for i in range(k + 1)]
    per_mate = [_record_spans(s, first_idx + m, bounds) for m, s in enumerate(scans)]
    return list(zip(*per_mate, strict=True))


def _check_lanes(samples: list[Sample]) -> None:
    """Rows of one sample (its lanes) are one sample: all paired or all single-end, no file twice."""
    paired: dict[str, bool] = {}
    files: set[str] = set()
    for s in samples:
        if paired.setdefault(s.name, s.r2 is not None) != (s.r2 is not None):
            raise BadInputError(s.r1, f"sample {s.name!r} mixes paired-end and single-end files")
        for uri in s.uris:
            if uri in files:
                raise BadInputError(uri, f"{uri} is listed twice")
            files.add(uri)


def _workers(n: int) -> int:
    """Threads for ``n`` calls at once: at most SCAN_WORKERS."""
    return max(1, min(SCAN_WORKERS, n))


def _each(fn: Callable[[int], _Scanned], indices: Iterable[int], *, threads: bool = True) -> list[_Scanned]:
    """``fn`` of each index, ``SCAN_WORKERS`` at a time: a run of thousands of small files costs their round
    trips divided by the workers, not added up. Each worker takes the next index as it finishes one (a
    future per file, submitted from this thread, made the submitting thread contend with the workers for
    the executor's locks: 10,000 samples' submissions took seconds, while workers waited for them). After a
    failure no new index is taken; the error raised is that of the first failing file in the run's order
    (every file before it was taken, so has been read). Each call sees this thread's context
    (:func:`storage.objects_known`). A single call runs in this thread, where its pass may fork a helper: no
    fork ever happens while scan threads run (:mod:`seqlake.base.forked`); so do all of them when not
    ``threads`` (calls that wait for nothing: threads would only add their switches)."""
    todo = list(indices)
    if len(todo) <= 1 or not threads:
        return [fn(i) for i in todo]
    results: list[_Scanned | None] = [None] * len(todo)
    failed: dict[int, BaseException] = {}
    taken = itertools.count()
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                k = next(taken)
                if k >= len(todo) or failed:
                    return
            try:
                results[k] = fn(todo[k])
            except BaseException as err:  # raised again below, in the caller's thread
                with lock:
                    failed[k] = err

    workers = _workers(len(todo))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in range(workers):
            pool.submit(contextvars.copy_context().run, work)
    if failed:
        raise failed[min(failed)]
    done = [r for r in results if r is not None]
    assert len(done) == len(todo), "a scan returned nothing"
    return done


def _sniffed(sniff: Callable[[int], _Scanned], uris: list[str], known: Mapping[str, storage.ObjectInfo],
             ) -> list[_Scanned]:
    """``sniff`` of each file, in the run's order, a batch of files at a time (:func:`_read_ahead`): the
    batch's small files read whole beforehand, many in flight from one thread
    (:func:`storage.read_small_objects`: one GET a file, as its sniff would send), so their sniffs wait for
    nothing; a batch read whole is sniffed in this thread, any other by the scan threads. The next batch is
    read while this one is sniffed (read, then sniffed, in turn, the plan and S3 each waited for the other:
    measured, 10,000 samples took longer than 32 threads doing both). As :func:`_each`: after a failure no
    later file is sniffed (the next batch may have been read), and the error raised is the first failing
    file's."""
    files: list[_Scanned] = []
    batches = list(_read_ahead(uris, known))
    with ThreadPoolExecutor(max_workers=1) as reader:
        ahead = [reader.submit(storage.read_small_objects, sizes) for _, sizes in batches[:1]]
        for k, (batch, _) in enumerate(batches):
            held = ahead.pop().result()
            ahead += [reader.submit(storage.read_small_objects, sizes) for _, sizes in batches[k + 1:k + 2]]
            with storage.objects_held(held):
                files += _each(sniff, batch, threads=not all(uris[i] in held for i in batch))
    return files


def _read_ahead(uris: list[str], known: Mapping[str, storage.ObjectInfo]) -> Iterator[tuple[range, dict[str, int]]]:
    """Consecutive batches of the files (at most :data:`READ_AHEAD_FILES`), each with the sizes of those of its
    files to read whole beforehand: on S3, of a size the run's listing gave, within a reader's first block
    (the bytes its first GET fetches anyway), together at most :data:`READ_AHEAD_BYTES` a batch."""
    first, held = 0, 0
    sizes: dict[str, int] = {}
    for i, uri in enumerate(uris):
        info = known.get(uri)
        size = info.size if info is not None and storage.is_s3(uri) and info.size <= storage.BLOCK_SIZE else None
        if i > first and (i - first >= READ_AHEAD_FILES or (size is not None and held + size > READ_AHEAD_BYTES)):
            yield range(first, i), sizes
            first, sizes, held = i, {}, 0
        if size is not None:
            sizes[uri] = size
            held += size
    if first < len(uris):
        yield range(first, len(uris)), sizes


def _scan_all(samples: list[Sample], layout: RunLayout, params: Params, *, shards: int | None,
              count_plain_below: int, known: Mapping[str, storage.ObjectInfo],
              ) -> tuple[list[list[_Scanned]], list[int]]:
    """Every file sniffed, then indexed or counted where its shards need record numbers; the files by
    sample, and each sample's shard count."""
    jobs = [(s, mate, uri) for s in samples for mate, uri in enumerate(s.uris, start=1)]

    def sniff(i: int) -> _Scanned:
        s, mate, uri = jobs[i]
        found = _sniff_input(uri, s.name, mate)
        found.info = replace(found.info, metadata=dict(s.metadata))
        return found

    threads = 1  # the process's vCPUs split between the scans running at once (set before each pass)

    def scan(i: int) -> _Scanned:
        s = jobs[i][0]
        return _scan_input(files[i], idx=i, layout=layout, count_below=None if len(s.uris) == 2 else count_plain_below,
                           threads=threads)

    def grouped() -> list[list[_Scanned]]:
        found = iter(files)
        return [[next(found) for _ in s.uris] for s in samples]

    def allocate() -> list[int]:
        return allocate_shards([g[0].estimated_records for g in grouped()], params.reads_per_shard, shards)

    with storage.objects_known(known):
        files = _sniffed(sniff, [uri for _, _, uri in jobs], known)
        # the index or counting pass, for the files whose shards need record numbers: not for a sample its
        # sniffs read whole that is one shard (a run of thousands of small samples then costs one GET a
        # file), nor for one the first allocation makes one shard but the last does not (then next)
        passed: set[int] = set()
        counts = allocate()
        for _ in range(2):
            first, todo = 0, []
            for g, k in zip(grouped(), counts, strict=True):
                if not (k == 1 and _read_whole(g)):
                    todo += [i for i in range(first, first + len(g)) if i not in passed]
                first += len(g)
            threads = max(1, gzindex.index_threads() // _workers(len(todo)))
            for i, found in zip(todo, _each(scan, todo), strict=True):
                files[i] = found
            passed.update(todo)
            counts = allocate()
    return grouped(), counts


def _pin(uri: str, data: bytes, kind: str, suffix: str, layout: RunLayout) -> str:
    """The bytes checked, copied into the run's folder named by their SHA-256; the copy's URI. Every later
    step (the children, the reducers, the commit) reads the copy: the commit's role reads ``runs/`` only (a
    file elsewhere would be AccessDenied after all compute is spent), and a file changed after the plan cannot
    change a run half-way."""
    pinned = layout.pinned_input(kind, hashlib.sha256(data).hexdigest()[:32], suffix)
    if pinned != uri:
        storage.write_bytes(pinned, data)
    return pinned


def pin_run_files(params: Params, reference: ReferencePin | None, layout: RunLayout) -> Params:
    """The primer BED (amplicon mode) and the GFF (annotation), checked against the reference before anything
    else is written (bad input names the file and line), then pinned into the run's folder (``_pin``)."""
    for uri, what in ((params.primer_bed, "a primer BED"), (params.gff, "a GFF")):
        if uri is not None and reference is None:
            raise BadInputError(uri, f"{what} needs a reference to align to")
    if reference is None:
        return params
    if params.primer_bed is not None:
        data = read_primer_bed(params.primer_bed)
        check_primer_bytes(params.primer_bed, data, reference.uri, params.primer_bed_pin)
        params = replace(params, primer_bed=_pin(params.primer_bed, data, "primers", ".bed", layout))
    if params.gff is not None:  # the contigs the index stored (a .mmi reference's too), not a read of the FASTA
        data = storage.read_bytes(params.gff)
        check_gff_bytes(params.gff, data, {c.name: c.length for c in load_contigs(reference)})
        params = replace(params, gff=_pin(params.gff, data, "annotation", ".gff3", layout))
    return params


def make_plan(run_id: str, samples: list[Sample], *, out_prefix: str,
              reference: ReferencePin | None = None, params: Params | None = None,
              shards: int | None = None, count_plain_below: int = PLAIN_COUNT_BELOW,
              known: Mapping[str, storage.ObjectInfo] | None = None,
              check: Callable[[Plan], None] | None = None) -> Plan:
    """Validate the inputs, build indexes, choose the shards, write and return the plan.

    ``check``: called with the plan before it is written (it raises to refuse the plan: the reduce's size,
    the jobs' sizes), so a refused plan leaves no ``plan.json`` for a later execution to find.

    ``reference``: the pinned reference, whose index must be stored already (:mod:`seqlake.plan.refindex`
    builds it before the plan): the children only load it. ``known``: the inputs' sizes and ETags where the
    caller has them (a run's request, from its listing): not asked again."""
    params = params or Params()
    if not samples:
        raise ValueError("no samples to plan")
    for s in samples:
        if not SAMPLE_NAME.fullmatch(s.name):
            raise BadInputError(s.r1, f"invalid sample name {s.name!r}: use letters, digits, '.', '_' "
                                "and '-' (it names folders and table rows)")
        if s.r2 == s.r1:
            raise BadInputError(s.r1, "R1 and R2 are the same file")
    _check_lanes(samples)
    if reference is not None and not index_ready(reference):
        raise ValueError(f"{reference.uri}: no index at {reference.contigs_uri}: build it before the plan "
                         "(seqlake.plan.refindex.ensure_index)")
    layout = RunLayout(out_prefix, run_id)
    params = pin_run_files(params, reference, layout)
    scanned, counts = _scan_all(samples, layout, params, shards=shards, count_plain_below=count_plain_below,
                                known=known or {})
    for group in scanned:
        if len(group) == 2:
            n1, n2 = group[0].info.records, group[1].info.records
            if n1 is not None and n2 is not None and n1 != n2:
                raise BadInputError(
                    group[0].info.uri,
                    f"paired files have different read counts: {group[0].info.uri} has {n1} records, "
                    f"{group[1].info.uri} has {n2}")
    reads = [g[0].estimated_records for g in scanned]
    inputs = tuple(sc.info for g in scanned for sc in g)
    out_shards: list[Shard] = []
    shard_reads: list[int] = []
    whole: list[bool] = []
    idx = 0
    for s, g, k, n in zip(samples, scanned, counts, reads, strict=True):
        pieces = _sample_spans(g, idx, k)
        for spans in pieces:
            out_shards.append(Shard(index=len(out_shards), sample=s.name, spans=spans))
            shard_reads.append(n // len(pieces))
            whole.append(len(pieces) == 1)
        idx += len(g)
    children = pack_children(shard_reads, whole, params.reads_per_shard)
    plan = Plan(run_id=run_id, out_prefix=out_prefix, inputs=inputs, shards=tuple(out_shards),
                params=params, reference=reference, children=children)
    if check is not None:
        check(plan)
    write_plan(plan)
    return plan

