"""Configuration of a batch run (`geak run CONFIG.yaml`): one flat YAML file with GEAK's key names.

The batch keys (`RunConfig`: which suite or dataloader, which problems, which mode, where evaluation runs) sit
beside the agent's keys (`AgentConfig`: model, rounds, search, output); `load_run_config` splits and validates
both and reports every bad key at once.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..config import FIELD_NAMES as AGENT_KEYS
from ..config import LEGACY_HINTS, SECRET_KEYS, AgentConfig, ConfigError, _read_yaml_mapping, config_from_mapping


class RunConfig(BaseModel):
    """Which problems to run, how, and where their candidates are evaluated."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    # The problems.
    suite: Literal["tritonbench", "rocm"] | None = None
    dataloader: str | None = None  # "package.module:Class" (a user's own dataloader)
    dataloader_args: dict[str, Any] = Field(default_factory=dict)
    data_path: Path | None = None  # the suite folder (e.g. ../shared/suites/tritonbench_revised)
    py_folder: Path | None = None  # GEAK's key: the golden files
    instruction_path: Path | None = None  # GEAK's key: the instruction JSON
    instruction: Literal["complex", "simple"] = "complex"  # TritonBench's instruction variant
    start_idx: int = Field(0, ge=0)
    datalen: int | None = Field(None, ge=1)
    target_kernels: list[str] | None = None  # GEAK's key: only these files

    # The task.
    mode: Literal["generate", "optimize"] | None = None  # default: generate with a model, optimize without

    # Where evaluation runs.
    backend: Literal["auto", "gpu", "interpreter"] = "auto"
    gpu_ids: list[int] | None = None  # default: every visible GPU (one worker pool each)
    workers: int = Field(1, ge=1)  # evaluators without a GPU (interpreter), or Ray actors on a CPU-only cluster
    jobs_per_gpu: int = Field(2, ge=1)  # jobs a GPU's evaluator runs at once (checks share it, a timing runs alone)
    concurrency: int | None = Field(None, ge=1)  # problems in flight; default jobs_per_gpu per GPU (with a model at
    # least 2 per evaluator, so model calls overlap evaluation), else 1
    ray_address: str | None = None  # "local" or a cluster address ("auto", "ray://host:10001")

    @model_validator(mode="after")
    def _one_source(self) -> RunConfig:
        if (self.suite is None) == (self.dataloader is None):
            raise ValueError("give exactly one of `suite` (tritonbench or rocm) and `dataloader` (module:Class)")
        if (
            self.suite is not None
            and self.data_path is None
            and (self.py_folder is None or self.instruction_path is None)
        ):
            raise ValueError(
                f"suite {self.suite} needs `data_path` (the suite folder) or `py_folder` and `instruction_path`"
            )
        if self.dataloader is not None and ":" not in self.dataloader:
            raise ValueError(f"dataloader {self.dataloader!r}: write it as 'package.module:ClassName'")
        return self

    def loader_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the built-in loader of `suite`."""
        kwargs: dict[str, Any] = {"data_path": self.data_path}
        if self.py_folder is not None:
            kwargs["py_folder"] = self.py_folder
        if self.instruction_path is not None:
            kwargs["instruction_path"] = self.instruction_path
        if self.suite == "tritonbench":
            kwargs["instruction"] = self.instruction
        return kwargs


RUN_KEYS = tuple(RunConfig.model_fields)
PER_FILE_RESUME = ("result_path", "mem_file")


def load_run_config(path: Path | str, overrides: Mapping[str, Any] | None = None) -> tuple[RunConfig, AgentConfig]:
    """Read and validate a batch configuration; raises `ConfigError` listing every problem."""
    path = Path(path).expanduser()
    data = {**_read_yaml_mapping(path), **{k: v for k, v in (overrides or {}).items() if v is not None}}
    source = str(path)
    problems: list[str] = []
    run_part = {k: v for k, v in data.items() if k in RUN_KEYS}
    agent_keys = {*AGENT_KEYS, *SECRET_KEYS, *LEGACY_HINTS} - set(RUN_KEYS)
    agent_part = {k: v for k, v in data.items() if k in agent_keys}
    for key in data:
        if key not in run_part and key not in agent_part:
            close = difflib.get_close_matches(str(key), RUN_KEYS + AGENT_KEYS, n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
            problems.append(
                f"{key}: unknown key{hint}; batch keys: {', '.join(RUN_KEYS)}; agent keys: see `geak optimize`"
            )
    problems += [
        f"{k}: resumes one file; `geak run --resume` continues a batch from output_path"
        for k in PER_FILE_RESUME
        if k in agent_part
    ]
    run = agent = None
    try:
        run = RunConfig(**run_part)
    except ValidationError as e:
        problems += [_describe(err) for err in e.errors(include_url=False)]
    try:
        agent = config_from_mapping(agent_part, source=source)
    except ConfigError as e:
        problems += [line.strip()[2:] for line in str(e).splitlines()[1:]]
    if run is not None and agent is not None:
        if run.mode == "generate" and not agent.model_configured:
            problems.append("mode: generate writes kernels from instructions and needs a model (model_id)")
        if agent.gpu_id is not None and run.gpu_ids is None:
            run.gpu_ids = [agent.gpu_id]
    if problems or run is None or agent is None:
        raise ConfigError(f"Invalid GEAK run configuration in {source}:\n" + "\n".join(f"  - {p}" for p in problems))
    if run.mode is None:
        run.mode = "generate" if agent.model_configured else "optimize"
    return run, agent


def _describe(err: Mapping[str, Any]) -> str:
    key = ".".join(str(part) for part in err["loc"]) or "configuration"
    return f"{key}: {str(err['msg']).removeprefix('Value error, ')}"
