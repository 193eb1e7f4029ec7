"""What each of several parallel chains is aimed at: one bottleneck each, so that the chains explore different
directions instead of converging on the first idea. The aims are ranked by the original's why-slow facts (where its
timed calls sit on the roofline, and how many kernels it launches); chain i takes the i-th (modulo their number)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from geak.evaluator import CallCost


@dataclass(frozen=True)
class Aim:
    name: str
    direction: str  # what to change, for the prompts


MEMORY = Aim(
    "memory traffic",
    "the bytes moved: read each input once and write each output once, keep intermediates in registers, contiguous "
    "and wide (16-byte) accesses, fewer passes over the data, no redundant loads across programs",
)
PARALLELISM = Aim(
    "parallelism and launch configuration",
    "the work in flight: how many programs the grid launches and how much each does, occupancy (registers and "
    "shared memory per program), persistent programs over many small tiles, fewer and larger launches",
)
ARITHMETIC = Aim(
    "arithmetic and precision",
    "the instructions per element: matrix cores for products (tl.dot tile shapes and input dtypes), cheaper math "
    "(exp2, multiplying by a reciprocal, fewer casts and index computations), with fp32 accumulation kept",
)
FUSION = Aim(
    "fusion and algorithm",
    "the decomposition: fuse kernels and passes into fewer, a different algorithm (online statistics, split-K or "
    "stream-K, another tiling or loop order) that does less work or less synchronisation",
)
AIMS = (MEMORY, PARALLELISM, ARITHMETIC, FUSION)
_DOT = re.compile(r"\btl\.dot(?:_scaled)?\b")
_KERNEL = re.compile(r"@triton\.jit")


def ranked_aims(calls: Sequence[CallCost], code: str) -> list[Aim]:
    """`AIMS`, the most promising first. Each timed call's share of the total time votes for what bounds it
    (memory-bound: memory traffic; compute-bound: arithmetic; latency-bound: parallelism, and fusion where a call
    is launch-bound); several kernels in the code add to fusion. Untimed (no GPU): a matrix-multiply kernel ranks
    arithmetic first, any other memory traffic; ties keep the order of `AIMS`."""
    score = {aim.name: 0.0 for aim in AIMS}
    timed = [c for c in calls if c.ms]
    total = sum(c.ms or 0.0 for c in timed)
    for c in timed:
        share = (c.ms or 0.0) / total
        if c.bound == "memory":
            score[MEMORY.name] += share
        elif c.bound == "compute":
            score[ARITHMETIC.name] += share
        elif c.bound == "latency":
            score[PARALLELISM.name] += share
            if "launch-bound" in c.why:
                score[FUSION.name] += share / 2
    if not timed:
        score[ARITHMETIC.name if _DOT.search(code) else MEMORY.name] += 1.0
    if len(_KERNEL.findall(code)) > 1:
        score[FUSION.name] += 0.25
    return sorted(AIMS, key=lambda aim: -score[aim.name])


def aim_named(name: str) -> Aim | None:
    return next((aim for aim in AIMS if aim.name == name), None)


def chain_aim(chain: int, calls: Sequence[CallCost], code: str) -> Aim:
    """The aim of chain number `chain` (0-based) of several."""
    ranked = ranked_aims(calls, code)
    return ranked[chain % len(ranked)]
