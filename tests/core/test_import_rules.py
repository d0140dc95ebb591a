"""The import rules ``make lint`` checks (``scripts/import_rules.py``): no circle, the layers, who imports boto3."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@functools.cache  # loaded once: its parses are cached by each file's text, so src/ is parsed once for all tests
def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_rules", ROOT / "scripts" / "import_rules.py")
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
    assert check.circles(check.import_graph(check.SOURCES)) == []


def test_the_local_cloud_is_a_component() -> None:
    """Only the adapter (``seqlake.local``) imports the local cloud, the local cloud imports nothing of seqlake,
    no other module imports moto, and its launcher and fork server import nothing else (they are told what to
    run)."""
    check = _script()
    graph = check.import_graph(check.SOURCES)
    local = check.COMPONENT
    users = {m for m, targets in graph.items() if not m.startswith(local) and any(t.startswith(local) for t in targets)}
    assert users and all(m.startswith(check.ADAPTER + ".") for m in users), users
    outside = {t for m, targets in graph.items() if m.startswith(local) for t in targets if not t.startswith(local)}
    assert outside == set()
    assert check.component_violations(graph) == [] and check.moto_violations(check.SOURCES) == []
    transport = {f"{local}.launcher", f"{local}.forkserver"}
    assert all(graph[m] <= transport for m in transport)


@pytest.mark.parametrize(("files", "broken"), [
    ({"localcloud/a.py": "from seqlake.base import storage\n"}, "the local cloud imports nothing of seqlake"),
    ({"seqlake/cli.py": "from localcloud import a\n"}, "only seqlake.local reaches the local cloud"),
    ({"seqlake/commit/merge.py": "import moto.s3\n"}, "imports moto.s3 (only localcloud may)"),
])
def test_each_broken_component_rule_fails_the_check(tmp_path: Path, files: dict[str, str], broken: str) -> None:
    check = _script()
    src = _layered(tmp_path, {"localcloud/a.py": "", "seqlake/local/__init__.py": "",
                              "seqlake/local/adapter.py": "from localcloud import a\nfrom seqlake.base import "
                              "storage\n", **files})
    found = check.component_violations(check.import_graph(src)) + check.moto_violations(src)
    assert any(broken in line for line in found), found
    assert check.main([str(src)]) == 1


def _layered(tmp_path: Path, files: dict[str, str]) -> Path:
    """A copy of the rules' world: a ``seqlake`` package with one module in each named place."""
    base = {"seqlake/__init__.py": "", "seqlake/base/__init__.py": "", "seqlake/base/storage.py": "",
            "seqlake/lake/__init__.py": "", "seqlake/commit/merge.py": "", "seqlake/lake/tables.py": "",
            "seqlake/child/__init__.py": "", "seqlake/child/worker.py": "", "seqlake/aws/__init__.py": "",
            "seqlake/aws/steps.py": "", "seqlake/process.py": "", "localcloud/__init__.py": "",
            "seqlake/cli.py": ""}
    return _write(tmp_path, {**base, **files})


def test_the_package_keeps_its_layers() -> None:
    check = _script()
    src = check.SOURCES
    assert check.layer_violations(check.import_graph(src)) == []
    assert check.boto_violations(src) == []
    assert check.main([str(s) for s in src]) == 0


def test_at_most_seventeen_entries_at_the_top() -> None:
    """The top holds the layers' packages, one per stage (child, reduce, commit) among them, and the entry
    points: a module that is none of these belongs inside one."""
    top = [p for p in (ROOT / "src" / "seqlake").iterdir()
           if p.name != "__pycache__" and (p.suffix == ".py" or (p / "__init__.py").exists())]
    assert len(top) <= 17, sorted(p.name for p in top)


@pytest.mark.parametrize(("files", "broken"), [
    ({"seqlake/lake/tables.py": "from seqlake.child import worker\n"}, "up from layer 3"),
    ({"seqlake/base/storage.py": "def f():\n    import seqlake.lake.tables\n"}, "up from layer 0"),
    ({"seqlake/child/worker.py": "from seqlake.commit import merge\n"}, "never runs the commit's merge"),
    ({"seqlake/process.py": "from seqlake.aws import steps\n"}, "across layer 6"),
    ])
def test_each_broken_layer_rule_fails_the_check(tmp_path: Path, files: dict[str, str], broken: str) -> None:
    check = _script()
    src = _layered(tmp_path, files)
    assert any(broken in line for line in check.layer_violations(check.import_graph(src)))
    assert check.main([str(src)]) == 1


def test_boto3_only_where_allowed(tmp_path: Path) -> None:
    check = _script()
    src = _layered(tmp_path, {"seqlake/commit/merge.py": "import boto3\n", "seqlake/child/worker.py":
                              "from botocore.config import Config\n", "seqlake/aws/steps.py": "import boto3\n"})
    assert sorted(v.split()[0] for v in check.boto_violations(src)) == ["seqlake.child.worker", "seqlake.commit.merge"]
    assert check.main([str(src)]) == 1
