"""The JSON Schemas of the files users and steps exchange: ``plan``, ``run_request``, ``samplesheet``.

Each is a file here (``<name>.schema.json``, shipped as package data), read once per process.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any


@cache
def load(name: str) -> dict[str, Any]:
    """The schema ``<name>.schema.json`` as a dict (cached: callers must not change it)."""
    text = resources.files(__name__).joinpath(f"{name}.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def fast_check(name: str) -> Callable[[Any], bool]:
    """Whether a document passes schema ``name``, by fastjsonschema's compiled check: a few microseconds a
    row where jsonschema takes a millisecond or more (a 10,000-row samplesheet; a 10,000-sample run request,
    0.06 s against 0.76 s). A document it refuses is checked again by jsonschema, whose errors are the ones
    reported (the schemas' keywords mean the same to both). Without fastjsonschema it passes nothing."""
    try:
        import fastjsonschema
    except ImportError:
        return lambda doc: False
    check = fastjsonschema.compile(load(name))

    def passes(doc: Any) -> bool:
        try:
            check(doc)
        except fastjsonschema.JsonSchemaValueException:
            return False
        return True

    return passes
