"""`geak run` over suite files with a scripted model whose replies are built from the files themselves, then checked
from the run's own records.

    python benchmarks/scripted_run_report.py [--files 10] [--backend auto|gpu|interpreter] [--out DIR]
    python benchmarks/scripted_run_report.py --backend interpreter --files 3      # a CPU, seconds

Files: `--files N` spread over the suite's kernel sizes (the N smallest with the interpreter, `--pick`), files with
autotuning left out (their checks try every configuration); or `--names a.py,b.py`. The run checks candidates on the
test's inputs and fresh values (`probe_variants` off, so ten files fit one 10-minute GPU call; `--timeout-s` stops
`geak run`, and what it finished is still checked).

An OpenAI-compatible server on loopback (`tests/scripted_llm.py`) answers every request by a fixed plan per file:
*right* (the original kernel with a comment added), *wrong* (every ``tl.store`` value v written as ``1 - (v)``),
*slower* (``num_warps=1`` where the file sets more, or on its first launch of a kernel without autotuning), and
*cut* (a right reply cut in the middle with finish_reason "length"; the client asks again with a larger budget, which
the plan answers right or cuts again). The optimizer is answered with a strategy carrying a token. Files whose kernel
code reaches `diff_mode_min_chars` (by default the median of the chosen files, so both kinds are exercised) get
SEARCH/REPLACE blocks that turn the code the prompt shows into the planned code. Every reply carries a marker comment
that names it, so each candidate of the run is traced to the reply it came from.

The checks, per file, from `results.jsonl` and the problem's checkpoint: a record, complete, without error; one
candidate per code reply (nothing lost); every wrong candidate rejected; every cut reply asked again with a larger
budget, and one cut twice a reply-stage failure that the next prompt tells of; no candidate measured slower than the
original ever the base of an improvement, nor the best; the chosen candidate (or the original) is the one the record
hands back, and correct; the optimizer's strategy token in the implementer's request. Prints a table, writes
`scripted_run.json` (and the requests the server got, `requests.jsonl`) to --out; exit 1 when a check fails.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pytest_httpserver import HTTPServer

from geak.agent import checkpoint
from geak.evaluator import parse_triton_file

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from scripted_llm import ScriptedLLM, ScriptedReply  # noqa: E402

# shared/ inside the checkout (as on the GPU machine), else beside it (a developer's worktree)
SUITE = next((d / "suites" / "tritonbench_revised" for d in (ROOT / "shared", ROOT.parent / "shared") if d.is_dir()),
             ROOT / "shared" / "suites" / "tritonbench_revised")  # fmt: skip
PLANS = (  # the replies to a file's code requests, in order (then "right"); cut2: the retry is cut too
    ("right", "slower", "right"),
    ("wrong", "right", "slower"),
    ("cut", "slower", "wrong"),
    ("slower", "right", "cut2", "right"),
    ("cut2", "right", "slower"),
)
MARK = re.compile(r"# scripted reply (\d+) \((\w+)\)")
TOKEN = re.compile(r"SCRIPTED-STRATEGY-\w+-\d+")
LINE_NUMBER = re.compile(r"^[ \t]*\d+\| ?", re.MULTILINE)


# ------------------------------------------------------------------------------------------ replies from the file


def with_mark(code: str, number: int, kind: str) -> str:
    """`code` with the reply's marker comment before its first kernel: a harmless change."""
    at = re.search(r"^@", code, re.MULTILINE)
    at = at.start() if at else 0
    return code[:at] + f"# scripted reply {number} ({kind})\n" + code[at:]


def wrong(code: str) -> str | None:
    """Every ``tl.store(ptr, v, ...)`` writing ``1 - (v)``: outputs change."""
    edits = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("tl.store") and len(node.args) >= 2:
            value = node.args[1]
            edits.append((value.lineno, value.col_offset, value.end_lineno, value.end_col_offset))
    return _replace_spans(code, edits, lambda text: f"1 - ({text})") if edits else None


def slower(code: str) -> str | None:
    """One warp per program: every ``num_warps=K`` (K > 1) set to 1, or, where the file sets none, on the first launch
    of a kernel without autotuning; None when neither applies."""
    changed = re.sub(r"\bnum_warps\s*=\s*([2-9]|[1-9]\d+)\b", "num_warps=1", code)
    if changed != code:
        return changed
    if "num_warps" in code:
        return None
    tree = ast.parse(code)
    plain = {
        f.name
        for f in tree.body
        if isinstance(f, ast.FunctionDef)
        and any("jit" in ast.unparse(d) for d in f.decorator_list)
        and not any("autotune" in ast.unparse(d) or "heuristics" in ast.unparse(d) for d in f.decorator_list)
    }
    launches = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) and ast.unparse(n.func.value) in plain
    ]
    if not launches:
        return None
    call = min(launches, key=lambda n: (n.lineno, n.col_offset))
    last = max([*call.args, *call.keywords], key=lambda n: (n.end_lineno, n.end_col_offset), default=None)
    if last is None:
        return None
    return _replace_spans(code, [(last.end_lineno, last.end_col_offset, last.end_lineno, last.end_col_offset)],
                          lambda _: ", num_warps=1")  # fmt: skip


