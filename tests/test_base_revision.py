"""Reading a file at a git revision (``geak.server.base_revision``), in real repositories made by the tests: revisions
resolved or refused, files at a base (renamed, new, missing), what changed since a base, detached heads, linked
worktrees, shallow clones."""

from __future__ import annotations

import subprocess

import pytest
from git_repos import new_repo, scale_file

from geak.server.base_revision import (
    RevisionError,
    changed_since,
    relative_path,
    repository_root,
    resolve,
    same_code,
    version_at,
)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no repository above the test's own
    made = new_repo(tmp_path / "repo")
    made.write("kernels/scale.py", scale_file())
    made.write("README.md", "kernels\n")
    made.commit("first")
    return made


def test_revisions_of_every_kind_resolve_to_their_commit(repo):
    first = repo.git("rev-parse", "HEAD")
    repo.git("tag", "v1")
    repo.write("kernels/scale.py", scale_file("x + x"))
    second = repo.commit("second")
    repo.git("branch", "old", first)
    for rev, commit in (("HEAD", second), ("HEAD~1", first), ("HEAD^", first), ("v1", first), ("old", first),
                        ("main", second), (first, first), (first[:8], first), (f"{second}~1", first)):  # fmt: skip
        base = resolve(repo.root, rev)
        assert (base.commit, base.rev) == (commit, rev)
    assert resolve(repo.root, "HEAD").name == f"HEAD ({second[:7]})"


@pytest.mark.parametrize("rev", ["no-such-branch", "HEAD~5", "HEAD:kernels/scale.py", "0" * 40])
def test_an_unknown_revision_or_one_that_is_no_commit_is_said_in_one_line(repo, rev):
    with pytest.raises(RevisionError, match=r"^unknown revision .* in .*repo$"):
        resolve(repo.root, rev)


@pytest.mark.parametrize("rev", ["--output=/tmp/x", "-h", "", "HEAD\n--all", "HEAD\x00"])
def test_a_name_that_could_be_an_option_is_refused_before_git_sees_it(repo, rev):
    with pytest.raises(RevisionError, match="is not a revision"):
        resolve(repo.root, rev)


def test_outside_a_repository_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    (tmp_path / "k.py").write_text(scale_file())
    with pytest.raises(RevisionError, match="is not in a git repository"):
        repository_root(tmp_path / "k.py")


def test_a_repository_without_commits_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    empty = new_repo(tmp_path / "empty")
    with pytest.raises(RevisionError, match="has no commit yet"):
        resolve(empty.root, "HEAD")


def test_a_file_at_a_base_is_its_committed_text_found_from_a_subfolder(repo, monkeypatch):
    repo.write("kernels/scale.py", scale_file("x * 3.0"))
    monkeypatch.chdir(repo.root / "kernels")
    root = repository_root(repo.root / "kernels" / "scale.py")
    assert root == repo.root.resolve()
    version = version_at(resolve(root, "HEAD"), repo.root / "kernels" / "scale.py")
    assert (version.path, version.text, version.renamed) == ("kernels/scale.py", scale_file(), False)
    assert version.label(resolve(root, "HEAD")) == "HEAD:kernels/scale.py"


def test_a_file_new_since_the_base_or_missing_at_an_older_one_has_no_text(repo):
    repo.write("kernels/added.py", scale_file())
    new = version_at(resolve(repo.root, "HEAD"), repo.root / "kernels" / "added.py")
    assert new.text is None and new.path == "kernels/added.py"
    repo.commit("added")
    assert version_at(resolve(repo.root, "HEAD"), repo.root / "kernels" / "added.py").text == scale_file()
    assert version_at(resolve(repo.root, "HEAD~1"), repo.root / "kernels" / "added.py").text is None


def test_a_file_renamed_since_the_base_is_read_where_it_was(repo):
    repo.git("mv", "kernels/scale.py", "kernels/scaled.py")
    repo.write("kernels/scaled.py", scale_file("x * 2.0 + 0.0"))
    version = version_at(resolve(repo.root, "HEAD"), repo.root / "kernels" / "scaled.py")
    assert (version.path, version.text, version.renamed) == ("kernels/scale.py", scale_file(), True)
    repo.commit("renamed")  # a rename committed since an older base is followed too
    version = version_at(resolve(repo.root, "HEAD~1"), repo.root / "kernels" / "scaled.py")
    assert (version.path, version.renamed) == ("kernels/scale.py", True)


