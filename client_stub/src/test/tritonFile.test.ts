import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { containsTritonKernel } from "../tritonFile";

describe("containsTritonKernel", () => {
  it("finds @triton.jit kernels, with or without arguments", () => {
    assert.ok(containsTritonKernel("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x):\n    pass\n"));
    assert.ok(containsTritonKernel("import triton\n\n@triton.autotune(configs=[], key=[])\n@triton.jit(debug=True)\ndef k(x): ...\n"));
    assert.ok(containsTritonKernel("from triton import jit\n\nclass A:\n    @jit\n    def k(x): ...\n"));
  });

  it("ignores Python without Triton kernels", () => {
    assert.equal(containsTritonKernel("import torch\n\ndef f(x):\n    return x + 1\n"), false);
    assert.equal(containsTritonKernel("import triton\n# @triton.jit is used elsewhere\nprint(triton.__version__)\n"), false);
    assert.equal(containsTritonKernel("from numba import jit\n\n@jit\ndef f(x):\n    return x\n"), false);
  });
});
