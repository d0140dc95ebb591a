"""The bundled demo data: simulated paired-end reads and the SARS-CoV-2 reference they come from.

- ``MN908947.3.fasta``: the SARS-CoV-2 Wuhan-Hu-1 reference (29,903 bp), CC BY 4.0, from the ARTIC
  network's primer schemes (attribution in ``README.md`` beside this file).
- ``demo_R1.fastq.gz`` / ``demo_R2.fastq.gz``: 20,000 read pairs of 2x150 bp simulated from it by
  :mod:`seqlake.simulate` (regenerate with ``python -m seqlake.simulate --out src/seqlake/demo_data``).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

R1_NAME = "demo_R1.fastq.gz"
R2_NAME = "demo_R2.fastq.gz"
REFERENCE_NAME = "MN908947.3.fasta"


def _path(name: str) -> Path:
    resource = files(__name__) / name
    # the package is installed as plain files (setuptools package-data), never zipped: tools such as
    # minimap2 and the local cloud's child processes need real paths
    if not isinstance(resource, Path):
        raise RuntimeError(f"seqlake.demo_data is not on a file system ({resource!r})")
    return resource


def reference_path() -> Path:
    """The bundled reference FASTA."""
    return _path(REFERENCE_NAME)


def paths() -> tuple[Path, Path, Path]:
    """``(r1, r2, reference)``: the bundled demo reads and their reference, as file system paths."""
    return _path(R1_NAME), _path(R2_NAME), _path(REFERENCE_NAME)
