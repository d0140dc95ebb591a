"""How the report scales with samples: a real run's tables replicated under many sample names.

``python -m seqlake.report.scale --samples 1000`` processes the bundled demo library with the core
pipeline, replicates its one sample's rows 1,000 times, renders the report and prints the time and the
page's size; with Chromium installed, also how long the browser takes to load and draw it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa


def replicate(tables: dict[str, pa.Table], copies: int) -> dict[str, pa.Table]:
    """The tables with every row that has a sample repeated under ``copies`` names ``S0000``, ``S0001``, ..."""
    out = {}
    for name, table in tables.items():
        if "sample" not in table.column_names or table.num_rows == 0:
            out[name] = table
            continue
        i = table.column_names.index("sample")
        parts = [table.set_column(i, table.schema.field("sample"), pa.array([f"S{k:04d}"] * table.num_rows,
                                                                              pa.string()))
                 for k in range(copies)]
        out[name] = pa.concat_tables(parts)
    return out


def process_demo(out: Path) -> str:
    """Run ``seqlake process`` over the bundled demo library into ``out``; the run id."""
    from seqlake.demo_data import paths

    r1, r2, bundled = paths()
    reference = out / "ref" / bundled.name  # the aligner's index is written beside it: not in the package
    reference.parent.mkdir(parents=True)
    shutil.copyfile(bundled, reference)
    subprocess.run([sys.executable, "-m", "seqlake", "process", str(r1), str(r2), "--reference", str(reference),
                    "--out", str(out / "lake"), "--jobs", "2"], check=True, capture_output=True)
    run_id: str = json.loads((out / "lake" / "summary.json").read_text())["run_id"]
    return run_id


def browser_seconds(page: Path) -> float | None:
    """Wall-clock seconds for headless Chromium to load the page, run its script and dump the DOM."""
    exe = shutil.which("chromium")
    if exe is None:
        return None
    with tempfile.TemporaryDirectory(prefix="seqlake-chromium-") as profile:
        t0 = time.perf_counter()
        dom = subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             "--dump-dom", page.resolve().as_uri()],
            check=True, capture_output=True, text=True, timeout=600).stdout
        seconds = time.perf_counter() - t0
    if 'data-rendered="true"' not in dom:
        raise RuntimeError("the page's script did not finish drawing")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=1000, help="samples in the synthesized run (default 1000)")
    args = parser.parse_args()
    from seqlake.report import load_run_tables, render_report

    with tempfile.TemporaryDirectory(prefix="seqlake-report-scale-") as tmp:
        root = Path(tmp)
        run_id = process_demo(root)
        tables = replicate(load_run_tables(str(root / "lake" / "results"), run_id), args.samples)
        rows = {name: t.num_rows for name, t in tables.items()}
        t0, c0 = time.perf_counter(), time.process_time()
        render_report(run_id, tables, str(root / "report"))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        page = root / "report" / "index.html"
        mqc = sum(p.stat().st_size for p in (root / "report").glob("*_mqc.json"))
        print(f"{args.samples} samples ({', '.join(f'{k} {v:,}' for k, v in rows.items() if v)} rows)")
        size = page.stat().st_size
        print(f"render: {seconds:.2f} s ({cpu:.2f} s CPU); index.html {size / 1e6:.2f} MB; "
              f"MultiQC files {mqc / 1e6:.2f} MB")
        loaded = browser_seconds(page)
        if loaded is not None:
            print(f"Chromium: loaded and drawn in {loaded:.2f} s")


if __name__ == "__main__":
    main()
