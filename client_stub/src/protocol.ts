/**
 * The GEAK server's custom messages (LSP_PROTOCOL.md), as TypeScript types. Types and method names only: no VS Code.
 */
import type { WorkspaceEdit } from "vscode-languageclient";

export const OPTIMIZE = "geak/optimize";
export const CANDIDATES = "geak/candidates";
export const CHECK = "geak/check";
export const STATUS = "geak/status";

export interface TextDocumentRef {
  textDocument: { uri: string };
}

export interface OptimizeParams extends TextDocumentRef {
  version: number | null;
  kernel: string | null;
  workDoneToken?: string;
}

export interface Candidate {
  id: string;
  origin: string;
  passed: boolean;
  stage: string | null;
  latencyMs: number | null;
  speedup: number | null;
  speedupLow: number | null;
  speedupHigh: number | null;
  note: string;
}

/** What the launch-configuration search did (empty when none ran, e.g. a refused optimize). */
export interface SearchReport {
  summary?: string;
  knobs?: number;
  screened?: number;
  correct?: number;
  rounds?: number;
  finalists?: number;
  diagnosis?: string;
  seconds?: number;
}

export interface OptimizeResult {
  edit: WorkspaceEdit | null;
  summary: string;
  speedup: number | null;
  candidates: Candidate[];
  /** Why the original is slow (its calls against the device's roofline and its kernels' compile facts). */
  diagnosis: string;
  search: SearchReport;
}

export interface CheckResult {
  ok: boolean;
  stage: string;
  message: string;
  backend: string | null;
}

export type Backend = "cuda" | "rocm" | "interpreter";

/** The last comparison of a saved file with its version at the base revision (`geak.base`), in parts. */
export interface BaseVerdict {
  file: string;
  rev: string;
  /** A few words: `same`, `same test outputs, probing`, `same outputs`, `outputs differ`, `1.25× slower`, `within noise`, `new file`... */
  verdict: string;
}

export interface ServerStatus {
  backend: Backend | null;
  device: string | null;
  busy: boolean;
  activity: string | null;
  /** What the last comparison with the base said, whole (`add.py: outputs differ from HEAD's in test_add: …`). */
  base?: string | null;
  baseVerdict?: BaseVerdict | null;
}
