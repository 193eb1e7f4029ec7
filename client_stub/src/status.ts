/** The status-bar item's text and tooltip for each state of the server. */
import type { Backend, BaseVerdict, ServerStatus } from "./protocol";

export type ServerState =
  | { kind: "idle" }
  | { kind: "restricted" }
  | { kind: "starting"; interpreter: string }
  | { kind: "running"; interpreter: string; status: ServerStatus | null }
  | { kind: "failed"; interpreter: string; message: string };

export interface StatusView {
  text: string;
  tooltip: string;
  /** Draw the item as an error or warning. */
  alert?: "error" | "warning";
}

const BACKENDS: Record<Backend, string> = { cuda: "CUDA", rocm: "ROCm", interpreter: "CPU interpreter" };
const MAX_ACTIVITY = 40;

export function backendLabel(backend: Backend | null): string {
  return backend === null ? "backend not known yet" : BACKENDS[backend];
}

function shorten(text: string): string {
  return text.length <= MAX_ACTIVITY ? text : `${text.slice(0, MAX_ACTIVITY - 1)}…`;
}

export function statusView(state: ServerState): StatusView {
  const log = "Click to show the server log.";
  switch (state.kind) {
    case "idle":
      return { text: "GEAK", tooltip: `GEAK starts when a Triton file is opened. ${log}` };
    case "restricted":
      return {
        text: "$(shield) GEAK",
        tooltip: "Restricted mode: GEAK runs kernels and their tests, so it waits until you trust this workspace.",
        alert: "warning",
      };
    case "starting":
      return { text: "$(loading~spin) GEAK", tooltip: `Starting the GEAK server with ${state.interpreter}. ${log}` };
    case "failed":
      return { text: "$(error) GEAK", tooltip: `${state.message}\n${log}`, alert: "error" };
    case "running": {
      const status: ServerStatus = state.status ?? { backend: null, device: null, busy: false, activity: null };
      const name = state.status === null ? "GEAK" : `GEAK: ${status.backend === null ? "…" : BACKENDS[status.backend]}`;
      const activity = status.busy ? ` · ${shorten(status.activity ?? "running")}` : "";
      const device = status.device ? ` (${status.device})` : "";
      const lines = [
        `GEAK server: ${state.interpreter}`,
        `Backend: ${backendLabel(status.backend)}${device}`,
        status.busy ? `Running: ${status.activity ?? "a job"}` : "Idle",
        log,
      ];
      const icon = status.busy ? "$(sync~spin)" : "$(circuit-board)";
      return { text: `${icon} ${name}${activity}`, tooltip: lines.join("\n") };
    }
  }
}

/** Verdicts that are warnings in the editor too: the item is drawn as a warning. */
const WARNING_VERDICTS = [/^outputs differ$/, /^base's test fails$/, /× slower$/];

/**
 * The base comparison's item (`add.py vs HEAD: outputs differ`), or null while there is none to show: no server
 * running, comparing off (`geak.base` empty), or nothing compared yet.
 */
export function baseView(state: ServerState): StatusView | null {
  const status = state.kind === "running" ? state.status : null;
  const verdict: BaseVerdict | null | undefined = status?.baseVerdict;
  if (verdict === null || verdict === undefined) {
    return null;
  }
  const said = status?.base ?? `${verdict.file}: ${verdict.verdict}`;
  const warning = WARNING_VERDICTS.some((pattern) => pattern.test(verdict.verdict));
  return {
    text: `$(git-compare) ${verdict.file} vs ${shorten(verdict.rev)}: ${verdict.verdict}`,
    tooltip: `Last save compared with ${verdict.rev} (setting geak.base):\n${said}\nClick to show the server log.`,
    ...(warning ? { alert: "warning" as const } : {}),
  };
}
