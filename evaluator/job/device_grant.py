"""A timing job's hold on the device alone (``worker``'s protocol: ``device_wanted``, a grant, ``device_released``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


class DeviceStillBusy(RuntimeError):
    """Granted the device alone, the job found it still busy: what the jobs paused for it had queued did not drain
    (the pool then runs the timing once more, once they have ended)."""


class DeviceGrant:
    """A timing job's way to have the device alone for what it measures (``worker``'s protocol): `wait_alone()` asks
    the pool for it, blocks until granted, then waits until the device is quiet (`quiet`: what the jobs paused for
    it had queued has drained; it raises DeviceStillBusy where that does not happen); `release()` gives it back once
    measured. Without a grant channel (the pool then gave the job the device from its start), `wait_alone()` only
    waits for the device to be quiet."""

    def __init__(self) -> None:
        self._send: Callable[[dict[str, Any]], None] | None = None
        self._fd: int | None = None
        self._quiet: Callable[[], None] | None = None
        self._held = False

    def open(
        self, send: Callable[[dict[str, Any]], None], fd: int | None, quiet: Callable[[], None] | None = None
    ) -> None:
        self._send, self._fd, self._quiet, self._held = send, fd, quiet, False

    def wait_alone(self) -> None:
        if self._held:
            return
        if self._fd is not None and self._send is not None:
            self._send({"event": "device_wanted"})
            if os.read(self._fd, 1) != b"g":
                raise RuntimeError("the evaluator closed the job's device grant without granting the device")
        self._held = True
        if self._quiet is not None:
            self._quiet()

    def release(self) -> None:
        """What needs the device alone is done (the rounds): the pool lets the paused jobs go on while this one checks
        its timed calls' outputs and exits."""
        if self._held and self._send is not None:
            self._send({"event": "device_released"})
        self._held = False


DEVICE_GRANTS = DeviceGrant()
