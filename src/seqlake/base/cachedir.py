"""The user's cache folder: files derived from others, shared by every run and state folder of a machine,
safe to delete (they are made again when needed).

``$SEQLAKE_CACHE_DIR``, else ``$XDG_CACHE_HOME/seqlake``, else ``~/.cache/seqlake``. Reference indexes
(:mod:`seqlake.plan.reference`) go to ``$SEQLAKE_REF_CACHE`` when it is set (a Batch host's volume,
shared by the children of the instance), else to this folder, in the bucket's layout
(``reference-indexes/<key>/``: :class:`seqlake.base.layout.LakeLayout`).
"""

from __future__ import annotations

import os
from pathlib import Path

#: the user's cache folder, when not the XDG one
CACHE_VAR = "SEQLAKE_CACHE_DIR"
#: the folder of reference indexes, when not the user's cache folder
REF_CACHE_VAR = "SEQLAKE_REF_CACHE"


def user_cache_dir() -> Path:
    """Derived files any run or state folder may share (see the module docstring)."""
    explicit = os.environ.get(CACHE_VAR)
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seqlake"


def reference_cache() -> Path:
    """The root under which this machine keeps reference indexes (``$SEQLAKE_REF_CACHE``, else the user's
    cache folder)."""
    explicit = os.environ.get(REF_CACHE_VAR)
    return Path(explicit) if explicit else user_cache_dir()
