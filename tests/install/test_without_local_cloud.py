"""seqlake installs and ``seqlake process`` runs without the local cloud (``localcloud``, its own distribution in
``localcloud/``): only the ``local`` extra names it, and no module of seqlake imports it or moto but the adapter
(``seqlake.local``, lazily: ``scripts/import_rules.py`` checks every import statement)."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
import textwrap
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from seqlake import demo_data

#: the distributions only the local cloud needs
_LOCAL_ONLY = {"localcloud", "moto", "duckdb", "sqlglot", "aws-sam-translator"}


def test_only_the_local_extra_names_the_local_cloud() -> None:
    found = {}
    for text in md.requires("seqlake") or []:
        req = Requirement(text)
        if canonicalize_name(req.name) in _LOCAL_ONLY:
            found[canonicalize_name(req.name)] = str(req.marker)
    assert found == {"localcloud": 'extra == "local"'}, found


def test_seqlake_process_runs_where_the_local_cloud_cannot_be_imported(tmp_path: Path) -> None:
    """``seqlake process`` of the demo reads in an interpreter where importing ``localcloud`` or ``moto`` fails, as
    in a venv without the ``local`` extra."""
    r1, r2, reference = demo_data.paths()
    script = textwrap.dedent(f"""
        import importlib.abc, sys

        class NoLocalCloud(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("localcloud", "moto"):
                    raise ModuleNotFoundError(f"No module named {{name!r}} (not installed here)")
                return None

        sys.meta_path.insert(0, NoLocalCloud())
        sys.argv = ["seqlake", "process", {str(r1)!r}, {str(r2)!r}, "--reference", {str(reference)!r},
                    "--out", {str(tmp_path / "lake")!r}, "--jobs", "1"]
        from seqlake.cli import run
        run()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert any((tmp_path / "lake" / "results").iterdir())
