/**
 * The extension in a real VS Code (code-server, driven by Debian's Chromium through Playwright), as a user meets it
 * on a machine without a GPU: kernels run in Triton's CPU interpreter. One session, step by step; a step that fails
 * skips the rest (each depends on the ones before) and leaves a screenshot in the artifacts folder.
 *
 * Inputs (run.sh sets them): GEAK_E2E_CODE_SERVER (code-server's out/node/entry.js), GEAK_E2E_VSIX, GEAK_PYTHON
 * (default: the checkout's .venv), GEAK_E2E_ARTIFACTS (logs, screenshots), GEAK_E2E_CHROMIUM (/usr/bin/chromium).
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { type BrowserContext, chromium } from "playwright-core";
import { CodeServer } from "./codeServer.mts";
import { commandLine, languageServers } from "./processes.mts";
import { ScriptedModel, TEST_SECTION } from "./scriptedModel.mts";
import { type Problem, until, Workbench } from "./workbench.mts";
import { BASE_FILE, BROKEN, CHANGED, COMMITTED, CORRECT, FILE, pythonWithoutGeak, Workspace } from "./workspace.mts";

const REPOSITORY = path.resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.GEAK_PYTHON ?? path.join(REPOSITORY, ".venv", "bin", "python");
const SCRIPTED_GPU_PYTHON = path.join(import.meta.dirname, "scripted-gpu-python");
const CHROMIUM_FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const VIEWPORT = { width: 1280, height: 760 };
/** A step's time limit; what it waits for inside gets WAIT_MS, so that a wait that fails leaves its screenshot. */
const STEP_MS = 300_000;
const WAIT_MS = 150_000;
const EXTENSION = "geak.geak";
const SMALL_TEST = "torch.randn(3000,";
const LARGE_TEST = "torch.randn(300_000,";
const SEARCH_CPU = "search_time_s: 10\ntimeout_per_check_s: 120\n";

function required(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") {
    throw new Error(`${name} is not set (client_stub/e2e/run.sh sets it)`);
  }
  return value;
}

/** Settings of the throwaway VS Code profile: a quiet workbench, and the trust question asked at every start. */
const USER_SETTINGS = {
  "security.workspace.trust.startupPrompt": "always",
  "workbench.startupEditor": "none",
  "workbench.colorTheme": "Default Dark Modern",
  "workbench.secondarySideBar.defaultVisibility": "hidden",
  "workbench.tips.enabled": false,
  "chat.disableAIFeatures": true,
  "telemetry.telemetryLevel": "off",
  "update.mode": "none",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "remote.autoForwardPorts": false,
  "editor.minimap.enabled": false,
  "editor.stickyScroll.enabled": false,
  "window.commandCenter": false,
};

const artifacts = process.env.GEAK_E2E_ARTIFACTS ?? mkdtempSync(path.join(os.tmpdir(), "geak-e2e-"));
/** The session's workspace, VS Code and Chromium profiles, and logs: kept only when something failed. */
const home = path.join(artifacts, "session");
let codeServer: CodeServer;
let browser: BrowserContext;
let model: ScriptedModel;
let workspace: Workspace;
let ui: Workbench;
/** The kernel committed in a git repository of the workspace (its path in the workspace). */
let baseFile: string;
/** The first step that failed (skipping the rest). */
let broken: string | undefined = "the start of code-server and Chromium";
/** What `before` started, stopped by `after` in reverse order. */
const cleanups: (() => Promise<void>)[] = [];

/** One step of the session: skipped once a step before it failed, which leaves a screenshot. */
function step(name: string, run: () => Promise<void>): void {
  it(name, { timeout: STEP_MS }, async (t) => {
    if (broken !== undefined) {
      t.skip(`an earlier step failed: ${broken}`);
      return;
    }
    try {
      await run();
    } catch (error) {
      broken = name;
      const shot = await ui.screenshot(`failed-${name.replace(/\W+/g, "-")}`).catch(() => "none");
      t.diagnostic(`screenshot: ${shot}; code-server and GEAK logs: ${home}`);
      throw error;
    }
  });
}

function geakStatus(): Promise<string> {
  return ui.statusItem(EXTENSION, "geak.status").innerText();
}

/** The base comparison's status item (empty while it is hidden). */
async function baseStatus(): Promise<string> {
  const item = ui.statusItem(EXTENSION, "geak.base");
  return (await item.count()) > 0 && (await item.isVisible()) ? item.innerText() : "";
}

