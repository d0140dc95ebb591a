"""constraints.txt pins every distribution the project installs, and the venv holds exactly those versions.

pyproject.toml pins the direct dependencies; a clean clone once failed because one they pull in (botocore)
released a version the pinned moto could not serve. These tests fail when the venv and the file disagree:
a constraint that is not installed (or not at its version), a distribution the project needs that has no
constraint, or a direct pin the constraints contradict.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
#: what a venv holds that no requirement brings (pip's own tools)
_VENV_OWN = {"pip", "setuptools", "wheel"}
#: the distributions of this repository (installed from it, editable, never from an index): no constraint
_OWN = {"seqlake", "localcloud"}


def constraints() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def public(version: str) -> str:
    """A version without its local label (mappy's fixed build is ``2.31+seqlake.1``, pinned ``2.31``)."""
    return version.split("+", maxsplit=1)[0]


def needed(root: str, extras: set[str]) -> set[str]:
    """Every distribution ``root[extras]`` reaches through its requirements, as this interpreter evaluates them."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(root, frozenset(extras))]
    while todo:
        name, wanted = todo.pop()
        if (canonicalize_name(name), wanted) in seen:
            continue
        seen.add((canonicalize_name(name), wanted))
        environments = [{**default_environment(), "extra": e} for e in wanted | {""}]
        for text in md.requires(name) or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate(env) for env in environments):
                todo.append((req.name, frozenset(req.extras)))
    return {name for name, _ in seen} - {canonicalize_name(root)}


def test_every_constraint_is_installed_at_its_version() -> None:
    wrong = {}
    for name, version in constraints().items():
        try:
            got = public(md.version(name))
        except md.PackageNotFoundError:
            got = "not installed"
        if got != version:
            wrong[name] = (version, got)
    assert not wrong, f"constraints.txt vs the venv (make setup installs them; make lock rewrites them): {wrong}"


def test_every_distribution_the_project_needs_has_a_constraint() -> None:
    missing = needed("seqlake", {"dev", "local"}) - set(constraints()) - _VENV_OWN - _OWN
    assert not missing, f"installed for seqlake[dev] but not in constraints.txt: {sorted(missing)}"


def test_the_direct_pins_agree_with_the_constraints() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    component = tomllib.loads((REPO / "localcloud" / "pyproject.toml").read_text())["project"]
    pins = constraints()
    direct = project["dependencies"] + [d for deps in project["optional-dependencies"].values() for d in deps]
    direct += component["dependencies"]
    checked = 0
    for text in direct:
        req = Requirement(text)
        if canonicalize_name(req.name) == "localcloud":  # the repository's own: the version in localcloud/
            assert str(req.specifier) == f"=={component['version']}", f"{text} vs localcloud/pyproject.toml"
            continue
        if canonicalize_name(req.name) in _OWN:
            continue
        assert re.fullmatch(r"==[\w.]+", str(req.specifier)), f"pyproject.toml: {text} is not an exact pin"
        assert pins.get(canonicalize_name(req.name)) == str(req.specifier)[2:], f"{text} vs constraints.txt"
        checked += 1
    assert checked >= 10
