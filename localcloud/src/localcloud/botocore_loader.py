"""One botocore data loader per process, so each service model's JSON is parsed once.

Every ``boto3``/``botocore`` session makes its own ``Loader``, and a loader caches what it parsed only
for itself. The local cloud's process makes many sessions (moto makes one at import time just to list
EC2's regions, which parses the 1 MB EC2 model and ``endpoints.json``; the deployer and the cloud make
clients; moto's backends make their own), so a local run would parse the EC2 model several times over,
seconds of JSON for nothing. Sharing one loader per search path is what a single session would do anyway; the models are
read-only data.

This changes botocore's module attribute ``botocore.session.create_loader`` (botocore pinned through
boto3 in ``pyproject.toml``; ``tests/local/test_patches.py`` checks it), and is applied only in the
local cloud's own processes: the parent (before moto is imported) and the fork server.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable
from typing import Any

import botocore.session
from botocore.exceptions import DataNotFoundError, UnknownServiceError

_original = botocore.session.create_loader


@functools.cache
def _shared(search_path_string: str | None = None) -> Any:
    return _original(search_path_string)


def share() -> None:
    """Make every later botocore session in this process use the shared loader."""
    botocore.session.create_loader = _shared


def shared() -> bool:
    return botocore.session.create_loader is _shared


def warm(services: Iterable[str]) -> None:
    """Parse these services' models and the endpoint data now (a fork server's children inherit them)."""
    loader = botocore.session.get_session().get_component("data_loader")
    for name in ("endpoints", "partitions", "sdk-default-configuration"):
        with contextlib.suppress(DataNotFoundError):
            loader.load_data(name)
    for service in services:
        for kind in ("service-2", "paginators-1", "endpoint-rule-set-1"):
            with contextlib.suppress(DataNotFoundError, UnknownServiceError):
                loader.load_service_model(service, kind)
