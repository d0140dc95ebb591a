"""The import-circle check that ``make lint`` runs (``scripts/import_circles.py``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_circles", ROOT / "scripts" / "import_circles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import registers it
    spec.loader.exec_module(module)
    return module


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_finds_circles_through_every_kind_of_import(tmp_path: Path) -> None:
    check = _script()
    src = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n",  # `from package import module`
            "pkg/b.py": "def f():\n    from .sub import c\n",  # relative, inside a function
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": "import typing\nif typing.TYPE_CHECKING:\n    from ..a import x\n",  # up two, types only
            "pkg/d.py": "import pkg.a\n",  # into the circle, not part of it
            "pkg/e.py": "from pkg import f\n",
            "pkg/f.py": "import pkg.e\n",
        },
    )
    graph = check.import_graph(src)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.sub.c"} and graph["pkg.sub.c"] == {"pkg.a"}
    assert check.circles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"], ["pkg.e", "pkg.f"]]
    assert check.main([str(src)]) == 1


def test_a_package_face_that_hands_names_on_is_no_circle(tmp_path: Path) -> None:
    check = _script()
    src = _write(tmp_path, {"pkg/__init__.py": "from pkg.a import x\n", "pkg/a.py": "x = 1\n"})
    assert check.circles(check.import_graph(src)) == []


def test_the_package_has_no_import_circle() -> None:
    check = _script()
    assert check.circles(check.import_graph(ROOT / "src")) == []


def test_the_local_cloud_is_the_top_floor() -> None:
    """Only the command line imports the local cloud, and its launcher and fork server import nothing else of
    seqlake (they are told what to run)."""
    graph = _script().import_graph(ROOT / "src")
    local = "seqlake.localcloud"
    users = {m for m, targets in graph.items() if not m.startswith(local) and any(t.startswith(local) for t in targets)}
    assert users == {"seqlake.cli"}
    transport = {f"{local}.launcher", f"{local}.forkserver"}
    assert all(graph[m] <= transport for m in transport)
