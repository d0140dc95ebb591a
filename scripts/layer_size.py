"""Build every Lambda layer as `sam build` does (layers/Makefile) and measure what each function carries.

Lambda allows 250 MB (MiB) unzipped for a function with all its layers. Each function's total (its
layers in template.yaml; the handlers themselves are a few kB) must stay at or below the limit, 172 MiB
by default: room to notice growth long before a deploy fails. Prints each layer's size and each
function's total; exits 1 above the limit.

    python scripts/layer_size.py [PYTHON]     (PYTHON: an interpreter with pip; default .venv/bin/python)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
LIMIT_MIB = float(os.environ.get("SEQLAKE_LAYER_LIMIT_MIB", "172"))


class _Loader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags: ``!Ref X`` -> ``{"Ref": "X"}``, the others kept as values."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {suffix if suffix == "Ref" else f"Fn::{suffix}": value}


_Loader.add_multi_constructor("!", _tag)


def template_layers(template: dict[str, Any]) -> tuple[dict[str, Path], dict[str, list[str]]]:
    """The layers (logical id -> build folder) and each function's layers (logical ids), from the template."""
    resources = template["Resources"]
    layers = {name: ROOT / r["Metadata"]["ContextPath"] for name, r in resources.items()
              if r["Type"] == "AWS::Serverless::LayerVersion"}
    functions = {name: [ref["Ref"] for ref in r["Properties"].get("Layers", [])]
                 for name, r in resources.items() if r["Type"] == "AWS::Serverless::Function"}
    return layers, functions


def tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def build(name: str, folder: Path, python: str, out: Path) -> int:
    subprocess.run(["make", "--no-print-directory", "-s", "-f", str(folder / "Makefile"), f"build-{name}",
                    f"ARTIFACTS_DIR={out}", f"PY={python}"], check=True)
    return tree_bytes(out)


def main(argv: list[str]) -> int:
    python = argv[0] if argv else str(ROOT / ".venv" / "bin" / "python")
    layers, functions = template_layers(yaml.load((ROOT / "template.yaml").read_text(), Loader=_Loader))  # noqa: S506 - a SafeLoader
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(len(layers)) as pool:
        # pip waits on downloads more than it computes: the layers build side by side
        built = {name: pool.submit(build, name, folder, python, Path(tmp, name)) for name, folder in layers.items()}
        sizes = {name: future.result() for name, future in sorted(built.items())}
    for name, size in sizes.items():
        print(f"layer-size: {name:<12} {size / MIB:6.1f} MiB unzipped ({size} bytes)")
    over = []
    for function, names in sorted(functions.items()):
        total = sum(sizes[n] for n in names)
        print(f"layer-size: {function:<22} {total / MIB:6.1f} MiB = {' + '.join(names) or 'no layer'}")
        if total > LIMIT_MIB * MIB:
            over.append(function)
    print(f"layer-size: largest function {max(sum(sizes[n] for n in ns) for ns in functions.values()) / MIB:.1f} MiB"
          f" (limit {LIMIT_MIB:g} MiB per function)")
    if over:
        print(f"layer-size: above {LIMIT_MIB:g} MiB: {', '.join(over)}: trim layers/Makefile, a layer's "
              "requirements, or what the function's handler imports", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
