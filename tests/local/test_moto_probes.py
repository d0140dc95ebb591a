"""``make moto-check``'s probes on the pinned moto: each sees the behaviour its patch exists for.

They run in a process of their own, where no patch is applied (this process may have applied them all), as
``make moto-check`` runs them against the newest moto. On the pinned moto every patch is known to be needed (its
test fails without it: ``test_patch_registry.py``), so a probe that answered anything but ``needed`` here could
not be trusted to say ``gone`` of a newer moto.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from localcloud import patch_registry

REPO = Path(__file__).resolve().parents[2]


def test_every_probe_finds_its_patch_needed_on_the_pinned_moto() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop(patch_registry.DISABLED_VAR, None)
    proc = subprocess.run([sys.executable, "-m", "localcloud.moto_check"], env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    verdicts = dict(re.findall(r"^  (\S+)\s+(needed|gone|review)\s", proc.stdout, re.MULTILINE))
    assert verdicts == {p.id: "needed" for p in patch_registry.PATCHES}, proc.stdout + proc.stderr[-2000:]
    assert proc.returncode == 0


def test_a_patch_whose_function_moved_is_for_review() -> None:
    from localcloud import moto_probes

    moved = patch_registry.Patch(id="s3-latency", kind="emulator", replaces=("moto.s3.responses:S3Response.gone",),
                                 why="", source="", upstream="", tests=())
    verdict = moto_probes.probe(moved)
    assert verdict.state == "review" and "moto.s3.responses:S3Response.gone" in verdict.evidence
