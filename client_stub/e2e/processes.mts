/** The processes under a given one, from Linux's /proc: to find, count and kill the language servers VS Code started. */
import { readdirSync, readFileSync } from "node:fs";

function children(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((task) =>
      readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").split(" ").filter(Boolean).map(Number),
    );
  } catch {
    return []; // it has exited
  }
}

export function commandLine(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  } catch {
    return [];
  }
}

export function descendants(pid: number): number[] {
  const found: number[] = [];
  const todo = [pid];
  for (let next = todo.pop(); next !== undefined; next = todo.pop()) {
    for (const child of children(next)) {
      found.push(child);
      todo.push(child);
    }
  }
  return found;
}

/** GEAK language servers under `root`: `python -m geak.server`, or the test harness with scripted GPU timing. */
export function languageServers(root: number): number[] {
  return descendants(root).filter((pid) => {
    const argv = commandLine(pid);
    const python = argv[0]?.split("/").pop()?.startsWith("python") ?? false;
    return python && (argv.includes("geak.server") || argv.some((arg) => arg.endsWith("lsp_harness.py")));
  });
}
