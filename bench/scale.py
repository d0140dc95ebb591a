"""The scale bench: a run of many children (and a samplesheet of many samples) through the local cloud
with S3 latency on, reporting the critical path, the per-child overhead, the commit's time and peak
memory, and the largest state payload.

    python bench/scale.py --children 10000 --latency-ms 20 --out bench/work/scale-10000.json
    python bench/scale.py --children 1000  --latency-ms 20 --out bench/work/scale-1000.json
    python bench/scale.py --samples 1000   --latency-ms 20 --out bench/work/scale-samples-1000.json

The input is the bundled demo library (20,000 pairs) cut into ``--children`` shards, or, with
``--samples N``, dealt into N paired samples (gzip files of their own) listed in a samplesheet and
uploaded as one folder, the sheet first, as ``seqlake local run --samplesheet`` does. State durations
and payload sizes come from the execution's history (what Step Functions records); the commit's peak
memory is measured by running the same merge again on the run's mirrored objects in a process of its
own under ``/usr/bin/time -v`` (the local Lambda shares the local cloud's process tree).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: the commit's time per child may grow at most this much from 1,000 to 10,000 children (flat)
MERGE_FLAT_RATIO = 1.25


def _history(sfn: Any, arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    kw: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
    while True:
        page = sfn.get_execution_history(**kw)
        events += page["events"]
        if not page.get("nextToken"):
            return events
        kw["nextToken"] = page["nextToken"]


def _states(events: list[dict[str, Any]]) -> tuple[dict[str, float], int]:
    """Seconds in each state (first entry to last exit) and the largest input or output in bytes."""
    entered: dict[str, float] = {}
    seconds: dict[str, float] = {}
    largest = 0
    for e in events:
        for key in ("stateEnteredEventDetails", "stateExitedEventDetails", "executionStartedEventDetails"):
            d = e.get(key)
            if d:
                largest = max(largest, len(str(d.get("input") or d.get("output") or "").encode()))
        ts = e["timestamp"].timestamp()
        if "stateEnteredEventDetails" in e:
            entered.setdefault(e["stateEnteredEventDetails"]["name"], ts)
        if "stateExitedEventDetails" in e:
            name = e["stateExitedEventDetails"]["name"]
            seconds[name] = round(ts - entered.get(name, ts), 3)
    return seconds, largest


def _merge_peak(bucket_dir: Path, run_id: str) -> dict[str, float]:
    """Run the commit's merge again on a copy of the run's objects, in a process of its own."""
    with tempfile.TemporaryDirectory(prefix="seqlake-scale-") as tmp:
        root = Path(tmp)
        # the run's objects, the parts the children and the reducers staged among them (the commit checks
        # and publishes them)
        shutil.copytree(bucket_dir / "runs" / run_id, root / "runs" / run_id)
        plan = json.loads((root / "runs" / run_id / "plan.json").read_text())
        plan["out_prefix"] = str(root)
        (root / "runs" / run_id / "plan.json").write_text(json.dumps(plan))
        code = ("import sys, time; from seqlake.commit.merge import merge_run; "
                "from seqlake.plan.planfile import load_plan; "
                "t = time.perf_counter(); merge_run(load_plan(sys.argv[1]), reduce_here=False); "
                "print(f'merge_seconds={time.perf_counter() - t:.3f}', file=sys.stderr)")
        out = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-c", code,
                              str(root / "runs" / run_id / "plan.json")],
                             capture_output=True, text=True, check=True)
    merge = float(next(line.split("=")[1] for line in out.stderr.splitlines() if line.startswith("merge_seconds")))
    rss = next(int(line.split()[-1]) for line in out.stderr.splitlines() if "Maximum resident set size" in line)
    return {"merge_seconds_on_files": merge, "merge_peak_rss_mb": round(rss / 1024, 1)}


def _samplesheet_uploads(samples: int, r1: Path, r2: Path, folder: Path) -> list[tuple[Path, str]]:
    """The demo pairs dealt round-robin into ``samples`` paired samples, their files and a samplesheet,
    as ``seqlake local run --samplesheet`` uploads them (the sheet first)."""
    import dnaio

    folder.mkdir(parents=True, exist_ok=True)
    names = [f"s{i:05d}" for i in range(samples)]
    writers = [dnaio.open(folder / f"{n}_R1.fastq.gz", folder / f"{n}_R2.fastq.gz", mode="w") for n in names]
    with dnaio.open(r1, r2) as reads:
        for i, (a, b) in enumerate(reads):
            writers[i % samples].write(a, b)
    for w in writers:
        w.close()
    sheet = folder / "samplesheet.csv"
    sheet.write_text("sample,fastq_1,fastq_2\n" + "".join(f"{n},{n}_R1.fastq.gz,{n}_R2.fastq.gz\n" for n in names))
    from seqlake.local.commands import plan_samplesheet

    return plan_samplesheet(sheet, folder / "staged")


def run(children: int, samples: int, latency_ms: int, jobs: int, home: Path) -> dict[str, Any]:
    os.environ["SEQLAKE_LOCAL_S3_LATENCY_MS"] = str(latency_ms)
    from localcloud.state import StateDir
    from seqlake.demo_data import paths
    from seqlake.local.adapter import local_cloud

    r1, r2, reference = paths()
    if samples:
        uploads = _samplesheet_uploads(samples, r1, r2, home / "samples")
    else:
        uploads = [(r1, "incoming/scale/scale_R1.fastq.gz"), (r2, "incoming/scale/scale_R2.fastq.gz")]
    state = StateDir(str(home))
    with local_cloud(state=state, jobs=jobs, quiet=True) as cloud:
        cloud.override_parameter("ReferenceUri", cloud.upload(reference, f"references/{reference.name}", as_admin=True))
        if not samples:
            cloud.override_parameter("ReadsPerShard", str(max(1, 20_000 // children)))
        cloud.prewarm()
        t0 = time.monotonic()
        for path, key in uploads:
            cloud.upload(path, key)
        uploaded = time.monotonic() - t0
        finished = cloud.wait(timeout=6 * 3600)
        returned = time.time()
        wall = time.monotonic() - t0
        (e,) = finished
        sfn = cloud.client("stepfunctions")
        stopped = sfn.describe_execution(executionArn=e.arn)["stopDate"].timestamp()
        seconds, largest = _states(_history(sfn, e.arn))
        run_id = str(e.input.get("run_id"))
        status = json.loads((state.bucket_dir(cloud.bucket) / "runs" / run_id / "status.json").read_text())
        bucket_dir = state.bucket_dir(cloud.bucket)
    array = seconds.get("ProcessShards", seconds.get("ProcessOneShard", 0.0))
    return {
        "samples": samples or 1, "children": status.get("shards"), "state": e.status, "latency_ms": latency_ms,
        "jobs": jobs, "wall_seconds": round(wall, 1), "upload_seconds": round(uploaded, 1),
        "returned_after_run_end_seconds": round(returned - stopped, 1),
        "state_seconds": seconds, "largest_state_payload_bytes": largest,
        "per_child_seconds": round(array * min(jobs, status.get("shards") or 1) / max(1, status.get("shards") or 1), 4),
        "commit_seconds": seconds.get("Commit"),
        **_merge_peak(bucket_dir, run_id),
    }


def _commit() -> str:
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                         check=False, capture_output=True, text=True)
    return out.stdout.strip() or "unknown commit"


def section(work: Path) -> list[str]:
    """BENCHMARKS.md's section on the scale runs saved in ``work`` (``scale-*.json``), with the issue's bars."""
    results = [json.loads(p.read_text()) for p in sorted(work.glob("scale-*.json"))]
    if not results:
        return []
    lines = [
        "", "## Scale: the local cloud with S3 latency (`bench/scale.py`)", "",
        "Each run goes through `LocalCloud` as `seqlake local run` does: every S3 request waits `latency` ms, the",
        "limits of Step Functions, Lambda and Batch are enforced, children run `jobs` at a time on this machine.",
        "Seconds per state come from the execution's history; the commit's peak memory from the same merge",
        "run again on the run's objects in a process of its own (`/usr/bin/time -v`).", "",
        "| run | children | latency (ms) | jobs | state | wall (s) | plan (s) | index (s) | array job (s) "
        "| per child (s) | commit (s) | commit per shard (ms) | merge peak RSS (MB) | largest payload (B) "
        "| returned after end (s) | measured |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        st = r.get("state_seconds", {})
        array = st.get("ProcessShards", st.get("ProcessOneShard"))
        commit = r.get("commit_seconds")
        per_shard = f"{1000 * commit / r['children']:.1f}" if commit and r.get("children") else ""
        what = f"{r['samples']:,} samples" if r.get("samples", 1) > 1 else "one paired sample"
        lines.append(
            f"| {what} | {r.get('children', 0):,} | {r['latency_ms']} | {r['jobs']} | {r['state']} "
            f"| {r['wall_seconds']} | {st.get('Plan', '')} | {st.get('Index', '')} | {array or ''} "
            f"| {r.get('per_child_seconds', '')} | {commit or ''} | {per_shard} | {r.get('merge_peak_rss_mb', '')} "
            f"| {r.get('largest_state_payload_bytes', ''):,} | {r.get('returned_after_run_end_seconds', '')} "
            f"| {r.get('measured', '')} |"
        )
    one = {r["children"]: r for r in results if r.get("samples", 1) == 1 and r.get("commit_seconds")}
    if 1000 in one and 10000 in one:
        per = {n: one[n]["commit_seconds"] / n for n in (1000, 10000)}
        ratio = per[10000] / per[1000]
        met = "met" if ratio <= MERGE_FLAT_RATIO else "**not met**"
        lines += ["", f"Commit time per child, 10,000 vs 1,000 children: **{ratio:.2f}x** "
                      f"(target <= {MERGE_FLAT_RATIO}x: {met}); the merge alone on files: "
                      f"{one[10000]['merge_seconds_on_files'] / one[1000]['merge_seconds_on_files'] / 10:.2f}x."]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--children", type=int, default=1000, help="children of the run (the Batch array's size)")
    parser.add_argument("--samples", type=int, default=0,
                        help="instead: a samplesheet of this many paired samples (the demo reads dealt out)")
    parser.add_argument("--jobs", type=int, default=4, help="children at once (they mostly wait on the latency)")
    add_common_arguments(parser)
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="seqlake-scale-home-"))
    result = run(args.children, args.samples, args.latency_ms, args.jobs, home)
    record(result, args.out)
    return 0 if result["state"] == "SUCCEEDED" else 1


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """``--latency-ms``, ``--home`` and ``--out``, as every scale bench takes them."""
    parser.add_argument("--latency-ms", type=int, default=20, help="per-request S3 latency of the local cloud")
    parser.add_argument("--home", type=Path, default=None, help="state folder (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=None, help="also write the result here as JSON")


def record(result: dict[str, Any], out: Path | None) -> None:
    """Stamp ``result`` with when and at which commit it was measured, print it, and save it to ``out``."""
    result["measured"] = f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {_commit()}"
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
