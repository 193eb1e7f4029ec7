"""Inlay hints on each kernel's definition line: its measured time and efficiency after a timing on a GPU
(`41 µs · 3.9 TB/s · 91% of peak`), its paired timing against the base revision (`1.21× faster than HEAD
[1.18, 1.24]`, `within noise of HEAD [0.99, 1.01]`), and after an optimize run, that a faster candidate exists and by
how much.

Hints come from the caches keyed by the document's content: changed code loses its stale hints.
"""

from __future__ import annotations

from lsprotocol import types

from geak.evaluator import BenchResult

from ..positions import Positions
from ..state import ServerState
from ..timing_text import against_base, format_ms, format_rate, kernel_calls


def latency_label(bench: BenchResult, kernel: str) -> str | None:
    """`41 µs · 3.9 TB/s · 91% of peak` for one kernel: its device time, and the efficiency of the largest call
    that launched it."""
    calls = kernel_calls(bench, kernel)
    if not calls:
        return None
    largest = max(calls, key=lambda c: c.median_ms)
    ms = bench.kernel_ms.get(kernel) or largest.kernel_ms.get(kernel) or largest.median_ms
    parts = [format_ms(ms)]
    flops_bound = (largest.pct_peak_flops or 0) > (largest.pct_peak_bw or 0)
    if flops_bound and largest.tflops:
        parts.append(f"{largest.tflops:.3g} TFLOP/s")
        parts.append(f"{largest.pct_peak_flops:.0f}% of peak")
    elif largest.gbps:
        parts.append(format_rate(largest.gbps))
        if largest.pct_peak_bw is not None:
            parts.append(f"{largest.pct_peak_bw:.0f}% of peak")
    return " · ".join(parts)


def hints_for(state: ServerState, uri: str, text: str, first_line: int, last_line: int) -> list[types.InlayHint]:
    model = state.documents.cached_model(text)
    if model is None or not model.triton:
        return []
    positions = Positions(text, state.server.workspace.position_codec)
    report = state.checks.cache.get(model.key)
    compared = state.compared(report)
    versus = against_base(compared.bench, compared.rev) if compared is not None and compared.bench else None
    record = state.optimizer.record_for(uri, model.key)
    hints = []
    for kernel in model.kernels:
        if not first_line <= kernel.line <= last_line:
            continue
        labels = []
        if report is not None and report.bench is not None:
            label = latency_label(report.bench, kernel.name)
            if label:
                labels.append(label)
        if versus:
            labels.append(versus)
        tooltip = None
        if record is not None and record.speedup and record.kernel in (None, kernel.name):
            labels.append(f"⚡ {record.speedup:.2f}x faster candidate found")
            tooltip = types.MarkupContent(types.MarkupKind.Markdown, record.candidates_markdown())
        if labels:
            hints.append(
                types.InlayHint(
                    position=positions.end_of_line(kernel.line),
                    label=" · ".join(labels),
                    kind=types.InlayHintKind.Type,
                    padding_left=True,
                    tooltip=tooltip,
                )
            )
    return hints


def register(state: ServerState) -> None:
    documents = state.documents

    @state.server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    async def inlay_hints(params: types.InlayHintParams) -> list[types.InlayHint] | None:
        uri = params.text_document.uri
        doc = documents.open_document(uri)
        if doc is None:
            return None
        text = doc.source
        if documents.cached_model(text) is None:
            await documents.model_of(text, documents.path_of(uri))
            doc = documents.open_document(uri)
            if doc is None or doc.source != text:
                return None
        return hints_for(state, uri, text, params.range.start.line + 1, params.range.end.line + 1)
