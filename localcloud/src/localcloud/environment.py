"""The local cloud's environment: fake credentials and the moto endpoint, for this process (restored on
stop) and for every Lambda and Batch child. Nothing here can reach a real AWS account."""

from __future__ import annotations

import os
from pathlib import Path

from localcloud import contract
from localcloud.deployer import REGION

#: the local cloud's parent folder: on the children's PYTHONPATH (their Lambda runtime), with the app's
#: (:attr:`.contract.App.pythonpath`: locally it stands in for the Lambda layer)
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_SESSION_TOKEN": "local",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    # loopback transfers cannot be corrupted: skip the CRC32 pass botocore adds to every upload and
    # download by default (moto keeps its own MD5 ETags)
    "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
    "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
}
#: settings that could point a client at a real account
DROPPED_ENV = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CA_BUNDLE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
)


def process_env(endpoint: str, port: int) -> dict[str, str | None]:
    """What this process's ``os.environ`` gets while the cloud runs (None: removed)."""
    return {
        **FAKE_ENV,
        "AWS_ENDPOINT_URL": endpoint,
        # moto's state machine interpreter calls back to localhost:$MOTO_PORT for service integrations
        "MOTO_PORT": str(port),
        # moto's EC2 backend (made for the compute environments' subnets) loads 1,300 AMIs by
        # default, a noticeable part of the start-up; none is needed, as no instance is launched
        "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
        **dict.fromkeys(DROPPED_ENV),
    }


def child_env(endpoint: str) -> dict[str, str]:
    """The environment every Lambda and Batch child starts from."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    app = contract.app()
    path = [*app.pythonpath, str(PACKAGE_ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env.update(FAKE_ENV)
    env.update(
        {
            "AWS_ENDPOINT_URL": endpoint,
            "PYTHONPATH": os.pathsep.join(dict.fromkeys(path)),
            "PYTHONUNBUFFERED": "1",
            **app.child_env,
        }
    )
    return env


class SavedEnv:
    """Changes to ``os.environ`` that :meth:`restore` undoes. Local clouds started one inside the other's
    lifetime in this process stack: a cloud stopped while a newer one runs leaves the newer one's values
    in place, and the last one stopped puts back what the process had before."""

    def __init__(self) -> None:
        self._set: dict[str, str | None] = {}

    def set(self, values: dict[str, str | None]) -> None:
        if self not in _STACK:
            if not _STACK:
                _BEFORE.clear()
            _STACK.append(self)
        for k, v in values.items():
            _BEFORE.setdefault(k, os.environ.get(k))
            self._set[k] = v
            _put(k, v)

    def restore(self) -> None:
        if self not in _STACK:
            return
        i = _STACK.index(self)
        newer, older = _STACK[i + 1 :], _STACK[:i]
        del _STACK[i]
        for k in self._set:
            if any(k in e._set for e in newer):
                continue  # a newer cloud's value is in place (and its restore will look past this one)
            _put(k, next((e._set[k] for e in reversed(older) if k in e._set), _BEFORE.get(k)))
        self._set = {}


#: the environments set in this process and not restored yet, oldest first; the values they replaced
_STACK: list[SavedEnv] = []
_BEFORE: dict[str, str | None] = {}


def _put(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
