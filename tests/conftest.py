"""Shared fixtures: where the real data is, and which external tools exist.

Tests that need ``../shared/data`` (real reads, AGPL: never copied here) or ``seqkit`` / ``minimap2``
skip cleanly when those are absent, so a user's clone without them still runs green.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
TEST_DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not beside this checkout")
    return SHARED_DATA


@pytest.fixture(scope="session")
def miseq(shared_data: Path) -> tuple[Path, Path]:
    d = shared_data / "sarscov2_artic_miseq"
    return d / "subsample1_R1.fastq.gz", d / "subsample1_R2.fastq.gz"


@pytest.fixture(scope="session")
def reference(shared_data: Path) -> Path:
    return shared_data / "ref" / "MN908947.3.fasta"


@pytest.fixture(scope="session")
def edge(shared_data: Path) -> Path:
    return shared_data / "edge"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (make test installs it with apt-get)")
    return path


@pytest.fixture(scope="session")
def seqkit() -> str:
    return _tool("seqkit")


@pytest.fixture(scope="session")
def minimap2() -> str:
    return _tool("minimap2")
