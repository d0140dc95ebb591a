"""Install mappy, at the version pyproject.toml pins, built from its source with one fix and one addition.

mappy's paired-end ``Aligner.map(seq1, seq2)`` (``python/cmappy.h``, ``mm_map_aux``) reverse-complements
mate 2 into a ``strdup`` copy and never frees it: about 240 bytes per 2x220 bp pair, so a worker's memory
grew with its shard (+110 MB over 1.15 M pairs). The fix frees the copy once ``mm_map_frag`` has used it;
alignments are unchanged (``mm_reg1_t`` keeps no pointer into the query). The build is installed as the
local version ``<pin>+seqlake.1``, which satisfies the ``mappy==<pin>`` pin (PEP 440 ignores local labels),
so a later ``pip install`` of the project keeps it; mappy's own ``__version__`` (the ``runs`` table's
``mappy_version``) stays the pinned one.

The addition, ``mappy.seqlake_map_batch`` (scripts/mappy/: ``seqlake_batch.h``, and ``batch.pyx`` appended to
``mappy.pyx``), maps a chunk of reads in one call and returns its ``alignments`` rows as column buffers: mappy's
``map`` builds a Python object per hit and a list per CIGAR operation, and the child's rows were then built from
those per read in Python (a fifth of a child's CPU time beside mapping itself). The rules it follows are
seqlake.child.align's; tests/core/test_mappy_batch.py holds both equal.

    python scripts/install_mappy.py [PYTHON]   (PYTHON: the environment's interpreter; default: this one)

Does nothing when the environment already holds this build. Needs a C compiler and zlib's headers, as
mappy's own install does.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the local version label of the fixed build (raise it when the fix changes)
LABEL = "seqlake.2"
#: seqlake's batch mapping, compiled into mappy
BATCH = ROOT / "scripts" / "mappy"
_LEAKY = "\t\tfree(regs[1]);\n\t\tr = regs[0];\n"
_FIXED = _LEAKY.replace("\t\tr = ", "\t\tfree(seq[1]); /* mate 2's reverse-complemented copy (seqlake) */\n\t\tr = ")


def pinned_version() -> str:
    """The mappy version pyproject.toml pins (its one home)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        if m := re.fullmatch(r"mappy==([\w.]+)", dep.strip()):
            return m.group(1)
    raise SystemExit("pyproject.toml pins no mappy==<version>")


def installed_version(python: str) -> str | None:
    p = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('mappy'))"],
                       capture_output=True, text=True, check=False)
    return p.stdout.strip() if p.returncode == 0 else None


def patch_source(src: Path, version: str) -> None:
    """The leak fixed in ``python/cmappy.h``, the batch mapping added, the distribution named ``<version>+<LABEL>``."""
    header = src / "python" / "cmappy.h"
    text = header.read_text()
    if text.count(_LEAKY) != 1:
        raise SystemExit(f"{header}: the code freeing mate 2's copy is not where mappy {version} has it")
    header.write_text(text.replace(_LEAKY, _FIXED))
    (src / "python" / "seqlake_batch.h").write_text((BATCH / "seqlake_batch.h").read_text())
    pyx = src / "python" / "mappy.pyx"
    pyx.write_text(pyx.read_text() + (BATCH / "batch.pyx").read_text())
    setup = src / "setup.py"
    text = setup.read_text()
    if text.count(f"'{version}'") != 1:
        raise SystemExit(f"{setup}: no single version string {version!r}")
    setup.write_text(text.replace(f"'{version}'", f"'{version}+{LABEL}'"))


def main(argv: list[str]) -> int:
    python = argv[1] if len(argv) > 1 else sys.executable
    version = pinned_version()
    wanted = f"{version}+{LABEL}"
    if installed_version(python) == wanted:
        return 0
    pip = [python, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    with tempfile.TemporaryDirectory(prefix="seqlake-mappy-") as tmp:
        # mappy's source only: ":all:" made the download's metadata step build its build dependencies from source
        # too (Cython compiled, one core, minutes, whenever pip's cache was empty: every clean clone's make test)
        subprocess.run([*pip, "download", "--no-deps", "--no-binary", "mappy", f"mappy=={version}", "-d", tmp],
                       check=True)
        (archive,) = Path(tmp).glob(f"mappy-{version}.tar.gz")
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        src = Path(tmp) / f"mappy-{version}"
        patch_source(src, version)
        subprocess.run([*pip, "install", "--no-deps", "--force-reinstall", str(src)], check=True)
    if installed_version(python) != wanted:
        raise SystemExit(f"mappy {wanted} did not install")
    print(f"mappy {wanted} installed (mappy {version} without its paired-end leak, with seqlake's batch mapping)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