def test_a_detached_head_is_a_base_like_any_other(repo):
    repo.write("kernels/scale.py", scale_file("x + x"))
    second = repo.commit("second")
    repo.git("checkout", "-q", "--detach", "HEAD~1")
    base = resolve(repo.root, "HEAD")
    assert base.commit != second
    assert version_at(base, repo.root / "kernels" / "scale.py").text == scale_file()
    assert version_at(resolve(repo.root, "main"), repo.root / "kernels" / "scale.py").text == scale_file("x + x")


def test_a_linked_worktree_reads_its_own_head(repo, tmp_path):
    repo.git("worktree", "add", "-q", "-b", "side", str(tmp_path / "side"))
    side = tmp_path / "side" / "kernels" / "scale.py"
    side.write_text(scale_file("x * 4.0"))
    root = repository_root(side)
    assert root == (tmp_path / "side").resolve()
    base = resolve(root, "HEAD")
    assert version_at(base, side).text == scale_file()
    assert changed_since(base) == [side.resolve()]


def test_a_shallow_clone_says_why_an_older_revision_is_unknown(repo, tmp_path):
    repo.write("kernels/scale.py", scale_file("x + x"))
    repo.commit("second")
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo.root}", str(tmp_path / "shallow")],
                   check=True, capture_output=True)  # fmt: skip
    shallow = tmp_path / "shallow"
    assert version_at(resolve(shallow, "HEAD"), shallow / "kernels" / "scale.py").text == scale_file("x + x")
    with pytest.raises(RevisionError, match=r"shallow clone.*git fetch --unshallow"):
        resolve(shallow, "HEAD~1")


def test_changed_since_lists_committed_staged_unstaged_and_untracked_files_not_ignored_or_deleted(repo):
    repo.write("kernels/other.py", scale_file())
    repo.write(".gitignore", "build/\n")
    repo.commit("second")
    repo.write("kernels/committed.py", scale_file())
    repo.commit("third")
    repo.write("kernels/staged.py", scale_file())
    repo.git("add", "kernels/staged.py")
    repo.write("kernels/scale.py", scale_file("x + x"))  # unstaged
    repo.write("notes/untracked.py", "x = 1\n")
    repo.write("build/ignored.py", scale_file())
    repo.git("rm", "-q", "kernels/other.py")
    head = resolve(repo.root, "HEAD")
    names = [p.relative_to(repo.root).as_posix() for p in changed_since(head)]
    assert names == ["kernels/scale.py", "kernels/staged.py", "notes/untracked.py"]
    older = [p.relative_to(repo.root).as_posix() for p in changed_since(resolve(repo.root, "HEAD~1"))]
    assert older == ["kernels/committed.py", "kernels/scale.py", "kernels/staged.py", "notes/untracked.py"]
    under = changed_since(head, [repo.root / "notes"])
    assert [p.name for p in under] == ["untracked.py"]


def test_paths_are_literal_for_git(repo):
    """A file whose name has pathspec magic in it is read as named (never as a pattern or a magic signature)."""
    repo.write("kernels/:(glob)*.py", scale_file("x - 1.0"))
    repo.write("kernels/a b.py", scale_file("x - 2.0"))
    repo.commit("odd names")
    repo.write("kernels/:(glob)*.py", scale_file("x - 3.0"))
    base = resolve(repo.root, "HEAD")
    assert version_at(base, repo.root / "kernels" / ":(glob)*.py").text == scale_file("x - 1.0")
    assert version_at(base, repo.root / "kernels" / "a b.py").text == scale_file("x - 2.0")
    assert [p.name for p in changed_since(base)] == [":(glob)*.py"]


def test_a_file_outside_the_repository_is_refused(repo, tmp_path):
    with pytest.raises(RevisionError, match="is not in the repository at"):
        relative_path(repo.root, tmp_path / "elsewhere.py")


def test_same_code_ignores_white_space_and_comments_only():
    text = scale_file()
    spaced = text.replace("mask = offs < n", "mask = offs <  n  # the tail").replace("\n\n\n", "\n\n\n\n")
    assert same_code(text, spaced)
    assert not same_code(text, scale_file("x * 2.5"))
    assert not same_code(text, text.replace('"""Scales', '"""Multiplies'))  # a docstring is code (a value)
    assert same_code("def (:\n", "def (:\n") and not same_code("def (:\n", "def (: \n")
