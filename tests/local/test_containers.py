"""Container mode: the worker image (``make image``) and Batch attempts run as ``podman run`` of it.

The first tests need nothing: the ``podman run`` an attempt becomes, its environment, its limits, the
image's tag. The rest need podman and the image of this checkout, and skip naming what is missing:
what the image holds, how its entry point takes SIGTERM, and whole runs on the local cloud with
Batch children as containers, whose tables must equal those of children run as processes, with a
Spot interruption (the container stopped as ECS stops it) retried and changing nothing.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import seqlake
from localcloud import athena, containers, contract
from localcloud.batch import ESSENTIAL_EXITED, BatchRunner, Outcome
from localcloud.cloud import LocalCloud
from localcloud.errors import LocalCloudError
from localcloud.state import StateDir
from seqlake.base import faults
from seqlake.demo_data import paths as demo_paths
from seqlake.lake.tables import AMPLICON_TABLES, BY_NAME, COMMIT_TIME_COLUMNS, RESULT_TABLES
from seqlake.local import adapter
from seqlake.local.commands import athena_query
from seqlake.local.image import IMAGE

REPO = Path(__file__).resolve().parents[2]
#: the spot test's reads: the first pairs of the bundled demo library, in 4 shards (what it checks needs
#: 4 children and a write before the interruption, not the library's 20,000 pairs run twice)
PAIRS = 2000
READS_PER_SHARD = PAIRS // 4


# ---------------------------------------------------------------- without podman
def _job(overrides: dict[str, Any] | None = None) -> Any:
    """The attributes of moto's Batch job that the runner reads (the template's job definition, in short)."""
    props = {
        "command": ["seqlake", "worker"],
        "environment": [{"name": "AWS_DEFAULT_REGION", "value": "eu-west-1"},
                        {"name": "SEQLAKE_REF_CACHE", "value": "/refcache"}],
        "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "7680"}],
        "volumes": [{"name": "refcache", "host": {"sourcePath": "/var/lib/seqlake/refcache"}}],
        "mountPoints": [{"sourceVolume": "refcache", "containerPath": "/refcache"}],
    }
    return SimpleNamespace(
        job_id="abc:3",
        job_queue=SimpleNamespace(name="queue"),
        array_properties={"index": 3},
        container_overrides={"environment": [{"name": "SEQLAKE_PLAN_URI", "value": "s3://b/plan.json"}],
                             **(overrides or {})},
        job_definition=SimpleNamespace(container_properties=props),
    )


def test_an_attempt_gets_what_batch_gives_a_container_and_nothing_of_the_host(tmp_path: Path) -> None:
    base = {
        containers.var(): "1",
        "PATH": "/host/bin", "HOME": "/root", "PYTHONPATH": "/checkout/src", "SEQLAKE_HOME": "/x",
        "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_SESSION_TOKEN": "local",
        "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:4566",
        faults.WORKER_VAR: "kill:shard=3",
    }
    runner = BatchRunner(1, base, tmp_path / "logs")
    assert runner.containers is not None and runner.containers.image == containers.image_ref()
    attempt = runner._container_attempt(_job(), ["seqlake", "worker"], 2, tmp_path / "a.log")
    assert attempt.env == {
        "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_SESSION_TOKEN": "local",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:4566",
        "AWS_DEFAULT_REGION": "eu-west-1",  # the job definition's, over the local cloud's
        "SEQLAKE_REF_CACHE": "/refcache",  # a container path, mounted (not rewritten to a host folder)
        "SEQLAKE_PLAN_URI": "s3://b/plan.json",
        "AWS_BATCH_JOB_ID": "abc:3", "AWS_BATCH_JOB_ATTEMPT": "2", "AWS_BATCH_JOB_ARRAY_INDEX": "3",
        "AWS_BATCH_JQ_NAME": "queue", "AWS_BATCH_CE_NAME": "local",
        faults.WORKER_VAR: "kill:shard=3",
    }
    assert attempt.volumes == {"/refcache": str(tmp_path / "hosts" / "refcache")}
    assert attempt.resources == containers.Resources(1.0, 7680)
    assert attempt.name == "seqlake-abc-3-2"
    # without the setting, attempts stay processes
    assert BatchRunner(1, {**base, containers.var(): "0"}, tmp_path / "logs").containers is None


def test_the_podman_command_line_carries_names_not_values(tmp_path: Path) -> None:
    runner = containers.ContainerRunner("localhost/seqlake-worker:x")
    attempt = containers.Attempt("seqlake-j-1", ["seqlake", "worker"], {"AWS_SECRET_ACCESS_KEY": "s3cret", "A": "1"},
                                 containers.Resources(), {"/refcache": "/host/cache"}, tmp_path / "a.log")
    argv = runner.argv(attempt)
    assert argv[:3] == ["podman", "run", "--rm"]
    assert argv[-3:] == ["localhost/seqlake-worker:x", "seqlake", "worker"]
    assert "s3cret" not in " ".join(argv)
    assert argv[argv.index("--network") + 1] == "host"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--env"] == ["A", "AWS_SECRET_ACCESS_KEY"]
    assert argv[argv.index("--volume") + 1] == "/host/cache:/refcache"


def test_the_jobs_tmpdir_reaches_the_container_not_podman(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job definition's TMPDIR is a container path (/scratch): given to podman's own environment, podman
    put its temporary files there and no attempt started ("inspecting image: open /scratch/...")."""
    started: dict[str, Any] = {}

    class Recorded:
        def __init__(self, argv: list[str], **kwargs: Any) -> None:
            started.update(argv=argv, **kwargs)

    monkeypatch.setattr(containers, "PodmanRun", Recorded)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    runner = containers.ContainerRunner("localhost/seqlake-worker:x")
    attempt = containers.Attempt("seqlake-j-1", ["seqlake", "worker"], {"TMPDIR": "/scratch", "B": "2"},
                                 containers.Resources(), {}, tmp_path / "a.log")
    runner.start(attempt)
    assert started["env"]["TMPDIR"] == str(tmp_path) and started["env"]["B"] == "2"
    argv = started["argv"]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--env"] == ["B", "TMPDIR=/scratch"]


