"""Shared fixtures: where the test data is, and which external tools exist.

The edge-case FASTQ files and the adapter reads live in ``tests/data/`` (MIT and Biopython-licensed
copies, attributed in ``tests/data/README.md``); the reference is the one the package bundles. Only the
real MiSeq reads are not in the repository: they are AGPL-licensed, so the tests read them from
``$SEQLAKE_EXTERNAL_DATA`` (by default ``shared/data`` beside the checkout) and skip when they are absent.
Tests that compare against ``seqkit`` / ``minimap2`` skip when those are not installed.

The session is hermetic: it never reads or writes the user's cache folder (``~/.cache/seqlake``: reference
indexes, translated templates, the demo reads), where a stale index once reached a fresh clone's tests, nor
the user's home, XDG folders or git configuration. It gets a folder of its own in the system's temporary
folder, with its cache, home and temporary folder (:func:`pytest_configure`), shared by the xdist workers and
every process a test starts, and removed at its end.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import slowest_tests
from localcloud import emulator_errors
from seqlake import demo_data
from seqlake.base.cachedir import CACHE_VAR, REF_CACHE_VAR

REPO = Path(__file__).resolve().parents[1]
TEST_DATA = Path(__file__).resolve().parent / "data"
EXTERNAL_DATA = Path(os.environ.get("SEQLAKE_EXTERNAL_DATA") or REPO.parent / "shared" / "data")
MISEQ_READS = ("subsample1_R1.fastq.gz", "subsample1_R2.fastq.gz")
#: the session's folder (:data:`SESSION_FOLDERS`), kept by the process that made it (it removes it at the end)
_SESSION_KEY = pytest.StashKey[str]()


# ---------------------------------------------------------------- the hermetic session (issue 39)
#: the session's folders, under one folder of the system's temporary folder: name -> the variables it is
#: (HOME and the XDG folders: matplotlib's, DuckDB's, Chromium's, git's and pip's files of a user; TMPDIR:
#: what the tests and their processes leave in temporary files goes with the session)
SESSION_FOLDERS: dict[str, tuple[str, ...]] = {
    "cache": (CACHE_VAR,),
    "home": ("HOME",),
    "home/.cache": ("XDG_CACHE_HOME",),
    "home/.config": ("XDG_CONFIG_HOME",),
    "home/.local/share": ("XDG_DATA_HOME",),
    "home/.local/state": ("XDG_STATE_HOME",),
    "tmp": ("TMPDIR",),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    slowest_tests.add_option(parser)  # --slowest-into README.md: make test writes the slowest tests there


def pytest_configure(config: pytest.Config) -> None:
    """The session's own cache folder (``$SEQLAKE_CACHE_DIR``; no ``$SEQLAKE_REF_CACHE``, so reference indexes
    go there too), home, XDG folders and temporary folder (:data:`SESSION_FOLDERS`), so that no test reads or
    writes the user's files. Made before xdist starts its workers, which inherit the environment and so share
    them (the cache's writers write a temporary file and rename it, indexes under a file lock); a worker
    keeps them. The git configuration of the user is not read either (``GIT_CONFIG_GLOBAL``)."""
    slowest_tests.register(config)
    if hasattr(config, "workerinput"):
        return
    root = Path(tempfile.mkdtemp(prefix="seqlake-test-"))
    for name, variables in SESSION_FOLDERS.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for variable in variables:
            os.environ[variable] = str(root / name)
    os.environ.pop(REF_CACHE_VAR, None)
    os.environ["GIT_CONFIG_GLOBAL"] = os.devnull
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    config.stash[_SESSION_KEY] = str(root)


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_SESSION_KEY, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
# ---------------------------------------------------------------- end of the hermetic session


#: Tests that must run in one xdist worker beyond their module, by path prefix: they share a fixture made once
#: per worker that runs any of them (the fault suite's local cloud), or must not run at once. The suite's own
#: scheduler (:func:`pytest_xdist_make_scheduler`) hands out each group, and each other module, whole: a module
#: fixture (a local cloud, a module's runs) is made once. xdist's ``xdist_group`` mark does nothing under
#: pytest 9 (xdist 3.8 renames ``item._nodeid``, which pytest 9 no longer reads): each of its groups, and
#: each module, was split over both workers and its fixtures made in both (tests/core/test_suite_groups.py).
GROUPS: dict[str, str] = {
    # one local cloud for the fault suite (tests/faults/conftest.py): the bad runs, the scenario, IAM
    "tests/faults/test_bad_input.py": "faults_cloud",
    "tests/faults/test_faults.py": "faults_cloud",
    "tests/faults/test_least_privilege.py": "faults_cloud",
    "tests/faults/test_unrecorded_ends.py": "faults_cloud",
    # one `seqlake local run` of the MiSeq pair (tests/local/conftest.py: miseq_local_run) for both
    "tests/local/test_containers.py": "miseq_local_run",
    "tests/local/test_e2e.py": "miseq_local_run",
    # one `seqlake process` of the demo library (tests/report/conftest.py: demo_run) for the report's modules
    "tests/report/test_browser.py": "demo_run",
    "tests/report/test_multiqc.py": "demo_run",
    "tests/report/test_report.py": "demo_run",
    "tests/report/test_report_command.py": "demo_run",
    "tests/report/test_value_ranges.py": "demo_run",
}


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its group in :data:`GROUPS`, else its module."""
    path = nodeid.split("::", 1)[0]
    return next((group for prefix, group in GROUPS.items() if path.startswith(prefix)), path)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadgroup`` by the units of :func:`unit_of`, handed out in the collection's order
    (``--no-loadscope-reorder``)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return UnitScheduling(config, log)


#: The longest units of work (a group or a module), longest first (their CPU seconds in a whole run). The
#: suite runs them first: xdist hands units out in the collection's order (``--no-loadscope-reorder``), so a
#: long unit handed out last is the run's tail, one core idle. A local cloud started in the test process is
#: stopped by the end of its module (the fault suite's: its package), so these may run in any order.
LONGEST_FIRST: tuple[str, ...] = (
    "tests/faults/test_bad_input.py",  # the fault suite's cloud (one group): bad runs, scenario, IAM
    "tests/faults/test_faults.py",
    "tests/faults/test_least_privilege.py",
    "tests/bench/test_bench_quick.py",  # bench/run.py --quick
    "tests/local/test_scale.py",  # 200 children, three failing, then the re-run and a clean run
    "tests/local/test_delete_sample.py",  # three local runs, a sample's deletion, a compaction
    # the MiSeq run without containers, which test_e2e checks, then two runs with them, one after the other
    # (they collided at once): one group, after the units above, so that the image that make test builds
    # beside the suite is there when its tests need it (they wait for its build)
    "tests/local/test_e2e.py",
    "tests/local/test_containers.py",
    "tests/local/test_delete_sample_function.py",  # two runs on one local cloud, its delete function invoked
    "tests/local/test_iceberg_tables.py",  # two local runs, the latest views, time travel
    "tests/docs/test_documented_commands.py",  # every documented command, in one state folder
    "tests/core/test_variants.py",  # the ivar comparisons
    "tests/aws/test_start_run.py",
    "tests/local/test_demo.py",
    "tests/cli/test_contract.py",
    "tests/cli/test_cli.py",
    "tests/core/test_reduce.py",
    "tests/core/test_worker_merge.py",
    "tests/aws/test_steps.py",
    "tests/local/test_patches.py",
    "tests/core/test_plan.py",
    "tests/local/test_packaged_app.py",
    "tests/core/test_lab_metrics.py",
    # the report's modules (one group: demo_run), ahead of the small modules: last in the collection, they
    # were the run's tail
    "tests/report/test_browser.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of :data:`LONGEST_FIRST` first, in its order; the others keep theirs."""

    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if path.startswith(prefix)), len(LONGEST_FIRST))

    items.sort(key=rank)


