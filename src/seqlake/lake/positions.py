"""A child's per-position staging tables in one object, cut by region and window, after an offset index.

Every table of :data:`seqlake.lake.tables.POSITION_STAGING` has the same key: ``sample``, ``contig``
(dictionary-encoded) and a 0-based position (``pos``, or ``start`` .. ``stop`` for runs and intervals),
rows sorted by it. A child writes them all into one object (``staging/child=NNNNN/positions.arrows``,
:meth:`seqlake.base.layout.RunLayout.positions`), region after region (:mod:`seqlake.lake.regions`), inside
a region window after window (:func:`seqlake.lake.regions.windows`: the unit a reducer merges at a time), and
inside a window table after table, each an Arrow IPC stream, after the index::

    [index: [region 0: header | record of window 0 | of window 1 | ...][region 1: header | records] ...]
    [region 0: [window 0: coverage_bins | covered_intervals | depth_runs | ...][window 1: ...]][region 1: ...] ...

The index has a block per region at a place computed from the plan alone (:class:`IndexLayout`: the regions
and the window), a fixed-width record per window (offset, then length and rows of each table), so the reducer
of a region reads its block of every child with one ranged GET each, as many bytes as its region has windows
whatever the genome; each block's header names the format, the run, the child, the region and the window,
so a foreign, older or differently cut object fails naming it. A window's streams are contiguous, so a
reducer reads a window of a child with one more ranged GET. Windows where the child has no row at all have
no stream (a record of zeros). Inside a window's streams, the ``contig`` dictionary is the window's contigs
in reference order (the same codes in every child) and the ``sample`` dictionary the child's samples;
intervals that cross a window boundary are cut there (each window gets its part).

Columns are built from NumPy arrays (:func:`dictionary_column`, :func:`table_from_arrays`), never
from Python lists.
"""

from __future__ import annotations

import hashlib
import itertools
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seqlake.base import storage
from seqlake.lake.regions import Contigs, Region, windows
from seqlake.lake.tables import INTERVAL_END, POSITION_STAGING, STAGING_BY_NAME, Table, position_column

I64 = npt.NDArray[np.int64]
#: what every table and its region's streams are read with
Tables = dict[str, pa.Table]


@dataclass(frozen=True)
class Extent:
    """Where one table of one region is in a child's object: bytes ``[offset, offset + length)``, rows."""

    offset: int
    length: int
    rows: int

    def to_json(self) -> list[int]:
        return [self.offset, self.length, self.rows]

    @classmethod
    def from_json(cls, v: Sequence[int]) -> Extent:
        return cls(int(v[0]), int(v[1]), int(v[2]))


#: table name -> extent, of one window
WindowEntry = Mapping[str, Extent]
#: window (its number in the region) -> its tables, of one region
RegionEntry = Mapping[int, WindowEntry]


class PositionsIndex(dict[int, dict[int, dict[str, Extent]]]):
    """Region -> window -> table name -> extent, and the window size the regions were cut at."""

    def __init__(self, window: int = 0, entries: Mapping[int, dict[int, dict[str, Extent]]] | None = None) -> None:
        super().__init__(entries or {})
        self.window = window


# ------------------------------------------------------------------------------------------- the index
#: the first bytes of each region's block of the index: an object of manifest version 5 or before (its index in the
#: manifest) starts with an Arrow stream instead
INDEX_MAGIC = b"SQLKPIDX"
#: the index's format (the header's and the records' fields, and POSITION_STAGING's tables in its order); a reducer
#: refuses an object in another one
INDEX_VERSION = 1
#: a region's block header: magic, version, tables per record, child, region, the region's windows, the window size
#: (bases), the run (:func:`run_digest`), then padding to 64 bytes
_HEADER = struct.Struct("<8sIIIIIQ16s12x")
#: a window's record: the offset of its first table's stream, then the length and rows of each table of
#: POSITION_STAGING (0, 0: the window has none of it), little-endian uint64
_FIELDS = 1 + 2 * len(POSITION_STAGING)
_RECORD = 8 * _FIELDS


