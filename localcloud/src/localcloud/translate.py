"""SAM -> CloudFormation with aws-sam-translator, offline.

The translator needs a region but no credentials: managed policy names resolve from its bundled
map; the loader below is only the fallback it would otherwise fill from ``iam:ListPolicies``.
Local ``CodeUri`` / ``DefinitionUri`` are rejected by the translator: package first
(:mod:`localcloud.packaging`).
"""

from __future__ import annotations

import copy
import os
from typing import Any

REGION = "us-east-1"


class _OfflinePolicyLoader:
    def load(self) -> dict[str, str]:
        return {}


def translate(template: dict[str, Any], parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plain CloudFormation template of a packaged SAM template; ``ValueError`` lists SAM's complaints."""
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    # imported after the region is set: the translator reads it at import time
    from samtranslator.model.exceptions import InvalidDocumentException
    from samtranslator.translator.transform import transform

    try:
        result: dict[str, Any] = transform(copy.deepcopy(template), dict(parameters or {}), _OfflinePolicyLoader())
    except InvalidDocumentException as err:
        raise ValueError("; ".join(c.message for c in err.causes)) from None
    return result
