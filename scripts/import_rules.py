"""Fails when the package's imports break its rules: ``python scripts/import_rules.py [SRC...]``.

Three checks, all over every import statement of ``src/seqlake`` and ``localcloud/src/localcloud``:

- **No circle**: no modules that import each other, directly or through others.
- **Layers** (:data:`LAYERS`, the one home of the rule; docs/INTERNALS.md draws it): a module
  imports only its own layer or lower ones, never a sibling package of its own layer; plus the few
  :data:`FORBIDDEN` arrows and :data:`BOTO_ALLOWED` (who may talk to AWS's SDK directly).
- **The local cloud is a component**: no module of :data:`COMPONENT` imports seqlake outside it, no module
  but :data:`ADAPTER`'s imports the component, and no module but the component's imports moto.

Every import statement counts, wherever it stands (at the top, inside a function, under ``TYPE_CHECKING``):
a circle that only runs late is still two modules that cannot be understood one without the other.
``from pkg import name`` is an arrow to ``pkg.name`` where that is a module, else to ``pkg``; importing
a module does not count as importing its parent packages. Only the standard library is used, so the
check runs before anything is installed.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path


#: the source folders checked by default: seqlake's and the local cloud's (its own distribution, localcloud/)
SOURCES = (Path(__file__).resolve().parents[1] / "src", Path(__file__).resolve().parents[1] / "localcloud" / "src")


def modules(src: Path | Sequence[Path]) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` under ``src`` (one folder or several; a package's ``__init__.py`` is
    the package)."""
    out = {}
    for root in [src] if isinstance(src, Path) else src:
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if parts and all(p.isidentifier() for p in parts):
                out[".".join(parts)] = path
    return out


