import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Candidate, OptimizeResult } from "../protocol";
import { optimizeOutcome } from "../proposal";

const candidate: Candidate = {
  id: "s1",
  origin: "search",
  passed: true,
  stage: "perf",
  latencyMs: 0.5,
  speedup: 2,
  speedupLow: 1.9,
  speedupHigh: 2.1,
  note: "BLOCK=1024",
};
const edit = { documentChanges: [] };

function result(fields: Partial<OptimizeResult>): OptimizeResult {
  return { edit: null, summary: "summary", speedup: null, candidates: [], diagnosis: "", search: {}, ...fields };
}

describe("optimizeOutcome", () => {
  it("warns of a refusal, with no candidates to show", () => {
    const outcome = optimizeOutcome(result({ summary: "add.py does not pass its own test" }));
    assert.deepEqual(outcome, {
      text: "GEAK: nothing to optimize: add.py does not pass its own test",
      severity: "warning",
      offerCandidates: false,
    });
  });

  it("reports a search that screened configurations without a candidate, not as a refusal", () => {
    const summary = "speed cannot be measured without a GPU (6 launch configuration(s) screened for correctness only)";
    const outcome = optimizeOutcome(result({ summary, search: { screened: 6, correct: 6 } }));
    assert.deepEqual(outcome, { text: `GEAK: ${summary}`, severity: "information", offerCandidates: false });
  });

  it("reports a run without a proposal and offers its candidates", () => {
    const outcome = optimizeOutcome(result({ summary: "no candidate was faster", candidates: [candidate] }));
    assert.equal(outcome.text, "GEAK: no candidate was faster");
    assert.equal(outcome.severity, "information");
    assert.ok(outcome.offerCandidates);
  });

  it("reports an applied proposal by its speedup", () => {
    const outcome = optimizeOutcome(result({ edit, summary: "2.00x faster", speedup: 2, candidates: [candidate] }), true);
    assert.equal(outcome.text, "GEAK: 2.00x faster");
  });

  it("says how to take a proposal the preview did not apply", () => {
    const outcome = optimizeOutcome(result({ edit, summary: "2.00x faster", speedup: 2, candidates: [candidate] }), false);
    assert.match(outcome.text, /not applied \(2\.00x faster\)\. In the Refactor Preview, tick the changes/);
    assert.ok(outcome.offerCandidates);
  });
});
