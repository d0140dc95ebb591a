"""The patch registry is the truth about the moto patches: each patch's tests fail with that one patch off.

Each case runs the registry's tests for one patch in a pytest process of its own with the patch named in
``LOCALCLOUD_MOTO_PATCHES_OFF`` (``patches.apply_all`` leaves it out there), and asserts that every one of them
fails, as a failure of the test, not an error of its fixture's setup. The same tests pass with every patch on in the
suite's own run of ``tests/local/test_patches.py``: the difference is the patch.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from localcloud import patch_registry, patches

REPO = Path(__file__).resolve().parents[2]


def test_the_registry_and_the_patches_are_one_table() -> None:
    assert [p.id for p in patch_registry.PATCHES] == list(dict.fromkeys(p.id for p in patch_registry.PATCHES))
    assert set(patches.PATCHES) == set(patch_registry.BY_ID)
    defined = {node.name for node in ast.parse((REPO / patch_registry.TESTS).read_text()).body
               if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
    for patch in patch_registry.PATCHES:
        assert patch.tests and set(patch.tests) <= defined, patch.id
        assert patch.kind in ("moto", "emulator", "speed"), patch.id
        # moto's own bugs have their upstream report; the emulator's own behaviour has none
        assert bool(patch.report) if patch.kind == "moto" else not (patch.kind == "emulator" and patch.report), patch.id
        assert patch.source.startswith(("https://docs.aws.amazon.com/", "docs/")), patch.id


def test_an_unknown_patch_id_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(patch_registry.DISABLED_VAR, "s3-ranged-get, no-such-patch")
    with pytest.raises(ValueError, match="no-such-patch"):
        patch_registry.disabled()


def test_the_upstream_reports_are_generated_from_the_registry() -> None:
    assert (REPO / "docs" / "moto-upstream.md").read_text() == patch_registry.upstream_reports_markdown() + "\n"


#: the removal cases run a pytest process per patch (~18 minutes of CPU under load): `make patch-removal` runs them;
#: the suite of `make test` stays within its 20 minutes without them
REMOVAL_VAR = "SEQLAKE_PATCH_REMOVAL"


@pytest.mark.skipif(os.environ.get(REMOVAL_VAR) != "1",
                    reason=f"each patch removed in turn: `make patch-removal` ({REMOVAL_VAR}=1)")
@pytest.mark.parametrize("patch", patch_registry.PATCHES, ids=lambda p: p.id)
def test_without_the_patch_its_tests_fail(patch: patch_registry.Patch) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env[patch_registry.DISABLED_VAR] = patch.id
    nodes = [f"{patch_registry.TESTS}::{name}" for name in patch.tests]
    proc = subprocess.run([sys.executable, "-m", "pytest", *nodes, "-p", "no:randomly", "-p", "no:cacheprovider",
                           "-n", "0", "-q", "-rfE"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=1200, check=False)
    out = proc.stdout[-4000:]
    assert proc.returncode == 1, out  # 1: tests failed (0 passed, 2-5: interrupted, usage, nothing collected)
    # FAILED: the test itself failed (a fixture that could not be set up is an ERROR and no FAILED; an ERROR at
    # teardown beside a FAILED is the emulator's own errors the patch's absence caused, counted by the fixture)
    failed = set(re.findall(r"^FAILED \S+::(test_\w+)", proc.stdout, re.MULTILINE))
    assert failed == set(patch.tests), out
