"""Benchmark suites for batch runs: GEAK's dataloader protocol, the problem state, and the built-in loaders of
TritonBench-revised and the ROCm benchmark."""

from .golden_suite import GoldenFileSuite, SuiteError
from .problem import Dataloader, DataloaderError, ProblemError, ProblemState, load_dataloader, reference_text
from .rocm import ROCmLoader
from .scoring import Score, reference_file, score_code
from .tritonbench import TritonBenchLoader

BUILT_IN = {"tritonbench": TritonBenchLoader, "rocm": ROCmLoader}

__all__ = [
    "BUILT_IN",
    "Dataloader",
    "DataloaderError",
    "GoldenFileSuite",
    "ProblemError",
    "ProblemState",
    "ROCmLoader",
    "Score",
    "SuiteError",
    "TritonBenchLoader",
    "load_dataloader",
    "reference_file",
    "reference_text",
    "score_code",
]
