/** The test's workspace: a Triton file of the repository's own whose test fails, its settings and geak.yaml. */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";

export const FILE = "add.py";
const SOURCE = "tests/fixtures/add_native.py";
/** A git repository in the workspace, made by tests/git_repos.py, with a committed kernel whose test checks shapes. */
export const BASE_REPOSITORY = "kernels";
export const BASE_FILE = "scale.py";
/** What the committed kernel stores, and an edit that changes its outputs (its own test still passes). */
export const COMMITTED = "x * 2.0";
export const CHANGED = "x * 3.0";
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

  /** A file of the workspace (`FILE` by default), as on disk. */
  text(name = FILE): string {
    return readFileSync(path.join(this.folder, name), "utf8");
  }

  /** 1-based line of the first line of the file that contains `needle`. */
  lineOf(needle: string, name = FILE): number {
    const index = this.text(name).split("\n").findIndex((line) => line.includes(needle));
    if (index < 0) {
      throw new Error(`${name} has no line with "${needle}"`);
    }
    return index + 1;
  }

  /**
   * Makes `BASE_REPOSITORY`, a git repository inside the workspace (with the tests' own helper, tests/git_repos.py),
   * with `BASE_FILE` committed; returns the file's path relative to the workspace.
   */
  baseRepository(python: string, repository: string): string {
    const make = [
      "import sys",
      "from pathlib import Path",
      "sys.path.insert(0, sys.argv[1])",
      "from git_repos import new_repo, scale_file",
      "repo = new_repo(Path(sys.argv[2]))",
      `repo.write("${BASE_FILE}", scale_file("${COMMITTED}"))`,
      'repo.commit("the kernel as committed")',
    ].join("\n");
    execFileSync(python, ["-c", make, path.join(repository, "tests"), path.join(this.folder, BASE_REPOSITORY)]);
    return path.join(BASE_REPOSITORY, BASE_FILE);
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