def _imported(name: str, path: Path, node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> Iterator[str]:
    """The modules of ``known`` that one import statement of module ``name`` (file ``path``) names."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names if alias.name in known)
        return
    base = node.module or ""
    if node.level:  # relative: from the module's package, up level - 1 more
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    for alias in node.names:
        if f"{base}.{alias.name}" in known:
            yield f"{base}.{alias.name}"
        elif base in known:
            yield base


#: the nodes that can hold statements: an import is a statement, so nothing else is walked into
_HOLDS_STATEMENTS = (ast.Module, ast.stmt, ast.excepthandler, ast.match_case)


def import_statements(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a file, wherever it stands, in the file's order."""
    return _import_statements(path.read_text(encoding="utf-8"), str(path))


@functools.cache
def _import_statements(text: str, filename: str) -> list[ast.Import | ast.ImportFrom]:
    # Cached by the text (each check parses a file once, a changed file again); only the statements are
    # walked, not the expressions that make up most of a tree: ast.walk over every node took seconds.
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = [ast.parse(text, filename)]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        todo += [child for child in ast.iter_child_nodes(node) if isinstance(child, _HOLDS_STATEMENTS)]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def import_graph(src: Path | Sequence[Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``src`` it imports."""
    known = modules(src)
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        imports = import_statements(path)
        graph[name] = {t for node in imports for t in _imported(name, path, node, known)} - {name}
    return graph


#: bottom to top: (layer, package or module prefix). A module belongs to the longest prefix that names it.
LAYERS: tuple[tuple[int, str], ...] = (
    (0, "seqlake"),  # the package root: its version only
    (0, "seqlake.base"),  # the shared vocabulary: model, errors, params, storage, layout...
    (0, "seqlake.schemas"),  # JSON Schemas, data
    (0, "seqlake.demo_data"),  # the bundled demo and its simulator
    (0, "seqlake.formats"),  # BGZF, BAM, CIGAR, BAI: pure formats over bytes and arrays (imports no seqlake)
    (1, "seqlake.reads"),  # FASTQ formats and random access
    (2, "seqlake.plan"),  # the plan, its files, samplesheets, what a child reads of it
    (3, "seqlake.lake"),  # tables, the stages' contracts, Parquet, Iceberg, the exact aggregates, the counting
    (4, "seqlake.child"),  # the Batch child
    (4, "seqlake.reduce"),  # the reduce step: a reducer per region and sample group
    (5, "seqlake.report"),  # the run report
    (5, "seqlake.commit"),  # the commit step: the merge of every child and region
    (6, "seqlake.aws"),  # the AWS steps (Lambda handlers' logic, the index job)
    (6, "seqlake.process"),  # the whole pipeline in one process, no cloud
    # (7: the local cloud, `localcloud`, its own distribution: it imports nothing of seqlake, COMPONENT)
    (8, "seqlake.local"),  # the adapter: seqlake on the local cloud, the `seqlake local ...` commands (ADAPTER)
    (9, "seqlake.cli"),
    (10, "seqlake.__main__"),  # `python -m seqlake`: the command line
)
#: the local cloud: it imports no module of seqlake outside itself, and only the adapter imports it
COMPONENT = "localcloud"
#: the adapter between the two: the only modules that import both
ADAPTER = "seqlake.local"
#: moto is the local cloud's alone
_MOTO = ("moto",)
#: arrows the layers allow but the design does not: (importer prefix, imported prefix, why)
FORBIDDEN: tuple[tuple[str, str, str], ...] = (
    ("seqlake.child", "seqlake.commit", "a child never runs the commit's merge"),
)
#: the only modules that import boto3/botocore: everything else goes through storage and clients
BOTO_ALLOWED: tuple[str, ...] = ("seqlake.base.storage", "seqlake.base.clients", "seqlake.aws", "localcloud",
                                 "seqlake.local", "seqlake.cli")
_BOTO = ("boto3", "botocore")


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def group_of(module: str) -> tuple[int, str]:
    """The (layer, package) a module belongs to: the longest prefix of :data:`LAYERS` that names it."""
    best = max((p for p in LAYERS if _under(module, p[1])), key=lambda p: len(p[1]), default=None)
    if best is None:
        raise ValueError(f"{module} is in no layer of scripts/import_rules.py: add its package to LAYERS")
    return best


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that runs up a layer, across to a sibling package, or along a forbidden arrow."""
    out = []
    for module in sorted(m for m in graph if _under(m, "seqlake")):  # the rules are this package's
        mine = group_of(module)
        for target in sorted(t for t in graph[module] if _under(t, "seqlake")):  # the local cloud: the next check
            theirs = group_of(target)
            if theirs[0] > mine[0]:
                out.append(f"{module} -> {target}: up from layer {mine[0]} ({mine[1]}) to {theirs[0]} ({theirs[1]})")
            elif theirs[0] == mine[0] and theirs[1] != mine[1] and theirs[1] != "seqlake":
                out.append(f"{module} -> {target}: across layer {mine[0]}, {mine[1]} to {theirs[1]}")
            for importer, imported, why in FORBIDDEN:
                if _under(module, importer) and _under(target, imported):
                    out.append(f"{module} -> {target}: {why}")
    return out


def boto_violations(src: Path | Sequence[Path]) -> list[str]:
    """Modules outside :data:`BOTO_ALLOWED` that import boto3 or botocore."""
    out = []
    for name, path in modules(src).items():
        if any(_under(name, allowed) for allowed in BOTO_ALLOWED):
            continue
        for node in import_statements(path):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if not node.level else [])
            out += [f"{name} imports {n} (only {', '.join(BOTO_ALLOWED)} may)"
                    for n in names if n.split(".")[0] in _BOTO]
    return out


def component_violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports that break the local cloud's contract: a module of :data:`COMPONENT` importing seqlake outside
    it, or a module outside :data:`COMPONENT` and :data:`ADAPTER` importing the component."""
    out = []
    for module in sorted(graph):
        mine = _under(module, COMPONENT)
        for target in sorted(graph[module]):
            if mine and _under(target, "seqlake") and not _under(target, COMPONENT):
                out.append(f"{module} -> {target}: the local cloud imports nothing of seqlake (give it through "
                           f"{ADAPTER}.adapter)")
            elif not mine and not _under(module, ADAPTER) and _under(target, COMPONENT):
                out.append(f"{module} -> {target}: only {ADAPTER} reaches the local cloud")
    return out


def moto_violations(src: Path | Sequence[Path]) -> list[str]:
    """Modules outside :data:`COMPONENT` that import moto."""
    out = []
    for name, path in modules(src).items():
        if _under(name, COMPONENT):
            continue
        for node in import_statements(path):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if not node.level else [])
            out += [f"{name} imports {n} (only {COMPONENT} may)" for n in names if n.split(".")[0] in _MOTO]
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def main(argv: list[str]) -> int:
    src: Path | Sequence[Path] = [Path(a) for a in argv] if argv else SOURCES
    graph = import_graph(src)
    found = circles(graph)
    for component in found:
        members = set(component)
        arrows = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
        print(f"import circle of {len(component)} modules: " + "; ".join(arrows), file=sys.stderr)
    broken = layer_violations(graph) + boto_violations(src) + component_violations(graph) + moto_violations(src)
    for line in broken:
        print(f"import rule broken: {line}", file=sys.stderr)
    if not found and not broken:
        where = ", ".join(str(s) for s in ([src] if isinstance(src, Path) else src))
        print(f"imports: no circle and no broken layer rule among {len(graph)} modules under {where}")
    return 1 if found or broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
