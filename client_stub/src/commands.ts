/**
 * The extension's commands: each sends one of the server's custom requests and shows the answer.
 */
import { randomUUID } from "node:crypto";
import * as path from "node:path";
import * as vscode from "vscode";
import { LSPErrorCodes, ResponseError, WorkDoneProgress } from "vscode-languageclient/node";
import type { LanguageClient } from "vscode-languageclient/node";
import { candidateRows, candidateSummary } from "./candidates";
import { staleDocuments } from "./edits";
import { ProgressRelay } from "./progress";
import { type Outcome, optimizeOutcome } from "./proposal";
import {
  CANDIDATES,
  type Candidate,
  CHECK,
  type CheckResult,
  OPTIMIZE,
  type OptimizeParams,
  type OptimizeResult,
} from "./protocol";
import type { GeakServer } from "./server";

export const OPTIMIZE_KERNEL = "geak.optimizeKernel";

interface Target {
  uri: string;
  kernel: string | null;
  version: number | null;
}

function isCancellation(error: unknown, token: vscode.CancellationToken): boolean {
  return (
    token.isCancellationRequested ||
    error instanceof vscode.CancellationError ||
    (error instanceof ResponseError && error.code === LSPErrorCodes.RequestCancelled)
  );
}

function requestFailed(what: string, error: unknown): void {
  const reason = error instanceof Error ? error.message : String(error);
  void vscode.window.showErrorMessage(`GEAK: ${what} failed: ${reason}`);
}

/** The Python file of the active editor, or a message saying why there is none. */
function activePythonDocument(): vscode.TextDocument | undefined {
  const document = vscode.window.activeTextEditor?.document;
  if (document?.languageId !== "python") {
    void vscode.window.showInformationMessage("GEAK: open a Triton file (a Python file with a @triton.jit kernel) first.");
    return undefined;
  }
  if (document.uri.scheme !== "file") {
    void vscode.window.showInformationMessage("GEAK: save the file to disk first (its test runs from there).");
    return undefined;
  }
  return document;
}

/** From the command palette: the server's own "Optimize" code actions at the cursor (it knows where kernels are). */
async function pickTarget(): Promise<Target | undefined> {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined || activePythonDocument() === undefined) {
    return undefined;
  }
  const actions =
    (await vscode.commands.executeCommand<(vscode.CodeAction | vscode.Command)[] | undefined>(
      "vscode.executeCodeActionProvider",
      editor.document.uri,
      editor.selection,
      vscode.CodeActionKind.RefactorRewrite.value,
    )) ?? [];
  const choices = actions
    .map((action) => (typeof action.command === "string" ? (action as vscode.Command) : (action as vscode.CodeAction).command))
    .filter((command): command is vscode.Command => command?.command === OPTIMIZE_KERNEL && command.arguments !== undefined);
  if (choices.length === 0) {
    void vscode.window.showInformationMessage("GEAK found no Triton kernel to optimize in this file.");
    return undefined;
  }
  const chosen =
    choices.length === 1
      ? choices[0]
      : (await vscode.window.showQuickPick(
          choices.map((command) => ({ label: command.title, command })),
          { title: "GEAK: Optimize", placeHolder: "What to optimize" },
        ))?.command;
  if (chosen === undefined) {
    return undefined;
  }
  const [uri, kernel, version] = chosen.arguments as [string, string | null, number | null];
  return { uri, kernel, version };
}

async function tell(outcome: Outcome, uri: string): Promise<void> {
  const items = outcome.offerCandidates ? ["Show Candidates"] : [];
  const choice =
    outcome.severity === "warning"
      ? await vscode.window.showWarningMessage(outcome.text, ...items)
      : await vscode.window.showInformationMessage(outcome.text, ...items);
  if (choice !== undefined) {
    await vscode.commands.executeCommand("geak.showCandidates", uri);
  }
}

async function applyProposal(client: LanguageClient, result: OptimizeResult, uri: string): Promise<void> {
  if (result.edit === null) {
    await tell(optimizeOutcome(result), uri);
    return;
  }
  const edit = await client.protocol2CodeConverter.asWorkspaceEdit(result.edit);
  // No await between this check and applyEdit: the documents cannot change in between.
  const stale = staleDocuments(result.edit, (uri) => {
    const target = client.protocol2CodeConverter.asUri(uri).toString();
    return vscode.workspace.textDocuments.find((d) => d.uri.toString() === target)?.version;
  });
  if (stale.length > 0) {
    void vscode.window.showWarningMessage(
      `GEAK: the file changed during the optimization, so its result was not applied (${result.summary}). Run it again.`,
    );
    return;
  }
  // The edit's change annotation asks for confirmation, so VS Code opens the refactoring preview.
  const applied = await vscode.workspace.applyEdit(edit, { isRefactoring: true });
  await tell(optimizeOutcome(result, applied), uri);
}

