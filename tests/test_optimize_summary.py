"""The one line the editor shows of an optimize (``optimizing.answer_summary``): the confirmed speedup with its
interval and device, and the search's finding where nothing was faster. (The winner's review notes, through the real
path: ``test_lsp_optimize``.)"""

from geak.agent.memory import Candidate, Evaluation
from geak.agent.outcome import OptimizeResult
from geak.server.lsp.optimizing import answer_summary


def result(improved: bool, search: dict) -> OptimizeResult:
    evaluation = Evaluation(True, "perf", "", timed=True, latency_ms=0.5, speedup=2.0, speedup_low=1.96,
                            speedup_high=2.04, speedup_verdict="faster")  # fmt: skip
    best = Candidate("s1", 0, 0, "search", "code", evaluation=evaluation) if improved else None
    message = "s1 (search) is 2.0x faster" if improved else "no candidate was significantly faster than the original"
    return OptimizeResult("f.py", improved, message, True, {"device": "NVIDIA H200"}, 1.0, best, None, "", [],
                          search=search)  # fmt: skip


def test_a_confirmed_winner_says_its_speedup_interval_and_device():
    speedup, summary = answer_summary(result(True, {"summary": "mm: SPLIT_K 1→2: 2.000x"}), "mm")
    assert speedup == 2.0
    assert summary == "2.00x faster [1.96, 2.04] on NVIDIA H200 (mm)"


def test_without_a_winner_the_search_says_what_it_found():
    search = {"summary": "its launch configuration already suits this device"}
    speedup, summary = answer_summary(result(False, search), None)
    assert speedup is None
    assert summary == "no candidate was significantly faster than the original (its launch configuration already " \
                      "suits this device)"
