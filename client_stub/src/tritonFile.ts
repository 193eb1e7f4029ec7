/**
 * A cheap test whether a Python document holds a Triton kernel, so that the server only starts where it is useful.
 * The server's own parser decides what a Triton file is; this only gates the start. The decorator names follow the
 * evaluator's (`triton.jit`, `tl.jit`, `jit`), with or without a call.
 */

const KERNEL_DECORATOR = /^[ \t]*@(?:triton\.|tl\.)?jit\b/m;
const IMPORTS_TRITON = /^[ \t]*(?:import|from)[ \t]+triton\b/m;

export function containsTritonKernel(text: string): boolean {
  return IMPORTS_TRITON.test(text) && KERNEL_DECORATOR.test(text);
}
