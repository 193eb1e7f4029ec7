"""Every Triton launch of the job goes through here (`JITFunction.run` patched): counted per kernel, and, as the
modes of ``launch_modes`` say, timed, watched, kept, turned into a compile or into nothing."""

from __future__ import annotations

import contextlib

import torch

from . import autotuning, step_facts
from .kernel_names import kernel_name
from .launch_modes import MODES, STATE


def install() -> None:
    """Count kernel launches per kernel name (to tell a Triton kernel from a torch fallback)."""
    from triton.runtime.jit import JITFunction

    classes: list[type] = [JITFunction]
    with contextlib.suppress(ImportError):
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    event, current_stream = torch.cuda.Event, torch.cuda.current_stream  # bound before any user code
    capturing = torch.cuda.is_current_stream_capturing
    for cls in classes:
        original = cls.run

        def counted(self, *args, __original=original, **kwargs):
            if not kwargs.get("warmup", False):
                name = kernel_name(self)
                STATE.launches[name] += 1
                if MODES.record_steps:
                    step_facts.note(self, args, kwargs)
                if MODES.track_streams:
                    STATE.launch_streams[current_stream().cuda_stream] += 1
                if MODES.ghost:
                    return None
                if MODES.time_kernels:
                    start, end = event(enable_timing=True), event(enable_timing=True)
                    start.record(current_stream())
                    ret = __original(self, *args, **kwargs)
                    end.record(current_stream())
                    STATE.kernel_events.append((name, start, end))
                    return ret
                if STATE.watches:
                    ret = __original(self, *args, **kwargs)
                    if not capturing():  # an event recorded in a capture would be the graph's, not a launch's
                        done = event()
                        done.record(current_stream())
                        STATE.watches[-1].launched(done)
                    return ret
            return __original(self, *args, **kwargs)

        def run(self, *args, __original=original, __counted=counted, **kwargs):
            if MODES.compile_only:
                kwargs["warmup"] = True
                return __original(self, *args, **kwargs)
            ret = __counted(self, *args, **kwargs)
            if MODES.keep_compiled and ret is not None and not kwargs.get("warmup", False):
                STATE.compiled.append((kernel_name(self), ret))
            return ret

        cls.run = run
    autotuning.install()
