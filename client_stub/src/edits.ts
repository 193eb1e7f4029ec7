/** Checks on the server's proposed edit before VS Code shows it. */
import type { WorkspaceEdit } from "vscode-languageclient";

/**
 * URIs of the documents a versioned edit was computed for but which have changed since (the same rule as the
 * language client's own `workspace/applyEdit` handling). `versionOf` gives an open document's version, or undefined.
 */
export function staleDocuments(edit: WorkspaceEdit, versionOf: (uri: string) => number | undefined): string[] {
  const stale: string[] = [];
  for (const change of edit.documentChanges ?? []) {
    if (!("textDocument" in change)) {
      continue;
    }
    const expected = change.textDocument.version;
    const current = versionOf(change.textDocument.uri);
    if (expected !== null && expected >= 0 && current !== undefined && current !== expected) {
      stale.push(change.textDocument.uri);
    }
  }
  return stale;
}
