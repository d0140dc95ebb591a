"""One local cloud for all fault tests, and the helpers that drive it like a user and a saboteur.

The cloud is made once for the package (the tests that use it are one xdist group, ``GROUPS`` in
tests/conftest.py): starting one costs seconds and every case here is small; it stops when the worker
leaves the package, so no later test of that worker runs beside its server's threads and moto's patches. Runs are told
apart by their keys (each case uploads under its own ``incoming/<case>/`` folder). ``ReadsPerShard``
is overridden to 500 so that a 2,000-pair input makes a 4-shard array job.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from localcloud.progress import Execution
from localcloud.state import StateDir
from seqlake.base import faults
from seqlake.lake.tables import RESULT_TABLES
from seqlake.local import adapter

READS_PER_SHARD = 500


@pytest.fixture(scope="package")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    c = LocalCloud(state=StateDir(tmp_path_factory.mktemp("faults-home")), jobs=2, quiet=True)
    c.start()
    try:
        c.override_parameter("ReadsPerShard", str(READS_PER_SHARD))
        yield c
    finally:
        c.stop()


@dataclass(frozen=True)
class Outcome:
    """What one run left behind: the execution, ``status.json`` and its registered partitions."""

    execution: Execution
    status: dict[str, Any]
    partitions: frozenset[str]
    #: the objects under ``results/<result table>/run_id=<id>/`` (what a crawler or a repair would find)
    result_files: frozenset[str] = frozenset()

    @property
    def run_id(self) -> str:
        return run_id_of(self.execution)


def run_id_of(e: Execution) -> str:
    """The run id (the execution's name, except for a re-run started under another name)."""
    return str(e.input.get("run_id") or e.name)


def put(cloud: LocalCloud, key: str, body: bytes | Path) -> str:
    data = body.read_bytes() if isinstance(body, Path) else body
    r = cloud.client("s3").put_object(Bucket=cloud.bucket, Key=key, Body=data)
    return str(r["ETag"]).strip('"')


def etags(cloud: LocalCloud, keys: list[str]) -> dict[str, str]:
    s3 = cloud.client("s3")
    return {k: str(s3.head_object(Bucket=cloud.bucket, Key=k)["ETag"]) for k in keys}


def status_of(cloud: LocalCloud, run_id: str) -> dict[str, Any]:
    body = cloud.client("s3").get_object(Bucket=cloud.bucket, Key=f"runs/{run_id}/status.json")["Body"].read()
    doc: dict[str, Any] = json.loads(body)
    return doc


def partitions_of(cloud: LocalCloud, run_id: str) -> frozenset[str]:
    """The tables that show ``run_id``: a registered partition (Hive: ``runs``), a committed run (Iceberg)."""
    from pyiceberg.catalog.glue import GlueCatalog

    from seqlake.lake import iceberg
    from seqlake.lake.iceberg_io import FILE_IO
    from seqlake.lake.tables import BY_NAME

    glue = cloud.client("glue")
    out = set()
    catalog = GlueCatalog("glue", client=glue, **{"py-io-impl": FILE_IO})
    for table in (*RESULT_TABLES, "runs"):
        if BY_NAME[table].is_iceberg:
            if run_id in iceberg.committed_runs(catalog, cloud.database, table):
                out.add(table)
            continue
        parts = glue.get_partitions(DatabaseName=cloud.database, TableName=table)["Partitions"]
        if any(p["Values"] == [run_id] for p in parts):
            out.add(table)
    return frozenset(out)


def result_files_of(cloud: LocalCloud, run_id: str) -> frozenset[str]:
    """The keys under each result table's ``run_id=<id>/`` folder."""
    pages = cloud.client("s3").get_paginator("list_objects_v2")
    return frozenset(o["Key"] for table in RESULT_TABLES
                     for page in pages.paginate(Bucket=cloud.bucket, Prefix=f"results/{table}/run_id={run_id}/")
                     for o in page.get("Contents", []))


def outcomes(cloud: LocalCloud, executions: list[Execution]) -> dict[str, Outcome]:
    """Per run id, after ``cloud.wait()``."""
    return {e.name: Outcome(e, status_of(cloud, run_id_of(e)), partitions_of(cloud, run_id_of(e)),
                            result_files_of(cloud, run_id_of(e))) for e in executions}


def by_folder(results: dict[str, Outcome]) -> dict[str, Outcome]:
    """Index outcomes by the ``incoming/<folder>/`` of their first input."""
    out = {}
    for o in results.values():
        key = str(o.status["inputs"][0]["key"])
        out[key.split("/")[1]] = o
    return out


def runs_row(cloud: LocalCloud, run_id: str) -> dict[str, str | None]:
    from seqlake.local.commands import athena_query

    result = athena_query(cloud, f"SELECT * FROM runs WHERE run_id = '{run_id}'")
    assert len(result.rows) == 1, result.rows
    return dict(zip(result.columns, result.rows[0], strict=True))


def start_function(cloud: LocalCloud) -> str:
    assert cloud.lambdas is not None
    return next(n for n in cloud.lambdas.functions if "StartRun" in n)


def worker_fault(cloud: LocalCloud, spec: str) -> AbstractContextManager[None]:
    """``SEQLAKE_FAULT=spec`` for the Batch children started meanwhile (:func:`seqlake.local.adapter.worker_fault`)."""
    return adapter.worker_fault(cloud, spec)


def commit_function(cloud: LocalCloud) -> str:
    assert cloud.lambdas is not None
    return next(n for n in cloud.lambdas.functions if "Commit" in n)


def commit_memory(cloud: LocalCloud) -> int:
    """The commit function's MemorySize (MB), as deployed."""
    assert cloud.lambdas is not None
    return cloud.lambdas.functions[commit_function(cloud)].memory


@contextlib.contextmanager
def commit_fault(cloud: LocalCloud, spec: str) -> Iterator[None]:
    """``SEQLAKE_COMMIT_FAULT=spec`` in the commit function's environment (``UpdateFunctionConfiguration``)."""
    assert faults.from_env(faults.COMMIT_VAR, {faults.COMMIT_VAR: spec})
    name = commit_function(cloud)
    with function_environment(cloud, name, {**_environment(cloud, name), faults.COMMIT_VAR: spec}):
        yield


@contextlib.contextmanager
def record_failure_broken(cloud: LocalCloud) -> Iterator[str]:
    """The record-failure function without its ``GLUE_DATABASE`` setting: it fails before writing anything
    (``KeyError``), so a failed run ends in ``FailedUnrecorded``; yields the missing setting's name."""
    assert cloud.lambdas is not None
    name = next(n for n in cloud.lambdas.functions if "RecordFailure" in n)
    env = {k: v for k, v in _environment(cloud, name).items() if k != "GLUE_DATABASE"}
    with function_environment(cloud, name, env):
        yield "GLUE_DATABASE"


def _environment(cloud: LocalCloud, name: str) -> dict[str, str]:
    assert cloud.lambdas is not None
    return dict(cloud.lambdas.functions[name].environment)


@contextlib.contextmanager
def function_environment(cloud: LocalCloud, name: str, env: dict[str, str]) -> Iterator[None]:
    """Function ``name`` with environment ``env`` meanwhile (``UpdateFunctionConfiguration``), then as before."""
    assert cloud.lambdas is not None
    spec_before = cloud.lambdas.functions[name]
    lam = cloud.client("lambda")

    def configure(variables: dict[str, str]) -> None:
        lam.update_function_configuration(FunctionName=name, Environment={"Variables": variables})
        assert cloud.lambdas is not None
        cloud.lambdas.update(replace(spec_before, environment=variables))

    configure(env)
    try:
        yield
    finally:
        configure(dict(spec_before.environment))


def fastq_records(n: int, *, prefix: str = "r", length: int = 60, seed: int = 1) -> list[bytes]:
    """``n`` deterministic 4-line records (pseudo-random bases, qualities 'I' with a few lower)."""
    import random

    rng = random.Random(seed)
    out = []
    for i in range(n):
        seq = "".join(rng.choices("ACGT", k=length))
        qual = "".join(rng.choices("IIIIII?5+", k=length))
        out.append(f"@{prefix}{i}\n{seq}\n+\n{qual}\n".encode())
    return out


def env_without_faults() -> bool:
    return faults.WORKER_VAR not in os.environ and faults.COMMIT_VAR not in os.environ


#: a gzip stream cut right after its 10-byte member header (an upload cut short; ``gzip -t``: unexpected end of
#: file): rejected as truncated (issue 37), not read as an empty sample
BARE_GZIP_HEADER = bytes.fromhex("1f8b08000000000002ff")
#: a sample with no reads, as the kinds of file a lab's tools leave for one (docs/FAULTS.md, "Empty
#: inputs"): each is a run with zero reads, by ``seqlake process`` and through the local cloud alike
EMPTY_INPUTS: dict[str, bytes] = {
    "empty plain file": b"",
    # what gzip.open(...).close() writes: one member of no data
    "empty gzip member": bytes.fromhex("1f8b08000000000002ff03000000000000000000"),
    # what bgzip / bcl-convert write for a sample with no reads: the BGZF EOF block alone (SAM spec, 4.1.2)
    "BGZF EOF block only": bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000"),
}
