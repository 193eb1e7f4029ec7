"""`OptimizeManager`: runs one `OptimizeSession` per document on the engine thread, on the checks' warm evaluator,
from a snapshot of the document's text, and keeps what the last optimize of each document found (for hints, hover
and `geak/candidates`; the handlers are in ``features.optimize``). Cancelling the request (or the progress) cancels
the session's task, which kills the evaluator job in flight. The result is a versioned edit of the kernel section
with a change annotation that asks for confirmation; it is refused when the document changed meanwhile. A module of
a repository (``modules``) is optimized in place, as saved, judged by its repository's tests on the evaluator that
may read its repository.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import logging
import shutil
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from geak.agent.config import AgentConfig
from geak.agent.llm import LLMError
from geak.agent.loop import ProgressEvent
from geak.agent.memory import Candidate
from geak.agent.outcome import OptimizeResult
from geak.agent.session import OptimizeSession
from geak.agent.tuning.launch_search import over_autotune_said
from geak.evaluator import BadInput

from .checks import CheckManager
from .documents import Documents, Snapshot
from .engine import Engine
from .modules import ModuleTarget, ModuleTargets
from .positions import Positions
from .requests import CONVERTER
from .timing_text import format_ms

log = logging.getLogger(__name__)
ANNOTATION = "geak.optimize"


def candidate_dict(c: Candidate) -> dict[str, Any]:
    ev = c.evaluation
    note = c.note
    if not note and ev is not None and not ev.ok:
        note = (ev.message or "").strip().splitlines()[0][:200] if ev.message else ""
    if not note and c.strategy:
        note = c.strategy.strip().splitlines()[0][:200]
    if c.review:  # the client's candidate list shows the note: the caveats must reach it there too
        note += " · review: " + "; ".join(c.review)
    return {
        "id": c.id,
        "origin": c.origin,
        "passed": c.passed,
        "stage": ev.stage if ev else None,
        "latencyMs": ev.latency_ms if ev else None,
        "speedup": ev.speedup if ev else None,
        "speedupLow": ev.speedup_low if ev else None,
        "speedupHigh": ev.speedup_high if ev else None,
        "note": note,
        "review": list(c.review),
    }


@dataclass
class OptimizeRecord:
    """What the last optimize of a document found (for hints, hover and geak/candidates)."""

    uri: str
    key: str  # content key of the text it optimized
    kernel: str | None
    summary: str
    speedup: float | None
    candidates: list[dict[str, Any]] = field(default_factory=list)
    diagnosis: str = ""  # why the kernel was slow, as the launch search found it
    review: list[str] = field(default_factory=list)  # the proposal's notes for its reviewer (``review_notes``)

    def candidates_markdown(self, limit: int | None = None) -> str:
        ranked = sorted(
            self.candidates, key=lambda c: (not c["passed"], -(c["speedup"] or 0), c["latencyMs"] or float("inf"))
        )
        shown = ranked[:limit] if limit else ranked
        if not shown:
            return "No candidates."
        rows = ["| candidate | verdict | time | speedup [95% CI] |", "|---|---|---|---|"]
        for c in shown:
            verdict = "passes" if c["passed"] else f"fails ({c['stage']})"
            speed = (
                f"{c['speedup']:.2f}x [{c['speedupLow']:.2f}, {c['speedupHigh']:.2f}]"
                if c["speedup"] and c["speedupLow"] is not None
                else "-"
            )
            latency = format_ms(c["latencyMs"]) if c["latencyMs"] else "-"
            rows.append(f"| {c['id']} ({c['origin']}) | {verdict} | {latency} | {speed} |")
        more = f"\n\n{len(ranked) - len(shown)} more: GEAK: Show candidates" if len(shown) < len(ranked) else ""
        return "\n".join(rows) + more


class Progress:
    """Work-done progress for one optimize: on the client's token, or one the server creates (when the client
    supports it). A progress cancel from the client cancels `task`."""

    def __init__(self, server: LanguageServer, token: Any, title: str):
        self.server = server
        self.token = token
        self.title = title
        self.active = False

    async def begin(self, task: asyncio.Task) -> None:
        server = self.server
        if self.token is None:
            window = server.client_capabilities.window
            if not (window and window.work_done_progress):
                return
            token = f"geak-optimize-{uuid.uuid4()}"
            try:
                await server.work_done_progress.create_async(token)
            except Exception as e:
                log.info("the client refused a progress token: %s", e)
                return
            self.token = token
        server.work_done_progress.begin(
            self.token, types.WorkDoneProgressBegin(title=self.title, cancellable=True, message="starting")
        )
        self.active = True
        loop = asyncio.get_running_loop()
        cancelled = server.work_done_progress.tokens.get(self.token)
        if cancelled is not None:
            cancelled.add_done_callback(lambda f: loop.call_soon_threadsafe(task.cancel) if f.cancelled() else None)

    def report(self, event: ProgressEvent) -> None:
        if not self.active:
            return
        best = f" · best {event.best_speedup:.2f}x" if event.best_speedup else ""
        self.server.work_done_progress.report(
            self.token, types.WorkDoneProgressReport(message=f"{event.message[:160]}{best}", cancellable=True)
        )

    def end(self, message: str) -> None:
        if self.active:
            self.active = False
            self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message[:300]))
            self.server.work_done_progress.tokens.pop(self.token, None)


@dataclass
class OptimizeHooks:
    """What the manager reads of the server's state and how it talks back (all called on the server's loop)."""

    ready: Callable[[], Awaitable[Any]]  # returns once the client's settings have been read
    trusted: Callable[[], Awaitable[bool]]
    config: Callable[[], AgentConfig | None]  # the current configuration (None: invalid)
    status_changed: Callable[[], None]  # an optimize started or ended (see `OptimizeManager.activity`)
    hints_changed: Callable[[], None]  # a record changed: refresh inlay hints


class OptimizeManager:
    def __init__(
        self,
        server: LanguageServer,
        documents: Documents,
        checks: CheckManager,
        engine: Engine,
        hooks: OptimizeHooks,
        modules: ModuleTargets,
    ):
        self.server = server
        self.modules = modules
        self.documents = documents
        self.checks = checks
        self.engine = engine
        self.hooks = hooks
        self.records: dict[str, OptimizeRecord] = {}
        self.running: dict[str, asyncio.Task] = {}
        self.activity: str | None = None

    def busy(self) -> bool:
        return bool(self.running)

    def record_for(self, uri: str, key: str) -> OptimizeRecord | None:
        record = self.records.get(uri)
        return record if record is not None and record.key == key else None

    def last_record(self, uri: str) -> OptimizeRecord | None:
        return self.records.get(uri)

    async def cancel_all(self) -> None:
        tasks = list(self.running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def optimize(
        self, uri: str, kernel: str | None, version: int | None, token: Any = None
    ) -> tuple[dict[str, Any], types.WorkspaceEdit | None]:
        """Run one optimize; returns the protocol's result object and the edit (also in the result, as JSON)."""
        snap = await self.documents.snapshot(uri, disk=True)
        if snap is None:
            return refusal(f"cannot read {uri}"), None
        if snap.model.triton and not snap.model.has_tests:
            await self.modules.find(snap.path)
        problem = self._refuse(snap, kernel, version) or await self._unsaved(snap)
        if problem:
            return refusal(problem), None
        await self.hooks.ready()
        if not await self.hooks.trusted():
            return refusal("the workspace is not trusted: GEAK runs no code from it"), None
        if self.hooks.config() is None:
            return refusal("the GEAK configuration is invalid (see the messages): fix it first"), None
        task = asyncio.current_task()
        assert task is not None
        self.running[uri] = task
        what = f"kernel {kernel}" if kernel else f"all kernels of {Path(snap.path).name}"
        progress = Progress(self.server, token, f"GEAK: optimizing {what}")
        self.activity = f"optimizing {what}"
        self.hooks.status_changed()
        try:
            await progress.begin(task)
            result = await self._run(snap, kernel, progress)
        except asyncio.CancelledError:
            progress.end("cancelled")
            raise
        except (BadInput, LLMError, ValueError) as e:
            message = f"the model cannot be used: {e}" if isinstance(e, LLMError) else str(e)
            progress.end(message)
            return refusal(message), None
        finally:
            self.running.pop(uri, None)
            self.activity = None
            self.hooks.status_changed()
        answer, edit = self._answer(snap, kernel, result)
        progress.end(answer["summary"])
        self.hooks.hints_changed()
        return answer, edit

    def _refuse(self, snap: Snapshot, kernel: str | None, version: int | None) -> str:
        model = snap.model
        if version is not None and snap.version is not None and version != snap.version:
            return f"the document changed since the request (version {version}, now {snap.version}): run it again"
        if not model.triton:
            note = f"; {model.note}" if model.note else ""
            return f"{Path(snap.path).name} is not a Triton file (no @triton.jit kernel{note})"
        found = self.modules.known(snap.path) if not model.has_tests else None
        if not model.has_tests and (found is None or found.target is None):
            why = f" ({found.problem})" if found is not None else ""
            return f"{Path(snap.path).name} has no embedded test, so a faster version cannot be checked{why}"
        if kernel is not None and model.kernel(kernel) is None:
            return f"{Path(snap.path).name} has no @triton.jit kernel named {kernel!r}"
        if snap.uri in self.running:
            return "an optimize of this file is already running"
        return ""

    async def _unsaved(self, snap: Snapshot) -> str:
        """A module is optimized as saved (its repository's tests import it from its place): its buffer must be."""
        if self._module(snap) is None or snap.version is None:
            return ""
        if await self.documents.disk_key(snap.path) != snap.model.key:
            return f"save {Path(snap.path).name} first: a module is optimized as saved, in its repository"
        return ""

    def _module(self, snap: Snapshot) -> ModuleTarget | None:
        found = self.modules.known(snap.path) if not snap.model.has_tests else None
        return found.target if found is not None else None

    async def _run(self, snap: Snapshot, kernel: str | None, progress: Progress) -> OptimizeResult:
        module = self._module(snap)
        if module is not None:
            return await self._session(Path(snap.path), snap, kernel, progress, module)
        scratch = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="geak-optimize-"))
        try:
            name = Path(snap.path).name if snap.path.endswith(".py") else "kernel.py"
            file = scratch / name
            await asyncio.to_thread(file.write_text, snap.text, encoding="utf-8")
            try:
                return await self._session(file, snap, kernel, progress, None)
            except BadInput as e:  # it names the scratch copy the session ran on: name the user's file instead
                raise BadInput(str(e).replace(str(file), snap.path)) from e
        finally:
            await asyncio.to_thread(shutil.rmtree, scratch, True)

    async def _session(
        self, file: Path, snap: Snapshot, kernel: str | None, progress: Progress, module: ModuleTarget | None
    ) -> OptimizeResult:
        """One optimize session of `file` (a module: in its place, on the evaluator that may read its repository)."""
        loop = asyncio.get_running_loop()
        current = self.hooks.config()  # read now: settings that changed since the request apply
        assert current is not None
        runs = Path(current.output_path) / hashlib.sha1(snap.path.encode()).hexdigest()[:12]
        config = current.model_copy(update={"output_path": runs})
        evaluator = await self.checks.evaluator(module.root if module is not None else None)

        def on_progress(event: ProgressEvent) -> None:  # called on the engine thread
            loop.call_soon_threadsafe(progress.report, event)

        tests = module.tests if module is not None else None
        session = OptimizeSession(file, config, evaluator=evaluator, progress=on_progress, kernel=kernel, module=tests)
        return await self.engine.run(session.run())

    def _answer(
        self, snap: Snapshot, kernel: str | None, result: OptimizeResult
    ) -> tuple[dict[str, Any], types.WorkspaceEdit | None]:
        candidates = [candidate_dict(c) for c in result.candidates]
        speedup, summary = answer_summary(result, kernel)
        search = result.search or {}
        diagnosis = str(search.get("diagnosis") or "")
        review = list(result.review) if speedup is not None else []
        self.records[snap.uri] = OptimizeRecord(
            snap.uri, snap.model.key, kernel, summary, speedup, candidates, diagnosis, review
        )
        summary = with_review(summary, review)
        edit = None
        if result.new_text and speedup is not None:
            doc = self.documents.open_document(snap.uri)
            if snap.version is not None and (doc is None or doc.version != snap.version):
                summary += "; the document changed meanwhile, so no edit is proposed: run Optimize again"
            else:
                label = f"GEAK: optimized {kernel or Path(snap.path).name} ({speedup:.2f}x)"
                if review:  # the Refactor Preview shows the label first: a reviewer must not miss the caveats
                    label += f" · review {len(review)} note{'s' if len(review) > 1 else ''} first"
                edit = workspace_edit(self.server, snap, result.new_text, label, summary)
        answer = {
            "edit": CONVERTER.unstructure(edit) if edit is not None else None,
            "summary": summary,
            "speedup": speedup,
            "candidates": candidates,
            "diagnosis": diagnosis,
            "search": search,
            "review": review,
        }
        return answer, edit


