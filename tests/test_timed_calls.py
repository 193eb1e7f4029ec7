"""Which captured calls a timing times (``bench_capture.calls_to_time``): those that launch a Triton kernel, the
reference's choice for every variant; a helper that launches none is left out and named."""

from __future__ import annotations

import json
import subprocess
import sys

from geak.evaluator.job.bench_capture import calls_to_time
from geak.evaluator.job.capture import RecordedCall


def call(signature: str, launched: int | None) -> RecordedCall:
    return RecordedCall(signature.split("(")[0], {}, signature, launched=launched)


PACK, PACK2, MM, MM2 = (call("pack(64)", 0), call("pack(32)", 0), call("mm(64)", 2), call("mm(32)", 1))


def test_calls_that_launch_no_kernel_are_left_out_and_named():
    chosen = calls_to_time([PACK, MM, PACK2, MM2], 8)
    assert chosen.calls == [MM, MM2] and chosen.helpers == ["pack(64)", "pack(32)"]
    assert calls_to_time([PACK, MM, PACK2, MM2], 1).calls == [MM]


def test_where_no_call_launches_a_kernel_every_call_is_timed():
    chosen = calls_to_time([PACK, PACK2], 8)
    assert chosen.calls == [PACK, PACK2] and chosen.helpers == []
    uncounted = [call("f(1)", None), call("f(2)", None)]  # launches not counted: nothing to leave out
    assert calls_to_time(uncounted, 8).calls == uncounted


def test_every_variant_times_the_references_calls_whatever_it_launches():
    torch_only = [call("pack(64)", 0), call("mm(64)", 0), call("pack(32)", 0), call("mm(32)", 0)]
    chosen = calls_to_time(torch_only, 8, like=["mm(64)", "mm(32)"])
    assert [c.signature for c in chosen.calls] == ["mm(64)", "mm(32)"] and chosen.helpers == []
    # a variant without the reference's calls keeps its own, so the job reports that the variants' calls differ
    assert calls_to_time([PACK], 8, like=["mm(64)"]).calls == [PACK]


HELPER_FILE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def pack(w):
    out = torch.empty_like(w)
    for i in range(w.shape[0]):  # host-bound, launches no Triton kernel
        out[i] = w[i] * 2
    return out


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCK=64)
    return out


##################################################################################################################################################


def test_add():
    x = torch.randn(128)
    w = pack(torch.randn(128))
    return {"sum": add(x, w), "sum2": add(w, x)}
'''

CAPTURE = """
import json, sys
from pathlib import Path
from geak.evaluator.job import bench_capture, sandbox
from geak.evaluator.job.bench_capture import calls_to_time
from geak.evaluator.bench import bench_job
from geak.evaluator.options import EvalOptions
from geak.evaluator.triton_file import read_triton_file
from geak.evaluator.shared.protocol import job_from_dict
from geak.evaluator.shared.sequential import RoundPlan

sandbox.prepare_zygote("interpreter")
t = read_triton_file(sys.argv[1])
scratch = Path(sys.argv[2])
spec = {"label": "reference", "path": sys.argv[1], "module_name": "geak_capture", "wrappers": list(t.wrappers),
        "kernels": [k.name for k in t.kernels]}
job = job_from_dict(bench_job([spec], t, EvalOptions(), scratch / "outputs", RoundPlan.fixed(6)))
captured = bench_capture.capture_bench_calls(job, spec, lambda event: None)
chosen = calls_to_time(captured["calls"], job.max_calls)
print(json.dumps({"captured": [[c.signature, c.launched] for c in captured["calls"]],
                  "timed": [c.signature for c in chosen.calls], "helpers": chosen.helpers}))
"""


def test_a_jobs_capture_counts_each_calls_launches(tmp_path):
    path = tmp_path / "helper_file.py"
    path.write_text(HELPER_FILE)
    scratch = tmp_path / "job"
    scratch.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", CAPTURE, str(path), str(scratch)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["captured"] == [["pack(f32[128])", 0], ["add(f32[128], f32[128])", 1]]
    assert report["timed"] == ["add(f32[128], f32[128])"] and report["helpers"] == ["pack(f32[128])"]
