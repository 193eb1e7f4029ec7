/** The test's workspace: a Triton file of the repository's own whose test fails, its settings and geak.yaml. */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";

export const FILE = "add.py";
const SOURCE = "tests/fixtures/add_native.py";
/** The bug: the kernel subtracts. */
export const CORRECT = "x + y, mask=mask";
export const BROKEN = "x - y, mask=mask";

export class Workspace {
  readonly folder: string;
  readonly file: string;

  constructor(folder: string, repository: string) {
    this.folder = folder;
    mkdirSync(path.join(folder, ".vscode"), { recursive: true });
    this.file = path.join(folder, FILE);
    const source = readFileSync(path.join(repository, SOURCE), "utf8");
    if (!source.includes(CORRECT)) {
      throw new Error(`${SOURCE} no longer has "${CORRECT}": update the e2e test`);
    }
    writeFileSync(this.file, source.replace(CORRECT, BROKEN));
  }

  text(): string {
    return readFileSync(this.file, "utf8");
  }

  /** 1-based line of the first line of the file that contains `needle`. */
  lineOf(needle: string): number {
    const index = this.text().split("\n").findIndex((line) => line.includes(needle));
    if (index < 0) {
      throw new Error(`${FILE} has no line with "${needle}"`);
    }
    return index + 1;
  }

  /** The workspace's own settings (.vscode/settings.json): VS Code applies a change at once. */
  settings(values: Record<string, unknown>): void {
    writeFileSync(path.join(this.folder, ".vscode", "settings.json"), JSON.stringify(values, null, 2));
  }

  /** GEAK's configuration file (the server reloads it when it changes). */
  config(yaml: string): void {
    writeFileSync(path.join(this.folder, "geak.yaml"), yaml);
  }
}

/** A Python without GEAK (a bare virtual environment): the interpreter a new user may have configured. */
export function pythonWithoutGeak(folder: string): string {
  execFileSync("python3", ["-m", "venv", "--without-pip", folder]);
  return path.join(folder, "bin", "python");
}
