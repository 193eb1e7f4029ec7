"""`geak check --base REV`, `geak check --changed` and `geak bench --base REV` in real git repositories made by the
tests, on Triton's CPU interpreter: outputs compared with the committed version, what is said once (new, renamed, a
base that fails its own test), and bad input in one line with exit 2."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml
from git_repos import new_repo, scale_file

from geak.server.cli.entry import main

CPU = ("--backend", "interpreter")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    made = new_repo(tmp_path / "repo")
    made.write("scale.py", scale_file())
    made.commit("first")
    monkeypatch.chdir(made.root)
    return made


def geak(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    said = capsys.readouterr()
    return code, said.out, said.err


def test_an_edit_that_changes_outputs_is_caught_at_the_base_though_its_own_test_passes(repo, capsys):
    repo.write("scale.py", scale_file("x * 3.0"))
    code, out, err = geak(capsys, "check", "scale.py", *CPU)
    assert code == 0, out + err  # its own test checks only the shape
    code, out, err = geak(capsys, "check", "scale.py", "--base", "HEAD", "--json", *CPU)
    assert code == 1, err
    data = json.loads(out)
    assert data["base"]["rev"] == "HEAD" and data["base"]["commit"] == repo.git("rev-parse", "HEAD")
    (file,) = data["files"]
    assert file["verdict"] == "fail" and file["base_path"] == "scale.py"
    assert file["message"].startswith("against HEAD:scale.py: output differs")
    assert file["alone"] is None  # the same test section as the base's: the check against it ran that test
    result = file["result"]
    assert result["reference"] == "HEAD:scale.py" and not result["comparison"]["ok"]
    assert result["tests"][0]["name"] == "test_scale" and result["tests"][0]["ok"]
    assert any(d["file"] == "HEAD:scale.py" for d in result["diagnostics"])  # the base's test line, by its name
    code, out, _ = geak(capsys, "check", "scale.py", "--base", "HEAD", *CPU)
    assert code == 1 and "FAIL" in out and "vs HEAD (" in out and "HEAD:scale.py:" in out


def test_a_white_space_or_comment_edit_is_the_same_as_head_and_runs_nothing(repo, capsys):
    text = scale_file().replace("mask = offs < n", "mask = offs < n  # the tail")
    repo.write("scale.py", text.replace("\n\n\n", "\n\n\n\n"))
    code, out, err = geak(capsys, "check", "scale.py", "--base", "HEAD", "--json", *CPU)
    assert code == 0, err
    (file,) = json.loads(out)["files"]
    assert (file["verdict"], file["message"]) == ("same", "same as HEAD")
    assert file["alone"] is None and file["result"] is None and file["bench"] is None
    code, out, err = geak(capsys, "bench", "scale.py", "--base", "HEAD", *CPU)  # no GPU needed: nothing to time
    assert code == 0, err
    assert "SAME" in out and "same as HEAD: nothing to time" in out


def test_a_detached_head_is_the_base(repo, capsys):
    repo.write("scale.py", scale_file("x + x"))
    repo.commit("second")
    repo.git("checkout", "-q", "--detach", "HEAD~1")
    repo.write("scale.py", scale_file() + "\n# a comment\n")
    code, out, err = geak(capsys, "check", "--changed", "--json", *CPU)
    assert code == 0, err
    data = json.loads(out)
    assert data["base"]["commit"] == repo.git("rev-parse", "HEAD~0")
    assert [(f["verdict"], f["message"]) for f in data["files"]] == [("same", "same as HEAD")]


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_bad_input_is_one_line_and_exit_2(repo, capsys, tmp_path):
    repo.write("new.py", scale_file())
    repo.write("scale.py", scale_file("x * 3.0"))
    code, _, err = geak(capsys, "check", "new.py", "--base", "HEAD", *CPU)
    assert code == 2 and "new.py is not in HEAD (" in one_line(err) and "new since then" in err
    code, _, err = geak(capsys, "check", "scale.py", "--base", "no-such-rev", *CPU)
    assert code == 2 and one_line(err).startswith("geak check: unknown revision 'no-such-rev' in ")
    repo.commit("second: new.py")
    code, _, err = geak(capsys, "bench", "new.py", "--base", "HEAD~1", *CPU)
    assert code == 2 and "new.py is not in HEAD~1 (" in one_line(err)
    code, _, err = geak(capsys, "check", "scale.py", "--base=--output=x", *CPU)
    assert code == 2 and one_line(err) == "geak check: '--output=x' is not a revision"
    outside = tmp_path / "outside.py"
    outside.write_text(scale_file())
    code, _, err = geak(capsys, "check", str(outside), "--base", "HEAD", *CPU)
    assert code == 2 and "is not in a git repository" in one_line(err)
    code, _, err = geak(capsys, "check", "gone.py", "--base", "HEAD", *CPU)
    assert code == 2 and one_line(err) == "geak check: gone.py: no such file or folder"
    code, _, err = geak(capsys, "check", "scale.py", "--max-slowdown", "1.05", *CPU)
    assert code == 2 and "--max-slowdown needs --base REV or --changed" in one_line(err)
    code, _, err = geak(capsys, "check", "--changed", "--against", "scale.py", *CPU)
    assert code == 2 and "--changed compares with a git revision" in one_line(err)
    with pytest.raises(SystemExit) as exited:
        main(["check", "scale.py", "--base", "HEAD", "--max-slowdown", "0.9"])
    assert exited.value.code == 2 and "not a slowdown factor of at least 1" in capsys.readouterr().err


def test_nothing_changed_is_all_good(repo, capsys):
    repo.write("notes.md", "not a kernel\n")
    code, out, err = geak(capsys, "check", "--changed", *CPU)
    assert code == 0, err
    assert out.startswith("no Triton file changed since HEAD (")


def test_changed_checks_every_changed_kernel_against_its_version_at_the_base(repo, capsys):
    """Three changed kernels (one computing otherwise, one renamed and computing the same in another way, one new),
    one whose edit is a comment, one left alone, and a changed Python file that is no kernel."""
    repo.write("kernels/wrong.py", scale_file())
    repo.write("kernels/refactored.py", scale_file())
    repo.write("kernels/commented.py", scale_file())
    repo.write("kernels/untouched.py", scale_file())
    repo.write("helpers.py", "A = 1\n")
    repo.commit("kernels")
    repo.write("kernels/wrong.py", scale_file("x * 2.0 + 1.0"))
    repo.git("mv", "kernels/refactored.py", "kernels/doubled.py")
    repo.write("kernels/doubled.py", scale_file("x + x"))
    repo.write("kernels/added.py", scale_file("x * 5.0"))
    repo.write("kernels/commented.py", scale_file().replace("out = torch", "# allocated here\n    out = torch"))
    repo.write("helpers.py", "A = 2\n")
    code, out, err = geak(capsys, "check", "--changed", "--json", *CPU)
    assert code == 1, err
    data = json.loads(out)
    by_name = {f["file"].rsplit("/", 1)[-1]: f for f in data["files"]}
    assert sorted(by_name) == ["added.py", "commented.py", "doubled.py", "wrong.py"]
    assert data["summary"] == {"files": 4, "pass": 2, "same": 1, "fail": 1, "slower": 0, "not checkable": 0,
                               "bad input": 0}  # fmt: skip
    wrong, doubled, added = by_name["wrong.py"], by_name["doubled.py"], by_name["added.py"]
    assert wrong["verdict"] == "fail" and "against HEAD:kernels/wrong.py" in wrong["message"]
    assert doubled["verdict"] == "pass" and doubled["message"] == "same outputs as HEAD:kernels/refactored.py"
    assert doubled["base_path"] == "kernels/refactored.py"
    assert doubled["note"] == "renamed from kernels/refactored.py since HEAD"
    assert doubled["result"]["comparison"]["ok"] and doubled["result"]["comparison"]["fresh_calls"] > 0
    assert added["verdict"] == "pass" and added["note"] == "new since HEAD: checked alone"
    assert added["base_path"] is None and added["alone"]["ok"] and added["result"] is None
    assert by_name["commented.py"]["verdict"] == "same" and by_name["commented.py"]["result"] is None


def test_the_pre_commit_hook_compares_the_staged_triton_files_it_is_given_and_ignores_the_others(repo, capsys):
    """The hook of `.pre-commit-hooks.yaml` run as pre-commit runs it: its entry, the user's args, then the names
    of the staged Python files."""
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "geak-check" and hook["types"] == ["python"] and hook["require_serial"]
    program, *entry = shlex.split(hook["entry"])
    assert program == "geak"
    repo.write("wrong.py", scale_file())
    repo.commit("wrong.py")
    repo.write("helpers.py", "A = 1\n")
    repo.write("scale.py", scale_file().replace("BLOCK=64", "BLOCK = 64"))
    repo.write("wrong.py", scale_file("x * 4.0"))
    repo.write("unstaged.py", scale_file())  # not staged: pre-commit does not name it
    repo.git("add", "helpers.py", "scale.py", "wrong.py")
    staged = repo.git("diff", "--cached", "--name-only").split()
    code, out, err = geak(capsys, *entry, *CPU, "--json", *staged)
    assert code == 1, err
    files = {f["file"]: f["verdict"] for f in json.loads(out)["files"]}
    assert files == {"scale.py": "same", "wrong.py": "fail"}


def test_a_base_that_fails_its_own_test_is_said_once_and_the_file_checked_alone(repo, capsys):
    repo.write("scale.py", scale_file(check="\n    assert out.sum() != out.sum()  # always fails"))
    repo.commit("a test that cannot pass")
    repo.write("scale.py", scale_file())
    code, out, err = geak(capsys, "check", "scale.py", "--base", "HEAD", "--json", *CPU)
    assert code == 0, err
    (file,) = json.loads(out)["files"]
    assert file["verdict"] == "pass" and file["alone"]["ok"] and file["result"] is None
    assert file["note"].startswith("HEAD:scale.py does not pass its own test or import (")
    assert file["note"].endswith("): checked alone") and "geak-base-" not in file["note"]
