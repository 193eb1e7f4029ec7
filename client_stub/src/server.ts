/**
 * The GEAK language server's life cycle: which Python starts it, when it starts, restarts and stops, and the state
 * shown in the status bar. Starts are serialized, so a burst of events (documents opening, settings, trust) never
 * leaves two servers running.
 */
import * as os from "node:os";
import { PythonExtension, PVSC_EXTENSION_ID } from "@vscode/python-extension";
import * as vscode from "vscode";
import {
  CloseAction,
  type CloseHandlerResult,
  DidChangeConfigurationNotification,
  ErrorAction,
  type ErrorHandler,
  type ErrorHandlerResult,
  type Executable,
  LanguageClient,
  type LanguageClientOptions,
  type Message,
  ResponseError,
  RevealOutputChannelOn,
} from "vscode-languageclient/node";
import { type Interpreter, probeFailureMessage, probeInterpreter, resolveInterpreter, SERVER_MODULE } from "./interpreter";
import { STATUS, type ServerStatus } from "./protocol";
import { refreshAction } from "./restart";
import { initializationOptions, SECTION, serverSettings } from "./settings";
import type { ServerState } from "./status";

/** The language client's own restart policy for a crashing server, telling when it gives up. */
class RestartPolicy implements ErrorHandler {
  private policy: ErrorHandler | undefined;

  constructor(private readonly gaveUp: () => void) {}

  attach(client: LanguageClient): void {
    this.policy = client.createDefaultErrorHandler();
  }

  async error(error: Error, message: Message | undefined, count: number | undefined): Promise<ErrorHandlerResult> {
    return (await this.policy?.error(error, message, count)) ?? { action: ErrorAction.Shutdown };
  }

  async closed(): Promise<CloseHandlerResult> {
    const result = (await this.policy?.closed()) ?? { action: CloseAction.DoNotRestart };
    if (result.action === CloseAction.DoNotRestart) {
      this.gaveUp();
    }
    return result;
  }
}

