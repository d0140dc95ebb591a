"""Shared fixtures: where the test data is, and which external tools exist.

The edge-case FASTQ files and the adapter reads live in ``tests/data/`` (MIT and Biopython-licensed
copies, attributed in ``tests/data/README.md``); the reference is the one the package bundles. Only the
real MiSeq reads are not in the repository: they are AGPL-licensed, so the tests read them from
``$SEQLAKE_EXTERNAL_DATA`` (by default ``shared/data`` beside the checkout) and skip when they are absent.
Tests that compare against ``seqkit`` / ``minimap2`` skip when those are not installed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from seqlake import demo_data

REPO = Path(__file__).resolve().parents[1]
TEST_DATA = Path(__file__).resolve().parent / "data"
EXTERNAL_DATA = Path(os.environ.get("SEQLAKE_EXTERNAL_DATA") or REPO.parent / "shared" / "data")
MISEQ_READS = ("subsample1_R1.fastq.gz", "subsample1_R2.fastq.gz")


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
