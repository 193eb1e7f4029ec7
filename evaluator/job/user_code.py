"""The file under test in the job process: imported as a module, seeded as the suites' harness seeds it, waited for on
the GPU, and the threads it leaves."""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType

import torch


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy, torch (CPU and every GPU) as the suites' own harness does before it imports a file, so
    the reference and a candidate draw the same test inputs. Called before the import, before each test and each
    replay."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA/HIP device (lazily, if not initialized yet)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def load_module(path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton and dataclasses look modules up by name
    spec.loader.exec_module(module)
    return module


def synchronize(gpu: bool) -> None:
    if gpu:
        torch.cuda.synchronize()


def live_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.is_alive() and t.ident is not None}
