"""Editor settings (section `geak`) and the workspace's configuration file, validated with clear messages.

Editor settings come from `initializationOptions.settings` and `workspace/configuration`; the workspace file is
`geak.yaml` (or `geak.yml`) at the workspace root, else `[tool.geak]` in its `pyproject.toml`, with the agent's
key names. An editor setting changed from its default overrides the file; relative paths in the file are
relative to the workspace root.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from geak.agent.config import AgentConfig, ConfigError, config_from_mapping

CONFIG_FILES = ("geak.yaml", "geak.yml")
PATH_KEYS = ("output_path", "result_path", "mem_file")
REPOSITORY_KEYS = ("tests",)  # [tool.geak] keys of a repository's module tests (``geak.evaluator.module_tests``)


class SettingsError(ValueError):
    """Unusable editor settings; the message names each bad key."""


class Settings(BaseModel):
    """The `geak` settings section (camelCase keys, as the client sends them)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    model: str | None = None
    base_url: str | None = Field(None, alias="baseUrl")
    api_key_env: str = Field("OPENAI_API_KEY", alias="apiKeyEnv")
    iterations: int = Field(3, ge=1)
    parallel: int = Field(1, ge=1)
    check_on_save: bool = Field(True, alias="checkOnSave")
    time_on_save: bool = Field(True, alias="timeOnSave")
    device: Literal["auto", "gpu", "interpreter"] = "auto"
    gpu_id: int | None = Field(None, alias="gpuId", ge=0)
    base: str = "HEAD"  # the git revision a passing save is compared with (outputs, and speed on a GPU); "" = off
    # seconds a save's check of a repository's module spends on its tests' cases (the rest is said to be left out;
    # Optimize's confirmation runs them all); None: no limit
    module_budget_s: float | None = Field(20.0, alias="moduleBudgetS", gt=0)
    # of each of its test functions, at most this many cases (spread over its parameters); None: all of them
    module_cases_per_test: int | None = Field(4, alias="moduleCasesPerTest", ge=1)

    def agent_overrides(self) -> dict[str, Any]:
        """The agent keys these settings set, for keys changed from their defaults."""
        mapping = {
            "model": "model_id",
            "base_url": "base_url",
            "api_key_env": "api_key_env",
            "iterations": "max_iteration",
            "parallel": "parallel",
            "gpu_id": "gpu_id",
        }
        defaults = Settings()
        return {
            key: getattr(self, name) for name, key in mapping.items() if getattr(self, name) != getattr(defaults, name)
        }


CLIENT_ONLY = {"pythonPath"}


def parse_settings(data: Any) -> tuple[Settings, list[str]]:
    """Validate a `geak` settings object. Returns the settings and notes on ignored keys; raises
    `SettingsError` naming every bad value."""
    if data is None:
        return Settings(), []
    if not isinstance(data, Mapping):
        raise SettingsError(f"the geak settings must be an object, not {type(data).__name__}")
    known = {f.alias or name for name, f in Settings.model_fields.items()} | set(Settings.model_fields)
    notes = [f"unknown setting geak.{k} ignored" for k in data if k not in known and k not in CLIENT_ONLY]
    values = {k: v for k, v in data.items() if k in known}
    if isinstance(values.get("model"), str) and not values["model"].strip():
        values["model"] = None
    if isinstance(values.get("baseUrl"), str) and not values["baseUrl"].strip():
        values["baseUrl"] = None
    if isinstance(values.get("base"), str):
        values["base"] = values["base"].strip()
    try:
        return Settings.model_validate(values), notes
    except ValidationError as e:
        problems = []
        for err in e.errors(include_url=False):
            key = ".".join(str(p) for p in err["loc"])
            shown = "" if key in ("apiKeyEnv", "baseUrl") else f" (got {err.get('input')!r})"
            problems.append(f"geak.{key}: {err['msg']}{shown}")
        raise SettingsError("invalid GEAK settings: " + "; ".join(problems)) from e


def read_workspace_file(root: Path | None) -> tuple[dict[str, Any], str | None]:
    """The workspace's configuration mapping and where it came from (None: no file). Raises `ConfigError`."""
    if root is None:
        return {}, None
    for name in CONFIG_FILES:
        path = root / name
        if path.is_file():
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
                raise ConfigError(f"cannot read {path}: {e}") from e
            if data is None:
                return {}, str(path)
            if not isinstance(data, dict):
                raise ConfigError(f"{path} must be a mapping of `key: value` lines")
            return data, str(path)
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"cannot read {pyproject}: {e}") from e
        section = data.get("tool", {}).get("geak")
        if isinstance(section, dict):
            agent = {k: v for k, v in section.items() if k not in REPOSITORY_KEYS}
            return agent, f"{pyproject} [tool.geak]"
    return {}, None


def default_runs_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "geak" / "runs"


def agent_config(
    settings: Settings, file_data: Mapping[str, Any], source: str | None, root: Path | None
) -> AgentConfig:
    """The agent configuration of an editor run: protocol defaults, then the workspace file, then the editor's
    changed settings. Raises `ConfigError`."""
    data: dict[str, Any] = {"max_iteration": Settings().iterations, "output_path": str(default_runs_dir())}
    for key, value in file_data.items():
        if key in PATH_KEYS:
            value = _under_root(value, root)
        elif key == "corpus_path":
            value = [_under_root(v, root) for v in ([value] if isinstance(value, str) else value or [])]
        data[key] = value
    data.update(settings.agent_overrides())
    where = source or "the editor settings"
    return config_from_mapping(data, source=where + (" with the editor settings" if source else ""))


def _under_root(value: Any, root: Path | None) -> Any:
    """A relative path of the workspace file, relative to the workspace root."""
    if root is None or not isinstance(value, str) or Path(value).expanduser().is_absolute():
        return value
    return str(root / value)
