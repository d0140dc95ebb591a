"""The threads a process is given: ``SEQLAKE_THREADS`` (set by the job definitions), else a default."""

from __future__ import annotations

import pytest

from seqlake.base import cpus


def test_threads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cpus.THREADS_VAR, raising=False)
    assert cpus.threads_from_env() == 1
    assert cpus.threads_from_env(default=3) == 3
    monkeypatch.setenv(cpus.THREADS_VAR, "4")
    assert cpus.threads_from_env() == 4
    monkeypatch.setenv(cpus.THREADS_VAR, "0")
    assert cpus.threads_from_env() == 1
    monkeypatch.setenv(cpus.THREADS_VAR, "two")
    with pytest.raises(ValueError, match="SEQLAKE_THREADS"):
        cpus.threads_from_env()
    assert cpus.available_cpus() >= 1
