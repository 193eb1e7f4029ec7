import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ServerStatus } from "../protocol";
import { baseView, type StatusView, statusView } from "../status";

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

describe("baseView", () => {
  const idle = { backend: "interpreter" as const, device: null, busy: false, activity: null };
  const running = (status: ServerStatus) => baseView({ kind: "running", interpreter: "python3", status });
  /** The item for a comparison of add.py with HEAD (it must be shown). */
  const compared = (verdict: string, base: string | null = null): StatusView => {
    const view = running({ ...idle, base, baseVerdict: { file: "add.py", rev: "HEAD", verdict } });
    assert.ok(view !== null, "the item is hidden");
    return view;
  };

  it("shows the last comparison's verdict with the file and the revision", () => {
    const view = compared("same", "add.py: same as HEAD");
    assert.equal(view.text, "$(git-compare) add.py vs HEAD: same");
    assert.match(view.tooltip, /compared with HEAD \(setting geak\.base\):\nadd\.py: same as HEAD\n/);
    assert.equal(view.alert, undefined);
    assert.equal(compared("1.21× faster").alert, undefined);
    assert.equal(compared("within noise").text, "$(git-compare) add.py vs HEAD: within noise");
    assert.match(compared("new file").tooltip, /add\.py: new file/); // no whole message: the verdict
  });

  it("draws what the editor warns about as a warning", () => {
    const differs = compared("outputs differ", "add.py: outputs differ from HEAD's in test_add → return: 99 of 100 elements differ");
    assert.equal(differs.text, "$(git-compare) add.py vs HEAD: outputs differ");
    assert.equal(differs.alert, "warning");
    assert.match(differs.tooltip, /99 of 100 elements differ/);
    assert.equal(compared("1.25× slower").alert, "warning");
    assert.equal(compared("base's test fails").alert, "warning");
  });

  it("shows nothing without a comparison or a running server", () => {
    assert.equal(running({ ...idle, base: null, baseVerdict: null }), null);
    assert.equal(running(idle), null);
    assert.equal(baseView({ kind: "running", interpreter: "python3", status: null }), null);
    assert.equal(baseView({ kind: "starting", interpreter: "python3" }), null);
  });

  it("shortens a long revision", () => {
    const view = running({ ...idle, baseVerdict: { file: "add.py", rev: "r".repeat(80), verdict: "same" } });
    assert.ok(view !== null && view.text.length < 80, view?.text);
  });
});
