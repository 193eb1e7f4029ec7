/** code-server (VS Code for the browser) with the packaged extension installed, in a throwaway profile. */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";

export interface CodeServerOptions {
  /** code-server's `out/node/entry.js`, run by this Node (code-server needs Node 24). */
  entry: string;
  vsix: string;
  /** A fresh folder for the profile, extensions, caches and logs. */
  home: string;
  workspace: string;
  userSettings: Record<string, unknown>;
  /** Added to the environment the extension host (and so the language server) inherits. */
  env?: Record<string, string>;
}

const LISTENING = /HTTP server listening on (http:\/\/127\.0\.0\.1:\d+)\//;
const START_TIMEOUT_MS = 120_000;

export class CodeServer {
  readonly child: ChildProcess;
  readonly url: string;
  private readonly dataDir: string;

  private constructor(child: ChildProcess, url: string, dataDir: string) {
    this.child = child;
    this.url = url;
    this.dataDir = dataDir;
  }

  static async start(options: CodeServerOptions): Promise<CodeServer> {
    const { home } = options;
    const dataDir = path.join(home, "data");
    const extensionsDir = path.join(home, "extensions");
    mkdirSync(path.join(dataDir, "User"), { recursive: true });
    writeFileSync(path.join(dataDir, "User", "settings.json"), JSON.stringify(options.userSettings, null, 2));
    writeFileSync(path.join(home, "config.yaml"), "auth: none\ncert: false\n");
    const env = {
      ...process.env,
      XDG_CONFIG_HOME: path.join(home, "config"),
      XDG_DATA_HOME: path.join(home, "share"),
      XDG_CACHE_HOME: path.join(home, "cache"),
      ...options.env,
    };
    const common = ["--user-data-dir", dataDir, "--extensions-dir", extensionsDir, "--config", path.join(home, "config.yaml")];
    await promisify(execFile)(process.execPath, [options.entry, ...common, "--install-extension", options.vsix], {
      env,
      timeout: START_TIMEOUT_MS,
    });
    const args = [
      options.entry,
      ...common,
      "--bind-addr",
      "127.0.0.1:0",
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-getting-started-override",
      options.workspace,
    ];
    const child = spawn(process.execPath, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    const log = createWriteStream(path.join(home, "code-server.log"));
    child.stdout.pipe(log);
    child.stderr.pipe(log);
    const url = await new Promise<string>((resolve, reject) => {
      let seen = "";
      const timer = setTimeout(() => {
        reject(new Error(`code-server did not listen within ${START_TIMEOUT_MS / 1000} s:\n${seen}`));
      }, START_TIMEOUT_MS);
      const read = (chunk: Buffer): void => {
        seen += chunk.toString();
        const match = LISTENING.exec(seen);
        if (match?.[1] !== undefined) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      };
      child.stdout.on("data", read);
      child.stderr.on("data", read);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`code-server exited (${String(code)}) before listening:\n${seen}`));
      });
    });
    return new CodeServer(child, url, dataDir);
  }

  get pid(): number {
    if (this.child.pid === undefined) {
      throw new Error("code-server has no process id");
    }
    return this.child.pid;
  }

  folderUrl(folder: string): string {
    return `${this.url}/?folder=${encodeURIComponent(folder)}`;
  }

  /** The extension's log (its output channel "GEAK"), as written so far; "" before the extension started. */
  extensionLog(): string {
    const logs = path.join(this.dataDir, "logs");
    const files = existsSync(logs) ? findFiles(logs, "GEAK.log") : [];
    const newest = files.sort((a, b) => statSync(a).mtimeMs - statSync(b).mtimeMs).pop();
    return newest === undefined ? "" : readFileSync(newest, "utf8");
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) {
      return;
    }
    const exited = new Promise((resolve) => {
      this.child.once("exit", resolve);
    });
    this.child.kill("SIGTERM");
    await exited;
  }
}

function findFiles(folder: string, name: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(folder, entry.name);
    return entry.isDirectory() ? findFiles(full, name) : entry.name === name ? [full] : [];
  });
}
