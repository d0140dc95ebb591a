"""Fails when modules of the package import each other in a circle: ``python scripts/import_circles.py [SRC]``.

Every import statement counts, wherever it stands (at the top, inside a function, under ``TYPE_CHECKING``):
a circle that only runs late is still two modules that cannot be understood one without the other.
``from pkg import name`` is an arrow to ``pkg.name`` where that is a module, else to ``pkg``; importing
a module does not count as importing its parent packages. Only the standard library is used, so the
check runs before anything is installed.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path


def modules(src: Path) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` under ``src`` (a package's ``__init__.py`` is the package)."""
    out = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
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


def import_graph(src: Path) -> dict[str, set[str]]:
    """Module -> the modules of ``src`` it imports."""
    known = modules(src)
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
        graph[name] = {t for node in imports for t in _imported(name, path, node, known)} - {name}
    return graph


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
    src = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "src"
    graph = import_graph(src)
    found = circles(graph)
    for component in found:
        members = set(component)
        arrows = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
        print(f"import circle of {len(component)} modules: " + "; ".join(arrows), file=sys.stderr)
    if not found:
        print(f"import circles: none among {len(graph)} modules under {src}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