export async function optimizeKernel(server: GeakServer, ...args: unknown[]): Promise<void> {
  const client = await server.ensure();
  if (client === undefined) {
    return;
  }
  const target: Target | undefined =
    typeof args[0] === "string"
      ? { uri: args[0], kernel: (args[1] as string | null | undefined) ?? null, version: (args[2] as number | null | undefined) ?? null }
      : await pickTarget();
  if (target === undefined) {
    return;
  }
  const file = path.basename(vscode.Uri.parse(target.uri).fsPath);
  const what = target.kernel === null ? `all kernels in ${file}` : `${target.kernel} (${file})`;
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `GEAK: optimizing ${what}`, cancellable: true },
    async (progress, token) => {
      const workDoneToken = randomUUID();
      const relay = new ProgressRelay();
      const listener = client.onProgress(WorkDoneProgress.type, workDoneToken, (value) => {
        const step = relay.step(value);
        if (step !== undefined) {
          progress.report(step);
        }
      });
      const params: OptimizeParams = {
        textDocument: { uri: target.uri },
        version: target.version,
        kernel: target.kernel,
        workDoneToken,
      };
      try {
        return await client.sendRequest<OptimizeResult>(OPTIMIZE, params, token);
      } catch (error) {
        if (isCancellation(error, token)) {
          vscode.window.setStatusBarMessage("GEAK: optimization stopped", 5000);
        } else {
          requestFailed("optimize", error);
        }
        return undefined;
      } finally {
        listener.dispose();
      }
    },
  );
  if (result !== undefined) {
    await applyProposal(client, result, target.uri);
  }
}

export async function checkFile(server: GeakServer): Promise<void> {
  const document = activePythonDocument();
  const client = document && (await server.ensure());
  if (document === undefined || client === undefined) {
    return;
  }
  const file = path.basename(document.uri.fsPath);
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `GEAK: checking ${file}`, cancellable: true },
    async (_progress, token) => {
      try {
        return await client.sendRequest<CheckResult>(CHECK, { textDocument: { uri: document.uri.toString() } }, token);
      } catch (error) {
        if (!isCancellation(error, token)) {
          requestFailed("check", error);
        }
        return undefined;
      }
    },
  );
  if (result === undefined) {
    return;
  }
  const backend = result.backend === null ? "" : ` (${result.backend})`;
  if (result.ok) {
    void vscode.window.showInformationMessage(`GEAK: ${file} passes${backend}. ${result.message}`.trim());
  } else {
    const choice = await vscode.window.showWarningMessage(
      `GEAK: ${file} fails at ${result.stage}${backend}: ${result.message}`,
      "Show Problems",
    );
    if (choice !== undefined) {
      await vscode.commands.executeCommand("workbench.actions.view.problems");
    }
  }
}

/** `uri`: the file whose candidates to show (after an optimization); else the active editor's. */
export async function showCandidates(server: GeakServer, uri?: unknown): Promise<void> {
  const target = typeof uri === "string" ? vscode.Uri.parse(uri) : activePythonDocument()?.uri;
  const client = target && (await server.ensure());
  if (target === undefined || client === undefined) {
    return;
  }
  const file = path.basename(target.fsPath);
  let candidates: Candidate[];
  try {
    candidates = await client.sendRequest<Candidate[]>(CANDIDATES, { textDocument: { uri: target.toString() } });
  } catch (error) {
    requestFailed("show candidates", error);
    return;
  }
  if (candidates.length === 0) {
    void vscode.window.showInformationMessage(`GEAK: no candidates for ${file} yet; run "GEAK: Optimize kernel" first.`);
    return;
  }
  const picked = await vscode.window.showQuickPick(candidateRows(candidates), {
    title: `GEAK: candidates of the last optimization of ${file}`,
    matchOnDescription: true,
    matchOnDetail: true,
  });
  if (picked !== undefined) {
    void vscode.window.showInformationMessage(candidateSummary(picked.candidate));
  }
}
