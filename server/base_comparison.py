"""A file compared with its version at a git revision: what `geak check --base REV`, `geak check --changed` and
`geak bench --base REV` say of each file. It lives in `server/` so that the language server can use it too (the
command line and the language server import nothing of each other).

A file's version at the base (``base_revision``) is the reference of a check like any `--against` file: its text is
written to a private temporary folder and only the evaluator's jobs run it. What a comparison says per file:
"same" (the code is that of the base, white space and comments aside: nothing runs), "pass" (the kernels give the
base's outputs on the base's test and probes; on a GPU, their timing against the base's follows), "fail" (its own test
fails, or its outputs differ from the base's), "slower" (a significant slowdown beyond `--max-slowdown`), "not
checkable" (this backend cannot check it) or "bad input". A file new since the base, or whose base cannot be a
reference (it does not parse, or fails its own test or import), is checked alone, and says so once in its `note`.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from geak.evaluator import (
    BadInput,
    BenchResult,
    CheckResult,
    ModuleTests,
    TritonFile,
    TritonFileError,
    as_module,
    parse_triton_file,
)

from .base_revision import Base, BaseVersion, same_code

VERDICTS = ("pass", "same", "fail", "slower", "not checkable", "bad input")


@dataclass(frozen=True)
class BaseVerdict:
    """One file against its version at a base. `base_path`: the file's path there (None: new since the base);
    `note`: what is said once (new, renamed, a base that cannot be a reference); `alone`: its own check, where it
    ran (a test section of its own that differs from the base's, or no usable base); `result`: its check against the
    base; `bench`: its timing against the base (on a GPU)."""

    file: str
    verdict: str
    message: str
    base_path: str | None = None
    note: str = ""
    alone: CheckResult | None = None
    result: CheckResult | None = None
    bench: BenchResult | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("alone", "result", "bench"):
            found = getattr(self, name)
            data[name] = found.to_dict() if found is not None else None
        return data


class Evaluates(Protocol):
    """What a comparison asks of an evaluator (`geak.evaluator.Evaluator`'s methods)."""

    async def check(self, file: str | Path, *, against: str | Path | None = None, progress=None) -> CheckResult: ...

    async def check_module(
        self, target: ModuleTests, *, against: str | Path | None = None, progress=None
    ) -> CheckResult: ...

    async def bench(
        self, file: str | Path, *, against: str | Path | None = None, progress=None, check_first: bool = True
    ) -> BenchResult: ...


@dataclass(frozen=True)
class _Judge:
    """A file's evaluations, or, for a repository's module (`module`), those of texts in its place judged by the
    repository's tests: the module's version at the base is its reference like a file's."""

    evaluator: Evaluates
    module: ModuleTests | None = None

    def parse(self, text: str, label: str) -> TritonFile:
        return parse_triton_file(text, label) if self.module is None else as_module(self.module, text, label)

    async def check(self, file: Path, *, against: Path | None = None, progress=None) -> CheckResult:
        if self.module is None:
            return await self.evaluator.check(file, against=against, progress=progress)
        return await self.evaluator.check_module(self.module, against=against, progress=progress)

    async def bench(self, file: Path, *, against: Path | None = None, progress=None, check_first: bool = True):
        found = {"module": self.module} if self.module is not None else {}
        return await self.evaluator.bench(file, against=against, progress=progress, check_first=check_first, **found)


def too_slow(bench: BenchResult | None, max_slowdown: float | None) -> bool:
    """A significant slowdown (the speedup's interval lies wholly below 1 − the device's noise margin) whose measured
    size, 1 / speedup, exceeds `max_slowdown`."""
    s = bench.speedup if bench is not None else None
    return max_slowdown is not None and s is not None and s.significant and s.ratio < 1 and 1 / s.ratio > max_slowdown


def speed_line(bench: BenchResult, rev: str) -> str:
    """`1.21x faster than HEAD [1.18, 1.24]`, or why there is no speedup."""
    s = bench.speedup
    if not bench.ok or s is None:
        return f"not timed against {rev}: {bench.message}"
    size = f"{s.ratio:.2f}x faster than" if s.ratio >= 1 else f"{1 / s.ratio:.2f}x slower than"
    return f"{size} {rev} [{s.low:.2f}, {s.high:.2f}]: {s.verdict}"


def is_same(version: BaseVersion) -> bool:
    """Is the file's code that of its base, white space and comments aside? (Nothing to run: "same as REV".)"""
    if version.text is None:
        return False
    try:
        text = version.file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):  # the check says what is wrong with it
        return False
    return same_code(text, version.text)


def same(base: Base, version: BaseVersion, what: str = "") -> BaseVerdict:
    return BaseVerdict(str(version.file), "same", f"same as {base.rev}{what}", version.path, _renamed(base, version))


@contextlib.contextmanager
def base_folder() -> Iterator[Path]:
    """A private temporary folder (0700) for the base versions' texts, removed after."""
    with tempfile.TemporaryDirectory(prefix="geak-base-") as folder:
        yield Path(folder)


async def compare_file(
    evaluator: Evaluates,
    base: Base,
    version: BaseVersion,
    folder: Path,
    *,
    timed: bool,
    max_slowdown: float | None = None,
    progress: Callable[[str], None] | None = None,
    module: ModuleTests | None = None,
) -> BaseVerdict:
    """`version.file` checked against its version at `base` (its own test first, where its test section differs
    from the base's), then, `timed` (a GPU), timed against it. BadInput where the file itself cannot be checked.
    `module`: the file is a repository's module, judged by its repository's tests (``geak.evaluator.module_tests``),
    with its version at the base in its place as the reference."""
    file, label = version.file, version.label(base)
    evaluator = _Judge(evaluator, module)
    if version.text is None:
        return await _alone(evaluator, version, f"new since {base.rev}: checked alone", progress)
    if is_same(version):
        return same(base, version)
    notes = _renamed(base, version)
    try:
        reference = evaluator.parse(version.text, label)
    except TritonFileError as e:
        return await _alone(evaluator, version, _join(notes, f"{unparsable_base(label, e)}: checked alone"),
                            progress)  # fmt: skip
    alone = None
    if _own_test_differs(file, reference):
        alone = await evaluator.check(file, progress=progress)
        if not alone.ok:
            return BaseVerdict(str(file), _verdict_of(alone), alone.summary, version.path, notes, alone=alone)
    written = base_file(folder, version)
    try:
        result = relabeled(await evaluator.check(file, against=written, progress=progress), written, label)
    except BadInput as e:
        if e.verdict is None:
            raise
        why = _join(notes, f"{failing_base(e, written, label)}: checked alone")
        if alone is None:
            return await _alone(evaluator, version, why, progress)
        return BaseVerdict(str(file), "pass", alone.summary, version.path, why, alone=alone)
    verdict = _verdict_of(result)
    if verdict != "pass":
        message = f"against {label}: {result.summary}" if verdict == "fail" else result.summary
        return BaseVerdict(str(file), verdict, message, version.path, notes, alone, result)
    message = f"same outputs as {label}"
    if not timed:
        return BaseVerdict(str(file), "pass", message, version.path, notes, alone, result)
    bench = relabeled(await evaluator.bench(file, against=written, progress=progress, check_first=False), written,
                      label)  # fmt: skip
    verdict = "fail" if not bench.ok else "slower" if too_slow(bench, max_slowdown) else "pass"
    beyond = f" (beyond --max-slowdown {max_slowdown:g})" if verdict == "slower" else ""
    return BaseVerdict(str(file), verdict, f"{message}; {speed_line(bench, base.rev)}{beyond}", version.path, notes,
                       alone, result, bench)  # fmt: skip


async def bench_file(
    evaluator: Evaluates,
    base: Base,
    version: BaseVersion,
    folder: Path,
    *,
    max_slowdown: float | None = None,
    progress: Callable[[str], None] | None = None,
    module: ModuleTests | None = None,
) -> BaseVerdict:
    """`version.file` timed against its version at `base` (after its check against it), or alone where the base
    cannot be a reference. The caller has refused a file new since the base and said one that is the same.
    `module`: as for ``compare_file``."""
    assert version.text is not None
    file, label = version.file, version.label(base)
    evaluator = _Judge(evaluator, module)
    notes = _renamed(base, version)
    written = base_file(folder, version)
    try:
        evaluator.parse(version.text, label)
        bench = relabeled(await evaluator.bench(file, against=written, progress=progress), written, label)
    except TritonFileError as e:
        notes = _join(notes, f"{unparsable_base(label, e)}: timed alone")
        bench = await evaluator.bench(file, progress=progress)
    except BadInput as e:
        if e.verdict is None:
            raise
        notes = _join(notes, f"{failing_base(e, written, label)}: timed alone")
        bench = await evaluator.bench(file, progress=progress)
    if bench.ok:
        verdict = "slower" if too_slow(bench, max_slowdown) else "pass"
        message = speed_line(bench, base.rev) if bench.speedup else bench.message
    elif bench.check is not None and not bench.check.ok:
        verdict, message = _verdict_of(bench.check), f"against {label}: {bench.check.summary}"
    else:  # not timed although the check passed: no GPU, or the timing was rejected
        verdict, message = ("bad input" if bench.backend == "interpreter" else "fail"), bench.message
    return BaseVerdict(str(file), verdict, message, version.path, notes, bench=bench)


async def _alone(
    evaluator: _Judge, version: BaseVersion, note: str, progress: Callable[[str], None] | None
) -> BaseVerdict:
    alone = await evaluator.check(version.file, progress=progress)
    path = version.path if version.text is not None else None
    return BaseVerdict(str(version.file), _verdict_of(alone), alone.summary, path, note, alone=alone)


def _own_test_differs(file: Path, reference) -> bool:
    """Has the file a test section of its own that is not the base's? (Else the check against the base runs its own
    test, and its check alone would repeat it.)"""
    try:
        own = parse_triton_file(file.read_text(encoding="utf-8-sig"), str(file), require_tests=False)
    except (OSError, UnicodeDecodeError, TritonFileError):  # the check against the base says what is wrong
        return False
    return bool(own.tests) and not same_code(own.test_section, reference.test_section)


def unparsable_base(label: str, error: TritonFileError) -> str:
    """Why a base version that does not parse as a Triton file with tests is no reference."""
    return f"{label} cannot be a reference ({error})"


def failing_base(error: BadInput, written: Path, label: str) -> str:
    """Why a base version is no reference where the check against it raised `error` with its own verdict (it fails
    its own test, or imports what is gone)."""
    said = error.verdict.summary.replace(str(written), label) if error.verdict is not None else str(error)
    return f"{label} does not pass its own test or import ({said})"


def base_file(folder: Path, version: BaseVersion) -> Path:
    """The base's text in a folder of its own under `folder`, under its file's name (messages name it)."""
    path = Path(tempfile.mkdtemp(dir=folder)) / Path(version.path).name
    path.write_text(version.text or "", encoding="utf-8")
    return path


def relabeled(result, written: Path, label: str):
    """`result` (a CheckResult or BenchResult) naming the base `label` (`HEAD:add.py`) where it names the temporary
    file holding its text."""
    if isinstance(result, BenchResult) and result.check is not None:
        result = replace(result, check=relabeled(result.check, written, label))
    diagnostics = tuple(replace(d, file=label) if d.file == str(written) else d for d in result.diagnostics)
    reference = label if result.reference == str(written) else result.reference
    return replace(result, diagnostics=diagnostics, reference=reference)


def _verdict_of(result: CheckResult) -> str:
    if result.ok:
        return "pass"
    if result.not_checkable is not None:
        return "not checkable"
    return "bad input" if result.stage == "parse" else "fail"


def _renamed(base: Base, version: BaseVersion) -> str:
    return f"renamed from {version.path} since {base.rev}" if version.renamed else ""


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)
