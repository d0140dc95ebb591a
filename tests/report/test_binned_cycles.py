"""The report's per-cycle plots of a run with a long read, from ``qc_position`` grouped into bins as it is read
(issue 37: one 1 Mb read made ``seqlake process`` peak at ~2.9x its memory without it, all of it in the report
holding a million cycles per mate and stage): the same plots as from the table read whole."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from seqlake.lake.parquet_io import read_table
from seqlake.lake.tables import QC_POSITION
from seqlake.report import load_run_tables
from seqlake.report.data import CYCLE_BIN_KEY, build_report


def test_binned_cycles_draw_what_the_whole_table_draws(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    reads = []
    for i, length in enumerate([150] * 300 + [40_000, 25_123]):
        seq = "".join(rng.choice(list("ACGTN"), size=length, p=[0.24, 0.25, 0.25, 0.25, 0.01]))
        qual = "".join(chr(33 + int(q)) for q in rng.integers(2, 41, size=length))
        reads.append(f"@r{i}\n{seq}\n+\n{qual}\n")
    fq = tmp_path / "r.fastq.gz"
    fq.write_bytes(gzip.compress("".join(reads).encode(), 1))
    out = tmp_path / "lake"
    proc = subprocess.run([sys.executable, "-m", "seqlake", "process", str(fq), "--out", str(out), "--jobs", "1"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    run_id = next((out / "results" / "qc_position").iterdir()).name.removeprefix("run_id=")
    binned = load_run_tables(str(out / "results"), run_id)
    assert binned[QC_POSITION.name].schema.metadata[CYCLE_BIN_KEY] == b"200"
    assert binned[QC_POSITION.name].num_rows <= 2 * 201
    whole = dict(binned)
    parts = sorted((out / "results" / "qc_position" / f"run_id={run_id}").glob("*.parquet"))
    whole[QC_POSITION.name] = pa.concat_tables([read_table(str(p)) for p in parts]).select(
        QC_POSITION.schema.names).cast(QC_POSITION.schema)
    assert whole[QC_POSITION.name].num_rows > 40_000
    a, b = build_report(run_id, binned), build_report(run_id, whole)
    for pa_, pb in zip(a.plots, b.plots, strict=True):
        assert (pa_.id, pa_.description) == (pb.id, pb.description)
        for qa, qb in zip(pa_.panels, pb.panels, strict=True):
            assert qa.x == qb.x
            for name in qa.series:
                np.testing.assert_allclose(qa.series[name], qb.series[name], rtol=1e-12, equal_nan=True)