export class GeakServer implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  /** Set when a start failed; automatic starts wait for a restart, a settings change or a command. */
  private failed = false;
  private watchingPythonExtension = false;
  private state: ServerState = { kind: "idle" };
  /** The last geak/status of the current server (it may come before the client's start() returns). */
  private lastStatus: ServerStatus | null = null;
  private readonly stateChanged = new vscode.EventEmitter<ServerState>();
  readonly onDidChangeState = this.stateChanged.event;
  private readonly disposables: { dispose(): unknown }[] = [this.stateChanged];

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly log: vscode.LogOutputChannel,
  ) {}

  get current(): ServerState {
    return this.state;
  }

  /** The running client, started first when needed; undefined, after telling the user why, when it cannot run. */
  ensure(): Promise<LanguageClient | undefined> {
    return this.serialize(() => this.start(true));
  }

  /** Starts the server for a Triton document unless an earlier start failed. */
  autoStart(): void {
    void this.serialize(() => (this.failed ? Promise.resolve(undefined) : this.start(false)));
  }

  /** A new server process (the "Restart server" command). */
  restart(): Promise<LanguageClient | undefined> {
    return this.serialize(async () => {
      await this.stop();
      this.failed = false;
      return this.start(true);
    });
  }

  /**
   * After trust was granted or the interpreter setting changed: a server on the interpreter configured now, where one
   * runs or was wanted (a start failed or waited for trust). A server already on that interpreter is kept.
   */
  refresh(reason: string): Promise<LanguageClient | undefined> {
    return this.serialize(async () => {
      const interpreter = await this.interpreter();
      switch (refreshAction(this.state, interpreter.command)) {
        case "none":
          return undefined;
        case "keep":
          this.log.info(
            this.state.kind === "failed"
              ? `${reason}: not starting ${interpreter.command} again ("GEAK: Restart server" does)`
              : `${reason}: the server on ${interpreter.command} stays`,
          );
          return this.client;
        case "start":
          this.log.info(`${reason}: starting the server`);
          await this.stop();
          this.failed = false;
          return this.start(false, interpreter);
      }
    });
  }

  /** Pushes the current settings to a running server (it re-reads them with workspace/configuration as well). */
  async notifySettingsChanged(): Promise<void> {
    const client = this.client;
    if (client?.isRunning()) {
      const settings = serverSettings((key) => vscode.workspace.getConfiguration(SECTION).get(key));
      await client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: settings } });
    }
  }

  dispose(): void {
    void this.serialize(() => this.stop());
    for (const d of this.disposables) {
      d.dispose();
    }
  }

  /** Stops the server and waits for it (used when the extension deactivates). */
  shutdown(): Promise<void> {
    return this.serialize(() => this.stop());
  }

  private serialize<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private setState(state: ServerState): void {
    this.state = state;
    this.stateChanged.fire(state);
  }

  private async start(explicit: boolean, configured?: Interpreter): Promise<LanguageClient | undefined> {
    if (this.client !== undefined) {
      return this.client;
    }
    if (!vscode.workspace.isTrusted) {
      this.setState({ kind: "restricted" });
      if (explicit) {
        void this.explainRestricted();
      }
      return undefined;
    }
    const interpreter = configured ?? (await this.interpreter());
    this.setState({ kind: "starting", interpreter: interpreter.command });
    const probe = await probeInterpreter(interpreter.command, { cwd: this.context.extensionPath });
    if (!probe.ok) {
      this.fail(interpreter.command, probeFailureMessage(interpreter, probe), true);
      return undefined;
    }
    const client = this.createClient(interpreter);
    this.log.info(`Starting ${interpreter.command} -m ${SERVER_MODULE} (interpreter from ${interpreter.source})`);
    try {
      await client.start();
    } catch (error) {
      await client.dispose().catch(() => undefined);
      this.fail(interpreter.command, `GEAK: the server did not start: ${String(error)}`, true);
      return undefined;
    }
    this.client = client;
    this.failed = false;
    this.setState({ kind: "running", interpreter: interpreter.command, status: this.lastStatus });
    return client;
  }

  private async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client !== undefined) {
      this.setState({ kind: "idle" });
      try {
        await client.dispose(5000);
      } catch (error) {
        this.log.warn(`Stopping the server: ${String(error)}`);
      }
    }
  }

  private fail(interpreter: string, message: string, notify: boolean): void {
    this.failed = true;
    this.log.error(message);
    this.setState({ kind: "failed", interpreter, message });
    if (notify) {
      void vscode.window.showErrorMessage(message, "Open Settings", "Show Log").then((choice) => {
        if (choice === "Open Settings") {
          void vscode.commands.executeCommand("workbench.action.openSettings", `${SECTION}.pythonPath`);
        } else if (choice === "Show Log") {
          this.log.show();
        }
      });
    }
  }

  private async explainRestricted(): Promise<void> {
    const choice = await vscode.window.showWarningMessage(
      "GEAK runs your kernels and their tests, so it only works in a trusted workspace.",
      "Manage Workspace Trust",
    );
    if (choice !== undefined) {
      await vscode.commands.executeCommand("workbench.trust.manage");
    }
  }

  private createClient(interpreter: Interpreter): LanguageClient {
    // The working directory is the extension's own folder: `python -m` puts it first on sys.path, and it holds no
    // Python modules that could shadow GEAK's (a workspace folder could).
    const server: Executable = {
      command: interpreter.command,
      args: ["-m", SERVER_MODULE],
      options: { cwd: this.context.extensionPath, env: process.env },
    };
    const restarts = new RestartPolicy(() => {
      // The client gave up on a crashing server: forget it, so that the next command starts a fresh one.
      if (this.client === client) {
        this.client = undefined;
        setTimeout(() => void client.dispose().catch(() => undefined), 0); // once the client has seen the close
        this.fail(interpreter.command, "GEAK: the server stopped; see its log.", false);
      }
    });
    const read = (scope?: vscode.Uri) => (key: string) => vscode.workspace.getConfiguration(SECTION, scope).get(key);
    const options: LanguageClientOptions = {
      documentSelector: [{ scheme: "file", language: "python" }],
      outputChannel: this.log,
      errorHandler: restarts,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: initializationOptions(serverSettings(read()), vscode.workspace.isTrusted),
      middleware: {
        workspace: {
          // The server registers for every configuration change; the extension sends it the `geak` section itself
          // (notifySettingsChanged) and restarts it when the interpreter changes, so the client's own notification
          // would only repeat that, or reach a server that is being replaced.
          didChangeConfiguration: () => Promise.resolve(),
          // Answer `{section: "geak"}` with the same mapping as initializationOptions.
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (answers instanceof ResponseError) {
              return answers;
            }
            return params.items.map((item, index): unknown =>
              item.section === SECTION
                ? serverSettings(read(item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined))
                : answers[index],
            );
          },
        },
      },
    };
    const client = new LanguageClient("geak", "GEAK", server, options);
    restarts.attach(client);
    this.lastStatus = null;
    client.onNotification(STATUS, (status: ServerStatus) => {
      this.lastStatus = status;
      if (this.client === client) {
        this.setState({ kind: "running", interpreter: interpreter.command, status });
      }
    });
    return client;
  }

  private async interpreter(): Promise<Interpreter> {
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    return resolveInterpreter({
      setting: vscode.workspace.getConfiguration(SECTION).get<string>("pythonPath"),
      pythonExtension: () => this.activePython(),
      workspaceFolder: folder,
      home: os.homedir(),
      platform: process.platform,
    });
  }

  /** The Python extension's active interpreter (restarting the server when the user picks another one). */
  private async activePython(): Promise<string | undefined> {
    if (vscode.extensions.getExtension(PVSC_EXTENSION_ID) === undefined) {
      return undefined;
    }
    try {
      const api = await PythonExtension.api();
      if (!this.watchingPythonExtension) {
        this.watchingPythonExtension = true;
        this.disposables.push(
          api.environments.onDidChangeActiveEnvironmentPath(() => {
            if (!vscode.workspace.getConfiguration(SECTION).get<string>("pythonPath")) {
              void this.refresh("The Python extension's interpreter changed");
            }
          }),
        );
      }
      const environment = await api.environments.resolveEnvironment(api.environments.getActiveEnvironmentPath());
      return environment?.executable.uri?.fsPath;
    } catch (error) {
      this.log.warn(`The Python extension did not name an interpreter: ${String(error)}`);
      return undefined;
    }
  }
}
