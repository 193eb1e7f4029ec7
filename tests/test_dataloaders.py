"""The suite loaders (GEAK's dataloader protocol) over small fixture suites in both published layouts, a user's
dataloader by module:Class, and the real suites in ../shared/suites when they are there."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from geak.agent.batch.dataloaders import (
    Dataloader,
    DataloaderError,
    ProblemError,
    ProblemState,
    ROCmLoader,
    SuiteError,
    TritonBenchLoader,
    load_dataloader,
    reference_text,
)

SUITES = Path(__file__).parent / "fixtures" / "suites"
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "suites"
if not SHARED.is_dir():  # a worktree sits one level deeper than the main checkout
    SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "suites"


def test_tritonbench_fixture_suite():
    suite = TritonBenchLoader(SUITES / "tritonbench")
    assert isinstance(suite, Dataloader) and len(suite) == 4
    add = suite.find(filename="add_example.py")
    assert add.difficulty == "1" and add.instruction.startswith("Write a Triton kernel `add_kernel(")
    assert add.test_code.startswith("import torch") and "result_gold = test_add()" in add.test_code
    assert Path(add.path).name == "add_example.py" and add.label.endswith("<|im_end|>")
    relu = suite.find(filename="relu_kernel.py")  # separator with trailing white space
    assert relu.test_code.lstrip().startswith("import torch") and "def test_relu" in relu.test_code
    simple = TritonBenchLoader(SUITES / "tritonbench", instruction="simple")
    expected = "Write a Triton kernel add_kernel and a wrapper add(x, y) that adds two vectors."
    assert simple.find(filename="add_example.py").instruction == expected


def test_tritonbench_matching_by_instruction_and_label():
    suite = TritonBenchLoader(SUITES / "tritonbench")
    row = suite.find(filename="row_sum.py")
    assert suite.find(instruction=row.instruction) is row
    assert suite.find(instruction=f"You are an expert.\n{row.instruction}\nAnswer in one block.") is row  # in a prompt
    simple = "Write a Triton kernel that sums each row of a matrix."
    assert suite.find(instruction=simple) is row  # either instruction variant
    assert suite.find(label=row.label.replace("<|im_end|>", "<|EOT|>")) is row
    assert suite.find(label="y") is None and suite.find(instruction="unrelated") is None


def test_load_ps_reads_both_prediction_formats(tmp_path):
    suite = TritonBenchLoader(SUITES / "tritonbench")
    add, relu = suite.find(filename="add_example.py"), suite.find(filename="relu_kernel.py")
    lines = [
        {"instruction": add.instruction, "predict": "code A", "label": add.label},  # TritonBench's format
        {"filename": "relu_kernel.py", "predict": "code B", "speedup": 1.5, "exe_pass": True},  # GEAK's
        {"instruction": "something else", "predict": "x", "label": "y"},
    ]
    path = tmp_path / "predictions.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    states = suite.load_ps(path)
    assert [(s.filename, s.solution) for s in states] == [("add_example.py", "code A"), ("relu_kernel.py", "code B")]
    assert states[1].speedup == 1.5 and states[1].pass_exe and relu.solution is None  # the suite's states untouched
    assert len(suite.unmatched) == 1 and ":3:" in suite.unmatched[0]
    path.write_text('{"predict": 1}\nnot json\n')
    with pytest.raises(SuiteError, match=":2: not valid JSON"):
        suite.load_ps(path)


def test_write_file_is_geak_results_jsonl(tmp_path):
    suite = TritonBenchLoader(SUITES / "tritonbench")
    suite.problem_states[0].solution, suite.problem_states[0].speedup = "new code", 1.2
    suite.write_file(tmp_path / "out" / "results.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4
    assert {"instruction", "label", "filename", "test_code", "predict", "speedup"} <= set(rows[0])
    assert rows[0]["predict"] == "new code" and rows[0]["speedup"] == 1.2
    assert [s.solution for s in suite.load_ps(tmp_path / "out" / "results.jsonl")][:1] == ["new code"]


def test_rocm_fixture_suite():
    suite = ROCmLoader(SUITES / "rocm")
    assert len(suite) == 3 and suite.skipped == []
    add = suite.find(filename="test_add_kernel.py")
    assert add.target_kernel_name == "add_kernel" and add.difficulty is None
    assert "@pytest.mark.parametrize" in add.test_code and "result_gold = {}" in add.test_code
    assert "def add_kernel" not in add.test_code and "def add_kernel" in add.label
    assert suite.find(instruction=add.instruction) is add and suite.find(label=add.label) is add


def test_suite_errors_name_the_path(tmp_path):
    with pytest.raises(SuiteError, match="is not a folder"):
        TritonBenchLoader(tmp_path / "missing")
    (tmp_path / "TritonBench_G_v1").mkdir()
    with pytest.raises(SuiteError, match="no such file"):
        TritonBenchLoader(tmp_path)
    (tmp_path / "TritonBench_G_v1.json").write_text('{"file": "x.py"}')
    with pytest.raises(SuiteError, match="a JSON list of objects"):
        TritonBenchLoader(tmp_path)
    (tmp_path / "TritonBench_G_v1.json").write_text('[{"file": "x.py", "comp_instru": "do it"}]')
    with pytest.raises(SuiteError, match="no problem found"):
        TritonBenchLoader(tmp_path)
    with pytest.raises(SuiteError, match="instruction must be one of"):
        TritonBenchLoader(SUITES / "tritonbench", instruction="medium")


def test_reference_from_label_and_test_code():
    ps = ProblemState(instruction="i", filename="k.py", label="code\n", test_code="def test_k():\n    pass\n")
    text = reference_text(ps)
    assert text.splitlines()[2] == "#" * 146 and text.endswith("def test_k():\n    pass\n")
    with pytest.raises(ProblemError, match="needs `path`"):
        reference_text(ProblemState(instruction="i", filename="k.py", label="code"))


USER_LOADER = '''
from pathlib import Path
from geak.agent.batch.dataloaders import ProblemState

SUITE = Path({suite!r})


class MyKernels:
    """A user's suite: golden code and test code kept apart (no golden file)."""

    def __init__(self, names):
        self.problem_states = []
        for name in names:
            code, test = (SUITE / name).read_text().split("#" * 146)
            self.problem_states.append(ProblemState(instruction="make it fast", filename=name, label=code,
                                                    test_code=test.strip(" \\n") + "\\n", difficulty="easy"))

    def __len__(self):
        return len(self.problem_states)

    def load_ps(self, path):
        return self.problem_states

    def test_opt_correctness(self, code, filename, tmp_dir, exe_dir="pass_exe"):
        raise NotImplementedError

    def write_file(self, path):
        pass
