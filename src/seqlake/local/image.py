"""seqlake's worker image, as the local cloud runs it (``--containers``) and ``make image`` builds it.

The image is built from a checkout (``scripts/build-worker-image.sh``, with ``containers/worker/Dockerfile``) and
tagged with a digest of the files it is built from, :data:`IMAGE`'s (``python -m seqlake.local.image --image``
prints the tag): that is how ``seqlake local run --containers`` finds the image of the checkout it runs from.
The Dockerfile's ignore file (``containers/worker/Dockerfile.dockerignore``) keeps out what :data:`IMAGE`
leaves out.

This module imports nothing but the standard library, :mod:`.appdir` and the local cloud's
:mod:`localcloud.contract` and :mod:`localcloud.containers`, which import nothing else either: the Makefile's
``image-beside`` names the image with the system's Python beside ``make setup``, before any virtualenv exists.
"""

from __future__ import annotations

import sys

from localcloud.containers import image_ref
from localcloud.contract import WorkerImage
from seqlake.local.appdir import CHECKOUT

IMAGE = WorkerImage(
    name="localhost/seqlake-worker",
    root=CHECKOUT,
    # the build context (the Dockerfile's COPY lines, as its ignore file leaves them)
    files=("pyproject.toml", "constraints.txt", "scripts/install_mappy.py", "scripts/mappy/seqlake_batch.h",
           "scripts/mappy/batch.pyx", "scripts/uv.txt",
           "scripts/uv-excludes.txt", "README.md",
           "containers/worker/Dockerfile", "containers/worker/Dockerfile.dockerignore",
           "containers/worker/entrypoint.py"),
    tree="src",
    # kept out of the build context: the local cloud's adapter (``seqlake/local``; the local cloud itself,
    # ``localcloud/``, is not under ``src``), the demo data, bytecode, and the metadata of an editable install
    excluded_parts=("local", "demo_data", "__pycache__"),
    excluded_suffixes=(".egg-info",),
    container_prefix="seqlake-",
    # podman's settings on this kind of machine (cgroupfs, runc; the build reads them too)
    podman_conf="containers/worker/containers.conf",
    build_command="make image",
)


def main(argv: list[str] | None = None) -> int:
    """``python -m seqlake.local.image --image``: the worker image's name and tag for this checkout."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["--image"]:
        print("usage: python -m seqlake.local.image --image", file=sys.stderr)
        return 2
    print(image_ref(IMAGE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