@pytest.fixture(scope="session")
def miseq() -> tuple[Path, Path]:
    """Real ARTIC V3 MiSeq reads (5,762 pairs of 2x220 bp, gzip): the only data kept outside the repo."""
    d = EXTERNAL_DATA / "sarscov2_artic_miseq"
    r1, r2 = (d / name for name in MISEQ_READS)
    if not (r1.is_file() and r2.is_file()):
        pytest.skip(f"the AGPL MiSeq reads are not in {d} (set SEQLAKE_EXTERNAL_DATA; see tests/data/README.md)")
    return r1, r2


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SARS-CoV-2 reference the MiSeq reads and the demo reads map to, as a copy in a folder of its
    own (a test may look at what is beside it; the package's folder stays as shipped)."""
    copy = tmp_path_factory.mktemp("reference") / demo_data.REFERENCE_NAME
    shutil.copyfile(demo_data.reference_path(), copy)
    return copy


@pytest.fixture(scope="session")
def edge() -> Path:
    """One real FASTQ file per defect, as ``<source>/<file>`` (cases in tests/core/test_edge_files.py)."""
    return TEST_DATA / "edge"


@pytest.fixture(scope="session")
def adapter_reads() -> Path:
    """100 real Illumina reads of 101 bp that carry adapters (from cutadapt's tests)."""
    return TEST_DATA / "cutadapt_illumina_adapters.fastq.gz"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (make test installs it with apt-get)")
    return path


@pytest.fixture(scope="session")
def seqkit() -> str:
    return _tool("seqkit")


@pytest.fixture(scope="session")
def bgzip() -> str:
    return _tool("bgzip")


@pytest.fixture(scope="session")
def minimap2() -> str:
    return _tool("minimap2")


@pytest.fixture(scope="session")
def samtools() -> str:
    return _tool("samtools")


# ------------------------------------------- issue 38: the moto patches' removal test first; the emulator's own errors
#: each moto patch's tests once more with that patch off (18 pytest processes; `make patch-removal`): first
LONGEST_FIRST = ("tests/local/test_patch_registry.py", *LONGEST_FIRST)
#: a ``seqlake`` command the tests run as a process fails at its cloud's stop if the emulator failed a request
os.environ[emulator_errors.STRICT_VAR] = "1"


@pytest.fixture(autouse=True)
def no_emulator_errors() -> Iterator[None]:
    """An exception inside the local cloud (answered as the service's internal error, which clients retry) fails
    the test that met it; an error the test injected on purpose is a ``faults.InjectedFaultError``, not counted."""
    yield  # (errors while a module's cloud started are its first test's)
    errors = emulator_errors.take()
    assert not errors, "the local cloud failed requests itself: " + "; ".join(map(str, errors))
