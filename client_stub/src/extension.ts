/**
 * GEAK for VS Code: glue between VS Code and the GEAK language server (`python -m geak.server`), where every
 * feature lives (diagnostics, inlay hints, hover, code actions, optimization).
 */
import * as vscode from "vscode";
import { checkFile, OPTIMIZE_KERNEL, optimizeKernel, showCandidates } from "./commands";
import { GeakServer } from "./server";
import { configurationChange } from "./settings";
import { baseView, statusView } from "./status";
import { containsTritonKernel } from "./tritonFile";

let server: GeakServer | undefined;
/** How long after trust is granted the workspace's own settings may take to apply. */
const TRUST_SETTLE_MS = 1000;

function statusBar(geak: GeakServer): vscode.StatusBarItem {
  const item = vscode.window.createStatusBarItem("geak.status", vscode.StatusBarAlignment.Left, 0);
  item.name = "GEAK";
  item.command = "geak.showLog";
  const render = (): void => {
    const view = statusView(geak.current);
    item.text = view.text;
    item.tooltip = view.tooltip;
    item.backgroundColor =
      view.alert === undefined ? undefined : new vscode.ThemeColor(`statusBarItem.${view.alert}Background`);
    if (geak.current.kind === "idle") {
      item.hide();
    } else {
      item.show();
    }
  };
  geak.onDidChangeState(render);
  render();
  return item;
}

/** The last save's comparison with the base revision (`add.py vs HEAD: same`), while there is one. */
function baseStatusBar(geak: GeakServer): vscode.StatusBarItem {
  const item = vscode.window.createStatusBarItem("geak.base", vscode.StatusBarAlignment.Left, -1);
  item.name = "GEAK: against the base revision";
  item.command = "geak.showLog";
  const render = (): void => {
    const view = baseView(geak.current);
    if (view === null) {
      item.hide();
      return;
    }
    item.text = view.text;
    item.tooltip = view.tooltip;
    item.backgroundColor =
      view.alert === undefined ? undefined : new vscode.ThemeColor(`statusBarItem.${view.alert}Background`);
    item.show();
  };
  geak.onDidChangeState(render);
  render();
  return item;
}

function isTritonDocument(document: vscode.TextDocument): boolean {
  return document.languageId === "python" && document.uri.scheme === "file" && containsTritonKernel(document.getText());
}

export function activate(context: vscode.ExtensionContext): void {
  const log = vscode.window.createOutputChannel("GEAK", { log: true });
  const geak = new GeakServer(context, log);
  server = geak;
  const startFor = (document: vscode.TextDocument): void => {
    if (isTritonDocument(document)) {
      geak.autoStart();
    }
  };
  context.subscriptions.push(
    log,
    geak,
    statusBar(geak),
    baseStatusBar(geak),
    vscode.commands.registerCommand(OPTIMIZE_KERNEL, (...args: unknown[]) => optimizeKernel(geak, ...args)),
    vscode.commands.registerCommand("geak.checkFile", () => checkFile(geak)),
    vscode.commands.registerCommand("geak.showCandidates", (uri?: unknown) => showCandidates(geak, uri)),
    vscode.commands.registerCommand("geak.restartServer", () => geak.restart()),
    vscode.commands.registerCommand("geak.showLog", () => {
      log.show();
    }),
    vscode.workspace.onDidOpenTextDocument(startFor),
    vscode.workspace.onDidSaveTextDocument(startFor),
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      // VS Code applies the workspace's restricted settings (geak.pythonPath) in a message of its own, which may come
      // after this one: wait for it, so that the server starts on the interpreter the workspace names (a change of
      // geak.pythonPath meanwhile starts it at once; this then keeps that server).
      setTimeout(() => void geak.refresh("Workspace trusted"), TRUST_SETTLE_MS);
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      switch (configurationChange((setting) => event.affectsConfiguration(setting))) {
        case "restart":
          void geak.refresh("geak.pythonPath changed");
          break;
        case "notify":
          void geak.notifySettingsChanged();
          break;
        case "none":
          break;
      }
    }),
  );
  vscode.workspace.textDocuments.forEach(startFor);
}

export function deactivate(): Promise<void> | undefined {
  return server?.shutdown();
}
