"""Kernel code that compiles for one GPU vendor only: a vendor's libdevice module named in the kernel code
(``triton.language.extra.hip.libdevice`` links AMD's ``__ocml_*`` functions, ``triton.language.extra.cuda.libdevice``
NVIDIA's ``__nv_*``), and the caveat a check on another backend gives. Triton's interpreter computes both, and a GPU
of the other vendor fails to link them, so a pass on CPU says so; ``triton.language.extra.libdevice`` takes the
vendor's own at compile time.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from .python_source import parse


@dataclass(frozen=True)
class Vendor:
    """One vendor's libdevice: the submodule of ``triton.language.extra`` and the backend that compiles it."""

    submodule: str
    backend: str  # as the runtime names it: "cuda" or "rocm"
    owner: str
    gpus: str


VENDORS = (
    Vendor("hip", "rocm", "AMD's", "ROCm GPUs"),
    Vendor("cuda", "cuda", "NVIDIA's", "NVIDIA GPUs"),
)


SUBMODULES = frozenset(v.submodule for v in VENDORS)
CHOOSING = (ast.If, ast.IfExp, ast.Match)  # code under these may pick each vendor's own (`if torch.version.hip:`)


def vendor_libdevices(kernel_code: str) -> tuple[Vendor, ...]:
    """The vendors whose libdevice the code imports or names (``tl.extra.hip.libdevice.isinf``). Comments and
    strings do not count. Code that names one under an ``if`` or ``match`` chooses each vendor's own, as portable
    code does: it names none. A ``try`` of the import chooses nothing, since every Triton has both modules. Code
    that does not parse names none (its check fails at the parse stage)."""
    try:
        tree = parse(kernel_code)
    except (SyntaxError, ValueError):
        return ()
    named = list(_named(tree))
    if any(chosen for _, chosen in named):
        return ()
    return tuple(v for v in VENDORS if any(submodule == v.submodule for submodule, _ in named))


def _named(tree: ast.AST) -> Iterator[tuple[str, bool]]:
    """Each vendor submodule of ``triton.language.extra`` that `tree` imports or names, and whether it lies under a
    statement or expression that chooses (``CHOOSING``). Walked with a stack, not by recursion: a candidate's
    expression of a thousand terms parses, and must not end its check in a RecursionError."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, chosen = stack.pop()
        chosen = chosen or isinstance(node, CHOOSING)
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "extra":
            modules = [f"extra.{node.attr}"]
        else:
            modules = []
        for module in modules:
            parts = module.split(".")
            for i, part in enumerate(parts[:-1]):
                if part == "extra" and parts[i + 1] in SUBMODULES:
                    yield parts[i + 1], chosen
        stack.extend((child, chosen) for child in ast.iter_child_nodes(node))


def vendor_caveats(kernel_code: str, backend: str | None) -> tuple[str, ...]:
    """What a check on `backend` ("interpreter", "cuda", "rocm") should add: each vendor libdevice the code calls
    that this backend does not compile."""
    return tuple(
        f"its kernel code calls {v.owner} libdevice (triton.language.extra.{v.submodule}.libdevice), which compiles "
        f"only for {v.gpus}: on another GPU its functions do not link (\"Unresolved extern function\"); "
        "triton.language.extra.libdevice takes each vendor's own"
        for v in vendor_libdevices(kernel_code)
        if backend != v.backend
    )
