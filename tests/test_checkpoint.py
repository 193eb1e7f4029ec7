"""Checkpoints: one folder per file path, a lock per checkpoint, atomic state, each candidate stored once (as edits of
the original), and a clear one-line error for anything that is not a checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import filelock
import pytest

from geak.agent import checkpoint
from geak.agent.checkpoint import Checkpoint, CheckpointError, paths_for
from geak.agent.code_diff import decode, encode
from geak.agent.memory import Candidate, ChainState, Evaluation, ProblemMemory

FIXTURES = Path(__file__).parent / "fixtures"
KERNEL = (FIXTURES / "add_native.py").read_text().split("def test_add")[0]


def memory_of(text: str, name: str = "add.py") -> ProblemMemory:
    memory = ProblemMemory(name, text.split("def test_add")[0], original_text=text)
    memory.chains = [ChainState(0)]
    return memory


def search_candidate(memory: ProblemMemory, n: int, block: int) -> Candidate:
    code = memory.original_text.replace("BLOCK=256", f"BLOCK={block}")
    c = Candidate(f"s{n}", -1, 0, "search", code, note=f"BLOCK={block}")
    c.evaluation = Evaluation(True, "exec", "passed", called=True)
    return c


def started(tmp_path: Path, memory: ProblemMemory, file: Path) -> Checkpoint:
    store = Checkpoint(paths_for(tmp_path / "runs", file), file)
    store.open()
    store.start(memory, None)
    return store


def test_code_edits_round_trip():
    base = "a\nb\nc\nd\n"
    for text in ("a\nb\nc\nd\n", "a\nX\nc\nd\n", "a\nc\n", "", "new\n", "a\nb\nc\nd", "z\na\nb\nc\nd\ny\n"):
        assert decode(base, encode(base, text)) == text
    with pytest.raises(ValueError):
        decode("a\n", [5])


def test_each_candidate_is_stored_once_as_edits_of_the_original(tmp_path):
    filler = "".join(f"CONSTANT_{i} = {i * 7919 % 104729}  # ballast to make the file big\n" for i in range(100_000))
    text = (FIXTURES / "add_native.py").read_text() + filler
    source = tmp_path / "add.py"
    source.write_text(text)
    memory = memory_of(text)
    store = started(tmp_path, memory, source)
    for n, block in enumerate((32, 64, 128, 512, 1024, 2048, 4096, 8192), 1):
        memory.candidates.append(search_candidate(memory, n, block))
        store.save({"model_id": None}, {})
        assert store.paths.latest.stat().st_size < 20_000  # the state rewritten after every candidate holds no code
    store.close()
    total = sum(f.stat().st_size for f in store.paths.root.iterdir())
    assert len(text) > 5_000_000 and total < 2.1 * len(text)  # the file twice (whole and kernel), not per candidate
    loaded = checkpoint.load(store.paths.latest)
    assert [c.code for c in loaded.memory.candidates] == [c.code for c in memory.candidates]
    assert loaded.memory.original_text == text and loaded.memory.original_code == memory.original_code


def test_changes_are_appended_and_a_half_written_line_is_dropped(tmp_path):
    source = FIXTURES / "add_native.py"
    memory = memory_of(source.read_text())
    store = started(tmp_path, memory, source)
    memory.candidates.append(search_candidate(memory, 1, 64))
    store.save({}, {"requests": 1})
    memory.candidates[0].note = "changed later"
    store.save({}, {"requests": 1})
    lines = store.paths.candidates.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1]) == {"id": "s1", "note": "changed later"}
    store.close()
    with open(store.paths.candidates, "a") as f:
        f.write('{"id": "s2", "chain": -1, "rou')  # killed mid-append, before the state was replaced
    loaded = checkpoint.load(store.paths.latest)
    assert [c.note for c in loaded.memory.candidates] == ["changed later"] and loaded.usage == {"requests": 1}
    again = Checkpoint(store.paths, source)
    again.open()
    again.start(loaded.memory, loaded)  # continuing: append after the valid part
    loaded.memory.candidates.append(search_candidate(loaded.memory, 2, 128))
    again.save({}, {})
    again.close()
    assert [c.id for c in checkpoint.load(store.paths.latest).memory.candidates] == ["s1", "s2"]


def test_a_second_run_on_the_same_file_is_refused(tmp_path):
    source = FIXTURES / "add_native.py"
    first = started(tmp_path, memory_of(source.read_text()), source)
    second = Checkpoint(paths_for(tmp_path / "runs", source), source)
    with pytest.raises(CheckpointError, match="another geak run is optimizing") as info:
        second.open()
    assert "\n" not in str(info.value)
    first.close()
    second.open()  # free again
    second.close()


def test_state_is_replaced_atomically_through_unique_temporary_files(tmp_path):
    target = tmp_path / "state.json"
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for _ in range(50):
                checkpoint._atomic_write(target, json.dumps({"writer": n}))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and json.loads(target.read_text())["writer"] in range(4)
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary file left behind


def test_files_with_the_same_name_have_their_own_checkpoints(tmp_path):
    a, b = tmp_path / "a" / "add.py", tmp_path / "b" / "add.py"
    for f in (a, b):
        f.parent.mkdir()
        f.write_text((FIXTURES / "add_native.py").read_text())
    assert paths_for(tmp_path, a).root != paths_for(tmp_path, b).root
    assert paths_for(tmp_path, a).root.name.startswith("add-")


def test_a_fresh_run_moves_the_earlier_checkpoint_aside(tmp_path):
    source = FIXTURES / "add_native.py"
    memory = memory_of(source.read_text())
    store = started(tmp_path, memory, source)
    memory.candidates.append(search_candidate(memory, 1, 64))
    store.save({}, {})
    store.close()
    again = Checkpoint(store.paths, source)
    again.open()
    again.start(memory_of(source.read_text()), None)
    again.close()
    assert again.moved_to == store.paths.root.with_name(store.paths.root.name + ".1")
    kept = checkpoint.load(again.moved_to / store.paths.latest.name)
    assert [c.id for c in kept.memory.candidates] == ["s1"]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[1, 2, 3]", "not a GEAK checkpoint: the top level"),
        ('{"format": 1}', "has format 1, not 2"),
        ('{"format": 2, "source": "x"}', "not a GEAK checkpoint: config: Field required"),
        ("{not json", "not valid JSON"),
        (None, "is a folder, not a file"),
    ],
)
def test_what_is_not_a_checkpoint_gets_one_line(tmp_path, content, words):
    path = tmp_path / "add_mem.json"
    if content is None:
        path.mkdir()
    else:
        path.write_text(content)
    with pytest.raises(CheckpointError) as info:
        checkpoint.load(path)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_a_candidate_with_missing_fields_gets_one_line(tmp_path):
    source = FIXTURES / "add_native.py"
    memory = memory_of(source.read_text())
    store = started(tmp_path, memory, source)
    memory.candidates.append(search_candidate(memory, 1, 64))
    store.save({}, {})
    store.close()
    record = json.loads(store.paths.candidates.read_text())
    del record["origin"]
    text = json.dumps(record) + "\n"
    store.paths.candidates.write_text(text)
    state = json.loads(store.paths.latest.read_text())
    store.paths.latest.write_text(json.dumps({**state, "candidate_bytes": len(text)}))
    with pytest.raises(CheckpointError, match=r"a candidate in .* is origin: Field required"):
        checkpoint.load(store.paths.latest)


def geak(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "geak.server.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("content", ["[1, 2, 3]", '{"format": 1}', None])
def test_resume_from_a_wrong_checkpoint_exits_2_in_one_line(tmp_path, content):
    latest = paths_for(tmp_path, FIXTURES / "add_native.py").latest
    latest.parent.mkdir(parents=True)
    if content is None:
        latest.mkdir()
    else:
        latest.write_text(content)
    p = geak("optimize", str(FIXTURES / "add_native.py"), "--backend", "interpreter", "--output", str(tmp_path),
             "--resume")  # fmt: skip
    lines = [line for line in p.stderr.splitlines() if line.startswith("geak")]
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(lines) == 1, p.stderr
    assert str(latest) in lines[0]


def test_a_cli_run_on_a_file_another_run_holds(tmp_path):
    paths = paths_for(tmp_path, FIXTURES / "add_native.py")
    with filelock.FileLock(paths.lock):  # another run (the lock is what `geak optimize` takes)
        p = geak("optimize", str(FIXTURES / "add_native.py"), "--backend", "interpreter", "--output", str(tmp_path))
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "another geak run is optimizing" in lines[0] and str(paths.lock) in lines[0]