class PositionsIndexError(ValueError):
    """A positions object whose index is not the one the reducer asked for (one line naming the object)."""


def run_digest(run_id: str) -> bytes:
    """16 bytes that tell one run's objects from another's (the header's field)."""
    return hashlib.blake2b(run_id.encode(), digest_size=16).digest()


@dataclass(frozen=True)
class _Header:
    magic: bytes
    version: int
    tables: int
    child: int
    region: int
    windows: int
    window: int
    run: bytes

    def pack(self) -> bytes:
        return _HEADER.pack(self.magic, self.version, self.tables, self.child, self.region, self.windows, self.window,
                            self.run)

    @classmethod
    def unpack(cls, data: bytes) -> _Header | None:
        return cls(*_HEADER.unpack(data[:_HEADER.size])) if len(data) >= _HEADER.size else None


@dataclass(frozen=True)
class IndexLayout:
    """Where each region's block of the index is in a positions object: a pure function of the regions and the
    window (:func:`seqlake.lake.regions.windows`), so the reducer of region ``r`` computes its block's bytes from
    the plan alone and reads them with one ranged GET per child, whatever the size of the genome::

        [region 0: header | a record per window][region 1: header | records] ... [the tables' streams ...]

    Every window of every region has its record (zeros where the child has no row), so nothing depends on
    the child's data; the streams start right after the last block (:attr:`size`)."""

    #: each region's number of windows, in region order
    windows: tuple[int, ...]
    window: int

    @classmethod
    def of(cls, all_regions: Sequence[Region], window: int) -> IndexLayout:
        return cls(tuple(len(windows(r, window)) for r in sorted(all_regions, key=lambda r: r.index)), window)

    def block(self, region: int) -> tuple[int, int]:
        """Bytes ``[start, stop)`` of region ``region``'s block."""
        start = region * _HEADER.size + sum(self.windows[:region]) * _RECORD
        return start, start + _HEADER.size + self.windows[region] * _RECORD

    @property
    def size(self) -> int:
        """Bytes of the whole index: where the tables' streams start."""
        return len(self.windows) * _HEADER.size + sum(self.windows) * _RECORD

    def header(self, run_id: str, child: int, region: int) -> _Header:
        """What region ``region``'s block of ``child``'s object of run ``run_id`` starts with."""
        return _Header(INDEX_MAGIC, INDEX_VERSION, len(POSITION_STAGING), child, region, self.windows[region],
                       self.window, run_digest(run_id))


def index_bytes(index: PositionsIndex, layout: IndexLayout, run_id: str, child: int) -> bytes:
    """The index of a child's object (:class:`IndexLayout`): each region's header and its windows' records."""
    out = bytearray()
    for region, n in enumerate(layout.windows):
        records = np.zeros((n, _FIELDS), dtype="<u8")
        for w, tables in index.get(region, {}).items():
            at = min(e.offset for e in tables.values())
            records[w, 0] = at
            for k, spec in enumerate(POSITION_STAGING):
                e = tables.get(spec.name)
                if e is None:
                    continue
                if e.offset != at:
                    raise ValueError(f"region {region} window {w}: {spec.name} is not contiguous with the tables "
                                     "before it")
                records[w, 1 + 2 * k: 3 + 2 * k] = e.length, e.rows
                at += e.length
        out += layout.header(run_id, child, region).pack() + records.tobytes()
    return bytes(out)


def _entries(records: npt.NDArray[np.uint64]) -> dict[int, dict[str, Extent]]:
    """Window -> table -> extent of a block's records (a window without rows left out)."""
    region: dict[int, dict[str, Extent]] = {}
    for w, row in enumerate(records.tolist()):
        at, tables = row[0], {}
        for k, spec in enumerate(POSITION_STAGING):
            length, rows = row[1 + 2 * k], row[2 + 2 * k]
            if length:
                tables[spec.name] = Extent(at, length, rows)
            at += length
        if tables:
            region[w] = tables
    return region


