/** What the user is told when an optimization ends, whether it proposed an edit or not. */
import type { OptimizeResult } from "./protocol";

export interface Outcome {
  text: string;
  severity: "information" | "warning";
  /** Offer "Show Candidates": the run tried some. */
  offerCandidates: boolean;
}

/** `applied`: whether VS Code applied the proposed edit; undefined when there was none to apply. */
export function optimizeOutcome(result: OptimizeResult, applied?: boolean): Outcome {
  const offerCandidates = result.candidates.length > 0;
  const searched = (result.search.screened ?? 0) > 0; // e.g. screened for correctness only, on a CPU
  if (result.edit === null && !offerCandidates && !searched) {
    // Refused before anything ran (the file fails its own test, another run is going on, ...).
    return { text: `GEAK: nothing to optimize: ${result.summary}`, severity: "warning", offerCandidates };
  }
  if (applied === false) {
    // VS Code lists edits that need confirmation unticked in the Refactor Preview: Apply takes only ticked ones.
    return {
      text: `GEAK: the proposal was not applied (${result.summary}). In the Refactor Preview, tick the changes to take before Apply.`,
      severity: "information",
      offerCandidates,
    };
  }
  return { text: `GEAK: ${result.summary}`, severity: "information", offerCandidates };
}
