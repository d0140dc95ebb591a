"""What the local cloud's fork server prepares once for all its children (:class:`.launcher.Launcher`).

The modules of :func:`preload` are imported by the server before its first child: the local cloud's own
(the SDK, the Lambda runtime) and the app's (:attr:`.contract.App.preload`: its handlers' and its worker's
libraries); none of them may read the environment or make a client at import time. :func:`prepare` shares one
botocore loader and parses the models of the services the handlers and the worker call, so each child inherits
them parsed.
"""

from __future__ import annotations

from localcloud import contract

#: the local cloud's own, imported once by the server
PRELOAD: tuple[str, ...] = (
    "boto3",
    "botocore.session",
    "botocore.client",
    # the Lambda children's side
    "localcloud.lambda_runtime",
)


def preload() -> tuple[str, ...]:
    """What the server imports: the local cloud's own, then the app's."""
    return PRELOAD + tuple(m for m in contract.app().preload if m not in PRELOAD)


#: the services the handlers make clients for: their models are parsed once, in the server
WARM_SERVICES: tuple[str, ...] = ("s3", "stepfunctions", "glue", "batch", "logs", "sts", "sqs")

#: what the server calls before preloading (``"module:function"``)
INIT = f"{__name__}:prepare"


def prepare() -> None:
    """One botocore loader for the server and its children, with the handlers' models parsed."""
    from localcloud import botocore_loader

    botocore_loader.share()
    botocore_loader.warm(WARM_SERVICES)