def parse_region_index(data: bytes, uri: str, layout: IndexLayout, *, region: int, run_id: str,
                       child: int) -> dict[int, dict[str, Extent]]:
    """Window -> table -> extent of region ``region`` from its block's bytes (read at :meth:`IndexLayout.block`);
    :class:`PositionsIndexError` when the block is not the one of this child of this run, in this format, cut at
    this window (:func:`diagnose` says which)."""
    want = layout.header(run_id, child, region)
    start, stop = layout.block(region)
    if _Header.unpack(data) != want or len(data) != stop - start:
        raise PositionsIndexError(diagnose(uri, data if region == 0 else storage.read_range(uri, 0, _HEADER.size),
                                           want))
    n = layout.windows[region]
    return _entries(np.frombuffer(data, dtype="<u8", count=n * _FIELDS, offset=_HEADER.size).reshape(n, _FIELDS))


def diagnose(uri: str, first: bytes, want: _Header) -> str:
    """Why a child's object does not hold the block a reducer expects, from the object's first header (region 0's,
    at byte 0 whatever the layout): one line naming the object."""
    got = _Header.unpack(first)
    if got is None or got.magic != INDEX_MAGIC:
        return (f"{uri} has no positions index: an older seqlake's object (manifest version 5 or before kept the "
                "index in the manifest); re-run the run's children with this version")
    if (got.version, got.tables) != (want.version, want.tables):
        return (f"{uri} holds positions index version {got.version} ({got.tables} tables), this reducer reads "
                f"version {want.version} ({want.tables} tables): re-run the run's children with this version")
    if (got.run, got.child) != (want.run, want.child):
        run = "this run" if got.run == want.run else "another run"
        return f"{uri} was written by child {got.child} of {run}, not by child {want.child} of this run"
    if got.window != want.window:
        return (f"{uri} is cut at {got.window}-base windows, the run's reduce plan at {want.window} (child 0's): "
                "the children cut their positions objects at different windows; re-run the run's children")
    return (f"{uri}: the index block of region {want.region} is not where its layout puts it (cut short, or a "
            "reference with other contigs or regions): re-run the run's children")


def read_region_indexes(uris: Sequence[str], layout: IndexLayout, region: int,
                        run_id: str, first_child: int = 0) -> Iterator[RegionEntry | None]:
    """Region ``region``'s entries of each child's object (``uris[c]`` is child ``first_child + c``'s: a reducer
    reads its sample group's children), in child order: one ranged GET of its block each, in parallel
    (:func:`seqlake.base.storage.read_many_ranges`); None for a missing object."""
    start, stop = layout.block(region)
    blocks = storage.read_many_ranges((uri, start, stop) for uri in uris)
    for child, (uri, data) in enumerate(zip(uris, blocks, strict=True), start=first_child):
        yield None if data is None else parse_region_index(data, uri, layout, region=region, run_id=run_id,
                                                           child=child)


def read_index(uri: str, layout: IndexLayout, run_id: str, child: int) -> PositionsIndex:
    """The whole index of one child's object (one ranged read of it all): for checks and tests."""
    data = storage.read_range(uri, 0, layout.size)
    index = PositionsIndex(layout.window)
    for region in range(len(layout.windows)):
        start, stop = layout.block(region)
        entry = parse_region_index(data[start:stop], uri, layout, region=region, run_id=run_id, child=child)
        if entry:
            index[region] = entry
    return index


def dictionary_column(codes: npt.NDArray[Any], names: Sequence[str]) -> pa.DictionaryArray:
    """A dictionary-encoded string column from integer codes into ``names``."""
    return pa.DictionaryArray.from_arrays(pa.array(np.asarray(codes, dtype=np.int32)),
                                          pa.array(list(names), type=pa.string()))


def table_from_arrays(spec: Table, columns: Mapping[str, Any]) -> pa.Table:
    """A staging table from NumPy arrays (and dictionary columns) in the spec's schema."""
    schema = spec.schema
    arrays = [c if isinstance(c, pa.Array | pa.ChunkedArray) else pa.array(np.asarray(c), type=f.type)
              for f, c in ((f, columns[f.name]) for f in schema)]
    return pa.Table.from_arrays(arrays, schema=schema)


