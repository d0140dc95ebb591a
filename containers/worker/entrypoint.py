"""The worker image's entry point: run the container's command in this process, with SIGTERM handled.

ECS stops a container (a Spot instance being reclaimed, a job terminated, a scale-in) by sending SIGTERM
to its PID 1, then SIGKILL when the stop timeout has passed. This process is PID 1, and the kernel
delivers no signal to a PID namespace's init whose action is the default: without a handler the worker
would ignore SIGTERM, sit out the timeout and die by SIGKILL wherever it happens to be. Here SIGTERM
raises ``SystemExit(143)``: the worker unwinds (its temporary files removed, an upload in flight abandoned;
an S3 object is whole or absent, and a shard's manifest is written after its parts) and exits with the
status of a process ended by SIGTERM. The retried attempt rewrites the shard's parts under the same keys.

The command (the job definition's ``seqlake worker``, or the index job's ``python -m
seqlake.aws.index_job``) runs in this interpreter, so the handler is the worker's; any other command is
executed in place of this process.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from pathlib import Path
from types import FrameType


def _stop(signum: int, frame: FrameType | None) -> None:
    print(f"seqlake: stopping on {signal.Signals(signum).name}", file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    if not argv:
        print("seqlake-entrypoint: no command", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _stop)
    head = Path(argv[0]).name
    if head == "seqlake":
        from seqlake.cli import main as seqlake_main

        sys.argv = argv
        return seqlake_main(argv[1:])
    if head.startswith("python") and len(argv) >= 3 and argv[1] == "-m":
        sys.argv = argv[2:]
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        return 0
    os.execvp(argv[0], argv)  # noqa: S606 - the container's own command, as the runtime would start it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
