/**
 * The real GEAK language server (`python -m geak.server`), driven the way the extension drives it: the same
 * initializationOptions and configuration answers (settings.ts), the same custom requests (protocol.ts) with a
 * client-owned work-done token, cancellation by $/cancelRequest. Checks run on Triton's CPU interpreter.
 *
 * The Python comes from $GEAK_PYTHON, else the checkout's `.venv` (`make setup`); without one that has
 * geak.server, the suite is skipped (and says so).
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, describe, it } from "node:test";
import {
  CancellationTokenSource,
  CodeActionRequest,
  type CodeAction,
  type Command,
  ConfigurationRequest,
  createProtocolConnection,
  DidOpenTextDocumentNotification,
  ExitNotification,
  InitializedNotification,
  InitializeRequest,
  LSPErrorCodes,
  type ProtocolConnection,
  ResponseError,
  ShutdownRequest,
  WorkDoneProgress,
  type WorkDoneProgressBegin,
  type WorkDoneProgressEnd,
  type WorkDoneProgressReport,
  WorkDoneProgressCreateRequest,
} from "vscode-languageserver-protocol/node";
import { candidateRows } from "../candidates";
import { probeInterpreter, SERVER_MODULE } from "../interpreter";
import { ProgressRelay } from "../progress";
import {
  CANDIDATES,
  type Candidate,
  CHECK,
  type CheckResult,
  OPTIMIZE,
  type OptimizeParams,
  type OptimizeResult,
  type ServerStatus,
  STATUS,
} from "../protocol";
import { DEFAULTS, initializationOptions, SECTION, type ServerSettings } from "../settings";

const CLIENT_DIR = path.join(__dirname, "..", "..");
const PYTHON = process.env.GEAK_PYTHON ?? path.join(CLIENT_DIR, "..", ".venv", "bin", "python");
const SETTINGS: ServerSettings = { ...DEFAULTS, device: "interpreter", timeOnSave: false, iterations: 1 };

const TRITON_FILE = `import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 32),)](x, y, out, n, BLOCK=32, num_warps=1)
    return out


def test_add():
    torch.manual_seed(0)
    x = torch.randn(300, device="cuda")
    y = torch.randn(300, device="cuda")
    out = add(x, y)
    torch.testing.assert_close(out, x + y)
    return out
`;

type Progress = WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;

/** Why the suite cannot run here, or false. */
async function unavailable(): Promise<string | false> {
  if (!existsSync(PYTHON) && process.env.GEAK_PYTHON === undefined) {
    return `no GEAK environment at ${PYTHON} (run make setup, or set GEAK_PYTHON)`;
  }
  const probe = await probeInterpreter(PYTHON, { cwd: CLIENT_DIR });
  return probe.ok ? false : `${PYTHON} cannot run ${SERVER_MODULE} (${probe.reason}) ${probe.detail}`.trim();
}

function waitFor<T>(items: () => T[], predicate: (item: T) => boolean, what: string, timeoutMs = 120_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const poll = setInterval(() => {
      const found = items().find(predicate);
      if (found !== undefined) {
        clearInterval(poll);
        resolve(found);
      } else if (Date.now() - started > timeoutMs) {
        clearInterval(poll);
        reject(new Error(`timed out waiting for ${what}`));
      }
    }, 50);
  });
}

