"""How the job's `@triton.autotune` kernels tune: `Autotuner.run` patched to follow the tuning modes of
``launch_modes`` (tuning deferred, kept, shared between twins, timed with another benchmark, its configs compiled
ahead or each compiled alone)."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from typing import Any

from .compile import configs_ahead
from .kernel_names import kernel_function, kernel_name
from .launch_modes import MODES, STATE


def install() -> None:
    """Patch `Autotuner.run` to follow the tuning modes of ``launch_modes``."""
    from triton.runtime.autotuner import Autotuner

    original = Autotuner.run

    def tuned(self, *args, **kwargs):
        every = self.configs
        if len(every) <= 1:
            return original(self, *args, **kwargs)
        if MODES.share_twins:
            return _tuned_like_twins(self, original, args, kwargs)
        if MODES.every_config and MODES.compile_only:
            return _every_config_run(self, original, args, kwargs)
        only = _untuned_config(self, args, kwargs)
        if only is None:
            key = _tuning_key(self, args, kwargs) if MODES.compile_ahead else None
            if key is None or key in self.cache:  # not compiling ahead, or tuned for this key already
                return original(self, *args, **kwargs)
            return configs_ahead.tuned_without(
                self, original, configs_ahead.compile_configs_ahead(self, every, args, kwargs), args, kwargs
            )
        if MODES.compile_ahead and MODES.defer_tuning:
            configs_ahead.compile_configs_ahead(self, every, args, kwargs)
        # deferred: the first config that runs (none chosen, none kept), as a shared device would choose by noise
        others = [c for c in every if c is not only] if MODES.defer_tuning else []
        if MODES.defer_tuning:
            STATE.deferred_tunings[kernel_name(kernel_function(self))] += 1
        for config in (only, *others):
            self.configs = [config]
            try:
                return original(self, *args, **kwargs)
            except Exception:
                continue
            finally:
                self.configs = every
        return original(self, *args, **kwargs)  # none runs alone: tuned at once (and raising as Triton would)

    def run(self, *args, **kwargs):
        if not STATE.tuning_bench or len(self.configs) <= 1:  # every timed launch comes here: nothing added to it
            return tuned(self, *args, **kwargs)
        with _benchmarked_by(self, *STATE.tuning_bench[-1]):
            return tuned(self, *args, **kwargs)

    Autotuner.run = run


@contextlib.contextmanager
def _benchmarked_by(tuner: Any, bench: Callable[..., Any] | None, over_tritons: bool = False):
    """`tuner` times its configs with `bench` within, where it was given no benchmark of its own (``_do_bench``
    None: no `do_bench`, `warmup`, `rep` or `use_cuda_graph` argument), or, `over_tritons`, only one Triton made for
    it from those arguments. Triton reads the benchmark through a cached property, so the tuner's own attribute
    takes its place and is taken away after."""
    own = getattr(tuner, "_do_bench", None)
    if bench is None or (own is not None and not (over_tritons and tritons_own_benchmark(own))):
        yield
        return
    saved = tuner.__dict__.pop("do_bench", None)
    tuner.__dict__["do_bench"] = bench
    try:
        yield
    finally:
        del tuner.__dict__["do_bench"]
        if saved is not None:
            tuner.__dict__["do_bench"] = saved


def tritons_own_benchmark(do_bench: Any) -> bool:
    """Is `do_bench` one of the benchmarks `@triton.autotune` builds from its `use_cuda_graph`, `warmup` and `rep`
    arguments (made in Triton's autotuner module), not one the file wrote?"""
    return getattr(do_bench, "__module__", None) == "triton.runtime.autotuner"


def _every_config_run(tuner: Any, original: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    """Run `tuner` once with each of its configs alone (within ``compile_only``: each compiles, nothing launches)."""
    every = tuner.configs
    for config in every:
        tuner.configs = [config]
        try:
            original(tuner, *args, **kwargs)
        except Exception:  # a config that fails here fails at its tuning in the job, which says why
            continue
        finally:
            tuner.configs = every


def _tuned_like_twins(tuner: Any, original: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """Run `tuner` with the choices its twins made (over any it made before, untwinned), and record those it makes."""
    fingerprint = _fingerprint(tuner)
    known = STATE.twin_choices.setdefault(fingerprint, {})
    for key, index in known.items():
        tuner.cache[key] = tuner.configs[index]
    try:
        return original(tuner, *args, **kwargs)
    finally:
        for key, config in tuner.cache.items():
            if key not in known and config in tuner.configs:
                known[key] = tuner.configs.index(config)


def _untuned_config(tuner: Any, args: tuple, kwargs: dict) -> Any:
    """The one config an autotuned kernel runs without tuning for this call (``tuning_kept``, ``tuning_deferred``);
    None: it runs as Triton runs it."""
    if MODES.keep_tuning and tuner.cache and _tuning_key(tuner, args, kwargs) not in tuner.cache:
        return next(iter(tuner.cache.values()))  # what it chose for a key it tuned
    return tuner.configs[0] if MODES.defer_tuning else None


def _tuning_key(tuner: Any, args: tuple, kwargs: dict) -> tuple[Any, ...] | None:
    """The key under which `tuner` keeps its choice for this call (as ``Autotuner.run`` makes it: the values of its
    `key` arguments, then every tensor argument's dtype); None if it cannot be made."""
    try:
        named = {**dict(zip(tuner.arg_names, args, strict=False)), **kwargs}
        named = {k: v for k, v in named.items() if k in tuner.arg_names}
        key = [named[k] for k in tuner.keys if k in named]
        return tuple(key + [str(v.dtype) for v in named.values() if hasattr(v, "dtype")])
    except Exception:
        return None


def _fingerprint(tuner: Any) -> tuple[Any, ...]:
    """What makes two autotuned kernels twins: the kernel's source, the configs in order, the tuning keys."""
    fn = kernel_function(tuner)
    source = getattr(fn, "src", None)
    if source is None:  # the interpreter's: the Python function itself
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = id(fn)
    return (source, tuple(str(c) for c in tuner.configs), tuple(getattr(tuner, "keys", ())))
