import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { refreshAction } from "../restart";

describe("refreshAction", () => {
  const python = "/venv/bin/python";

  it("keeps a server that runs on the configured interpreter", () => {
    assert.equal(refreshAction({ kind: "running", interpreter: python, status: null }, python), "keep");
  });

  it("starts a new server for another interpreter, after a failed start, or once trusted", () => {
    assert.equal(refreshAction({ kind: "running", interpreter: "/usr/bin/python3", status: null }, python), "start");
    assert.equal(refreshAction({ kind: "failed", message: "not installed" }, python), "start");
    assert.equal(refreshAction({ kind: "restricted" }, python), "start");
  });

  it("starts nothing before a Triton file was opened", () => {
    assert.equal(refreshAction({ kind: "idle" }, python), "none");
  });
});
