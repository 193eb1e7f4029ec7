/**
 * Which Python starts the server: `geak.pythonPath`, else the Python extension's active interpreter, else `python3`
 * (`python` on Windows) from PATH. Also the probe that tells "interpreter missing" from "GEAK not installed" before
 * the language client starts, so the user gets one clear message instead of a crash loop.
 */
import { execFile } from "node:child_process";
import * as path from "node:path";

export type InterpreterSource = "geak.pythonPath" | "Python extension" | "PATH";

export interface Interpreter {
  command: string;
  source: InterpreterSource;
}

export interface InterpreterInputs {
  /** The `geak.pythonPath` setting as written. */
  setting: string | undefined;
  /** The Python extension's active interpreter, when that extension is installed and has one. */
  pythonExtension?: () => Promise<string | undefined>;
  workspaceFolder?: string;
  home: string;
  platform: NodeJS.Platform;
}

/** `~`, `${userHome}` and `${workspaceFolder}` expanded; a relative path with a folder is taken from the workspace. */
export function expandPath(setting: string, workspaceFolder: string | undefined, home: string): string {
  let expanded = setting.trim().replace(/\$\{userHome\}/g, home);
  if (workspaceFolder !== undefined) {
    expanded = expanded.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
  }
  if (expanded === "~" || expanded.startsWith("~/")) {
    expanded = path.join(home, expanded.slice(1));
  }
  const hasFolder = expanded.includes("/") || expanded.includes("\\");
  if (hasFolder && !path.isAbsolute(expanded) && workspaceFolder !== undefined) {
    expanded = path.join(workspaceFolder, expanded);
  }
  return expanded;
}

export async function resolveInterpreter(inputs: InterpreterInputs): Promise<Interpreter> {
  if (inputs.setting !== undefined && inputs.setting.trim() !== "") {
    return { command: expandPath(inputs.setting, inputs.workspaceFolder, inputs.home), source: "geak.pythonPath" };
  }
  const active = await inputs.pythonExtension?.();
  if (active !== undefined && active !== "") {
    return { command: active, source: "Python extension" };
  }
  return { command: inputs.platform === "win32" ? "python" : "python3", source: "PATH" };
}

export const SERVER_MODULE = "geak.server";

/** Exit status of the probe when Python runs but `python -m geak.server` has nothing to run. */
const NOT_INSTALLED = 3;
/** Looks up the module `-m` runs (an older GEAK has the package, without the language server). */
const PROBE = [
  "import importlib.util, sys",
  "try:",
  `    found = importlib.util.find_spec("${SERVER_MODULE}.__main__") is not None`,
  "except ModuleNotFoundError:",
  "    found = False",
  `sys.exit(0 if found else ${NOT_INSTALLED})`,
].join("\n");

export type ProbeResult =
  | { ok: true }
  | { ok: false; reason: "missing" | "not-installed" | "failed"; detail: string };

export interface ProbeOptions {
  cwd: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
}

/** Runs the interpreter once to see that it exists and has GEAK's language server (without starting it). */
export function probeInterpreter(command: string, options: ProbeOptions): Promise<ProbeResult> {
  return new Promise((resolve) => {
    execFile(
      command,
      ["-c", PROBE],
      { cwd: options.cwd, env: options.env, timeout: options.timeoutMs ?? 30_000, windowsHide: true },
      (error, _stdout, stderr) => {
        if (error === null) {
          resolve({ ok: true });
        } else if ((error as NodeJS.ErrnoException).code === "ENOENT" || (error as NodeJS.ErrnoException).code === "EACCES") {
          resolve({ ok: false, reason: "missing", detail: error.message });
        } else if (error.code === NOT_INSTALLED) {
          resolve({ ok: false, reason: "not-installed", detail: "" });
        } else {
          const lastLine = stderr.trim().split(/\r?\n/).pop() ?? "";
          resolve({ ok: false, reason: "failed", detail: lastLine || error.message });
        }
      },
    );
  });
}

/** The one-line message shown when the server cannot start with this interpreter. */
export function probeFailureMessage(interpreter: Interpreter, result: ProbeResult & { ok: false }): string {
  const where = `${interpreter.command} (from ${interpreter.source})`;
  switch (result.reason) {
    case "missing":
      return `GEAK: cannot run the Python interpreter ${where}. Set geak.pythonPath to a Python with GEAK installed.`;
    case "not-installed":
      return `GEAK's language server (python -m ${SERVER_MODULE}) is not installed in ${where}: install GEAK there (pip install -e <GEAK checkout>) or set geak.pythonPath to a Python that has it.`;
    case "failed":
      return `GEAK: ${where} failed to look up ${SERVER_MODULE}: ${result.detail}`;
  }
}
