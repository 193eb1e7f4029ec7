import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ProgressRelay } from "../progress";

describe("ProgressRelay", () => {
  it("turns the server's absolute percentages into VS Code's increments", () => {
    const relay = new ProgressRelay();
    assert.deepEqual(relay.step({ kind: "begin", title: "Optimizing", message: "round 1/3", percentage: 0 }), {
      message: "round 1/3",
    });
    assert.deepEqual(relay.step({ kind: "report", message: "round 2/3, best 1.20×", percentage: 33 }), {
      message: "round 2/3, best 1.20×",
      increment: 33,
    });
    assert.deepEqual(relay.step({ kind: "report", percentage: 66 }), { increment: 33 });
  });

  it("never moves the bar backwards and drops empty reports", () => {
    const relay = new ProgressRelay();
    relay.step({ kind: "report", percentage: 50 });
    assert.deepEqual(relay.step({ kind: "report", message: "re-measuring", percentage: 40 }), { message: "re-measuring" });
    assert.equal(relay.step({ kind: "report", percentage: 50 }), undefined);
    assert.equal(relay.step({ kind: "end", message: "done" }), undefined);
  });
});
