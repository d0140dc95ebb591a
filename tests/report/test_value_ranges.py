"""The units the column names promise hold in a real run's data: every ``pct_*`` column of every table
runs from 0 to 100, every ``*_fraction`` from 0 to 1 (the names are checked in tests/core/test_vocabulary.py)."""

from __future__ import annotations

import pyarrow.compute as pc

from report.conftest import Run
from seqlake.lake.tables import TABLES
from seqlake.report import load_run_tables

RANGES = {"pct_": (0.0, 100.0), "_fraction": (0.0, 1.0)}


def test_percentages_and_fractions_are_in_their_range(demo_run: Run) -> None:
    tables = load_run_tables(str(demo_run.root / "results"), demo_run.run_id)
    checked, outside = [], []
    for table in TABLES:
        data = tables.get(table.name)
        for column in table.columns:
            bounds = next((b for affix, b in RANGES.items() if affix in column.name), None)
            if bounds is None or data is None or data.num_rows == 0:
                continue
            lo, hi = pc.min(data[column.name]).as_py(), pc.max(data[column.name]).as_py()
            checked.append(column.name)
            if lo is not None and not (bounds[0] <= lo and hi <= bounds[1]):
                outside.append(f"{table.name}.{column.name}: {lo}..{hi}")
    assert outside == []
    assert {"pct_q30", "pct_mapped", "pct_error", "pct_genome_1x", "pct_span_breadth"} <= set(checked)
