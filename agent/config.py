"""Agent configuration: a flat YAML file (GEAK's key names where they exist) validated into `AgentConfig`.

Secrets never live in the configuration: the API key is read from the environment variable named by
``api_key_env``. Every problem is reported as one `ConfigError` that names the file and each bad key.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from geak.evaluator import EvalOptions, parse_tolerance_overrides

ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

SECRET_KEYS = ("api_key", "openai_api_key")
SECRET_HINT = (
    "API keys must not be written in configuration files: put the key in an environment variable "
    "(e.g. `export OPENAI_API_KEY=...`) and give that variable's NAME as `api_key_env: OPENAI_API_KEY`"
)

# Keys of the original GEAK's TritonBench harness that have no meaning here.
LEGACY_HINTS = {
    "multi_thread": "use `parallel: N` for independent optimization chains",
    "search_budget": "the launch-configuration search's budget is now a time: `search_time_s: SECONDS` (default 60)",
    **dict.fromkeys(
        (
            "statis_path",
            "py_folder",
            "instruction_path",
            "golden_metrics",
            "perf_ref_folder",
            "perf_G_path",
            "py_interpreter",
            "target_kernels",
        ),
        "a TritonBench dataset setting of the original GEAK harness; `geak optimize` works on the Triton "
        "file you give it, so remove this key (suites run with `geak run CONFIG.yaml`)",
    ),
}


class ConfigError(ValueError):
    """An unusable configuration; the message names the source and every bad key."""


class AgentConfig(BaseModel):
    """All settings of one agent run. Build it with `load_config` or `config_from_mapping` for readable
    errors."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, hide_input_in_errors=True, protected_namespaces=()
    )

    # LLM endpoint (any OpenAI-compatible server).
    model_id: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(1.0, ge=0, le=2)  # generation: the Generator's and the Optimizer's requests
    # The Reflector's requests (a fix of a failed candidate, or a reply without usable code asked again): a fix
    # should stay close to the code it repairs, so it samples more narrowly than a fresh attempt.
    fix_temperature: float = Field(0.2, ge=0, le=2)
    # Sized for reasoning models, which think before they answer: a kernel task takes them 10-30 k tokens of
    # thinking before a module of 2-6 k tokens, and at 30-60 tokens/s such a reply takes 10-15 minutes. A reply cut
    # by the limit is asked once more with twice the budget (``llm.RETRY_BUDGET_FACTOR``).
    max_tokens: int | None = Field(32768, gt=0)
    timeout_s: float = Field(900, gt=0)  # one request, thinking included
    max_retries: int = Field(4, ge=0)
    model_max_failures: int = Field(3, ge=1)  # requests failed in a row (after retries) before the model is given up
    # Seconds without an answer before the model is given up; counted from the first request while it never
    # answered, so more than one request's `timeout_s` (a first reply asked again with a larger budget included).
    model_give_up_s: float = Field(2400, gt=0)
    # A provider's reasoning options, passed through as they are: `reasoning_effort` (OpenAI's, also vLLM's and
    # others') and `extra_body` (fields added to the request's JSON, e.g. `{"chat_template_kwargs":
    # {"enable_thinking": true}}` for vLLM, `{"reasoning": {"effort": "high"}}` for OpenRouter).
    reasoning_effort: str | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)

    # Optimization loop.
    max_iteration: int = Field(10, ge=1)
    parallel: int = Field(1, ge=1)
    ancestor_num: int = Field(5, ge=1)
    descendant_num: int = Field(1, ge=1)
    max_perf_debug_num: int = Field(5, ge=1)
    # Files whose kernel code has at least this many characters are edited with SEARCH/REPLACE blocks (the original
    # GEAK's diff mode), which keep a large module's reply short; 0: every file; null: never (whole modules).
    diff_mode_min_chars: int | None = Field(8000, ge=0)

    # LLM-free launch-configuration search.
    search: bool = True
    search_time_s: float = Field(60, gt=0)  # seconds for screening and confirming (the baseline's own check aside)

    # Evaluation.
    timeout_per_check_s: float = Field(300, gt=0)
    bench_rounds: int | None = Field(None, ge=3)  # fixed timing rounds; None: until the speedup is decided
    fresh_inputs: int = Field(2, ge=0)
    probe_variants: bool = True  # probe also at other sizes and on other values, not only fresh values
    seed: int = Field(EvalOptions.seed, ge=0)  # seeds Python, NumPy and torch before each test
    tolerance: list[str] = Field(default_factory=list)  # DTYPE=RTOL,ATOL overrides of the comparison

    # Retrieval and knowledge.
    corpus_path: list[Path] = Field(default_factory=list)
    one_shot: bool = True
    knowledge: bool = True
    target_gpu: str | None = None

    # Output and resume.
    output_path: Path = Path("geak_runs")
    result_path: Path | None = None
    mem_file: Path | None = None
    start_iter: int = Field(0, ge=0)
    gpu_id: int | None = Field(None, ge=0)
    profiling: bool = False

    @field_validator("model_id", "target_gpu", "base_url", "reasoning_effort", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip()
            return value or None
        return value

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http:// or https:// URL, e.g. http://localhost:8000/v1")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _check_env_name(cls, value: str) -> str:
        if not ENV_VAR_NAME.fullmatch(value):
            raise ValueError(
                "must be the NAME of the environment variable that holds the API key "
                "(letters, digits and underscores, e.g. OPENAI_API_KEY), not the key itself"
            )
        return value

    @field_validator("tolerance", mode="before")
    @classmethod
    def _one_or_many_tolerances(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("tolerance")
    @classmethod
    def _check_tolerances(cls, value: list[str]) -> list[str]:
        parse_tolerance_overrides(value)  # the evaluator's parser is the authority; raises ValueError
        return value

    @field_validator("corpus_path", mode="before")
    @classmethod
    def _one_or_many_paths(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, (str, Path)):
            return [value]
        return value

    @field_validator("corpus_path", "output_path", "result_path", "mem_file")
    @classmethod
    def _expand_home(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [p.expanduser() for p in value]
        return value.expanduser() if isinstance(value, Path) else value

    @property
    def model_configured(self) -> bool:
        """Is an LLM selected (`model_id` set)? Without one only the LLM-free search can run."""
        return self.model_id is not None

    def diff_mode_applies(self, kernel_chars: int) -> bool:
        """Is a file with this much kernel code edited by SEARCH/REPLACE blocks (`diff_mode_min_chars`)?"""
        return self.diff_mode_min_chars is not None and kernel_chars >= self.diff_mode_min_chars

    def to_public_dict(self) -> dict[str, Any]:
        """JSON-ready settings, safe to log or save: holds no secret (credentials in base_url are masked)."""
        data = self.model_dump(mode="json")
        if self.base_url is not None:
            data["base_url"] = mask_url_credentials(self.base_url)
        return data


def mask_url_credentials(url: str) -> str:
    """`url` with its user:password and query string shown as ***."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", parts.fragment))


def mask_credentials_in_text(text: str) -> str:
    """`text` with the user:password of every URL in it shown as ***."""
    return URL_CREDENTIALS.sub(r"\1***@", text)


URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
FIELD_NAMES = tuple(AgentConfig.model_fields)
HIDDEN_INPUTS = {"api_key_env", "base_url"}


def config_from_mapping(data: Mapping[str, Any], *, source: str = "configuration") -> AgentConfig:
    """Validate a mapping of settings; raises `ConfigError` listing every problem, prefixed by `source`."""
    problems = [_unknown_key_problem(str(key)) for key in data if str(key) not in FIELD_NAMES]
    known = {str(k): v for k, v in data.items() if str(k) in FIELD_NAMES}
    try:
        config = AgentConfig(**known)
    except ValidationError as e:
        problems.extend(_describe_error(err) for err in e.errors(include_url=False))
    else:
        if not problems:
            return config
    raise ConfigError(f"Invalid GEAK configuration in {source}:\n" + "\n".join(f"  - {p}" for p in problems))


def load_config(path: Path | str | None, overrides: Mapping[str, Any] | None = None) -> AgentConfig:
    """Read a YAML configuration (or start from the defaults when `path` is None), then apply `overrides`
    (e.g. command-line options; None values are ignored). Raises `ConfigError`."""
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        path = Path(path).expanduser()
        source = str(path)
        data = _read_yaml_mapping(path)
    applied = {k: v for k, v in (overrides or {}).items() if v is not None}
    if applied:
        source += " with overrides " + ", ".join(sorted(map(str, applied)))
    return config_from_mapping({**data, **applied}, source=source)


def _read_yaml_mapping(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"Configuration file not found: {path}")
    if not path.is_file():
        raise ConfigError(f"Configuration path is not a file: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"Cannot read configuration file {path}: {e}") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"YAML syntax error in {path}{where}: {problem}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"Configuration file {path} must be a mapping of `key: value` lines, not a {type(data).__name__}"
        )
    return data


def _unknown_key_problem(key: str) -> str:
    if key in SECRET_KEYS:
        return f"{key}: {SECRET_HINT}"
    if key in LEGACY_HINTS:
        return f"{key}: {LEGACY_HINTS[key]}"
    close = difflib.get_close_matches(key, FIELD_NAMES, n=1)
    suggestion = f" (did you mean `{close[0]}`?)" if close else ""
    return f"{key}: unknown key{suggestion}; valid keys are: {', '.join(FIELD_NAMES)}"


def _describe_error(err: Mapping[str, Any]) -> str:
    key = ".".join(str(part) for part in err["loc"]) or "configuration"
    message = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "path_type":
        message = "Input should be a file system path (a string)"
    field = str(err["loc"][0]) if err["loc"] else ""
    if "input" in err and field not in HIDDEN_INPUTS:
        shown = repr(err["input"])
        message += f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
    return f"{key}: {message}"


def eval_options(config: AgentConfig, backend: str = "auto") -> EvalOptions:
    """The evaluator settings an agent run asks for (time limit, timing rounds, fresh inputs, tolerances, GPU)."""
    return EvalOptions(
        timeout_s=config.timeout_per_check_s,
        bench_rounds=config.bench_rounds,
        fresh_inputs=config.fresh_inputs > 0,
        probe_variants=config.probe_variants,
        seed=config.seed,
        backend=backend,
        gpu_id=config.gpu_id,
        tolerances=parse_tolerance_overrides(config.tolerance),
    )