def _replace_spans(code: str, spans: list[tuple[int, int, int, int]], how) -> str:
    lines = code.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode()) + 1)
    data = code.encode()
    for l1, c1, l2, c2 in sorted(spans, reverse=True):
        start, end = offsets[l1 - 1] + c1, offsets[l2 - 1] + c2
        data = data[:start] + how(data[start:end].decode()).encode() + data[end:]
    return data.decode()


def edit_blocks(shown: str, target: str) -> str:
    """SEARCH/REPLACE blocks that turn `shown` into `target`, each SEARCH unique in `shown`."""
    a, b = shown.rstrip("\n").split("\n"), target.rstrip("\n").split("\n")
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    changes = [op[1:] for op in matcher.get_opcodes() if op[0] != "equal"]
    for context in (2, 4, 8, 16, 64, len(a)):
        spans: list[tuple[int, int, int, int]] = []
        for i1, i2, j1, j2 in changes:  # the lines around a change are equal in both: the same offset
            lo, hi = max(0, i1 - context), min(len(a), i2 + context)
            if spans and lo <= spans[-1][1]:  # overlaps the block before: one block
                lo_a, _, lo_b, _ = spans.pop()
                spans.append((lo_a, hi, lo_b, j2 + hi - i2))
            else:
                spans.append((lo, hi, j1 - (i1 - lo), j2 + hi - i2))
        if all(_occurrences(a, a[i1:i2]) == 1 for i1, i2, _, _ in spans):
            break
    return "".join(
        "<<<<<<< SEARCH\n" + "\n".join(a[i1:i2]) + "\n=======\n" + "\n".join(b[j1:j2]) + "\n>>>>>>> REPLACE\n"
        for i1, i2, j1, j2 in spans
    )


def _occurrences(lines: list[str], window: list[str]) -> int:
    """How often `window` (without its opening and closing blank lines, as the applier reads it) is in `lines`."""
    while window and not window[0].strip():
        window = window[1:]
    while window and not window[-1].strip():
        window = window[:-1]
    n = len(window)
    return sum(lines[i : i + n] == window for i in range(len(lines) - n + 1)) if n else 0


# ------------------------------------------------------------------------------------------ the scripted model


@dataclass
class FileState:
    stem: str
    original: str  # the kernel section
    plan: tuple[str, ...]
    fingerprint: set[str] = field(default_factory=set)  # lines no other chosen file has
    made: dict[int, tuple[str, str]] = field(default_factory=dict)  # reply number: (planned kind, full code)
    served: list[dict[str, Any]] = field(default_factory=list)  # what each request was and got
    strategies: list[str] = field(default_factory=list)
    last: tuple[str, int | None, str] | None = None  # messages, max_tokens, and the kind of the last code reply