/** Replace every `find` in a file (`FILE` by default) with `replacement` (VS Code's Replace All), save, and wait
 * for the disk. */
async function replaceAndSave(find: string, replacement: string, what: string, file = FILE): Promise<void> {
  await ui.openFile(path.basename(file));
  await ui.page.keyboard.press("Control+H");
  await ui.page.locator('.find-widget textarea[aria-label="Find"]').fill(find);
  const replace = ui.page.locator('.find-widget textarea[aria-label="Replace"]');
  await replace.fill(replacement);
  await replace.press("Control+Alt+Enter");
  await ui.page.locator('.find-widget [aria-label^="Close"]').click();
  await ui.page.keyboard.press("Control+S");
  await until(what, () => (workspace.text(file).includes(replacement) && !workspace.text(file).includes(find) ? true : undefined));
}

function errors(problems: Problem[]): Problem[] {
  return problems.filter((p) => p.severity === "Error" && p.source === "geak");
}

/** The failing test's diagnostics: at its `def` and at the assertion that failed (the deepest frame in the file). */
async function failingTestDiagnostics(what: string): Promise<Problem[]> {
  return until(what, async () => {
    const found = errors(await ui.problems());
    const lines = new Set(found.map((p) => p.line));
    const expected = [workspace.lineOf("def test_add"), workspace.lineOf("torch.testing.assert_close")];
    return found.length === 2 && expected.every((line) => lines.has(line)) ? found : undefined;
  });
}

/** Kills the GEAK language server (SIGKILL, a crash) and returns its process id. */
function killServer(): number {
  const pids = languageServers(codeServer.pid);
  assert.equal(pids.length, 1, `language servers: ${pids.join(", ")}`);
  const [pid] = pids as [number];
  process.kill(pid, "SIGKILL");
  return pid;
}

/** Waits until exactly one language server runs, the one `argv` describes. */
function oneServer(what: string, matches: (argv: string[]) => boolean): Promise<number> {
  return until(`one language server: ${what}`, () => {
    const pids = languageServers(codeServer.pid);
    const [pid] = pids;
    return pids.length === 1 && matches(commandLine(pid)) ? pid : undefined;
  });
}

const geakServer = (argv: string[]): boolean => argv[0] === PYTHON && argv.includes("geak.server");

