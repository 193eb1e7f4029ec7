"""A timing has the device alone: it waits for running checks, and checks that arrive meanwhile wait for it."""

from __future__ import annotations

import asyncio

from geak.evaluator.device_share import TIMED_KINDS, DeviceShare


def test_a_timing_waits_for_running_checks_and_goes_before_later_ones():
    async def go() -> list[str]:
        share, log = DeviceShare(), []

        async def job(name: str, alone: bool, start_after: float, hold: float) -> None:
            await asyncio.sleep(start_after)
            async with share.use(alone=alone):
                log.append(f"+{name}")
                await asyncio.sleep(hold)
                log.append(f"-{name}")

        await asyncio.gather(
            job("check1", False, 0.0, 0.05),
            job("check2", False, 0.0, 0.10),
            job("bench", True, 0.02, 0.05),
            job("check3", False, 0.04, 0.01),  # arrives while the timing waits: goes after it
        )
        return log

    log = asyncio.run(go())
    assert log.index("+bench") > max(log.index("-check1"), log.index("-check2"))
    assert log.index("+check3") > log.index("-bench")
    assert log.index("-bench") == log.index("+bench") + 1  # nothing ran during the timing


def test_checks_share_the_device():
    async def go() -> int:
        share, inside, most = DeviceShare(), [0], [0]

        async def check() -> None:
            async with share.use(alone=False):
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                await asyncio.sleep(0.02)
                inside[0] -= 1

        await asyncio.gather(*(check() for _ in range(4)))
        return most[0]

    assert asyncio.run(go()) == 4
    assert {"bench", "peaks"} == TIMED_KINDS
