/**
 * Whether a change of workspace trust or of the interpreter calls for a new server process. Granting trust also
 * makes the workspace's `geak.pythonPath` apply, so VS Code reports both changes at once: the second must find the
 * server the first started and keep it, not start another.
 */
import type { ServerState } from "./status";

export type RefreshAction = "none" | "keep" | "start";

/** `configured`: the interpreter the settings name now. */
export function refreshAction(state: ServerState, configured: string): RefreshAction {
  switch (state.kind) {
    case "idle":
      return "none"; // no Triton file opened yet: the first one starts the server
    case "running":
    case "failed": // the same start would fail the same way (and say so again); "Restart server" retries
      return state.interpreter === configured ? "keep" : "start";
    case "restricted":
    case "starting":
      return "start";
  }
}
