/** Quick-pick rows for the candidates of the last optimization (geak/candidates). */
import type { Candidate } from "./protocol";

export interface CandidateRow {
  label: string;
  description: string;
  detail: string;
  candidate: Candidate;
}

export function formatSpeedup(c: Pick<Candidate, "speedup" | "speedupLow" | "speedupHigh">): string | null {
  if (c.speedup === null) {
    return null;
  }
  const interval = c.speedupLow !== null && c.speedupHigh !== null
    ? ` [${c.speedupLow.toFixed(2)}, ${c.speedupHigh.toFixed(2)}]`
    : "";
  return `${c.speedup.toFixed(2)}×${interval}`;
}

export function formatLatency(ms: number): string {
  return ms >= 1 ? `${ms.toFixed(2)} ms` : `${(ms * 1000).toFixed(1)} µs`;
}

function outcome(c: Candidate): string {
  if (c.passed) {
    return formatSpeedup(c) ?? "passed (not timed)";
  }
  return `failed${c.stage === null ? "" : ` at ${c.stage}`}`;
}

function details(c: Candidate): string {
  return [c.latencyMs === null ? null : formatLatency(c.latencyMs), c.note.trim() || null]
    .filter((part): part is string => part !== null)
    .join(" · ");
}

export function candidateRow(c: Candidate): CandidateRow {
  const detail = details(c);
  return {
    label: `${c.passed ? "$(pass)" : "$(error)"} ${c.id}: ${outcome(c)}`,
    description: c.origin,
    detail,
    candidate: c,
  };
}

/** Passing candidates first, fastest first; then the failures in the server's order. */
export function candidateRows(candidates: readonly Candidate[]): CandidateRow[] {
  const rank = (c: Candidate): number => (c.passed ? -(c.speedup ?? 0) : Number.POSITIVE_INFINITY);
  return candidates
    .map((c, index) => ({ c, index }))
    .sort((a, b) => rank(a.c) - rank(b.c) || a.index - b.index)
    .map(({ c }) => candidateRow(c));
}

/** One line about a candidate, for a message. */
export function candidateSummary(c: Candidate): string {
  const detail = details(c);
  return `Candidate ${c.id} (${c.origin}): ${outcome(c)}${detail === "" ? "" : `. ${detail}`}`;
}
