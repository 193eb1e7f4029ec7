import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { candidateRows, candidateSummary, formatLatency, formatSpeedup } from "../candidates";
import type { Candidate } from "../protocol";

function candidate(fields: Partial<Candidate>): Candidate {
  return {
    id: "c1",
    origin: "generator",
    passed: true,
    stage: null,
    latencyMs: null,
    speedup: null,
    speedupLow: null,
    speedupHigh: null,
    note: "",
    ...fields,
  };
}

describe("formatting", () => {
  it("shows a speedup with its interval when there is one", () => {
    assert.equal(formatSpeedup({ speedup: 1.8412, speedupLow: 1.8, speedupHigh: 1.875 }), "1.84× [1.80, 1.88]");
    assert.equal(formatSpeedup({ speedup: 0.5, speedupLow: null, speedupHigh: null }), "0.50×");
    assert.equal(formatSpeedup({ speedup: null, speedupLow: null, speedupHigh: null }), null);
  });

  it("shows latency in µs below a millisecond", () => {
    assert.equal(formatLatency(0.053), "53.0 µs");
    assert.equal(formatLatency(2.5), "2.50 ms");
  });
});

describe("candidateRows", () => {
  const rows = candidateRows([
    candidate({ id: "c1", passed: false, stage: "exec", note: "mismatch in out: 12 of 4096 elements" }),
    candidate({ id: "c2", speedup: 1.2, speedupLow: 1.1, speedupHigh: 1.3, latencyMs: 0.05 }),
    candidate({ id: "c3", origin: "search", speedup: 3.85, speedupLow: 3.82, speedupHigh: 3.85, note: "BLOCK 32 → 128" }),
    candidate({ id: "c4", passed: false, stage: "parse" }),
    candidate({ id: "c5", note: "interpreter: not timed" }),
  ]);

  it("lists passing candidates fastest first, then failures in the server's order", () => {
    assert.deepEqual(
      rows.map((r) => r.candidate.id),
      ["c3", "c2", "c5", "c1", "c4"],
    );
  });

  it("labels each with its outcome and origin", () => {
    assert.equal(rows[0].label, "$(pass) c3: 3.85× [3.82, 3.85]");
    assert.equal(rows[0].description, "search");
    assert.equal(rows[0].detail, "BLOCK 32 → 128");
    assert.equal(rows[1].detail, "50.0 µs");
    assert.equal(rows[2].label, "$(pass) c5: passed (not timed)");
    assert.equal(rows[3].label, "$(error) c1: failed at exec");
    assert.equal(rows[3].detail, "mismatch in out: 12 of 4096 elements");
  });

  it("summarizes one candidate in a line", () => {
    assert.equal(
      candidateSummary(candidate({ id: "c1", passed: false, stage: "exec", note: "mismatch" })),
      "Candidate c1 (generator): failed at exec. mismatch",
    );
    assert.equal(candidateSummary(candidate({ id: "c9", speedup: 2 })), "Candidate c9 (generator): 2.00×");
  });
});
