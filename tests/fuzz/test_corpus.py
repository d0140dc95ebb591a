"""Every input ``make fuzz`` ever found failing, replayed through its target's check (``tests/data/fuzz/``).

A kept input is named ``<target>/<sha256[:16]>.bin`` (``.bin.gz``: gzipped, when large); its check
(:mod:`tests.fuzz.checks`) asserts the invariant, so an input whose bug was fixed passes, and one that fails
again is a regression.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from .checks import TARGETS

CORPUS = Path(__file__).resolve().parents[1] / "data" / "fuzz"
KEPT = sorted(p for p in CORPUS.glob("*/*.bin*"))


def test_every_kept_input_names_a_target() -> None:
    assert KEPT, f"no kept inputs under {CORPUS}"
    assert {p.parent.name for p in KEPT} <= set(TARGETS)


@pytest.mark.parametrize("kept", KEPT, ids=[f"{p.parent.name}/{p.name.split('.')[0]}" for p in KEPT])
def test_kept_input_keeps_the_invariant(kept: Path, tmp_path: Path) -> None:
    data = kept.read_bytes()
    TARGETS[kept.parent.name](gzip.decompress(data) if kept.suffix == ".gz" else data, tmp_path)
