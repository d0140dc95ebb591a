"""The JSON Schemas of the files users and steps exchange: ``plan``, ``run_request``, ``samplesheet``.

Each is a file here (``<name>.schema.json``, shipped as package data), read once per process.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def load(name: str) -> dict[str, Any]:
    """The schema ``<name>.schema.json`` as a dict (cached: callers must not change it)."""
    text = resources.files(__name__).joinpath(f"{name}.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema
