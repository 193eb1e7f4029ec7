import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { refreshAction } from "../restart";

describe("refreshAction", () => {
  const python = "/venv/bin/python";

  it("keeps a server that runs on the configured interpreter", () => {
    assert.equal(refreshAction({ kind: "running", interpreter: python, status: null }, python), "keep");
  });

  it("starts a new server for another interpreter, or once trusted", () => {
    assert.equal(refreshAction({ kind: "running", interpreter: "/usr/bin/python3", status: null }, python), "start");
    const failed = { kind: "failed", interpreter: "/usr/bin/python3", message: "not installed" } as const;
    assert.equal(refreshAction(failed, python), "start");
    assert.equal(refreshAction({ kind: "restricted" }, python), "start");
  });

  it("does not retry a failed start on the same interpreter (it would fail again, and say so twice)", () => {
    assert.equal(refreshAction({ kind: "failed", interpreter: python, message: "not installed" }, python), "keep");
  });

  it("starts nothing before a Triton file was opened", () => {
    assert.equal(refreshAction({ kind: "idle" }, python), "none");
  });
});
