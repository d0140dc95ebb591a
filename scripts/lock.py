"""Rewrite constraints.txt: every distribution a fresh `dev` install of pyproject.toml resolves to, today.

    python scripts/lock.py            (make lock)

A scratch venv gets mappy's fixed build (scripts/install_mappy.py) and then ``pip install -e localcloud -e '.[dev]'``
without constraints, so pip picks the newest releases pyproject.toml's pins allow; their freeze becomes
constraints.txt. Run the suite after it: the file is the versions the suite last passed with.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints.txt"


def header() -> str:
    """The comment block at the top of the current file (what the file is, kept across rewrites)."""
    lines = CONSTRAINTS.read_text().splitlines() if CONSTRAINTS.exists() else []
    return "".join(f"{line}\n" for line in lines if line.startswith("#"))


def freeze_lines(freeze: str) -> list[str]:
    """``pip freeze`` output as constraint lines: the project's own distributions (seqlake, localcloud) left out,
    mappy's local build by its pin."""
    out = []
    for line in freeze.splitlines():
        if not line or line.startswith(("#", "-e ")) or line.lower().startswith(("seqlake", "localcloud")):
            continue
        m = re.fullmatch(r"mappy @ .*/mappy-([\w.]+)", line)
        out.append(f"mappy=={m.group(1)}" if m else line)
    return sorted(out, key=str.lower)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="seqlake-lock-") as tmp:
        python = str(Path(tmp) / "bin" / "python")
        subprocess.run([sys.executable, "-m", "venv", tmp], check=True)
        subprocess.run([python, str(ROOT / "scripts" / "install_mappy.py")], check=True)
        # the local cloud is this repository's too (localcloud/): installed from here, never from an index
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "-e", str(ROOT / "localcloud"), "-e", f"{ROOT}[dev]"], check=True)
        freeze = subprocess.run([python, "-m", "pip", "freeze", "--exclude-editable"], check=True,
                                capture_output=True, text=True).stdout
    CONSTRAINTS.write_text(header() + "".join(f"{line}\n" for line in freeze_lines(freeze)))
    print(f"{CONSTRAINTS.name}: {len(freeze_lines(freeze))} distributions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
