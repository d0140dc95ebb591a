"""The fault-injection hooks themselves, without the cloud: the grammar, and a real ``seqlake worker``
child that SIGKILLs itself after its first staged write (so the end-to-end tests' fault is the one
intended: mid-shard, after a part was written)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from seqlake.base import faults
from seqlake.base.model import Sample
from seqlake.plan.planner import make_plan
from seqlake.plan.refindex import indexed_reference

from .conftest import fastq_records

SRC = Path(__file__).resolve().parents[2] / "src"


def test_grammar() -> None:
    (f,) = faults.from_env("X", {"X": "kill:sample=s1:shard=1:attempt=1:after_writes=2"})
    assert (f.action, f.selectors, f.number("after_writes", 0)) == ("kill", {"sample": "s1"}, 2)
    assert f.applies(sample="s1", shard=1, attempt=1)
    assert not f.applies(sample="s1", shard=1, attempt=2)
    assert not f.applies(sample="s2", shard=1, attempt=1)
    several = faults.from_env("X", {"X": "exit:sample=a:code=3; crash:run=cc-"})
    assert faults.first(several, sample="b", run_id="cc-1") is several[1]
    assert faults.first(several, sample="a") is several[0]
    assert faults.from_env("X", {}) == []
    for bad in ("explode", "kill:shard", "kill:colour=red", "kill:shard=one"):
        with pytest.raises(ValueError):
            faults.parse(bad)


def _worker(plan_uri: str, fault: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in (faults.WORKER_VAR, faults.COMMIT_VAR)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env["SEQLAKE_PLAN_URI"] = plan_uri
    env["AWS_BATCH_JOB_ATTEMPT"] = "1"
    env["SEQLAKE_REF_CACHE"] = str(Path(plan_uri).parent / "refcache")
    if fault:
        env[faults.WORKER_VAR] = fault
    return subprocess.run([sys.executable, "-m", "seqlake", "worker"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_worker_dies_after_its_first_staged_write(tmp_path: Path) -> None:
    reads = tmp_path / "r.fastq"
    reads.write_bytes(b"".join(fastq_records(50)))
    reference = tmp_path / "ref.fasta"
    reference.write_bytes(resources.files("seqlake.demo_data").joinpath("MN908947.3.fasta").read_bytes())
    pinned = indexed_reference(str(reference))
    plan = make_plan("hook-test", [Sample("s", str(reads))], out_prefix=str(tmp_path / "out"), reference=pinned)
    staged = Path(plan.layout.staging)
    # a fault for another sample or attempt does nothing
    assert _worker(plan.plan_uri, "kill:sample=other;kill:attempt=2").returncode == 0
    done = sorted(p.name for p in staged.rglob("*") if p.is_file())
    assert "manifest.json" in done
    for p in staged.rglob("*"):
        if p.is_file():
            p.unlink()
    Path(plan.layout.alignments_part(0)).unlink()
    # killed after the first write: one part on disk, no manifest (the child is not done)
    proc = _worker(plan.plan_uri, "kill:after_writes=1")
    assert proc.returncode == -signal.SIGKILL
    assert "seqlake fault injection: SIGKILL" in proc.stderr
    left = [p.name for p in [*staged.rglob("*"), Path(plan.layout.alignments_part(0))] if p.is_file()]
    assert len(left) == 1 and left[0].endswith(".parquet"), left
    # exit: the code asked for, before any work
    assert _worker(plan.plan_uri, "exit:code=7").returncode == 7