def answer_summary(result: OptimizeResult, kernel: str | None) -> tuple[float | None, str]:
    """The confirmed speedup (None: the original stays) and the one line the editor shows of an optimize: the speedup
    with its interval and device (and over the best of the autotune list it replaces), or why there is none; what the
    search found out where nothing was faster. (What the winner's reviewer must hear: ``with_review``.)"""
    best = result.best.evaluation if result.best is not None else None
    speedup = best.speedup if best is not None and result.improved else None
    focus = f" ({kernel})" if kernel else ""
    search = result.search or {}
    if speedup is not None and best is not None:
        device = result.runtime.get("device") or "this GPU"
        summary = f"{speedup:.2f}x faster [{best.speedup_low:.2f}, {best.speedup_high:.2f}] on {device}{focus}"
        if result.best is not None and result.best.origin == "search":
            summary += over_autotune_said(search.get("over_autotune_best") or {})
    else:
        summary = result.message + focus
    tally = str(search.get("summary") or "")
    if speedup is None and tally and tally not in summary:  # what the search found out, e.g. on a CPU
        summary += f" ({tally})"
    return speedup, summary


def with_review(summary: str, review: list[str]) -> str:
    """`summary` followed by what the proposal's reviewer must hear that the test cannot show (``review_notes``)."""
    return summary + "; review: " + "; ".join(review) if review else summary


