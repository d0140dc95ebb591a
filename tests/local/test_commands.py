"""The command functions that need no running cloud: upload planning, repeated runs, query output."""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from localcloud.athena import Partition, TableDef
from localcloud.state import StateDir, md5_file
from seqlake.base.errors import EXIT_BAD_INPUT, BadInputError, SeqlakeError
from seqlake.cli import build_parser
from seqlake.local.commands import (
    plan_reads,
    plan_samplesheet,
    previous_run,
    query_command,
    sample_name,
)


@pytest.mark.parametrize(
    ("name", "sample"),
    [
        ("reads_R1.fastq.gz", "reads"),
        ("x_1.fq", "x"),
        ("S1_L001_R2_001.fastq.gz", "S1"),
        ("single.fastq", "single"),
        ("odd name!.fq.gz", "odd-name"),
    ],
)
def test_sample_name(name: str, sample: str) -> None:
    assert sample_name(Path(name)) == sample


def test_plan_reads_names_mates_by_convention_and_sniffs_gzip(tmp_path: Path) -> None:
    r1, r2 = tmp_path / "a.txt", tmp_path / "b.txt"
    r1.write_bytes(gzip.compress(b"@r\nA\n+\nI\n"))
    r2.write_bytes(b"@r\nA\n+\nI\n")
    assert plan_reads(r1, r2, "s") == [(r1, "incoming/s/s_R1.fastq.gz"), (r2, "incoming/s/s_R2.fastq")]
    assert plan_reads(r2, None, None) == [(r2, "incoming/b.txt/b.txt.fastq")]


def test_plan_samplesheet_puts_the_sheet_first_with_relative_names(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    for name in ("d/a_R1.fq", "d/a_R2.fq", "b.fq"):
        (tmp_path / name).write_text("@r\nA\n+\nI\n")
    sheet = tmp_path / "my sheet.csv"
    sheet.write_text("sample,fastq_1,fastq_2\na,d/a_R1.fq,d/a_R2.fq\nb,b.fq,\n")
    uploads = plan_samplesheet(sheet, tmp_path / "staging")
    keys = [k for _, k in uploads]
    folder = keys[0].rsplit("/", 1)[0] + "/"
    assert folder.startswith("incoming/my-sheet-")
    assert keys == [folder + n for n in ("samplesheet.csv", "a_R1.fq", "a_R2.fq", "b.fq")]
    rows = list(csv.DictReader(io.StringIO(uploads[0][0].read_text())))
    assert rows == [
        {"sample": "a", "fastq_1": "a_R1.fq", "fastq_2": "a_R2.fq"},
        {"sample": "b", "fastq_1": "b.fq", "fastq_2": ""},
    ]
    missing = tmp_path / "bad.csv"
    missing.write_text("sample,fastq_1\nz,nope.fq\n")
    with pytest.raises(SeqlakeError, match=r"nope\.fq: no such file"):
        plan_samplesheet(missing, tmp_path / "staging")


def test_previous_run_matches_the_same_objects_and_reference(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "home")
    r1 = tmp_path / "r1.fq"
    r1.write_text("@r\nA\n+\nI\n")
    uploads = [(r1, "incoming/s/s.fq")]
    run = {
        "run_id": "s-1",
        "execution_arn": "arn:1",
        "status": "SUCCEEDED",
        "started": "t",
        "inputs": [{"key": "incoming/s/s.fq", "etag": md5_file(r1)}],
        "reference": "s3://b/references/ref/ref.fa",
    }
    state.record_run(run)
    assert previous_run(state, uploads, "references/ref/ref.fa") == run
    assert previous_run(state, uploads, None) is None  # a run without a reference is another run
    assert previous_run(state, uploads, "references/other/other.fa") is None
    r1.write_text("@r\nC\n+\nI\n")  # new content, new ETag, new run
    assert previous_run(state, uploads, "references/ref/ref.fa") is None


def _args(home: Path, sql: str | None = None, named: str | None = None, fmt: str = "json",
          as_of_run: str | None = None) -> argparse.Namespace:
    """The arguments as the command line's own parser makes them (so every option it has is there)."""
    argv = ["local", "query", "--home", str(home), "--format", fmt, *([sql] if sql else []),
            *(["--named", named] if named else []), *(["--as-of-run", as_of_run] if as_of_run else [])]
    return build_parser().parse_args(argv)


def test_query_command_reads_the_state_folder_without_moto(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = StateDir(tmp_path)
    path = state.local_path("b", "results/t/run_id=r1/part.parquet")
    path.parent.mkdir(parents=True)
    pq.write_table(pa.table({"n": pa.array([1, 2], pa.int64()), "x": [0.5, None]}), path)
    state.save_catalog(
        [
            TableDef(
                "seqlake",
                "t",
                "s3://b/results/t/",
                (("n", "bigint"), ("x", "double")),
                (("run_id", "string"),),
                (Partition(("r1",), "s3://b/results/t/run_id=r1/"),),
            )
        ]
    )
    assert query_command(_args(tmp_path, "SELECT run_id, n, x FROM t ORDER BY n")) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"run_id": "r1", "n": 1, "x": 0.5},
        {"run_id": "r1", "n": 2, "x": None},
    ]
    assert query_command(_args(tmp_path, "SELECT n, x FROM t ORDER BY n", fmt="csv")) == 0
    assert capsys.readouterr().out == "n,x\n1,0.5\n2,\n"
    # each a user's mistake: bad input (exit 65), naming what is wrong
    with pytest.raises(BadInputError, match=r"^SQL: .*nope"):
        query_command(_args(tmp_path, "SELECT nope FROM t"))
    with pytest.raises(BadInputError, match="--named nope: no such named query"):
        query_command(_args(tmp_path, named="nope"))
    with pytest.raises(BadInputError, match="empty: no local cloud here"):
        query_command(_args(tmp_path / "empty", "SELECT 1"))