describe("the GEAK server, driven as the extension drives it", { timeout: 600_000 }, async () => {
  const skip = await unavailable();
  if (skip !== false) {
    it("needs a Python with GEAK installed", { skip }, () => undefined);
    return;
  }
  const workspace = mkdtempSync(path.join(os.tmpdir(), "geak-client-e2e-"));
  const file = path.join(workspace, "add.py");
  const uri = pathToFileURL(file).toString();
  const statuses: ServerStatus[] = [];
  const progress = new Map<string, Progress[]>();
  const log: string[] = [];
  let lastCandidates: string[] = [];
  let server: ChildProcess | undefined;
  let connection: ProtocolConnection | undefined;

  before(async () => {
    writeFileSync(file, TRITON_FILE);
    // As the extension starts it: the extension's folder as the working directory.
    const child = spawn(PYTHON, ["-m", SERVER_MODULE], { cwd: CLIENT_DIR, stdio: ["pipe", "pipe", "pipe"] });
    server = child;
    child.stderr.on("data", (chunk: Buffer) => log.push(chunk.toString()));
    connection = createProtocolConnection(child.stdout, child.stdin);
    connection.onRequest(ConfigurationRequest.type, (params) =>
      params.items.map((item) => (item.section === SECTION ? SETTINGS : null)),
    );
    connection.onRequest(WorkDoneProgressCreateRequest.type, () => undefined);
    connection.onNotification(STATUS, (status: ServerStatus) => {
      statuses.push(status);
    });
    connection.onUnhandledNotification(() => undefined);
    connection.listen();
    await connection.sendRequest(InitializeRequest.type, {
      processId: process.pid,
      // eslint-disable-next-line @typescript-eslint/no-deprecated -- still a required field; workspaceFolders carry it
      rootUri: null,
      workspaceFolders: [{ uri: pathToFileURL(workspace).toString(), name: "e2e" }],
      capabilities: {
        window: { workDoneProgress: true },
        workspace: {
          configuration: true,
          applyEdit: true,
          workspaceEdit: { documentChanges: true, changeAnnotationSupport: { groupsOnLabel: true } },
        },
        textDocument: {
          publishDiagnostics: { versionSupport: true },
          codeAction: { codeActionLiteralSupport: { codeActionKind: { valueSet: ["refactor", "refactor.rewrite"] } } },
        },
      },
      initializationOptions: initializationOptions(SETTINGS, true),
    });
    await connection.sendNotification(InitializedNotification.type, {});
    await connection.sendNotification(DidOpenTextDocumentNotification.type, {
      textDocument: { uri, languageId: "python", version: 1, text: TRITON_FILE },
    });
  });

  after(async () => {
    const child = server;
    if (connection !== undefined) {
      await connection.sendRequest(ShutdownRequest.type).catch(() => undefined);
      await connection.sendNotification(ExitNotification.type).catch(() => undefined);
    }
    if (child !== undefined && child.exitCode === null) {
      const exited = await new Promise<boolean>((resolve) => {
        const kill = setTimeout(() => {
          child.kill("SIGKILL");
          resolve(false);
        }, 15_000);
        child.once("exit", () => {
          clearTimeout(kill);
          resolve(true);
        });
      });
      assert.ok(exited, "the server exits after shutdown and exit");
    }
    connection?.dispose();
  });

  function client(): ProtocolConnection {
    if (connection === undefined) {
      throw new Error("no connection");
    }
    return connection;
  }

  /** Progress values on one client-owned token. */
  function listen(token: string): Progress[] {
    const values: Progress[] = [];
    progress.set(token, values);
    client().onProgress(WorkDoneProgress.type, token, (value) => {
      values.push(value);
    });
    return values;
  }

  it("checks the file on the interpreter (geak/check)", async () => {
    const result = await client().sendRequest<CheckResult>(CHECK, { textDocument: { uri } });
    assert.equal(result.ok, true, `${result.stage}: ${result.message}\n${log.join("")}`);
    assert.equal(result.backend, "interpreter");
    assert.equal(typeof result.message, "string");
  });

  it("reports its backend for the status bar (geak/status)", async () => {
    const status = await waitFor(() => statuses, (s) => s.backend !== null, "a geak/status with a backend");
    assert.equal(status.backend, "interpreter");
    assert.equal(typeof status.busy, "boolean");
    assert.equal(status.baseVerdict, null, "nothing compared with a base yet"); // the item stays hidden
  });

  it("offers Optimize code actions that run the extension's command with [uri, kernel, version]", async () => {
    const actions = await client().sendRequest(CodeActionRequest.type, {
      textDocument: { uri },
      range: { start: { line: 8, character: 4 }, end: { line: 8, character: 4 } },
      context: { diagnostics: [], only: ["refactor.rewrite"] },
    });
    const commands = (actions ?? []).map((a) => (typeof a.command === "string" ? (a as Command) : (a as CodeAction).command));
    const args = commands.filter((c) => c?.command === "geak.optimizeKernel").map((c) => c?.arguments);
    assert.deepEqual(args, [
      [uri, "add_kernel", 1],
      [uri, null, 1],
    ]);
  });

  it("optimizes with progress on the client's token and returns the agreed result (geak/optimize)", async () => {
    const token = "e2e-optimize";
    const values = listen(token);
    const params: OptimizeParams = { textDocument: { uri }, version: 1, kernel: "add_kernel", workDoneToken: token };
    const result = await client().sendRequest<OptimizeResult>(OPTIMIZE, params);
    assert.equal(typeof result.summary, "string");
    assert.ok(result.summary.length > 0);
    // The launch-configuration search (no model) screened configurations on the interpreter, for correctness only:
    // none was timed, so none became a candidate.
    assert.ok((result.search.screened ?? 0) > 1, JSON.stringify(result.search));
    assert.ok((result.search.correct ?? 0) >= 1, JSON.stringify(result.search));
    lastCandidates = result.candidates.map((c) => c.id);
    // No GPU: nothing can be shown faster, so nothing is proposed.
    assert.equal(result.edit, null, result.summary);
    assert.equal(result.speedup, null);
    assert.equal(values[0]?.kind, "begin");
    assert.equal(values.at(-1)?.kind, "end");
    const relay = new ProgressRelay();
    assert.ok(values.some((v) => relay.step(v) !== undefined), "some progress reaches the notification");
    for (const candidate of result.candidates) {
      assertCandidate(candidate);
    }
  });

  it("lists what the last optimization tried (geak/candidates)", async () => {
    const candidates = await client().sendRequest<Candidate[]>(CANDIDATES, { textDocument: { uri } });
    assert.deepEqual(
      candidates.map((c) => c.id),
      lastCandidates,
    );
    candidates.forEach(assertCandidate);
    assert.equal(candidateRows(candidates).length, candidates.length);
  });

  it("stops an optimization on $/cancelRequest", async () => {
    const token = "e2e-cancel";
    const values = listen(token);
    const source = new CancellationTokenSource();
    const params: OptimizeParams = { textDocument: { uri }, version: 1, kernel: null, workDoneToken: token };
    const started = Date.now();
    const request = client().sendRequest<OptimizeResult>(OPTIMIZE, params, source.token);
    await waitFor(() => values, (v) => v.kind === "begin", "the optimization's begin");
    const mark = statuses.length;
    source.cancel();
    await assert.rejects(request, (error: unknown) => {
      assert.ok(error instanceof ResponseError);
      assert.equal(error.code, LSPErrorCodes.RequestCancelled);
      return true;
    });
    assert.ok(Date.now() - started < 60_000);
    // Its jobs stop too: the server reports itself idle again.
    await waitFor(() => statuses.slice(mark), (s) => !s.busy, "an idle geak/status after the cancel", 30_000);
  });
});

function assertCandidate(c: Candidate): void {
  assert.equal(typeof c.id, "string");
  assert.equal(typeof c.origin, "string");
  assert.equal(typeof c.passed, "boolean");
  assert.equal(typeof c.note, "string");
  for (const key of ["stage"] as const) {
    assert.ok(c[key] === null || typeof c[key] === "string", key);
  }
  for (const key of ["latencyMs", "speedup", "speedupLow", "speedupHigh"] as const) {
    assert.ok(c[key] === null || typeof c[key] === "number", key);
  }
}
