"""Where an optimize run starts: a fresh memory of the problem, or a checkpoint's, checked against the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from geak.evaluator import BadInput, TritonFile

from . import checkpoint
from .config import AgentConfig
from .memory import ChainState, Evaluation, ProblemMemory


def starting_memory(
    cfg: AgentConfig,
    original: TritonFile,
    store: checkpoint.Checkpoint,
    resume: bool,
    baseline: Evaluation,
    say: Callable[[str], None],
) -> tuple[ProblemMemory, dict[str, int]]:
    """The memory an optimize run starts from (a fresh one, or a checkpoint's, resumed), and the token usage so far;
    starts `store`. BadInput where the checkpoint cannot be read, is another file's, or the file changed since."""
    key = Path(original.path).name
    loaded = None
    if resume or cfg.mem_file or cfg.result_path:
        try:
            if cfg.mem_file:
                mem_file = Path(cfg.mem_file)
            elif cfg.result_path:
                mem_file = checkpoint.memory_for_results(Path(cfg.result_path))
            else:
                mem_file = store.paths.latest
                if not mem_file.exists():
                    raise checkpoint.CheckpointError(
                        f"no checkpoint of {original.path} to resume in {cfg.output_path} (looked for {mem_file})"
                    )
            loaded = checkpoint.load(mem_file)
        except checkpoint.CheckpointError as e:
            raise BadInput(str(e)) from None
        memory, usage = loaded.memory, loaded.usage
        if memory.file != key:
            raise BadInput(f"the checkpoint {mem_file} is of {memory.file!r}, not {key!r}")
        if memory.original_code != original.kernel_section:
            raise BadInput(f"{original.path} changed since the checkpoint {mem_file} was written: start afresh")
        while len(memory.chains) < cfg.parallel:
            memory.chains.append(ChainState(len(memory.chains), round=cfg.start_iter))
        for state in memory.chains:  # start_iter: the round to resume at, at the earliest
            state.round = max(state.round, cfg.start_iter)
        say(f"resuming from {mem_file}: {len(memory.candidates)} candidate(s) kept")
    else:
        memory, usage = ProblemMemory(key, original.kernel_section, original_text=original.text), {}
        memory.chains = [ChainState(i, round=cfg.start_iter) for i in range(cfg.parallel)]
    memory.baseline = baseline
    try:
        store.start(memory, loaded)
    except OSError as e:
        raise BadInput(f"cannot write the checkpoint in {store.paths.root}: {e.strerror}") from None
    if store.moved_to is not None:
        say(
            f"an earlier checkpoint of {original.path} was kept: moved to {store.moved_to} "
            "(--resume continues the latest instead of starting afresh)",
        )
    return memory, usage
