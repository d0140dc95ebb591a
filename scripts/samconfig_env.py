"""Prints the stack name and region of one samconfig.toml environment: ``STACK REGION``.

SAM reads only the selected environment's tables (``[ENV.global.parameters]``, ``[ENV.deploy.parameters]``),
never ``[default]``'s, when it runs with ``--config-env ENV``; so the region must be in the environment's
own table, and this reads it from there only (a missing one is an error, not a silent default).

    python3 scripts/samconfig_env.py ENV [samconfig.toml]
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any


def stack_and_region(config: dict[str, Any], env: str) -> tuple[str, str]:
    tables = config.get(env, {})
    stack = tables.get("deploy", {}).get("parameters", {}).get("stack_name")
    if not stack:
        raise SystemExit(f"samconfig.toml has no [{env}.deploy.parameters] stack_name")
    region = tables.get("global", {}).get("parameters", {}).get("region")
    if not region:
        raise SystemExit(f"samconfig.toml has no [{env}.global.parameters] region (sam deploy --config-env {env} "
                         "would use the caller's default region)")
    return stack, region


def main(argv: list[str]) -> int:
    env = argv[0]
    path = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1] / "samconfig.toml"
    stack, region = stack_and_region(tomllib.loads(path.read_text()), env)
    print(stack, region)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
