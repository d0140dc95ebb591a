"""Each Lambda carries only some layers (template.yaml): what its handler imports must be in them.

A module's imports decide which functions may use it. Two checks per function:

- every import in the handler's reach (module level and inside functions, so a rarely taken path such as
  a rejection counts too) names a library of the function's layers, of the Lambda runtime or of Python;
- a fresh interpreter that can import only those libraries imports the handler and every seqlake module
  in its reach (what the libraries themselves import is checked too).
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from .conftest import REPO

SRC = REPO / "src"
#: what the python3.13 runtime brings besides the standard library: boto3 and its dependencies
RUNTIME = ("boto3",)


#: a fresh interpreter that finds only the standard library, seqlake and the libraries named in argv[3]
#: (names starting with "_" are the interpreter's and the extensions' own modules), then imports the
#: handler (argv[1]) and the seqlake modules of argv[4]
ONLY_THE_LAYERS = """
import importlib, sys
allowed = set(sys.argv[3].split(","))
class Only:
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if path is None and top not in allowed | {"seqlake", "app"} | sys.stdlib_module_names and top[0] != "_":
            raise ModuleNotFoundError(f"{name} is in none of the layers", name=name)
sys.meta_path.insert(0, Only())
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import app
for module in sys.argv[4].split(","):
    importlib.import_module(module)
"""


def layer_requirements(folder: Path) -> list[Requirement]:
    lines = (folder / "requirements.txt").read_text().splitlines()
    return [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]


def distributions(requirements: list[Requirement]) -> set[str]:
    """The installed distributions that installing ``requirements`` brings (with their extras)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(r.name, frozenset(r.extras)) for r in requirements]
    while todo:
        name, extras = todo.pop()
        dist = md.distribution(name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if (key, extras) in seen:
            continue
        seen.add((key, extras))
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (*extras, "")):
                todo.append((req.name, frozenset(req.extras)))
    return {key for key, _ in seen}


@functools.cache
def _packages() -> dict[str, list[str]]:
    return dict(md.packages_distributions())


def import_names(dists: set[str]) -> set[str]:
    """Top-level import names of ``dists``."""
    names = set()
    for top, owners in _packages().items():
        if any(o.lower().replace("_", "-") in dists for o in owners):
            names.add(top)
    return names


def function_layers(template: dict[str, Any]) -> dict[str, tuple[Path, list[Path]]]:
    """Function -> (its handler file, the build folders of its layers)."""
    res = template["Resources"]
    out = {}
    for name, r in res.items():
        if r["Type"] == "AWS::Serverless::Function":
            layers = [REPO / res[ref["Ref"]]["Metadata"]["ContextPath"] for ref in r["Properties"].get("Layers", [])]
            out[name] = (REPO / r["Properties"]["CodeUri"] / "app.py", layers)
    return out


def _module_file(name: str) -> Path | None:
    base = SRC.joinpath(*name.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path, module: str) -> list[str]:
    """Every module ``path`` imports, anywhere but under ``if TYPE_CHECKING:``."""
    found: list[str] = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for stmt in child.orelse:
                    visit(stmt)
                continue
            if isinstance(child, ast.Import):
                found.extend(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                found.append(base)
                found.extend(f"{base}.{a.name}" for a in child.names)
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def reach(handler: Path) -> tuple[set[str], dict[str, set[str]]]:
    """The seqlake modules the handler reaches, and the other top-level modules each of those imports."""
    modules: set[str] = set()
    others: dict[str, set[str]] = {}
    todo = [("app", handler)]
    while todo:
        name, path = todo.pop()
        if name in modules:
            continue
        modules.add(name)
        for imported in _imports(path, name):
            top = imported.split(".")[0]
            if top == "seqlake":
                parts = imported.split(".")
                todo += [(".".join(parts[:i]), f) for i in range(1, len(parts) + 1)
                         if (f := _module_file(".".join(parts[:i]))) is not None]
            elif top not in sys.stdlib_module_names and top != "__future__":
                others.setdefault(top, set()).add(name)
    return modules - {"app"}, others


def provided(layers: list[Path]) -> set[str]:
    reqs = [r for folder in layers for r in layer_requirements(folder)]
    return import_names(distributions(reqs + [Requirement(r) for r in RUNTIME]))


#: libraries only Batch jobs use, imported inside the functions that need them by these modules, which a Lambda's
#: code reaches but never calls there: pysam, the reducers' CRAM encoder (``--cram``; the commit reaches the
#: reducer's code because ``seqlake process`` reduces in-process). The interpreter check below imports each such
#: module without the library, so a module-level import of it fails there.
BATCH_ONLY: dict[str, set[str]] = {"pysam": {"seqlake.reduce.cramencode"},
                                   # seqlake's compiled record walk and ISA-L's inflate, loaded by the reducer
                                   "mappy": {"seqlake.reduce.bams"}, "isal": {"seqlake.reduce.bams"}}


def test_every_function_names_its_layers(template: dict[str, Any]) -> None:
    functions = function_layers(template)
    assert len(functions) == 7
    for name, (handler, layers) in functions.items():
        assert handler.is_file(), name
        assert layers and layers[0].name == "core", f"{name}: CoreLayer (seqlake itself) comes first"


@pytest.mark.parametrize("function", ["StartRunFunction", "PlanFunction", "CommitFunction", "RecordFailureFunction",
                                      "RecordRunEndFunction", "DeleteSampleFunction", "CompactFunction"])
def test_what_a_handler_imports_is_in_its_layers(template: dict[str, Any], function: str) -> None:
    handler, layers = function_layers(template)[function]
    allowed = provided(layers)
    modules, others = reach(handler)
    missing = {top: sorted(where) for top, where in others.items()
               if top not in allowed and not where <= BATCH_ONLY.get(top, set())}
    assert not missing, f"{function}: not in its layers {[f.name for f in layers]}: {missing}"
    # and the interpreter agrees: with only those libraries importable, every module in reach imports
    argv = [str(handler.parent), str(SRC), ",".join(sorted(allowed)), ",".join(sorted(modules))]
    proc = subprocess.run([sys.executable, "-c", ONLY_THE_LAYERS, *argv], capture_output=True, text=True,
                          check=False, cwd=handler.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_heavy_libraries_stay_where_they_are_needed(template: dict[str, Any]) -> None:
    """The split is the point: the plan carries no pyarrow, the commit and the failure no FASTQ readers,
    the start neither numpy nor the readers, and no function the worker's libraries."""
    def carried(function: str) -> set[str]:
        return provided(function_layers(template)[function][1])

    assert "pyarrow" not in carried("PlanFunction")
    for function in ("CommitFunction", "RecordFailureFunction", "StartRunFunction", "RecordRunEndFunction"):
        assert not {"dnaio", "isal", "rapidgzip"} & carried(function), function
    assert "numpy" not in carried("StartRunFunction") and "numpy" not in carried("RecordRunEndFunction")
    for function in function_layers(template):
        assert not {"cutadapt", "mappy"} & carried(function), function


def test_layer_requirements_are_exact_pins() -> None:
    for requirements in sorted((REPO / "layers").glob("*/requirements.txt")):
        for req in layer_requirements(requirements.parent):
            assert re.fullmatch(r"==\S+", str(req.specifier)), f"{requirements}: {req}"
