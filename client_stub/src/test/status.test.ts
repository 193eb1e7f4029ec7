import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ServerStatus } from "../protocol";
import { statusView } from "../status";

const running = (status: ServerStatus | null) => statusView({ kind: "running", interpreter: "/venv/bin/python", status });

describe("statusView", () => {
  it("names each backend", () => {
    const idle = { device: null, busy: false, activity: null };
    assert.equal(running({ ...idle, backend: "rocm" }).text, "$(circuit-board) GEAK: ROCm");
    assert.equal(running({ ...idle, backend: "cuda" }).text, "$(circuit-board) GEAK: CUDA");
    assert.equal(running({ ...idle, backend: "interpreter" }).text, "$(circuit-board) GEAK: CPU interpreter");
    assert.equal(running({ ...idle, backend: null }).text, "$(circuit-board) GEAK: …");
    assert.equal(running(null).text, "$(circuit-board) GEAK");
  });

  it("shows a run in progress with its activity, shortened", () => {
    const view = running({ backend: "cuda", device: "NVIDIA H200", busy: true, activity: "optimizing add_kernel: round 2/3" });
    assert.equal(view.text, "$(sync~spin) GEAK: CUDA · optimizing add_kernel: round 2/3");
    assert.match(view.tooltip, /Backend: CUDA \(NVIDIA H200\)/);
    assert.match(view.tooltip, /Running: optimizing add_kernel/);
    assert.match(view.tooltip, /\/venv\/bin\/python/);
    const long = running({ backend: "rocm", device: null, busy: true, activity: "x".repeat(100) });
    assert.ok(long.text.endsWith("…"));
    assert.ok(long.text.length < 70);
    assert.equal(running({ backend: "rocm", device: null, busy: true, activity: null }).text, "$(sync~spin) GEAK: ROCm · running");
  });

  it("says idle when nothing runs", () => {
    assert.match(running({ backend: "cuda", device: null, busy: false, activity: "stale" }).tooltip, /\nIdle\n/);
  });

  it("marks a failed start as an error and restricted mode as a warning", () => {
    const failed = statusView({ kind: "failed", interpreter: "python3", message: "GEAK is not installed in python3 (from PATH)" });
    assert.equal(failed.alert, "error");
    assert.match(failed.tooltip, /not installed in python3/);
    const restricted = statusView({ kind: "restricted" });
    assert.equal(restricted.alert, "warning");
    assert.match(restricted.tooltip, /trust/);
    assert.equal(statusView({ kind: "starting", interpreter: "python3" }).alert, undefined);
  });
});