describe("GEAK in VS Code (code-server, Chromium; Triton's CPU interpreter)", () => {
  before(async () => {
    workspace = new Workspace(path.join(home, "workspace"), REPOSITORY);
    workspace.settings({ "geak.pythonPath": pythonWithoutGeak(path.join(home, "python-without-geak")), "geak.device": "interpreter" });
    workspace.config(SEARCH_CPU);
    baseFile = workspace.baseRepository(PYTHON, REPOSITORY); // before VS Code starts: Quick Open finds it at once
    model = await ScriptedModel.start(workspace.file);
    cleanups.push(() => model.stop());
    codeServer = await CodeServer.start({
      entry: required("GEAK_E2E_CODE_SERVER"),
      vsix: required("GEAK_E2E_VSIX"),
      home,
      workspace: workspace.folder,
      userSettings: USER_SETTINGS,
    });
    cleanups.push(async () => {
      const left = languageServers(codeServer.pid);
      await codeServer.stop();
      for (const pid of left) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // it ended with code-server
        }
      }
    });
    mkdirSync(path.join(home, "chromium"));
    browser = await chromium.launchPersistentContext(path.join(home, "chromium"), {
      executablePath: process.env.GEAK_E2E_CHROMIUM ?? "/usr/bin/chromium",
      headless: true,
      args: CHROMIUM_FLAGS,
      viewport: VIEWPORT,
    });
    cleanups.push(() => browser.close());
    const page = browser.pages()[0] ?? (await browser.newPage());
    page.setDefaultTimeout(60_000);
    ui = new Workbench(page, path.join(artifacts, "screenshots"));
    await page.goto(codeServer.folderUrl(workspace.folder));
    broken = undefined;
  });

  after(async () => {
    for (const cleanup of cleanups.reverse()) {
      await cleanup();
    }
    if (broken === undefined) {
      rmSync(home, { recursive: true, force: true });
    }
  });

  step("asks whether to trust the workspace, and runs nothing in restricted mode", async () => {
    const dialog = ui.page.locator(".monaco-dialog-box", { hasText: "Do you trust the authors of the files in this folder?" });
    await dialog.getByRole("button", { name: "No, I don't trust the authors" }).click();
    await ui.openFile(FILE);
    await until("the restricted status item", async () =>
      /Restricted mode/.test((await ui.statusItem(EXTENSION, "geak.status").getAttribute("aria-label")) ?? "") ? true : undefined,
    );
    assert.deepEqual(languageServers(codeServer.pid), [], "a language server runs in restricted mode");
  });

  step("once trusted, says clearly that the configured Python has no GEAK", async () => {
    await ui.command("Workspaces: Manage Workspace Trust");
    await ui.page.getByRole("button", { name: "Trust", exact: true }).click();
    await ui.page.locator('[aria-label^="Close Modal Editor"]').click();
    const toast = ui.toast(/GEAK's language server \(python -m geak\.server\) is not installed in .*python-without-geak/);
    await toast.waitFor({ timeout: WAIT_MS });
    await toast.getByRole("button", { name: "Open Settings" }).waitFor();
    await toast.getByRole("button", { name: "Show Log" }).waitFor();
    await ui.screenshot("missing-geak");
    assert.match((await ui.statusItem(EXTENSION, "geak.status").getAttribute("aria-label")) ?? "", /is not installed in/);
    await until("the extension done with the trust grant", () => (codeServer.extensionLog().includes("Workspace trusted: ") ? true : undefined));
    assert.equal(await ui.toast(/is not installed in/).count(), 1, "the same failure is told once");
  });

  step("starts the server on the interpreter the workspace settings name", async () => {
    workspace.settings({ "geak.pythonPath": PYTHON, "geak.device": "interpreter" });
    await until("GEAK: CPU interpreter in the status bar", async () => ((await geakStatus()).includes("GEAK: CPU interpreter") ? true : undefined));
    await oneServer(`${PYTHON} -m geak.server`, geakServer);
    await ui.command("Notifications: Clear All Notifications"); // the error above stays until dismissed
  });

  step("shows the failing test's diagnostics at its lines after the file is opened", async () => {
    const found = await failingTestDiagnostics("the failing test's diagnostics");
    assert.ok(found.some((p) => p.message.startsWith("test_add failed: AssertionError: Tensor-likes are not close!")));
    await ui.goTo(workspace.lineOf("torch.testing.assert_close"));
    await ui.screenshot("diagnostics");
  });

  step("moves them with the test after an edit and a save", async () => {
    const before = workspace.lineOf("def test_add");
    await ui.goTo(workspace.lineOf("import triton.language") + 1);
    await ui.page.keyboard.press("Enter");
    await ui.page.keyboard.press("Enter");
    await ui.page.keyboard.press("Control+S");
    await until("the saved edit on disk", () => (workspace.lineOf("def test_add") === before + 2 ? true : undefined));
    await failingTestDiagnostics("the diagnostics two lines down");
  });

  step("hovers a kernel with the verdict of its check", async () => {
    await ui.goTo(workspace.lineOf("def add_kernel"), "def add_".length);
    const hover = await ui.hover();
    await until("GEAK's hover", async () => ((await hover.innerText()).includes("GEAK · add_kernel") ? true : undefined));
    assert.match(await hover.innerText(), /❌ fails at the exec stage on cpu \(Triton interpreter\) \(\d+ s ago\): test_add failed/);
    await ui.screenshot("hover");
    await ui.page.keyboard.press("Escape");
  });

  step("offers both Optimize actions under Ctrl+.", async () => {
    const titles = await ui.codeActions();
    assert.ok(titles.includes("GEAK: Optimize kernel `add_kernel`"), titles.join(" | "));
    assert.ok(titles.includes("GEAK: Optimize all kernels in file"), titles.join(" | "));
    await ui.screenshot("code-actions");
    await ui.page.keyboard.press("Escape");
  });

  step("refuses to optimize a kernel whose test fails, naming the file", async () => {
    await ui.chooseCodeAction("GEAK: Optimize kernel `add_kernel`");
    const toast = ui.toast(/GEAK: nothing to optimize: .*add\.py does not pass its own test/);
    await toast.waitFor({ timeout: WAIT_MS });
    const text = await toast.innerText();
    assert.ok(text.includes(workspace.file) && !text.includes("geak-optimize-"), text);
    assert.equal(await toast.getByRole("button", { name: "Show Candidates" }).count(), 0);
    await ui.command("Notifications: Clear All Notifications");
  });

  step("shows the server's log in the output channel from the status item", async () => {
    await ui.statusItem(EXTENSION, "geak.status").click();
    const output = ui.page.locator(".panel .monaco-editor .view-lines").first();
    await until("the GEAK output channel", async () =>
      (await ui.page.locator('.panel select[aria-label="Switch Output"]').first().inputValue()) === "GEAK" ? true : undefined,
    );
    await until("the evaluator's start in the log", async () =>
      /evaluator ready: interpreter on cpu/.test((await output.innerText()).replaceAll("\u00a0", " ")) ? true : undefined,
    );
    assert.match(codeServer.extensionLog(), new RegExp(`Starting ${PYTHON} -m geak\\.server \\(interpreter from geak\\.pythonPath\\)`));
  });

  step("restarts a crashed server, and the diagnostics come back", async () => {
    const crashed = killServer();
    await until("the diagnostics cleared with the crash", async () => (errors(await ui.problems()).length === 0 ? true : undefined));
    const restarted = await oneServer(`${PYTHON} -m geak.server`, geakServer);
    assert.notEqual(restarted, crashed);
    await failingTestDiagnostics("the diagnostics after the restart");
    assert.match(codeServer.extensionLog(), /Server process exited with signal SIGKILL/);
  });

  step("clears them once the kernel is fixed and saved", async () => {
    await replaceAndSave(BROKEN, CORRECT, "the fix on disk");
    await until("a passing check (its CPU caveat, no error)", async () => {
      const problems = (await ui.problems()).filter((p) => p.source === "geak");
      return errors(problems).length === 0 && problems.some((p) => p.message.includes("Triton's CPU interpreter")) ? true : undefined;
    });
  });

  step("warns in the Problems view when a saved edit changes the outputs against HEAD", async () => {
    await ui.openFile(BASE_FILE);
    await until("the file the same as HEAD", async () => ((await baseStatus()).includes(`${BASE_FILE} vs HEAD: same`) ? true : undefined));
    await replaceAndSave(COMMITTED, CHANGED, "the edit on disk", baseFile); // its own test checks only the output's shape
    const warning = await until("the base's warning", async () =>
      (await ui.problems()).find((p) => p.source === "geak" && p.message.startsWith("outputs differ from HEAD's in test_scale")),
    );
    assert.equal(warning.severity, "Warning");
    assert.equal(warning.line, workspace.lineOf("def test_scale", baseFile));
    assert.match(warning.message, /elements differ/);
    assert.equal(errors(await ui.problems()).length, 0, "the file's own test passes");
    await until("the comparison in the status bar", async () =>
      (await baseStatus()).includes(`${BASE_FILE} vs HEAD: outputs differ`) ? true : undefined,
    );
    await ui.goTo(workspace.lineOf("def scale(", baseFile)); // the picture: the edited line and the test, both in view
    await ui.screenshot("base-differs");
    await ui.openFile(FILE); // the steps below work in it
  });

  step("runs Optimize kernel to its end, with progress", async () => {
    await ui.goTo(workspace.lineOf("def add_kernel"), "def add_".length);
    await ui.chooseCodeAction("GEAK: Optimize kernel `add_kernel`");
    const progress = ui.toast(/GEAK: optimizing add_kernel \(add\.py\)/);
    await progress.getByRole("button", { name: "Cancel" }).waitFor();
    // On a CPU the search screens launch configurations for correctness only: it says so, and proposes nothing.
    const done = ui.toast(/GEAK: speed cannot be measured without a GPU.*launch configuration\(s\) of \d+ knob\(s\) were screened for correctness only/);
    // The test's 3000 elements take the whole run about a second: its progress may be gone before it is read.
    const seen = await until("a progress report, or the end", async () => {
      if (/search|tuning|screening/.test(await progress.innerText().catch(() => ""))) {
        return "progress";
      }
      return (await done.count()) > 0 ? "the end" : undefined;
    });
    const reported = seen === "progress";
    if (reported) {
      await ui.screenshot("optimize-progress");
    }
    await done.waitFor({ timeout: WAIT_MS });
    assert.ok(reported || /screening \d+ configuration\(s\)/.test(codeServer.extensionLog()), "no progress was reported");
    await ui.command("Notifications: Clear All Notifications");
    assert.equal(await done.getByRole("button", { name: "Show Candidates" }).count(), 0);
  });

  step("cancels a second run", async () => {
    // A test of 300,000 elements: the interpreter takes its screening tens of seconds, time enough to cancel it.
    await replaceAndSave(SMALL_TEST, LARGE_TEST, "the larger test on disk");
    const reloads = codeServer.extensionLog().split("geak.yaml changed").length;
    workspace.config("search_time_s: 400\ntimeout_per_check_s: 120\n");
    await until("the configuration reloaded", () => (codeServer.extensionLog().split("geak.yaml changed").length > reloads ? true : undefined));
    await ui.goTo(workspace.lineOf("def add_kernel"), "def add_".length);
    await ui.chooseCodeAction("GEAK: Optimize kernel `add_kernel`");
    const progress = ui.toast(/GEAK: optimizing add_kernel \(add\.py\)/);
    await until("configurations being screened", async () => (/screening/.test(await progress.innerText().catch(() => "")) ? true : undefined));
    await until("the status item busy", async () => (/optimizing kernel add_kernel/.test(await geakStatus()) ? true : undefined));
    await progress.getByRole("button", { name: "Cancel" }).click();
    await ui.page.locator(".statusbar-item", { hasText: "GEAK: optimization stopped" }).waitFor();
    await until("the server idle", async () => (/optimizing/.test(await geakStatus()) ? undefined : true));
    assert.equal(await ui.toast(/speed cannot be measured/).count(), 0, "the cancelled run ran to its end");
    await replaceAndSave(LARGE_TEST, SMALL_TEST, "the test's own size back on disk");
  });

  step("proposes a faster kernel in the Refactor Preview, and applies it (scripted GPU timing and model)", async () => {
    const tests = workspace.text().slice(workspace.text().indexOf(TEST_SECTION));
    workspace.config("search: false\ntimeout_per_check_s: 120\n");
    workspace.settings({
      "geak.pythonPath": SCRIPTED_GPU_PYTHON,
      "geak.device": "interpreter",
      "geak.model": "scripted",
      "geak.baseUrl": model.baseUrl,
      "geak.iterations": 1,
    });
    await until("the server on the scripted GPU", async () => ((await geakStatus()).includes("GEAK: CUDA") ? true : undefined));
    await oneServer("tests/lsp_harness.py --scripted-gpu", (argv) => argv.some((arg) => arg.endsWith("lsp_harness.py")));
    await ui.goTo(workspace.lineOf("def add_kernel"), "def add_".length);
    await ui.chooseCodeAction("GEAK: Optimize kernel `add_kernel`");
    // The Refactor Preview's rows: the file, then each change, each with its checkbox.
    const preview = ui.page.locator(".monaco-list-row:has(.edit-checkbox)");
    await preview.first().waitFor({ timeout: WAIT_MS });
    const boxes = preview.locator(".edit-checkbox");
    const ticked = await boxes.evaluateAll((all) => all.map((box) => box.getAttribute("aria-checked")));
    assert.ok(ticked.length >= 2 && ticked.every((state) => state === "false"), `VS Code ticks edits that need confirmation: ${ticked.join()}`);
    assert.ok((await preview.allInnerTexts()).some((row) => row.includes("BLOCK=1024")));
    await boxes.first().click(); // the file: all of its changes
    await preview.filter({ hasText: "BLOCK=1024" }).click(); // its diff, for the review
    await ui.page.locator(".monaco-diff-editor").first().waitFor();
    await ui.screenshot("refactor-preview");
    await ui.page.getByRole("button", { name: "Apply", exact: true }).click();
    await ui.toast(/GEAK: 2\.00x faster \[1\.96, 2\.04\] on scripted GPU \(add_kernel\)/).waitFor();
    await ui.openFile(FILE);
    await ui.page.keyboard.press("Control+S");
    await until("the applied proposal on disk", () => (workspace.text().includes("BLOCK=1024") ? true : undefined));
    const text = workspace.text();
    assert.ok(text.includes("# latency: 0.5\ndef add("), "the proposal's marker");
    assert.equal(text.slice(text.indexOf(TEST_SECTION)), tests, "the test section is never touched");
    assert.ok(model.requests > 0);
  });
});