def _codes(column: pa.ChunkedArray | pa.Array) -> tuple[npt.NDArray[np.int32], list[str]]:
    """The codes and dictionary of a dictionary column (one chunk)."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_encode()
    return arr.indices.to_numpy(zero_copy_only=False).astype(np.int32), arr.dictionary.to_pylist()


class WindowAxis:
    """The windows of every contig on one axis (contigs laid end to end in reference order)."""

    def __init__(self, contigs: Contigs, all_regions: Sequence[Region]) -> None:
        self.names = [name for name, _ in contigs]
        lengths = np.array([n for _, n in contigs], dtype=np.int64)
        self.offset = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        code = {name: i for i, name in enumerate(self.names)}
        rows = sorted((code[p.contig], p.start, p.end, r.index) for r in all_regions for p in r.pieces)
        self.starts = np.array([self.offset[c] + s for c, s, _, _ in rows], dtype=np.int64)
        self.ends = np.array([self.offset[c] + e for c, _, e, _ in rows], dtype=np.int64)
        self.region = np.array([r for *_, r in rows], dtype=np.int64)
        self.regions = {r.index: r for r in all_regions}

    def window(self, contig_codes: npt.NDArray[Any], pos: I64) -> I64:
        """The window (its number on the axis) holding each position."""
        out: I64 = np.searchsorted(self.starts, self.offset[contig_codes] + pos, side="right") - 1
        return out


def cut_by_region(spec: Table, table: pa.Table, contigs: Contigs, all_regions: Sequence[Region]) -> Iterator[
        tuple[int, pa.Table]]:
    """``(region, rows)`` for each region the table has rows in, in region order: the rows in
    (sample, contig, position) order, intervals cut at window boundaries, the contig column re-encoded to the
    region's contigs."""
    if table.num_rows == 0:
        return
    windows = WindowAxis(contigs, all_regions)
    code_of = {name: i for i, name in enumerate(windows.names)}
    contig_codes, contig_names = _codes(table.column("contig"))
    ref_codes = np.array([code_of[n] for n in contig_names], dtype=np.int64)[contig_codes]
    pos_name = position_column(spec)
    pos = table.column(pos_name).to_numpy().astype(np.int64)
    first = windows.window(ref_codes, pos)
    take = np.arange(table.num_rows, dtype=np.int64)
    win = first
    interval = INTERVAL_END in table.column_names
    if interval:  # an interval over n windows becomes n rows, each clipped to its window
        stop = table.column(INTERVAL_END).to_numpy().astype(np.int64)
        last = windows.window(ref_codes, stop - 1)
        pieces = last - first + 1
        take = np.repeat(take, pieces)
        within = np.arange(len(take), dtype=np.int64) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        win = np.repeat(first, pieces) + within
    # rows are in (sample, contig, position) order and windows in (contig, position) order: a stable
    # sort by region keeps each region's rows in key order
    region = windows.region[win]
    order = np.argsort(region, kind="stable")
    take, win, region = take[order], win[order], region[order]
    cut = table.take(pa.array(take))
    if interval:
        base = windows.offset[ref_codes[take]]
        s = np.maximum(cut.column(pos_name).to_numpy().astype(np.int64), windows.starts[win] - base)
        e = np.minimum(cut.column(INTERVAL_END).to_numpy().astype(np.int64), windows.ends[win] - base)
        for name, values in ((pos_name, s), (INTERVAL_END, e)):
            f = cut.schema.field(name)
            cut = cut.set_column(cut.schema.get_field_index(name), f, pa.array(values, type=f.type))
    bounds = np.flatnonzero(np.concatenate([[True], region[1:] != region[:-1], [True]]))
    all_ref = ref_codes[take]
    for a, b in itertools.pairwise(bounds):
        r = int(region[a])
        names = windows.regions[r].contigs
        local = {code_of[n]: i for i, n in enumerate(names)}
        remap = np.full(len(windows.names), -1, dtype=np.int32)
        for g, i in local.items():
            remap[g] = i
        part = cut.slice(int(a), int(b - a))
        codes = remap[all_ref[a:b]]
        part = part.set_column(part.schema.get_field_index("contig"), part.schema.field("contig"),
                               dictionary_column(codes, names))
        yield r, part