def test_local_query_and_runs_import_no_moto(tmp_path: Path) -> None:
    """``local query`` and ``local runs`` read the state folder: importing moto (via the IAM module) cost each
    ~2.5 CPU s of its ~3.3, in every documented query a user types and every one the suite runs."""
    code = ("import sys\n"
            "from seqlake import cli\n"
            f"cli.main(['local', 'runs', '--home', {str(tmp_path)!r}])\n"
            f"cli.main(['local', 'query', '--home', {str(tmp_path)!r}, 'SELECT 1'])\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'moto', 'flask', 'werkzeug'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]


def test_a_reason_names_the_local_file_beside_its_key() -> None:
    from seqlake.local.commands import name_local_files

    sources = {"s3://b/incoming/x/x_R1.fastq": "/home/me/reads/x_R1.fastq"}
    reason = "s3://b/incoming/x/x_R1.fastq:12: quality has 3 characters but the sequence has 4; s3://b/other.fq"
    assert name_local_files(reason, sources) == (
        "s3://b/incoming/x/x_R1.fastq:12 (/home/me/reads/x_R1.fastq:12): quality has 3 characters but the "
        "sequence has 4; s3://b/other.fq")


@pytest.mark.parametrize("command", ["report", "status", "rerun"])
def test_run_id_commands_find_a_run_by_the_start_of_its_id_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """`local report`, `local status` and `local rerun` take RUN_ID the same way: a start that names two
    runs asks for more of the id, one that names none says so; neither starts a local cloud."""
    from seqlake.base.layout import RunLayout
    from seqlake.cli import main

    state = StateDir(tmp_path)
    state.save_catalog([])
    for run_id in ("r-2026-aaa", "r-2026-aab"):
        Path(RunLayout(str(state.bucket_dir("b")), run_id).status).parent.mkdir(parents=True)
    assert main(["local", command, "r-2026-aa", "--home", str(tmp_path)]) == EXIT_BAD_INPUT
    assert "names 2 runs (r-2026-aaa, r-2026-aab): give more of the id" in capsys.readouterr().err
    assert main(["local", command, "r-2027", "--home", str(tmp_path)]) == EXIT_BAD_INPUT
    assert "RUN_ID r-2027: no such run" in capsys.readouterr().err


def test_memory_options_reach_the_jobs_the_local_batch_holds_to_them() -> None:
    """``local run --worker-memory/--index-memory/--reducer-memory``: the template parameters the deployment
    gets (as ``sam deploy --parameter-overrides``), hence the worker job definition's MEMORY, which the local
    Batch caps each attempt at; the plan Lambda's job sizes (what it raises each job from: the index job's
    MEMORY comes from the plan); and the reducers' MEMORY in the state machine."""
    import boto3

    from localcloud.containers import resources
    from localcloud.deployer import Deployer, to_api
    from localcloud.packaging import load_template
    from seqlake.cli import build_parser
    from seqlake.local.appdir import TEMPLATE
    from seqlake.local.commands import cloud_parameters
    from seqlake.plan.sizing import Compute

    repo = Path(__file__).resolve().parents[2]
    template = load_template(repo / TEMPLATE)
    argv = ["local", "run", "r1.fq", "--threads", "2", "--worker-memory", "12288", "--index-memory", "20480",
            "--reducer-memory", "2048"]
    given = cloud_parameters(build_parser().parse_args(argv))
    assert given == {"WorkerVcpus": "2", "WorkerMemoryMiB": "12288", "IndexJobMemoryMiB": "20480",
                     "ReducerMemoryMiB": "2048"}
    assert cloud_parameters(build_parser().parse_args(["local", "run", "r1.fq"])) == {}  # the template's defaults
    deployer = Deployer(template, parameters={"Subnets": "subnet-1", "SecurityGroupIds": "sg-1", **given})
    container = template["Resources"]["WorkerJobDefinition"]["Properties"]["ContainerProperties"]
    props = {"Type": "container", "ContainerProperties": {
        "Image": "worker", "ResourceRequirements": deployer.resolve(container["ResourceRequirements"])}}
    batch = boto3.client("batch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    registered = to_api(batch, "RegisterJobDefinition", props)["containerProperties"]
    assert resources(registered, {}).memory_mib == 12288  # what batch.py's cap is made from
    substitutions = template["Resources"]["PipelineStateMachine"]["Properties"]["DefinitionSubstitutions"]
    assert deployer.resolve(substitutions["ReducerMemoryMiB"]) == "2048"
    plan_env = deployer.resolve(template["Resources"]["PlanFunction"]["Properties"]["Environment"]["Variables"])
    compute = Compute.from_env({k: str(v) for k, v in plan_env.items()})
    assert (compute.worker_vcpus, compute.worker_memory_mib, compute.index_memory_mib,
            compute.reducer_memory_mib) == (2, 12288, 20480, 2048)