class ScriptedModel:
    """Builds each reply from the file a request is about (found by lines only it has)."""

    def __init__(self, files: dict[str, FileState]):
        self.files = files
        self.requests: list[dict[str, Any]] = []
        self.unknown = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        with self._lock:
            self.requests.append(body)
            text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
            state = max(self.files.values(), key=lambda s: sum(line in text for line in s.fingerprint))
            if not any(line in text for line in state.fingerprint):
                self.unknown += 1
                return ScriptedReply("I cannot tell which file this is about.")
            return self._answer(state, body, text)

    def _answer(self, state: FileState, body: dict[str, Any], text: str) -> ScriptedReply:
        messages = json.dumps(body.get("messages"))
        budget = body.get("max_tokens") or body.get("max_completion_tokens")
        user = str(body["messages"][-1].get("content", ""))
        entry: dict[str, Any] = {"request": len(self.requests), "max_tokens": budget}
        state.served.append(entry)
        if "do not write code" in user.lower():
            token = f"SCRIPTED-STRATEGY-{state.stem}-{len(state.strategies) + 1}"
            state.strategies.append(token)
            entry.update(kind="optimizer", token=token)
            analysis = "## Analysis\nThe candidates are limited by memory traffic. " * 30
            return ScriptedReply(f"{analysis}\n## Strategy\n1. {token}: keep the access pattern, one warp less.\n")
        retry = state.last is not None and state.last[0] == messages and state.last[1] != budget
        entry["tokens_seen"] = TOKEN.findall(user)
        entry["says_truncated"] = "truncated" in user
        entry["diff_mode"] = "<<<<<<< SEARCH" in text
        if retry:
            kind = "cut" if state.last[2] == "cut2" else "right"
            entry.update(kind=f"retry of {state.last[2]}")
        else:
            number_of_code = sum(1 for e in state.served if e.get("code_reply"))
            kind = state.plan[number_of_code] if number_of_code < len(state.plan) else "right"
            entry["code_reply"] = True
            entry["kind"] = kind
        number = len(state.made) + 1
        target, made_kind = self._target(state, kind, number)
        state.made[number] = (made_kind, target)
        entry.update(reply=number, made=made_kind)
        state.last = (messages, budget, kind if not retry else state.last[2])
        if entry["diff_mode"]:
            body_text = "Edits:\n" + edit_blocks(self._shown(state, text), target)
        else:
            body_text = f"Here is the module.\n\n```python\n{target}```\n"
        if made_kind.startswith("cut"):
            return ScriptedReply(body_text[: int(len(body_text) * 0.6)], finish_reason="length")
        return ScriptedReply(body_text)

    def _target(self, state: FileState, kind: str, number: int) -> tuple[str, str]:
        """The planned code (the kind it really is: a kind that does not apply to the file falls back to right)."""
        base = state.original
        if kind == "wrong" and (changed := wrong(base)) is not None:
            return with_mark(changed, number, "wrong"), "wrong"
        if kind == "slower" and (changed := slower(base)) is not None:
            return with_mark(changed, number, "slower"), "slower"
        if kind in ("cut", "cut2"):
            return with_mark(base, number, kind), kind
        return with_mark(base, number, "right"), "right"

    def _shown(self, state: FileState, text: str) -> str:
        """The code the prompt asks to edit: the latest of this file's codes it shows, else the original."""
        plain = LINE_NUMBER.sub("", text)
        for _, code in sorted(state.made.items(), reverse=True)[1:]:  # not the reply being made
            if code[1].rstrip() in plain:
                return code[1]
        return state.original


# ------------------------------------------------------------------------------------------ the run


def choose(suite: Path, count: int, pick: str, names: list[str] | None) -> list[Path]:
    folder = suite / "TritonBench_G_v1"
    files = [folder / n for n in names] if names else sorted(folder.glob("*.py"))
    if names:
        return files
    files = [f for f in files if "autotune" not in f.read_text()]  # a check tries every configuration: minutes each
    sized = sorted(files, key=lambda p: len(parse_triton_file(p.read_text(), str(p)).kernel_section))
    if pick == "smallest" or count >= len(sized):
        return sized[:count]
    step = (len(sized) - 1) / max(count - 1, 1)
    return [sized[round(i * step)] for i in range(count)]


def fingerprints(states: dict[str, FileState], files: list[Path]) -> None:
    """Each file's lines that no other chosen file has, from its code and its test (every prompt shows either its
    test or code derived from it, and a planned edit changes a line or two)."""
    texts = {f.stem: f.read_text() for f in files}
    lines = {s: {ln.strip() for ln in text.split("\n") if len(ln.strip()) > 12} for s, text in texts.items()}
    for stem, own in lines.items():
        others = set().union(*(v for k, v in lines.items() if k != stem))
        states[stem].fingerprint = own - others


def run_geak(out: Path, files: list[Path], llm: ScriptedLLM, args, diff_chars: int) -> tuple[int, str]:
    config = {
        "suite": "tritonbench",
        "data_path": str(args.suite),
        "target_kernels": [f.name for f in files],
        "mode": "optimize",
        "backend": args.backend,
        "model_id": "scripted-model",
        "base_url": llm.base_url,
        "max_iteration": args.rounds,
        "search": False,
        "one_shot": False,
        "diff_mode_min_chars": diff_chars,
        "fresh_inputs": 1,  # fresh values still check every candidate; other sizes would cost the 10-minute call
        "probe_variants": False,
        "max_tokens": 8000,
        "timeout_s": 120,
        "max_retries": 0,
        "output_path": str(out / "run"),
        "concurrency": args.concurrency,
        "jobs_per_gpu": args.jobs_per_gpu,
    }
    path = out / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "NO_PROXY": "localhost,127.0.0.1", "no_proxy": "localhost,127.0.0.1"}
    command = [sys.executable, "-m", "geak.server.cli", "run", str(path), "--json"]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout_s)
    except subprocess.TimeoutExpired as e:  # killed: the problems it finished are in results.jsonl
        said = "".join(x.decode(errors="replace") if isinstance(x, bytes) else x for x in (e.stdout, e.stderr) if x)
        return 124, f"geak run stopped after {args.timeout_s:g} s\n{said}"
    return done.returncode, done.stdout + done.stderr