def refusal(summary: str) -> dict[str, Any]:
    return {"edit": None, "summary": summary, "speedup": None, "candidates": [], "diagnosis": "", "search": {},
            "review": []}  # fmt: skip


def workspace_edit(
    server: LanguageServer, snap: Snapshot, new_text: str, label: str, summary: str
) -> types.WorkspaceEdit:
    """The change from the snapshot's text to `new_text` as line edits (the test section is never touched)."""
    positions = Positions(snap.text, server.workspace.position_codec)
    old_lines, new_lines = snap.text.splitlines(keepends=True), new_text.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    spans = [(i1, i2, "".join(new_lines[j1:j2])) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]
    caps = server.client_capabilities.workspace
    edit_caps = caps.workspace_edit if caps else None
    if edit_caps is None or not edit_caps.document_changes:
        plain = [types.TextEdit(range=positions.line_block(i1, i2), new_text=text) for i1, i2, text in spans]
        return types.WorkspaceEdit(changes={snap.uri: plain})
    edits: list[types.TextEdit | types.AnnotatedTextEdit] = [
        types.AnnotatedTextEdit(range=positions.line_block(i1, i2), new_text=text, annotation_id=ANNOTATION)
        for i1, i2, text in spans
    ]
    return types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=snap.uri, version=snap.version),
                edits=edits,
            )
        ],
        change_annotations={
            ANNOTATION: types.ChangeAnnotation(label=label, needs_confirmation=True, description=summary)
        },
    )
