"""Sample metadata: the samplesheet's extra columns and what Illumina read names say.

A samplesheet may carry any columns besides ``sample``, ``fastq_1`` and ``fastq_2``; they are kept
as strings per row (a row is one lane of a sample). Three have a meaning seqlake knows:

- ``control``: ``negative`` / ``positive`` (a no-template or a known-positive control), or the older
  ``true`` / ``false``, in any case (empty: unknown); ``true`` is read as ``negative`` (the control every
  plate carries, and the one whose failure must not pass unseen); any other value (``yes``, ``1``) is
  rejected rather than guessed at;
- ``run_name``: the sequencing run;
- ``lane``: the flowcell lane (a positive integer).

Illumina read names (``@<instrument>:<run>:<flowcell>:<lane>:<tile>:<x>:<y>``, CASAVA 1.8+; or the
older ``@<instrument>:<lane>:<tile>:<x>:<y>``) give the instrument, run number, flowcell and lane
of each input; the samplesheet's columns take precedence where both exist.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

#: columns of a samplesheet with a known meaning (and type)
KNOWN_COLUMNS = ("control", "run_name", "lane")
_CASAVA = re.compile(r"^([^:\s]+):(\d+):([^:\s]+):(\d+):\d+:\d+:\d+$")
_OLD = re.compile(r"^([^:\s]+):(\d+):\d+:\d+:\d+(?:#\S*)?(?:/[12])?$")


#: the kinds of control a ``control`` value names
CONTROL_TYPES = {"negative": "negative", "positive": "positive", "true": "negative", "false": None}


def control_type(value: str) -> str | None:
    """The ``control`` column's kind: ``negative``, ``positive`` or None (not a control, or empty);
    ValueError for any other value."""
    v = value.strip().lower()
    if not v:
        return None
    if v not in CONTROL_TYPES:
        raise ValueError(f"control must be negative, positive, true or false (got {value!r})")
    return CONTROL_TYPES[v]


def parse_control(value: str) -> bool | None:
    """The ``control`` column's value as a boolean (None when empty); ValueError when it is none of
    :data:`CONTROL_TYPES`."""
    v = value.strip().lower()
    if not v:
        return None
    return control_type(v) is not None


def check_row(row: Mapping[str, str]) -> None:
    """Typed columns of one samplesheet row are valid (ValueError naming the column otherwise)."""
    parse_control(row.get("control", ""))
    lane = row.get("lane", "").strip()
    if lane and not (lane.isdigit() and int(lane) > 0):
        raise ValueError(f"lane must be a positive integer (got {lane!r})")


def illumina_fields(read_name: str) -> dict[str, str]:
    """Instrument, run number, flowcell and lane of an Illumina read name (empty when it is not one)."""
    name = read_name.split(maxsplit=1)[0] if read_name.strip() else ""
    m = _CASAVA.match(name)
    if m:
        return {"instrument": m.group(1), "run": m.group(2), "flowcell": m.group(3), "lane": m.group(4)}
    m = _OLD.match(name)
    if m:
        return {"instrument": m.group(1), "lane": m.group(2)}
    return {}


def _joined(values: Iterable[str | None]) -> str | None:
    distinct = list(dict.fromkeys(v for v in values if v))
    return ",".join(distinct) if distinct else None


def lane_row(metadata: Mapping[str, str], header: Mapping[str, str]) -> dict[str, Any]:
    """One input's (lane's) typed metadata: the samplesheet's columns, else the read names'."""
    extra = {k: v for k, v in metadata.items() if k not in KNOWN_COLUMNS}
    return {
        "control": parse_control(metadata.get("control", "")),
        "control_type": control_type(metadata.get("control", "")),
        "run_name": metadata.get("run_name") or header.get("run") or None,
        "lane": metadata.get("lane") or header.get("lane") or None,
        "instrument": header.get("instrument"),
        "flowcell": header.get("flowcell"),
        "metadata": json.dumps(extra, sort_keys=True) if extra else None,
    }


def sample_fields(lanes: list[dict[str, Any]]) -> dict[str, Any]:
    """A sample's metadata columns of ``sample_summary`` from its lanes' :func:`lane_row` values; a
    sample is a control when any of its rows says so."""
    controls = [r["control"] for r in lanes if r["control"] is not None]
    return {
        "control": any(controls) if controls else None,
        # a sample of several rows is a negative control when any row says so (its check is the strict one)
        "control_type": min((r["control_type"] for r in lanes if r.get("control_type")), default=None),
        "run_name": _joined(r["run_name"] for r in lanes),
        "flowcell": _joined(r["flowcell"] for r in lanes),
        "lanes": _joined(r["lane"] for r in lanes),
        "instrument": _joined(r["instrument"] for r in lanes),
    }
