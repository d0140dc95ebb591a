"""``children.jsonl``: every child's part of the plan, in one object beside ``plan.json``.

Line 0 is the byte offset of each child's line and of the object's end, as fixed-width numbers
(:mod:`seqlake.plan.fixedwidth`: child c finds offsets c and c + 1 with one ranged read of 25 bytes); line
c + 1 is child c's part: the run's identity and parameters, its shards (numbered as in the plan) and
the inputs they read (keyed by their number in the plan). The plan's writer makes it from the plan's
JSON (:func:`seqlake.plan.planfile.write_plan`), so every plan has it; :mod:`seqlake.plan.childplan` reads one line.
Whatever the number of children, that is one object more for the plan step to write.
"""

from __future__ import annotations

import json
from typing import Any

from seqlake.plan import fixedwidth

OFFSETS_KEY = "offsets"
#: digits of a byte offset (up to 1 TB of lines)
OFFSET_DIGITS = 12


def child_lines(plan: dict[str, Any]) -> bytes:
    """The object's bytes, from a plan as :meth:`seqlake.plan.planfile.Plan.to_dict` gives it."""
    children: list[int] = plan["children"]
    common = {k: plan[k] for k in ("run_id", "out_prefix", "reference", "params")}
    common["array_size"] = len(children)
    # each line is put together from pieces encoded once (the common fields, each input): encoding
    # 10,000 whole lines repeats the same few hundred bytes 10,000 times
    opening = _json(common)[:-1]
    inputs = [_json(i) for i in plan["inputs"]]
    lines: list[bytes] = []
    for child, first in enumerate(children):
        shards = plan["shards"][first:children[child + 1] if child + 1 < len(children) else None]
        used = sorted({sp["input"] for s in shards for sp in s["spans"]})
        text = (f'{opening},"child":{child},"inputs":{{' + ",".join(f'"{i}":{inputs[i]}' for i in used)
                + f'}},"shards":{_json(shards)}}}\n')
        lines.append(text.encode())
    head = len(fixedwidth.dumps(OFFSETS_KEY, [0] * (len(lines) + 1), OFFSET_DIGITS)) + 1
    offsets = [head]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    return fixedwidth.dumps(OFFSETS_KEY, offsets, OFFSET_DIGITS) + b"\n" + b"".join(lines)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
