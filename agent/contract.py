"""What a candidate must keep of the original: every function, kernel and class of the kernel section that the fixed
test uses (by name), and the public wrappers; with their `def` lines as the prompts show them.

A test that launches a kernel itself (``kernel[grid](...)``, 26 of the 31 ROCm benchmark files) fixes that kernel's
parameters and launch arguments: renaming one, or autotuning one the launch passes, fails at the call stage.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass

from geak.evaluator import TritonFile, is_kernel_def
from geak.evaluator import parse_python as parse


@dataclass(frozen=True)
class Signature:
    name: str
    line: str  # the `def` (or `class`) line, on one line, without decorators or body
    kernel: bool  # a @triton.jit kernel
    used_by_test: bool  # the test section names it (calls a wrapper, launches a kernel itself)


@dataclass(frozen=True)
class Contract:
    signatures: tuple[Signature, ...]

    @property
    def required(self) -> tuple[str, ...]:
        """The names a candidate's module must define (checked at extraction)."""
        return tuple(s.name for s in self.signatures)

    @property
    def launched_by_test(self) -> tuple[Signature, ...]:
        return tuple(s for s in self.signatures if s.kernel and s.used_by_test)

    def describe(self) -> str:
        """The contract as the prompts state it: one `def` line each."""
        if not self.signatures:
            return "(none)"
        lines = []
        for s in self.signatures:
            role = "kernel launched by the test itself" if s.kernel else "called by the test"
            lines.append(f"- `{s.line}`" + (f"  ({role})" if s.used_by_test else ""))
        if self.launched_by_test:
            lines.append(
                "The test launches the kernels marked so with its own grid and arguments: keep their parameter "
                "names, order and defaults exactly, and do not autotune or remove a parameter the test passes."
            )
        return "\n".join(lines)


def contract_of(original: TritonFile) -> Contract:
    """The signatures of `original`'s kernel section that the test uses, and its public wrappers (in file order)."""
    try:
        tree = parse(original.kernel_section)
    except SyntaxError:  # the evaluator parsed the file; a kernel section that does not parse alone keeps the names
        return Contract(tuple(Signature(w, f"def {w}(...)", False, True) for w in original.wrappers))
    test_names = _names_used(original.test_section)
    signatures = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr == "apply":
            names = [t.id for t in node.targets if isinstance(t, ast.Name) and t.id in test_names]
            signatures += [Signature(name, ast.unparse(node), False, True) for name in names]  # `f = Fn.apply`
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        kernel = is_kernel_def(node)
        used = node.name in test_names
        public_wrapper = not kernel and node.name in original.wrappers and not node.name.startswith("_")
        if used or public_wrapper:
            signatures.append(Signature(node.name, _header(node), kernel, used))
    return Contract(tuple(signatures))


def _names_used(test_section: str) -> set[str]:
    """The names the test section reads (`torch.add` is not `add`); every word where it does not parse alone."""
    try:
        tree = parse(test_section)
    except SyntaxError:
        return set(re.findall(r"\b\w+\b", test_section))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _header(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    """`def name(params) -> ret:` on one line (comments and decorators dropped)."""
    bare = copy.copy(node)
    bare.decorator_list = []
    bare.body = [ast.Expr(ast.Constant(...))]
    return ast.unparse(bare).split("\n", 1)[0]
