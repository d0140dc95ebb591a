"""``make moto-check``: which of the local cloud's moto patches the installed moto still needs.

Run in a process where no patch is applied (``make moto-check`` runs it from a scratch virtualenv with the
newest moto on PyPI and this checkout's ``src`` on ``PYTHONPATH``): one line per registered patch, ``needed``,
``gone`` (moto now behaves as AWS: remove the patch and its registry entry) or ``review`` (what the patch
replaces moved, or the probe could not tell). Exits 0 when every patch was judged, 1 when one needs review.
``--write-upstream`` writes ``docs/moto-upstream.md`` from the registry instead.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import sys
from pathlib import Path

from localcloud import patch_registry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcloud.moto_check", description=__doc__)
    parser.add_argument("--write-upstream", type=Path, metavar="PATH",
                        help="write the upstream reports (docs/moto-upstream.md) and exit")
    args = parser.parse_args(argv)
    if args.write_upstream is not None:
        args.write_upstream.write_text(patch_registry.upstream_reports_markdown() + "\n")
        return 0
    from localcloud import moto_probes

    logging.disable(logging.ERROR)  # moto logs the probes' own failing executions; the verdicts say what counts
    print(f"moto {importlib.metadata.version('moto')}: does it still need each patch of the local cloud?")
    verdicts = moto_probes.probe_all()
    width = max(len(v.patch) for v in verdicts)
    for v in verdicts:
        kind = patch_registry.BY_ID[v.patch].kind
        print(f"  {v.patch:<{width}}  {v.state:<6}  ({kind}) {v.evidence}")
    counts = {s: sum(v.state == s for v in verdicts) for s in ("needed", "gone", "review")}
    print(f"{counts['needed']} needed, {counts['gone']} gone, {counts['review']} to review")
    return 1 if counts["review"] else 0


if __name__ == "__main__":
    sys.exit(main())
