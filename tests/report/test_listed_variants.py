"""The variants a report lists, read from the run's parts a batch of PASS rows at a time (the commit renders the
report: the variants table has every allele at >= 3 %, 268,000 rows for a 10 Mb genome at 30x)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seqlake.lake.tables import VARIANTS
from seqlake.report import data


def _strings(values: list[str], picks: np.ndarray) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(picks.astype(np.int32)), pa.array(values)).cast(pa.string())


def _variants(rows: int, seed: int, pass_fraction: float, *, numbered: bool = True) -> pa.Table:
    """Rows of the ``variants`` table: two samples, three contigs, positions that repeat (several ALTs at one
    position), some rows PASS; the integer columns number the rows (``numbered``), else are small counts
    (as compressible as a reducer's part: 268,000 rows of a 10 Mb genome took 2.3 MB)."""
    rng = np.random.default_rng(seed)
    columns: dict[str, pa.Array] = {}
    for field in VARIANTS.schema:
        if field.name == "sample":
            columns[field.name] = _strings(["s1", "s2"], rng.integers(0, 2, rows))
        elif field.name == "contig":
            columns[field.name] = _strings(["chr2", "chr1", "chrM"], rng.integers(0, 3, rows))
        elif field.name == "pos":
            columns[field.name] = pa.array(np.sort(rng.integers(1, rows // 4 + 2, rows)))
        elif field.name == "pass":
            columns[field.name] = pa.array(rng.random(rows) < pass_fraction)
        elif pa.types.is_string(field.type):
            columns[field.name] = _strings(["A", "CT", "G", "snv", "del"], rng.integers(0, 5, rows))
        elif pa.types.is_floating(field.type):
            columns[field.name] = pa.array(rng.integers(0, 100, rows) / 100)
        elif numbered:
            columns[field.name] = pa.array(np.arange(rows) + seed * rows)  # which row of which part it was
        else:
            columns[field.name] = pa.array(rng.integers(0, 60, rows))
    return pa.table(columns).cast(VARIANTS.schema)


def test_the_listed_variants_are_the_first_passing_rows_in_the_reports_order(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts in several row groups read in small batches (one part with no PASS row, row groups without one):
    the rows kept are those of the whole table filtered and sorted at once, ties (one position's several ALTs,
    the same position in two parts) in the order of the parts and of their rows."""
    monkeypatch.setattr(data, "VARIANT_BATCH_ROWS", 97)
    parts, tables = [], []
    for k, (rows, fraction) in enumerate([(3_000, 0.2), (2_000, 0.0), (4_000, 0.05), (500, 1.0)]):
        table = _variants(rows, k, fraction)
        parts.append(str(tmp_path / f"region={k:05d}.parquet"))
        pq.write_table(table, parts[-1], row_group_size=250)
        tables.append(table)
    whole = pa.concat_tables(tables)
    want = whole.filter(whole.column("pass")).sort_by(data.VARIANT_ORDER).slice(0, data.MAX_VARIANT_ROWS)
    got = data.listed_variants(parts)
    assert got.num_rows == data.MAX_VARIANT_ROWS and got.equals(want)
    assert data.listed_variants(parts[1:2]).num_rows == 0
    assert data.listed_variants([]).equals(VARIANTS.schema.empty_table())


_PEAK = """
import json, sys, tracemalloc
import pyarrow as pa
from seqlake.report.data import listed_variants
tracemalloc.start()
listed_variants(sys.argv[1:])
print(json.dumps([pa.default_memory_pool().max_memory(), tracemalloc.get_traced_memory()[1]]))
"""


def _peak(parts: list[str]) -> int:
    """Arrow's and Python's peak while a fresh process keeps the listed variants of the parts."""
    out = subprocess.run([sys.executable, "-c", _PEAK, *parts], capture_output=True, text=True, check=True).stdout
    arrow, python = json.loads(out)
    return int(arrow) + int(python)


def test_listing_the_variants_does_not_grow_with_the_variants_table(tmp_path: Path) -> None:
    """Ten times the rows in ten times the parts (a genome ten times as long: its regions are of one size, and
    a reducer writes its region's part as one row group): the peak stays within 1.5x, where the whole table
    read, filtered and sorted took ten times as much."""
    sizes = {}
    for regions in (2, 20):
        parts = []
        for k in range(regions):
            parts.append(str(tmp_path / f"{regions}-region={k:05d}.parquet"))
            pq.write_table(_variants(10_000, k, 0.001, numbered=False), parts[-1])
        sizes[regions] = _peak(parts)
    assert sizes[20] < 1.5 * sizes[2], sizes
