"""Where the app's deployable files are: ``template.yaml``, the functions' code folders, the state machine
and the named queries (``queries/*.sql``), the files ``sam deploy`` reads.

In a checkout they are at its root. A built wheel carries a copy of them as package data in
``seqlake/local/app/`` (``setup.py`` copies them in), so that an installed ``seqlake[local]`` runs the
local cloud. ``SEQLAKE_APP_DIR`` names another folder with the same layout (an edited template, say).
"""

from __future__ import annotations

import os
from pathlib import Path

from seqlake.base.errors import SeqlakeError

#: the setting: a folder holding template.yaml (and what it refers to) and queries/
VAR = "SEQLAKE_APP_DIR"
#: the template's file name in that folder
TEMPLATE = "template.yaml"
#: the named queries' folder in it
QUERIES = "queries"
#: the copy a wheel carries
PACKAGED = Path(__file__).resolve().parent / "app"
#: a checkout's root, when this module runs from one (src/seqlake/local/appdir.py)
CHECKOUT = Path(__file__).resolve().parents[3]


def app_dir() -> Path:
    """``$SEQLAKE_APP_DIR``, else the checkout this module runs from, else the wheel's copy."""
    explicit = os.environ.get(VAR)
    if explicit:
        folder = Path(explicit)
        if not (folder / TEMPLATE).is_file():
            raise SeqlakeError(f"{VAR}={explicit}: no {TEMPLATE} there")
        return folder
    for folder in (CHECKOUT, PACKAGED):
        if (folder / TEMPLATE).is_file():
            return folder
    raise SeqlakeError(f"the app's {TEMPLATE} is not installed: set {VAR} to a checkout of seqlake")


def queries_dir() -> Path:
    return app_dir() / QUERIES
