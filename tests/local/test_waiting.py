"""The local cloud's wait loop (``localcloud/waiting.py``)."""

from __future__ import annotations

import threading
from typing import Any

from localcloud import waiting


class _Runs:
    """The state machine as the wait loop sees it: running for ``polls`` polls, then done."""

    def __init__(self, polls: int) -> None:
        self.left = polls
        self.changed = False

    def __enter__(self) -> _Runs:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def poll(self) -> bool:
        self.left -= 1
        return self.left > 0

    def update_arrays(self) -> None:
        pass

    def finished(self) -> list[Any]:
        return ["the run"]


def test_the_wait_has_no_deadline_of_its_own_by_default(monkeypatch: Any) -> None:
    """``seqlake local run`` waits as long as the run takes (its state machine's timeouts bound it, as on
    AWS): a fixed hour stopped a 1.5 Gb run while its last reducer ran. Here the run outlasts a deadline
    the clock passes at once, which only an explicit timeout sets."""
    clock = iter(range(0, 10**6, 10**4))  # each look at the clock: 10,000 s later
    monkeypatch.setattr(waiting.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(waiting, "_SETTLE_SECONDS", 0.0)
    woken = threading.Event()
    woken.set()  # a job returned: the loop polls at once
    assert waiting.wait_idle(_Runs(5), lambda: False, woken, None) == ["the run"]
    from localcloud.cloud import LocalCloud

    assert LocalCloud.wait.__defaults__ == (None,)
