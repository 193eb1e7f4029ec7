import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { staleDocuments } from "../edits";

const URI = "file:///work/add.py";
const edit = (version: number | null) => ({
  documentChanges: [
    {
      textDocument: { uri: URI, version },
      edits: [{ range: { start: { line: 3, character: 0 }, end: { line: 9, character: 0 } }, newText: "...", annotationId: "geak" }],
    },
  ],
  changeAnnotations: { geak: { label: "GEAK: optimized add_kernel (1.84x)", needsConfirmation: true } },
});

describe("staleDocuments", () => {
  it("accepts an edit made for the open document's version", () => {
    assert.deepEqual(staleDocuments(edit(7), () => 7), []);
  });

  it("refuses one made for an older version", () => {
    assert.deepEqual(staleDocuments(edit(7), (uri) => (uri === URI ? 8 : undefined)), [URI]);
  });

  it("accepts unversioned edits and edits of files that are not open", () => {
    assert.deepEqual(staleDocuments(edit(null), () => 8), []);
    assert.deepEqual(staleDocuments(edit(7), () => undefined), []);
    assert.deepEqual(staleDocuments({ changes: { [URI]: [] } }, () => 8), []);
  });
});
