"""The bundled demo data: simulated paired-end reads and the SARS-CoV-2 reference they come from.

- ``MN908947.3.fasta``: the SARS-CoV-2 Wuhan-Hu-1 reference (29,903 bp), CC BY 4.0, from the ARTIC
  network's primer schemes (attribution in ``README.md`` and ``NOTICE`` beside this file).
- ``demo_R1.fastq.gz`` / ``demo_R2.fastq.gz``: 20,000 read pairs of 2x150 bp simulated from it by
  :mod:`seqlake.demo_data.simulate` with :data:`DEMO_SEED` (regenerate with ``python -m seqlake.demo_data``).

If the read files are absent (a checkout or package built without them), :func:`paths` makes the same
reads once, deterministically, in the user's cache folder (about 3 seconds).
"""

from __future__ import annotations

import os
import tempfile
from importlib.resources import files
from pathlib import Path

R1_NAME = "demo_R1.fastq.gz"
R2_NAME = "demo_R2.fastq.gz"
REFERENCE_NAME = "MN908947.3.fasta"
#: the demo reads: this many pairs, simulated with this seed
DEMO_PAIRS = 20_000
DEMO_SEED = 20_240_229


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


def _generated_reads() -> tuple[Path, Path]:
    from seqlake.demo_data.simulate import write_pairs

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache / "seqlake" / f"demo-{DEMO_SEED}-{DEMO_PAIRS}"
    r1, r2 = folder / R1_NAME, folder / R2_NAME
    if not (r1.exists() and r2.exists()):
        folder.mkdir(parents=True, exist_ok=True)
        # write beside the target and rename: concurrent callers (test workers) never see half a file
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            t1, t2 = Path(tmp, R1_NAME), Path(tmp, R2_NAME)
            write_pairs(reference_path(), t1, t2, DEMO_PAIRS, seed=DEMO_SEED)
            t2.replace(r2)
            t1.replace(r1)
    return r1, r2


def paths() -> tuple[Path, Path, Path]:
    """``(r1, r2, reference)``: the bundled demo reads and their reference, as file system paths."""
    r1, r2 = _path(R1_NAME), _path(R2_NAME)
    if not (r1.exists() and r2.exists()):
        r1, r2 = _generated_reads()
    return r1, r2, reference_path()


def simulate_args(out: Path) -> list[str]:
    """The arguments of :func:`seqlake.demo_data.simulate.main` that make the demo reads in ``out``."""
    return ["--out", str(out), "--reference", str(reference_path()), "--pairs", str(DEMO_PAIRS),
            "--seed", str(DEMO_SEED)]