@pytest.mark.parametrize(
    ("controllers", "cpus", "expected"),
    [
        ({"cpu", "memory", "memsw"}, 8, ["--cpus", "4", "--memory", "7680m", "--memory-swap", "7680m"]),
        ({"cpu", "memory", "memsw"}, 2, ["--cpus", "2", "--memory", "7680m", "--memory-swap", "7680m"]),
        ({"cpu", "memory"}, 8, ["--cpus", "4", "--memory", "7680m"]),  # no swap accounting: no swap limit
        (set(), 8, []),  # no controllers: no limits
    ],
)
def test_limits_as_far_as_the_kernel_and_the_machine_allow(controllers: set[str], cpus: int,
                                                          expected: list[str]) -> None:
    assert containers.limit_options(containers.Resources(4.0, 7680), controllers, cpus) == expected


def test_submit_time_resource_overrides_win() -> None:
    job = _job({"resourceRequirements": [{"type": "MEMORY", "value": "2048"}]})
    got = containers.resources(job.job_definition.container_properties, job.container_overrides)
    assert got == containers.Resources(1.0, 2048)


def _image_inputs(root: Path) -> Path:
    for name in (*IMAGE.files, "src/seqlake/child/worker.py", "localcloud/src/localcloud/cloud.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / name, root / name)
    return root


def test_the_image_tag_follows_the_files_it_is_built_from_only(tmp_path: Path) -> None:
    repo = _image_inputs(tmp_path)
    before = containers.image_digest(IMAGE, repo)
    (repo / "localcloud/src/localcloud/cloud.py").write_text("# the local cloud is not in the image\n")
    (repo / "src/seqlake.egg-info").mkdir()
    (repo / "src/seqlake.egg-info/PKG-INFO").write_text("an editable install's metadata is not either\n")
    (repo / "src/seqlake/local").mkdir()
    (repo / "src/seqlake/local/adapter.py").write_text("# nor is its adapter\n")
    assert containers.image_digest(IMAGE, repo) == before
    (repo / "src/seqlake/child/worker.py").write_text("# the worker is\n")
    assert containers.image_digest(IMAGE, repo) != before


def test_the_build_names_the_image_with_no_package_installed() -> None:
    """``make test`` builds the image beside ``make setup`` (``image-beside``), before any virtualenv exists:
    ``python -m seqlake.local.image --image`` imports nothing but the standard library (``-S``: no
    site-packages) and names the image the local cloud looks for."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "localcloud/src")])}
    proc = subprocess.run([sys.executable, "-S", "-m", "seqlake.local.image", "--image"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == containers.image_ref() == f"{IMAGE.name}:{containers.image_digest(IMAGE)}"


def test_an_app_without_a_worker_image_runs_no_containers(tmp_path: Path) -> None:
    try:
        contract.use(contract.GENERIC)
        with pytest.raises(LocalCloudError, match="the app has no worker image"):
            BatchRunner(1, {containers.var(): "1"}, tmp_path / "logs")
    finally:
        contract.use(adapter.APP)


@pytest.mark.parametrize(
    ("code", "podman_says", "reason"),
    [
        (125, "Error: localhost/seqlake-worker:x: image not known",
         "CannotStartContainerError: localhost/seqlake-worker:x: image not known"),
        (126, "Error: runc: exec: permission denied: OCI permission denied",
         "CannotStartContainerError: runc: exec: permission denied: OCI permission denied"),
        (127, 'Error: runc: exec: "python": executable file not found in $PATH: OCI runtime attempt failed',
         'CannotStartContainerError: runc: exec: "python": executable file not found in $PATH: OCI runtime '
         "attempt failed"),
        (125, "", "CannotStartContainerError: podman run exited with 125"),
    ],
)
def test_a_container_podman_cannot_start_fails_as_ecs_reports_it(
    code: int, podman_says: str, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """podman's own exit statuses (125-127: the container never ran) are ECS's CannotStartContainerError,
    with no exit code; the podman on PATH here only says what a real one says when it cannot start one."""
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "podman"
    fake.write_text(f"#!/bin/sh\necho 'the worker says: Error: not podman'\necho '{podman_says}' >&2\nexit {code}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    runner = BatchRunner(1, {containers.var(): "1"}, tmp_path / "logs")
    outcome = runner._attempt(_job(), ["seqlake", "worker"], {}, log_path=tmp_path / "a.log", timeout=None, attempt=1)
    assert outcome == Outcome(None, reason, reason=reason)


def test_a_container_that_exits_with_a_code_of_its_own_is_an_exit_not_a_start_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "podman"
    fake.write_text("#!/bin/sh\necho 'Error: a line of the worker'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    runner = BatchRunner(1, {containers.var(): "1"}, tmp_path / "logs")
    outcome = runner._attempt(_job(), ["seqlake", "worker"], {}, log_path=tmp_path / "a.log", timeout=None, attempt=1)
    assert outcome == Outcome(1, ESSENTIAL_EXITED)


def test_containers_requested_where_podman_is_missing_fail_naming_why(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(containers.var(), "0")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LocalCloudError, match="podman is not installed"):
        containers.require(True)


ENTRYPOINT = REPO / "containers" / "worker" / "entrypoint.py"


def test_the_entry_point_runs_the_worker_and_the_index_job_in_its_interpreter() -> None:
    version = subprocess.run([sys.executable, ENTRYPOINT, "seqlake", "--version"], capture_output=True, text=True,
                             check=True)
    assert version.stdout.strip() == f"seqlake {seqlake.__version__}"
    env = {k: v for k, v in os.environ.items() if k != "SEQLAKE_REQUEST_URI"}
    index = subprocess.run([sys.executable, ENTRYPOINT, "python", "-m", "seqlake.aws.index_job"], capture_output=True,
                           text=True, env=env, check=False)
    assert index.returncode == 1 and "SEQLAKE_INDEX_JOB_URI is not set" in index.stderr


def test_the_entry_point_turns_sigterm_into_an_orderly_exit() -> None:
    serve = ["python", "-m", "http.server", "0", "--bind", "127.0.0.1"]
    proc = subprocess.Popen([sys.executable, "-u", ENTRYPOINT, *serve], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and "Serving HTTP" in proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "seqlake: stopping on SIGTERM" in err


# ---------------------------------------------------------------- with podman and the image
#: set by ``make test``, which builds the image beside the suite: the file the build writes when it ends
BUILD_DONE_VAR = "SEQLAKE_IMAGE_BUILD_DONE"
#: how long a test waits for that build (a fresh machine's: Debian's base, the compilers, mappy's compile)
BUILD_WAIT_SECONDS = 1800


def _wait_for_the_images_build() -> None:
    done = os.environ.get(BUILD_DONE_VAR)
    if not done:
        return
    deadline = time.monotonic() + BUILD_WAIT_SECONDS
    while not Path(done).exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the worker image's build beside the suite did not end within {BUILD_WAIT_SECONDS} s "
                        f"({done} not written)")
        time.sleep(2)


@pytest.fixture(scope="module")
def image() -> str:
    _wait_for_the_images_build()
    ref = containers.image_ref()
    reason = containers.unavailable_reason(ref)
    if reason is not None:
        pytest.skip(f"container mode cannot run here: {reason}")
    return ref


def _podman(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, env=containers.podman_env(),
                          check=check, timeout=300)


def test_the_image_holds_the_worker_only_and_runs_as_a_user(image: str) -> None:
    probe = (
        "import importlib.util as u, os, sys; "
        "print(os.getuid(), '%d.%d' % sys.version_info[:2], u.find_spec('seqlake.child.worker') is not None, "
        "[m for m in ('localcloud', 'moto', 'duckdb', 'pytest', 'ruff', 'mypy') if u.find_spec(m)])"
    )
    out = _podman("run", "--rm", "--network", "none", image, "python", "-c", probe).stdout.strip().split(maxsplit=3)
    base_python = re.search(r"PYTHON_IMAGE=python:(\d+\.\d+)", (REPO / "containers/worker/Dockerfile").read_text())
    assert base_python is not None
    assert out == ["10001", base_python.group(1), "True", "[]"]
    imported = _podman("run", "--rm", "--network", "none", image, "python", "-c", "import localcloud",
                       check=False)
    assert imported.returncode != 0 and "No module named 'localcloud'" in imported.stderr


def test_the_image_holds_pysam_at_its_pin_for_the_reducers_cram(image: str) -> None:
    """``--cram``: the reducers encode with pysam (htslib), a dependency of the worker's only (no Lambda layer)."""
    pin = re.search(r'"pysam==([^"]+)"', (REPO / "pyproject.toml").read_text())
    assert pin is not None
    out = _podman("run", "--rm", "--network", "none", image, "python", "-c",
                  "import pysam; print(pysam.__version__)").stdout.strip()
    assert out == pin.group(1)


def test_the_entry_point_ends_the_command_on_sigterm_as_pid_1(image: str) -> None:
    name = f"seqlake-test-sigterm-{os.getpid()}"
    _podman("rm", "--force", name, check=False)
    _podman("run", "--detach", "--name", name, "--network", "none", image, "python", "-m", "http.server", "8000")
    try:
        for _ in range(600):  # until the command runs (its handler is installed before it starts)
            if "Serving HTTP" in _podman("logs", name).stdout:
                break
            subprocess.run(["sleep", "0.1"], check=True)
        _podman("stop", "--time", str(containers.STOP_TIMEOUT_SECONDS), name)
        # 143: ended by its SIGTERM handler; a PID 1 without one ignores SIGTERM and dies of SIGKILL (137)
        assert _podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip() == "143"
        assert "seqlake: stopping on SIGTERM" in _podman("logs", name).stderr
    finally:
        _podman("rm", "--force", name, check=False)


def test_an_image_podman_does_not_have_is_a_container_that_cannot_start(image: str, tmp_path: Path) -> None:
    runner = containers.ContainerRunner(f"{IMAGE.name}:not-built")
    attempt = containers.Attempt(f"seqlake-test-nostart-{os.getpid()}", ["seqlake", "worker"], {},
                                 containers.Resources(), {}, tmp_path / "a.log")
    run = runner.start(attempt)
    assert run.wait(300) == 125
    assert run.start_error is not None and run.start_error.startswith("CannotStartContainerError: ")
    assert "not-built" in run.start_error


@pytest.fixture(scope="module")
def container_cloud(image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(containers.var(), "1")
        cloud = LocalCloud(state=StateDir(tmp_path_factory.mktemp("containers-home")), jobs=2, quiet=True)
        cloud.start()
        try:
            assert cloud.batch is not None and cloud.batch.containers is not None
            # PAIRS of the bundled demo reads in 4 shards, aligned to the bundled reference: the index
            # is cached in the job definition's host volume, mounted into the containers
            cloud.override_parameter("ReadsPerShard", str(READS_PER_SHARD))
            reference = demo_paths()[2]
            cloud.override_parameter("ReferenceUri", cloud.upload(reference, f"references/demo/{reference.name}",
                                                                         as_admin=True))
            yield cloud
        finally:
            cloud.stop()


def _first_pairs(folder: Path, pairs: int) -> tuple[Path, Path]:
    """The first ``pairs`` pairs of the bundled demo library, as gzip FASTQ."""
    out = []
    for mate, path in zip((1, 2), demo_paths()[:2], strict=True):
        lines = gzip.decompress(path.read_bytes()).split(b"\n")[: 4 * pairs]
        out.append(folder / f"first_R{mate}.fastq.gz")
        out[-1].write_bytes(gzip.compress(b"\n".join(lines) + b"\n", mtime=0))
    return out[0], out[1]


def _rows(result: athena.Result, swap: dict[str, str]) -> list[tuple[Any, ...]]:
    """A table's rows with run id and sample swapped for placeholders, in a stable order."""
    return sorted((tuple(swap.get(v, v) for v in row) for row in result.rows), key=repr)


#: columns that differ between two runs of the same reads: when each was committed, and (samples) the
#: keys the reads were uploaded under
_PER_RUN_COLUMNS = {*COMMIT_TIME_COLUMNS, "fastq_1", "fastq_2", "fasta_uri"}  # fasta_uri: under the run's own folder


def _tables(query: Any, run_id: str, sample: str | None = None) -> dict[str, list[tuple[Any, ...]]]:
    swap = {run_id: "<run>", **({sample: "<sample>"} if sample else {})}
    out = {}
    for t in RESULT_TABLES:
        columns = ", ".join(c.name for c in BY_NAME[t].columns if c.name not in _PER_RUN_COLUMNS)
        out[t] = _rows(query(f"SELECT {columns} FROM {t} WHERE run_id = '{run_id}'"), swap)
    return out


# The two runs below, one after the other: two local clouds' containers at once have collided. The suite hands
# out a module whole (unit_of in tests/conftest.py), so one xdist worker runs both.
@pytest.mark.e2e
def test_a_spot_interrupted_container_is_retried_and_the_tables_equal_process_mode(
    container_cloud: LocalCloud, tmp_path: Path
) -> None:
    cloud = container_cloud
    assert cloud.batch is not None and cloud.batch.containers is not None
    r1, r2 = _first_pairs(tmp_path, PAIRS)

    def run(sample: str) -> Any:
        for mate, path in (("R1", r1), ("R2", r2)):
            cloud.upload(path, f"incoming/{sample}/{sample}_{mate}.fastq.gz")
        (execution,) = cloud.wait()
        assert execution.status == "SUCCEEDED", execution
        return execution

    runner = cloud.batch.containers
    cloud.batch.containers = None  # the same cloud, children as processes: the reference run
    try:
        processes = run("procs")
    finally:
        cloud.batch.containers = runner
    before = cloud.batch.base_env
    # shard 1's first attempt loses its instance after its first write
    cloud.batch.base_env = {**before, faults.WORKER_VAR: "kill:sample=spot:shard=1:attempt=1:after_writes=1"}
    try:
        interrupted = run("spot")
    finally:
        cloud.batch.base_env = before

    batch = cloud.client("batch")
    # the shards' array, not the index job's or the reducers'
    (array,) = [a.job_id for a in interrupted.arrays if a.job_name.startswith("shard")]
    children = sorted(
        batch.describe_jobs(jobs=[f"{array}:{i}" for i in range(4)])["jobs"], key=lambda j: str(j["jobId"])
    )
    assert [len(c["attempts"]) for c in children] == [1, 2, 1, 1]
    lost = children[1]["attempts"][0]
    assert lost["statusReason"].startswith("Host EC2 (instance i-"), lost
    log = Path(lost["container"]["logStreamName"]).read_text()
    # the container was stopped as ECS stops one, and the worker ended on the SIGTERM (not the SIGKILL after it)
    assert faults.RECLAIM_MARKER in log and "seqlake: stopping on SIGTERM" in log

    def query(sql: str) -> athena.Result:
        return athena_query(cloud, sql)

    assert _tables(query, interrupted.name, "spot") == _tables(query, processes.name, "procs")


@pytest.mark.e2e
@pytest.mark.external_data
def test_local_run_with_containers_equals_local_run_without(image: str, miseq_local_run: Any, tmp_path: Path) -> None:
    """``seqlake local run R1 R2 --reference REF ... [--containers]``: each in a state folder of its own (the run
    without is the one tests/local/test_e2e.py checks, made once: ``miseq_local_run``)."""
    # as a user runs it: a process of its own (this test process may hold another test's moto mocks)
    home = tmp_path / "containers"
    proc = subprocess.run([sys.executable, "-m", "seqlake", *miseq_local_run.args, "--containers", "--home", str(home)],
                          env={k: v for k, v in os.environ.items() if k != containers.var()}, capture_output=True,
                          text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # (that --containers makes the local Batch run attempts as containers: the tests above)
    tables = []
    for state in (StateDir(miseq_local_run.home), StateDir(home)):
        (run,) = state.runs()
        assert run["status"] == "SUCCEEDED"

        def query(sql: str, state: StateDir = state) -> athena.Result:
            return state.query(sql)  # the Iceberg tables read from the state folder's copy of the bucket

        tables.append(_tables(query, run["run_id"]))
    processes, in_containers = tables
    assert all(processes[t] for t in RESULT_TABLES if t not in AMPLICON_TABLES)  # no primer BED here
    assert in_containers == processes


@pytest.mark.e2e
def test_a_cram_run_with_containers(image: str, tmp_path: Path, samtools: str) -> None:
    """``seqlake local run --cram --containers``: the reducers encode in the image (pysam there, in no Lambda
    layer); the CRAM reads back with the reference left beside it (tests/core/test_sample_cram.py compares
    its records with the BAM's, tests/local/test_cram_local_cloud.py without containers)."""
    r1, r2, reference = demo_paths()
    home = tmp_path / "home"
    proc = subprocess.run([sys.executable, "-m", "seqlake", "local", "run", str(r1), str(r2), "--reference",
                           str(reference), "--cram", "--containers", "--jobs", "2", "--home", str(home)],
                          env={k: v for k, v in os.environ.items() if k != containers.var()}, capture_output=True,
                          text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (genomes,) = home.glob("s3/*/results/genomes/run_id=*")
    crm, ref = genomes / "demo.cram", genomes / "reference.fasta"
    subprocess.run([samtools, "quickcheck", "-v", str(crm)], check=True)
    assert (genomes / "demo.cram.crai").is_file() and not list(genomes.glob("*.bam"))
    count = subprocess.run([samtools, "view", "-c", "-T", str(ref), str(crm)], capture_output=True, text=True,
                           check=True).stdout
    assert int(count) == 39_866  # the demo's records (tests/core/test_sample_bam.py's BAM)