# ------------------------------------------------------------------------------------------ the checks


def verify(state: FileState, record: dict[str, Any] | None, run_dir: Path, source: Path) -> dict[str, Any]:
    row: dict[str, Any] = {"file": source.name, "kernel_chars": len(state.original), "failures": []}
    fail = row["failures"].append
    if record is None:
        fail("no record in results.jsonl")
        return row
    for key in ("filename", "predict", "pass_call", "pass_exe", "history", "candidates", "error", "message"):
        if key not in record:
            fail(f"record lacks `{key}`")
    if record.get("reference_error"):
        row["reference_error"] = record.get("error")
        return row  # the golden file fails here: the loop never ran
    if record.get("error"):
        fail(f"record error: {record['error']}")
    found = sorted((run_dir / "problems").glob(f"{source.stem}-*/{source.stem}_mem.json"))
    if not found:
        fail("no checkpoint of the problem")
        return row
    memory = checkpoint.load(found[0]).memory
    cands = [c for c in memory.candidates if c.origin in ("generate", "reflect", "optimize")]
    code_replies = [e for e in state.served if "reply" in e and not e["kind"].startswith("retry")]
    row.update(
        diff_mode=any(e.get("diff_mode") for e in state.served),
        requests=len(state.served),
        candidates=len(cands),
        plan=[e["made"] for e in code_replies],
    )
    if len(cands) != len(code_replies):
        fail(f"{len(code_replies)} code replies but {len(cands)} candidates")
    traced = {}
    for c in cands:
        found = MARK.search(c.code or "")
        if found:
            traced[c.id] = state.made[int(found.group(1))][0]
    baseline = record.get("baseline_ms") or (memory.baseline.latency_ms if memory.baseline else None)
    slower_measured = {c.id for c in cands if c.passed and c.evaluation.latency_ms and baseline
                       and c.evaluation.latency_ms > baseline}  # fmt: skip
    verdicts = []
    for c in cands:
        kind = traced.get(c.id, "no code")
        ev = c.evaluation
        verdicts.append(f"{c.id}:{kind}:{'ok' if c.passed else ev.stage if ev else '?'}")
        if kind == "wrong" and c.passed:
            fail(f"{c.id}, a wrong candidate, passed")
        if kind in ("right", "slower") and not c.passed:
            fail(f"{c.id}, a {kind} candidate, failed: {ev.message[:160] if ev else ''}")
        if c.origin == "optimize" and c.parent in slower_measured:
            fail(f"{c.id} was built on {c.parent}, measured slower than the original")
    row["candidates_seen"] = verdicts
    for e in state.served:  # cut replies: asked again with a larger budget; cut twice: a reply-stage failure, told
        if e.get("made") in ("cut", "cut2") and not e["kind"].startswith("retry"):
            after = state.served[state.served.index(e) + 1 :]
            retry = after[0] if after else {}
            if not (retry.get("kind", "").startswith("retry") and retry["max_tokens"] > e["max_tokens"]):
                fail(f"cut reply {e['reply']} was not asked again with a larger budget")
    for e in state.served:  # a reply cut twice: the next prompt says the reply was truncated
        if e.get("made") == "cut2" and e["kind"].startswith("retry"):
            nxt = next((n for n in state.served if n["request"] > e["request"] and n.get("code_reply")), None)
            if nxt is not None and not nxt["says_truncated"]:
                fail(f"the request after reply {e['reply']}, cut twice, does not say it was truncated")
    for c in cands:
        if c.evaluation and c.evaluation.stage == "reply" and "truncated" not in (c.note or ""):
            fail(f"{c.id} failed at the reply stage for another reason: {c.note}")
    tokens = [e for e in state.served if e.get("kind") == "optimizer"]
    implements = [e for e in state.served if e.get("tokens_seen")]
    for opt in tokens:
        nxt = next((e for e in state.served if e["request"] > opt["request"] and "reply" in e), None)
        if nxt is not None and opt["token"] not in nxt.get("tokens_seen", []):
            fail(f"the strategy {opt['token']} did not reach the implementer's request")
    row.update(optimizer_requests=len(tokens), strategies_reached=len(implements))
    best = next((c for c in memory.candidates if c.code == record.get("predict")), None)
    row["chosen"] = best.id if best else "original"
    if best is not None:
        if not best.passed or best.id in slower_measured or traced.get(best.id) == "wrong":
            fail(f"the chosen {best.id} is not a correct, faster candidate")
    elif record.get("predict") != memory.original_code:
        fail("the record hands back code that is neither a candidate nor the original")
    row["speedup"] = record.get("speedup")
    row["slower_measured"] = sorted(slower_measured)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10, help="how many suite files (default 10)")
    parser.add_argument("--names", help="comma-separated suite file names instead of a pick")
    parser.add_argument("--pick", choices=("spread", "smallest"), help="spread over sizes (GPU default) or smallest")
    parser.add_argument("--suite", type=Path, default=SUITE, help="the TritonBench-revised folder")
    parser.add_argument("--backend", choices=("auto", "gpu", "interpreter"), default="auto")
    parser.add_argument("--rounds", type=int, default=3, help="max_iteration (default 3)")
    parser.add_argument("--diff-mode-min-chars", type=int, help="default: the median kernel size of the files")
    parser.add_argument("--concurrency", type=int, default=6, help="problems in flight (default 6)")
    parser.add_argument("--jobs-per-gpu", type=int, default=4, help="checks at once on the GPU (default 4)")
    parser.add_argument("--timeout-s", type=float, default=540, help="for `geak run`; what finished is still checked")
    parser.add_argument("--out", type=Path, default=Path("scripted_run_out"))
    args = parser.parse_args()
    if args.files < 1 or not (args.suite / "TritonBench_G_v1").is_dir():
        parser.error(f"need --files >= 1 and a suite folder with TritonBench_G_v1/ (got {args.suite})")
    pick = args.pick or ("smallest" if args.backend == "interpreter" else "spread")
    files = choose(args.suite, args.files, pick, args.names.split(",") if args.names else None)
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        parser.error(f"not in {args.suite / 'TritonBench_G_v1'}: {', '.join(missing)}")
    states = {
        f.stem: FileState(f.stem, parse_triton_file(f.read_text(), str(f)).kernel_section, PLANS[i % len(PLANS)])
        for i, f in enumerate(files)
    }
    fingerprints(states, files)
    sizes = [len(s.original) for s in states.values()]
    diff_chars = args.diff_mode_min_chars if args.diff_mode_min_chars is not None else int(statistics.median(sizes))
    args.out.mkdir(parents=True, exist_ok=True)
    model = ScriptedModel(states)
    server = HTTPServer(host="127.0.0.1")
    server.start()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    try:
        llm = ScriptedLLM(server).answer_with(model)
        rc, log = run_geak(args.out, files, llm, args, diff_chars)
    finally:
        server.stop()
    (args.out / "geak_run.log").write_text(log)
    with (args.out / "requests.jsonl").open("w") as f:
        for body in model.requests:
            f.write(json.dumps(body) + "\n")
    run_dir = args.out / "run"
    records = {}
    if (run_dir / "results.jsonl").exists():
        for line in (run_dir / "results.jsonl").read_text().splitlines():
            if line.strip():
                records[Path(json.loads(line)["filename"]).stem] = json.loads(line)
    rows = [verify(states[f.stem], records.get(f.stem), run_dir, f) for f in files]
    ok = rc == 0 and model.unknown == 0 and all(not r["failures"] for r in rows)
    report = {"ok": ok, "geak_run_exit": rc, "unknown_requests": model.unknown, "diff_mode_min_chars": diff_chars,
              "backend": args.backend, "files": rows}  # fmt: skip
    (args.out / "scripted_run.json").write_text(json.dumps(report, indent=1))
    print(f"{'file':34} {'chars':>6} {'diff':>4} {'plan':34} {'cands':>5} {'opt':>3} {'chosen':>8}  verdict")
    for r in rows:
        verdict = "reference failed" if r.get("reference_error") else "ok" if not r["failures"] else r["failures"][0]
        plan = ",".join(r.get("plan", []))[:34]
        print(f"{r['file'][:34]:34} {r['kernel_chars']:>6} {'yes' if r.get('diff_mode') else 'no':>4} {plan:34} "
              f"{r.get('candidates', '-'):>5} {r.get('optimizer_requests', '-'):>3} {r.get('chosen', '-'):>8}  "
              f"{verdict[:100]}")  # fmt: skip
    print(f"geak run exit {rc}; unknown requests {model.unknown}; {'ALL CHECKS PASS' if ok else 'CHECKS FAILED'}")
    if rc != 0:
        print(log[-3000:])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
