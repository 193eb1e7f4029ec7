import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, it } from "node:test";
import { expandPath, probeFailureMessage, probeInterpreter, resolveInterpreter } from "../interpreter";

const HOME = "/home/ada";
const FOLDER = "/work/project";

function hasPython3(): boolean {
  try {
    execFileSync("python3", ["-c", "pass"]);
    return true;
  } catch {
    return false;
  }
}
const noPython = hasPython3() ? false : "python3 is not on PATH";

describe("resolveInterpreter", () => {
  const base = { home: HOME, workspaceFolder: FOLDER, platform: "linux" as NodeJS.Platform };

  it("takes geak.pythonPath first, without asking the Python extension", async () => {
    let asked = false;
    const interpreter = await resolveInterpreter({
      ...base,
      setting: "/opt/geak/bin/python",
      pythonExtension: () => {
        asked = true;
        return Promise.resolve("/usr/bin/python3.12");
      },
    });
    assert.deepEqual(interpreter, { command: "/opt/geak/bin/python", source: "geak.pythonPath" });
    assert.equal(asked, false);
  });

  it("then the Python extension's active interpreter", async () => {
    const interpreter = await resolveInterpreter({ ...base, setting: "  ", pythonExtension: () => Promise.resolve("/venv/bin/python") });
    assert.deepEqual(interpreter, { command: "/venv/bin/python", source: "Python extension" });
  });

  it("then python3 from PATH (python on Windows)", async () => {
    assert.deepEqual(await resolveInterpreter({ ...base, setting: "", pythonExtension: () => Promise.resolve(undefined) }), {
      command: "python3",
      source: "PATH",
    });
    assert.deepEqual(await resolveInterpreter({ ...base, setting: undefined, platform: "win32" }), {
      command: "python",
      source: "PATH",
    });
  });
});

describe("expandPath", () => {
  it("expands ~, ${userHome} and ${workspaceFolder}", () => {
    assert.equal(expandPath("~/venvs/geak/bin/python", FOLDER, HOME), "/home/ada/venvs/geak/bin/python");
    assert.equal(expandPath("${userHome}/py/bin/python", FOLDER, HOME), "/home/ada/py/bin/python");
    assert.equal(expandPath("${workspaceFolder}/.venv/bin/python", FOLDER, HOME), "/work/project/.venv/bin/python");
  });

  it("takes a relative path with a folder from the workspace, and leaves a bare command to PATH", () => {
    assert.equal(expandPath(".venv/bin/python", FOLDER, HOME), "/work/project/.venv/bin/python");
    assert.equal(expandPath("python3.12", FOLDER, HOME), "python3.12");
  });
});

describe("probeInterpreter", () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), "geak-probe-"));
  const env = (extra: Record<string, string>) => ({ PATH: process.env.PATH ?? "", ...extra });

  it("tells a missing interpreter", async () => {
    const result = await probeInterpreter(path.join(tmp, "no-such-python"), { cwd: tmp, env: env({}) });
    assert.ok(!result.ok);
    assert.equal(result.reason, "missing");
  });

  it("tells an interpreter without GEAK", { skip: noPython }, async () => {
    const empty = mkdtempSync(path.join(tmp, "empty-"));
    const result = await probeInterpreter("python3", {
      cwd: empty,
      env: env({ PYTHONPATH: empty, PYTHONNOUSERSITE: "1" }),
    });
    // A python3 that has GEAK installed system-wide would pass; the CI's system python3 has not.
    assert.deepEqual(result, { ok: false, reason: "not-installed", detail: "" });
  });

  const fakeGeak = (withServer: boolean): string => {
    const site = mkdtempSync(path.join(tmp, "site-"));
    mkdirSync(path.join(site, "geak", "server"), { recursive: true });
    writeFileSync(path.join(site, "geak", "server", "__init__.py"), "");
    if (withServer) {
      writeFileSync(path.join(site, "geak", "server", "__main__.py"), "raise SystemExit('started')\n");
    }
    return site;
  };

  it("finds python -m geak.server without starting it", { skip: noPython }, async () => {
    const result = await probeInterpreter("python3", { cwd: tmp, env: env({ PYTHONPATH: fakeGeak(true) }) });
    assert.deepEqual(result, { ok: true });
  });

  it("tells a GEAK without the language server", { skip: noPython }, async () => {
    const result = await probeInterpreter("python3", { cwd: tmp, env: env({ PYTHONPATH: fakeGeak(false) }) });
    assert.deepEqual(result, { ok: false, reason: "not-installed", detail: "" });
  });

  it("reports the last line of a failing interpreter's stderr", { skip: process.platform === "win32" }, async () => {
    const broken = path.join(tmp, "broken-python");
    writeFileSync(broken, "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho 'ImportError: libpython3.so' >&2\nexit 1\n");
    chmodSync(broken, 0o755);
    const result = await probeInterpreter(broken, { cwd: tmp, env: env({}) });
    assert.deepEqual(result, { ok: false, reason: "failed", detail: "ImportError: libpython3.so" });
  });
});

describe("probeFailureMessage", () => {
  const interpreter = { command: "/venv/bin/python", source: "Python extension" as const };

  it("names the interpreter, where it came from and what to do", () => {
    const missing = probeFailureMessage(interpreter, { ok: false, reason: "missing", detail: "spawn ENOENT" });
    assert.match(missing, /\/venv\/bin\/python \(from Python extension\)/);
    assert.match(missing, /geak\.pythonPath/);
    const notInstalled = probeFailureMessage(interpreter, { ok: false, reason: "not-installed", detail: "" });
    assert.match(notInstalled, /not installed/);
    assert.match(notInstalled, /pip install/);
    const failed = probeFailureMessage(interpreter, { ok: false, reason: "failed", detail: "ImportError: x" });
    assert.match(failed, /ImportError: x$/);
  });

  it("is one line", () => {
    for (const reason of ["missing", "not-installed", "failed"] as const) {
      assert.doesNotMatch(probeFailureMessage(interpreter, { ok: false, reason, detail: "d" }), /\n/);
    }
  });
});
