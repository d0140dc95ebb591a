"""A child's per-position staging tables in one object, cut by region and window, with an offset index.

Every table of :data:`seqlake.lake.tables.POSITION_STAGING` has the same key: ``sample``, ``contig``
(dictionary-encoded) and a 0-based position (``pos``, or ``start`` .. ``stop`` for runs and intervals),
rows sorted by it. A child writes them all into one object (``staging/child=NNNNN/positions.arrows``,
:meth:`seqlake.base.layout.RunLayout.positions`), region after region (:mod:`seqlake.lake.regions`), inside
a region window after window (:func:`seqlake.lake.regions.windows`: the unit a reducer merges at a time), and
inside a window table after table, each an Arrow IPC stream::

    [region 0: [window 0: coverage_bins | covered_intervals | depth_runs | ...][window 1: ...]][region 3: ...] ...

A window's streams are contiguous, so a reducer reads a window of a child with one ranged GET; the index
(region -> window -> table -> offset, length, rows, and the window size it was cut at) travels in the child's
manifest. Windows and regions where the child has no row at all are left out. Inside a window's streams, the
``contig`` dictionary is the window's contigs in reference order (the same codes in every child) and the
``sample`` dictionary the child's samples; intervals that cross a window boundary are cut there (each window
gets its part).

Columns are built from NumPy arrays (:func:`dictionary_column`, :func:`table_from_arrays`), never
from Python lists.
"""

from __future__ import annotations

import itertools
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
    """Region -> window -> table name -> extent, and the window size the regions were cut at (0: no windows)."""

    def __init__(self, window: int = 0, entries: Mapping[int, dict[int, dict[str, Extent]]] | None = None) -> None:
        super().__init__(entries or {})
        self.window = window


class IndexVersionError(ValueError):
    """A positions index in a format this code does not read (an older child's)."""


def index_to_json(index: PositionsIndex) -> dict[str, Any]:
    """``{"window": size, "regions": {region: {window: [offset, length, rows of each of POSITION_STAGING]}}}``:
    a window's tables are contiguous in POSITION_STAGING order, so their offsets follow from the first (a
    table the window lacks: length 0)."""
    if not index:
        return {}
    regions: dict[str, dict[str, list[int]]] = {}
    for r, wins in sorted(index.items()):
        out = regions[str(r)] = {}
        for w, tables in sorted(wins.items()):
            at = min(e.offset for e in tables.values())
            row = [at]
            for spec in POSITION_STAGING:
                e = tables.get(spec.name)
                if e is not None and e.offset != at:
                    raise ValueError(f"region {r} window {w}: {spec.name} is not contiguous with the tables before it")
                row += [0, 0] if e is None else [e.length, e.rows]
                at += 0 if e is None else e.length
            out[str(w)] = row
    return {"window": index.window, "regions": regions}


def index_from_json(d: Mapping[str, Any]) -> PositionsIndex:
    if not d:
        return PositionsIndex()
    if "window" not in d or "regions" not in d:
        raise IndexVersionError("the positions index is not cut into windows: the child was run by an older "
                                "seqlake (manifest version 4); re-run the run's children with this version")
    index = PositionsIndex(int(d["window"]))
    for r, wins in d["regions"].items():
        region = index[int(r)] = {}
        for w, row in wins.items():
            if len(row) != 1 + 2 * len(POSITION_STAGING):
                raise IndexVersionError(f"region {r} window {w}: {len(row)} numbers, not the "
                                        f"{1 + 2 * len(POSITION_STAGING)} of {len(POSITION_STAGING)} tables")
            at, tables = int(row[0]), {}
            for k, spec in enumerate(POSITION_STAGING):
                length, rows = int(row[1 + 2 * k]), int(row[2 + 2 * k])
                if length:
                    tables[spec.name] = Extent(at, length, rows)
                at += length
            region[int(w)] = tables
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


class _Windows:
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
    windows = _Windows(contigs, all_regions)
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


def _all_windows(all_regions: Sequence[Region], window: int) -> tuple[list[Region], list[tuple[int, int]]]:
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
                    streams: Mapping[str, RegionStream] | None = None, *, window: int) -> PositionsIndex:
    """Write a child's staging tables (name -> table, in the schemas of POSITION_STAGING; a table the child
    does not make is left out) into one local file, region by region, each region in windows of ``window``
    bases (:func:`seqlake.lake.regions.windows`); returns the index. A table of ``streams`` is written window
    by window as its record batches come (several batches in a window's IPC stream, read back as one
    table), never held whole."""
    streams = streams or {}
    unknown = (set(tables) | set(streams)) - set(STAGING_BY_NAME)
    if unknown:
        raise ValueError(f"not staging tables: {sorted(unknown)}")
    cut_at, where = _all_windows(all_regions, window)
    cuts: dict[int, Tables] = {}
    for spec in POSITION_STAGING:
        if spec.name not in tables:
            continue
        for at, part in cut_by_region(spec, tables[spec.name], contigs, cut_at):
            cuts.setdefault(at, {})[spec.name] = part
    index = PositionsIndex(window)
    with path.open("wb") as out:
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
                             f"its manifest says {e.rows} rows")
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


__all__ = ["STAGING_BY_NAME", "Extent", "IndexVersionError", "PositionsIndex", "RegionEntry", "RegionStream", "Tables",
           "WindowEntry", "cut_by_region", "dictionary_column", "index_from_json", "index_to_json", "read_region",
           "read_window", "read_windows", "sample_groups", "table_from_arrays", "write_positions"]
