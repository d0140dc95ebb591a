"""The first-deploy smoke test (:mod:`seqlake.aws.smoke`) against the local cloud, so that it is tested here although
no AWS account exists: ``python -m seqlake.local.smoke`` (``scripts/aws-smoke.sh --local``;
``tests/local/test_smoke.py``).

The deploy step is the local cloud's own deployer of the same ``template.yaml`` (``sam`` is not needed, nor
installed here); the smoke's steps then go through the local cloud's endpoint with the stack administrator's
credentials (its platform role, IAM enforced), exactly as they go to AWS with the deployer's; the stack's
deletion is the local cloud's stop, after the bucket and the repository were emptied by the smoke's own
teardown.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from localcloud.cloud import LocalCloud
from localcloud.state import StateDir
from seqlake.aws import smoke
from seqlake.local.adapter import local_cloud

#: the local run takes well under a minute; a hung one fails the suite instead of waiting an hour
LOCAL_TIMEOUT_SECONDS = 600


def target(cloud: LocalCloud) -> smoke.Target:
    """The local cloud as the smoke's target; its teardown waits until the cloud is idle (a failed
    execution's end handed to the backstop function, which may write ``status.json``) before emptying."""

    def settle() -> None:
        cloud.wait(LOCAL_TIMEOUT_SECONDS)

    return smoke.Target(cloud.client, {k: str(v) for k, v in cloud.outputs.items()}, settle=settle)


def run_local(home: Path, *, keep: bool = False) -> list[tuple[str | None, ...]]:
    """The smoke test on a local cloud kept in ``home``; the Athena rows."""
    with local_cloud(state=StateDir(home), jobs=1, quiet=True) as cloud:
        return smoke.run(target(cloud), timeout_s=LOCAL_TIMEOUT_SECONDS, keep=keep)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seqlake.local.smoke", description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=None, help="the local cloud's folder (default: a temporary one)")
    args = parser.parse_args(argv)
    try:
        if args.home is not None:
            rows = run_local(args.home)
        else:
            with tempfile.TemporaryDirectory(prefix="seqlake-smoke-home-") as tmp:
                rows = run_local(Path(tmp))
    except smoke.SmokeError as failed:
        print(f"smoke: FAILED: {failed}", file=sys.stderr)
        return 1
    print(f"smoke: OK on the local cloud: {rows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
