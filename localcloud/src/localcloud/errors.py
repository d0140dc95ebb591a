"""The local cloud's own error types (the app's adapter turns them into the app's)."""

from __future__ import annotations


class LocalCloudError(Exception):
    """An error the local cloud raises on purpose: the message says what is wrong and what to do."""


class NoCloudError(LocalCloudError):
    """A state folder in which no local cloud ever ran."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


class InjectedFaultError(RuntimeError):
    """An error a test raises inside the local cloud on purpose (from a moto backend it replaced, say): answered
    as the service's internal error like any other, but not counted among the emulator's own failures
    (:mod:`.emulator_errors`). The app's adapter may name more such types (:attr:`.contract.App.injected_errors`)."""