'''


def write_user_loader(folder: Path) -> None:
    source = USER_LOADER.format(suite=str(SUITES / "tritonbench" / "TritonBench_G_v1"))
    (folder / "my_kernels.py").write_text(textwrap.dedent(source))


def test_user_dataloader_by_module_and_class(tmp_path, monkeypatch):
    write_user_loader(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    loader = load_dataloader("my_kernels:MyKernels", {"names": ["add_example.py"]})
    assert len(loader) == 1 and loader.problem_states[0].path is None
    assert "#" * 146 in reference_text(loader.problem_states[0])
    with pytest.raises(DataloaderError, match="cannot import"):
        load_dataloader("no_such_module:X")
    with pytest.raises(DataloaderError, match="has no class Nope"):
        load_dataloader("my_kernels:Nope")
    with pytest.raises(DataloaderError, match=r"failed: .*unexpected keyword"):
        load_dataloader("my_kernels:MyKernels", {"wrong": 1})
    with pytest.raises(DataloaderError, match=r"package\.module:ClassName"):
        load_dataloader("my_kernels")


def test_test_opt_correctness_geak_interface(tmp_path):
    suite = TritonBenchLoader(SUITES / "tritonbench")
    golden = (SUITES / "tritonbench" / "TritonBench_G_v1" / "add_example.py").read_text()
    kernel = golden.split("#" * 146)[0]
    call, exe, speedup, _, _ = suite.test_opt_correctness(kernel, "add_example.py", str(tmp_path / "tmp"),
                                                          str(tmp_path / "exe"))  # fmt: skip
    assert (call, exe, speedup) == (True, True, None)  # no GPU here: no speedup
    assert (tmp_path / "exe" / "add_example.py").read_text() == kernel
    wrong = kernel.replace("x + y", "x - y")
    call, exe, _, _, stderr = suite.test_opt_correctness(wrong, "add_example.py", str(tmp_path / "tmp"),
                                                         str(tmp_path / "exe2"))  # fmt: skip
    assert call and not exe and "output differs from the reference" in stderr
    assert not (tmp_path / "exe2").exists()


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/suites is not present (benchmark data)")
def test_real_suites_load():
    tb = TritonBenchLoader(SHARED / "tritonbench_revised")
    assert len(tb) == 184 and tb.skipped == []
    assert {ps.difficulty for ps in tb.problem_states} == {"1", "2", "3", "4", "5"}
    assert all(tb.find(instruction=ps.instruction) is ps and tb.find(label=ps.label) is ps for ps in tb.problem_states)
    assert all(ps.test_code and "def test_" in ps.test_code for ps in tb.problem_states)
    rocm = ROCmLoader(SHARED / "rocm")
    assert len(rocm) == 31 and all(ps.target_kernel_name for ps in rocm.problem_states)
    assert all(rocm.find(instruction=ps.instruction) is ps for ps in rocm.problem_states)
