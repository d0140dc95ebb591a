"""A real run to report on: the core pipeline (``seqlake process``) over the bundled demo data.

The expected numbers come from SQL over the run's Parquet (DuckDB, as ``seqlake local query`` answers),
not from the report's own code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from seqlake.demo_data import paths
from seqlake.report import load_run_tables
from seqlake.report.scale import replicate

REPO = Path(__file__).resolve().parents[2]

#: one row per sample, as the report's summary table and MultiQC's general statistics show it
EXPECTED_SQL = """
SELECT sample,
       read_pairs_raw AS pairs,
       reads_raw AS reads,
       bases_raw AS bases,
       pct_q30 AS q30_pct,
       pct_gc AS gc_pct,
       mean_quality,
       read_pairs_trimmed AS trimmed_reads,
       100.0 * (bases_raw - bases_trimmed) / bases_raw AS trimmed_bases_pct,
       pct_mapped AS mapped_pct,
       pct_properly_paired AS properly_paired_pct,
       mean_mapq,
       mean_depth,
       pct_genome_1x AS breadth_pct,
       pct_genome_10x AS pct_10x,
       median_insert_size,
       pct_error AS error_pct
FROM read_parquet('{glob}')
ORDER BY sample
"""


@dataclass(frozen=True)
class Run:
    root: Path
    run_id: str

    def expected_rows(self) -> dict[str, dict[str, Any]]:
        """Sample -> the summary numbers, by SQL over the run's ``sample_summary`` partition."""
        import duckdb

        glob = self.root / "results" / "sample_summary" / f"run_id={self.run_id}" / "*.parquet"
        con = duckdb.connect()
        cur = con.execute(EXPECTED_SQL.format(glob=glob))
        names = [d[0] for d in cur.description]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The bundled demo library processed by the real pipeline (paired, trimmed, aligned)."""
    r1, r2, bundled = paths()
    out = tmp_path_factory.mktemp("demo-lake")
    # a copy: the aligner's index is written beside the reference, and the package folder stays clean
    reference = out.parent / f"{out.name}-ref" / bundled.name
    reference.parent.mkdir()
    shutil.copyfile(bundled, reference)
    subprocess.run([sys.executable, "-m", "seqlake", "process", str(r1), str(r2), "--reference", str(reference),
                    "--out", str(out), "--jobs", "1", "--shards", "2"], check=True, capture_output=True)
    return Run(out, json.loads((out / "summary.json").read_text())["run_id"])


@pytest.fixture(scope="session")
def plain_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Mate 1 of the demo alone, not trimmed and not aligned: no mate 2, no coverage, no mapping numbers."""
    r1, _, _ = paths()
    out = tmp_path_factory.mktemp("plain-lake")
    subprocess.run([sys.executable, "-m", "seqlake", "process", str(r1), "--no-trim", "--out", str(out),
                    "--jobs", "1"], check=True, capture_output=True)
    return Run(out, json.loads((out / "summary.json").read_text())["run_id"])


def replicated(run: Run, copies: int) -> dict[str, pa.Table]:
    """The run's tables with its sample's rows repeated under ``copies`` sample names (a many-sample run)."""
    tables = replicate(load_run_tables(str(run.root / "results"), run.run_id), copies)
    assert pc.count_distinct(tables["qc_summary"]["sample"]).as_py() == copies
    return tables


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go for a person to look at (git-ignored)."""
    path = Path(os.environ.get("SEQLAKE_TEST_ARTIFACTS") or REPO / "test-artifacts") / "report"
    path.mkdir(parents=True, exist_ok=True)
    return path