class RegionStream(Protocol):
    """A staging table too big to hold whole (a child's allele counts): its rows of one window of a region
    (a :class:`Region` of the window's pieces) as record batches in key order, made while they are written."""

    @property
    def schema(self) -> pa.Schema: ...

    def batches(self, region: Region) -> Iterator[pa.RecordBatch]: ...


#: the staging streams' buffers compressed: an allele row is 32 counts, nearly all zero, so a child's object is
#: ~8x smaller in zstd (the MiSeq child's 767 KB -> 95 KB) for ~1 ms of CPU a MB each way: less disk for the
#: child's scratch volume, fewer bytes for the reducers' ranged reads; Arrow's readers decompress as they read
STREAM_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


def _write_stream(out: BinaryIO, schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> int:
    """Write the non-empty ``batches`` as one IPC stream (nothing when there is none); their rows."""
    rows = 0
    writer: pa.ipc.RecordBatchStreamWriter | None = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if writer is None:
            writer = pa.ipc.new_stream(out, schema, options=STREAM_OPTIONS)
        writer.write_batch(batch)
        rows += batch.num_rows
    if writer is not None:
        writer.close()
    return rows


def all_windows(all_regions: Sequence[Region], window: int) -> tuple[list[Region], list[tuple[int, int]]]:
    """Every window of every region, numbered along the reference (the cut's unit), and where each belongs:
    ``(region, its number in the region)``."""
    cut_at: list[Region] = []
    where: list[tuple[int, int]] = []
    for region in sorted(all_regions, key=lambda r: r.index):
        for w in windows(region, window):
            where.append((region.index, w.index))
            cut_at.append(Region(len(cut_at), w.pieces))
    return cut_at, where


def write_positions(path: Path, tables: Mapping[str, pa.Table], contigs: Contigs, all_regions: Sequence[Region],
                    streams: Mapping[str, RegionStream] | None = None, *, window: int, run_id: str,
                    child: int) -> PositionsIndex:
    """Write a child's staging tables (name -> table, in the schemas of POSITION_STAGING; a table the child
    does not make is left out) into one local file, region by region, each region in windows of ``window``
    bases (:func:`seqlake.lake.regions.windows`), after the index (:class:`IndexLayout`: written last, into
    the room kept for it at the start, as child ``child`` of run ``run_id``); returns the index. A table of
    ``streams`` is written window by window as its record batches come (several batches in a window's IPC
    stream, read back as one table), never held whole."""
    streams = streams or {}
    unknown = (set(tables) | set(streams)) - set(STAGING_BY_NAME)
    if unknown:
        raise ValueError(f"not staging tables: {sorted(unknown)}")
    cut_at, where = all_windows(all_regions, window)
    cuts: dict[int, Tables] = {}
    for spec in POSITION_STAGING:
        if spec.name not in tables:
            continue
        for at, part in cut_by_region(spec, tables[spec.name], contigs, cut_at):
            cuts.setdefault(at, {})[spec.name] = part
    index = PositionsIndex(window)
    layout = IndexLayout.of(all_regions, window)
    with path.open("wb") as out:
        out.truncate(layout.size)
        out.seek(layout.size)
        for win, (region, number) in zip(cut_at, where, strict=True):
            entry: dict[str, Extent] = {}
            for spec in POSITION_STAGING:
                offset = out.tell()
                part = cuts.get(win.index, {}).get(spec.name)
                if spec.name in streams:
                    stream = streams[spec.name]
                    rows = _write_stream(out, stream.schema, stream.batches(win))
                elif part is not None:  # written from its own buffers, without a copy in memory
                    rows = _write_stream(out, part.schema, iter(part.to_batches()))
                else:
                    continue
                if out.tell() > offset:
                    entry[spec.name] = Extent(offset, out.tell() - offset, rows)
            cuts.pop(win.index, None)  # written: its rows are not needed again
            if entry:
                index.setdefault(region, {})[number] = entry
        out.seek(0)
        out.write(index_bytes(index, layout, run_id, child))
    return index


def window_span(entry: WindowEntry) -> tuple[int, int]:
    """The bytes ``[start, stop)`` holding every table of one window (they are contiguous)."""
    return min(e.offset for e in entry.values()), max(e.offset + e.length for e in entry.values())


def _empty_tables() -> Tables:
    return {spec.name: spec.schema.empty_table() for spec in POSITION_STAGING}


def parse_window(data: bytes, start: int, entry: WindowEntry, uri: str) -> Tables:
    """The tables of one window from the bytes read at ``start`` (every one of POSITION_STAGING, empty
    where the child had no rows); a short or foreign read fails naming the object."""
    out: Tables = {}
    buf = pa.py_buffer(data)
    for spec in POSITION_STAGING:
        e = entry.get(spec.name)
        if e is None:
            out[spec.name] = spec.schema.empty_table()
            continue
        piece = buf[e.offset - start: e.offset - start + e.length]
        if piece.size != e.length:
            raise ValueError(f"{uri}: {spec.name} is cut short ({piece.size} of {e.length} bytes)")
        table = pa.ipc.open_stream(piece).read_all()
        if table.num_rows != e.rows or not table.schema.equals(spec.schema):
            raise ValueError(f"{uri}: {spec.name} holds {table.num_rows} rows of schema {table.schema.names}, "
                             f"its index says {e.rows} rows")
        out[spec.name] = table
    return out


def read_window(uri: str, entry: WindowEntry) -> Tables:
    """One window's tables of one child's object: one ranged read."""
    if not entry:
        return _empty_tables()
    start, stop = window_span(entry)
    return parse_window(storage.read_range(uri, start, stop), start, entry, uri)


def read_windows(items: Iterable[tuple[str, WindowEntry]]) -> Iterator[Tables]:
    """:func:`read_window` of each ``(uri, entry)``, in order, read in parallel
    (:func:`seqlake.base.storage.read_many_ranges`)."""
    listed = [(uri, entry) for uri, entry in items]
    spans = [(uri, *window_span(entry)) if entry else (uri, 0, 0) for uri, entry in listed]
    for (uri, entry), (_, start, _), data in zip(listed, spans, storage.read_many_ranges(spans), strict=True):
        if not entry:
            yield _empty_tables()
            continue
        if data is None:
            raise FileNotFoundError(uri)
        yield parse_window(data, start, entry, uri)


def read_region(uri: str, entry: RegionEntry) -> Tables:
    """Every window of one region of one child's object, each table's windows one after the other (one ranged
    read per window; the ``contig`` dictionaries unified: each window has its own). For checks and tests: the
    reducer reads a window at a time."""
    parts = [read_window(uri, entry[w]) for w in sorted(entry)]
    if not parts:
        return _empty_tables()
    return {spec.name: pa.concat_tables([p[spec.name] for p in parts]).unify_dictionaries()
            for spec in POSITION_STAGING}


def sample_groups(table: pa.Table) -> Iterator[tuple[str, pa.Table]]:
    """The rows of each sample of one region's table (rows are grouped by sample)."""
    if table.num_rows == 0:
        return
    codes, names = _codes(table.column("sample"))
    bounds = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1], [True]]))
    for a, b in itertools.pairwise(bounds):
        yield names[codes[a]], table.slice(int(a), int(b - a))


def contig_codes(table: pa.Table) -> npt.NDArray[np.int32]:
    """The contig codes of a region's rows (codes into the region's contigs, the same in every child)."""
    return _codes(table.column("contig"))[0]


__all__ = ["INDEX_VERSION", "STAGING_BY_NAME", "Extent", "IndexLayout", "PositionsIndex", "PositionsIndexError",
           "RegionEntry", "RegionStream", "Tables", "WindowEntry", "cut_by_region", "dictionary_column", "index_bytes",
           "read_index", "read_region", "read_region_indexes", "read_window", "read_windows", "sample_groups",
           "table_from_arrays", "write_positions"]
