"""Shared fixtures: where the test data is, and which external tools exist.

The edge-case FASTQ files and the adapter reads live in ``tests/data/`` (MIT and Biopython-licensed
copies, attributed in ``tests/data/README.md``); the reference is the one the package bundles. Only the
real MiSeq reads are not in the repository: they are AGPL-licensed, so the tests read them from
``$SEQLAKE_EXTERNAL_DATA`` (by default ``shared/data`` beside the checkout) and skip when they are absent.
Tests that compare against ``seqkit`` / ``minimap2`` skip when those are not installed.

The session is hermetic: it never reads or writes the user's cache folder (``~/.cache/seqlake``: reference
indexes, translated templates), where a stale index once reached a fresh clone's tests. It gets a new cache
folder of its own (:func:`pytest_configure`), shared by the xdist workers and every process a test starts.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from seqlake import demo_data
from seqlake.base.cachedir import CACHE_VAR, REF_CACHE_VAR

REPO = Path(__file__).resolve().parents[1]
TEST_DATA = Path(__file__).resolve().parent / "data"
EXTERNAL_DATA = Path(os.environ.get("SEQLAKE_EXTERNAL_DATA") or REPO.parent / "shared" / "data")
MISEQ_READS = ("subsample1_R1.fastq.gz", "subsample1_R2.fastq.gz")
#: the folder of the session's cache, kept by the process that made it (it removes it at the end)
_CACHE_KEY = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """The session's own cache folder, in ``$SEQLAKE_CACHE_DIR`` (and no ``$SEQLAKE_REF_CACHE``, so reference
    indexes go there too). Made before xdist starts its workers, which inherit the environment and so share
    it (its writers write a temporary file and rename it, indexes under a file lock); a worker keeps it."""
    if hasattr(config, "workerinput"):
        return
    folder = tempfile.mkdtemp(prefix="seqlake-test-cache-")
    os.environ[CACHE_VAR] = folder
    os.environ.pop(REF_CACHE_VAR, None)
    config.stash[_CACHE_KEY] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_CACHE_KEY, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


#: The modules whose tests take longest, longest first (``make test`` with ``--durations``). The suite runs them
#: first: xdist hands tests out in the collection's order (``--no-loadscope-reorder``), so a long test handed
#: out last is the run's tail, one core idle. Whole modules only: a module fixture is set up again wherever its
#: module's tests are split apart. Only modules that run no local cloud in the test process itself (theirs run
#: in child processes): a cloud in the test process (tests/faults' session cloud, tests/local/test_patches.py,
#: test_e2e.py) leaves moto's patches and its server's threads in that process, and the tests that fork or mock
#: AWS must have run before it, as they do in the collection's order.
LONGEST_FIRST: tuple[str, ...] = (
    "tests/local/test_scale.py",  # 1,000 children, three failing, then the re-run and a clean run
    "tests/docs/test_documented_commands.py",  # every documented command, in one state folder (one group)
    "tests/bench/test_bench_quick.py",  # bench/run.py --quick (one group)
    "tests/local/test_demo.py",
    "tests/core/test_variants.py",  # the ivar comparisons
    "tests/cli/test_contract.py",
    "tests/local/test_packaged_app.py",
    "tests/core/test_reduce.py",
    "tests/core/test_lab_metrics.py",  # one group
)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook names each test's group from its marks
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
