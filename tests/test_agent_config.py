"""AgentConfig: defaults, YAML loading, overrides, and readable errors."""

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from geak.agent.config import AgentConfig, ConfigError, config_from_mapping, load_config


def write(tmp_path: Path, text: str, name: str = "geak.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path | None, overrides: dict | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    return str(info.value)


def test_defaults() -> None:
    cfg = load_config(None)
    assert cfg == AgentConfig()
    assert not cfg.model_configured
    assert (cfg.model_id, cfg.base_url, cfg.api_key_env) == (None, None, "OPENAI_API_KEY")
    assert (cfg.temperature, cfg.max_tokens, cfg.timeout_s, cfg.max_retries) == (1.0, 32768, 900, 4)
    assert (cfg.model_give_up_s, cfg.reasoning_effort, cfg.extra_body) == (2400, None, {})
    assert (cfg.max_iteration, cfg.parallel, cfg.ancestor_num, cfg.descendant_num) == (10, 1, 5, 1)
    assert cfg.max_perf_debug_num == 5
    assert (cfg.search, cfg.search_time_s) == (True, 60)
    assert (cfg.timeout_per_check_s, cfg.bench_rounds, cfg.fresh_inputs) == (300, None, 2)  # None: until decided
    assert (cfg.corpus_path, cfg.one_shot, cfg.knowledge, cfg.target_gpu) == ([], True, True, None)
    assert (cfg.output_path, cfg.result_path, cfg.mem_file) == (Path("geak_runs"), None, None)
    assert (cfg.start_iter, cfg.gpu_id, cfg.profiling) == (0, None, False)


def test_yaml_round_trip(tmp_path: Path) -> None:
    cfg = AgentConfig(
        model_id="Qwen/Qwen3-Coder",
        base_url="http://localhost:8000/v1",
        api_key_env="VLLM_KEY",
        temperature=0.6,
        max_tokens=None,
        parallel=4,
        search=False,
        corpus_path=[tmp_path / "kernels", tmp_path / "more"],
        target_gpu="MI300X",
        output_path=tmp_path / "runs",
        gpu_id=1,
    )
    path = write(tmp_path, yaml.safe_dump(cfg.to_public_dict()))
    loaded = load_config(path)
    assert loaded == cfg
    assert loaded.model_configured


def test_geak_style_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "# LLM model\nmodel_id: gpt-4.1\ntemperature: 1.0\n\n"
        "result_path: null\nmem_file: null\nstart_iter: 0\n"
        "output_path: ../outputs/run\nmax_iteration: 20\nancestor_num: 5\ncorpus_path: ~/kernels\n",
    )
    cfg = load_config(path)
    assert cfg.model_id == "gpt-4.1" and cfg.max_iteration == 20
    assert cfg.output_path == Path("../outputs/run")
    assert cfg.corpus_path == [Path.home() / "kernels"]


def test_corpus_path_accepts_a_string_or_a_list() -> None:
    assert AgentConfig(corpus_path="/data/kernels").corpus_path == [Path("/data/kernels")]
    assert AgentConfig(corpus_path=["/a", "/b"]).corpus_path == [Path("/a"), Path("/b")]
    assert AgentConfig(corpus_path=None).corpus_path == []


def test_blank_model_id_means_unconfigured(tmp_path: Path) -> None:
    assert not load_config(write(tmp_path, "model_id: ''\nbase_url:\n")).model_configured


def test_overrides_win_and_none_is_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, "model_id: file-model\nparallel: 2\nsearch_time_s: 8\n")
    cfg = load_config(path, {"parallel": 6, "model_id": None, "search": False})
    assert (cfg.model_id, cfg.parallel, cfg.search_time_s, cfg.search) == ("file-model", 6, 8, False)
    assert load_config(None, {"max_iteration": 3}).max_iteration == 3


def test_bad_override_is_reported_with_its_key(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "parallel: 2\n"), {"parallel": 0, "max_iteration": None})
    assert "geak.yaml with overrides parallel" in message
    assert "parallel: Input should be greater than or equal to 1 (got 0)" in message


def test_api_key_is_rejected_with_advice(tmp_path: Path) -> None:
    secret = "sk-live-abcdef123456"
    message = error_of(write(tmp_path, f"model_id: gpt-4o\napi_key: {secret}\n"))
    assert "api_key:" in message
    assert "environment variable" in message and "api_key_env" in message
    assert secret not in message
    assert "valid keys" not in message


def test_api_key_env_must_be_a_variable_name_and_is_never_echoed(tmp_path: Path) -> None:
    secret = "sk-proj-12345"
    message = error_of(write(tmp_path, f"api_key_env: {secret}\n"))
    assert "api_key_env: must be the NAME of the environment variable" in message
    assert secret not in message


def test_unknown_keys_are_named_with_suggestions_and_valid_keys(tmp_path: Path) -> None:
    message = error_of(
        write(tmp_path, "max_iterations: 3\nfoo: 1\nmulti_thread: true\nstatis_path: x.json\n")
    )
    lines = message.splitlines()
    assert lines[0] == f"Invalid GEAK configuration in {tmp_path / 'geak.yaml'}:"
    assert any(
        line.startswith("  - max_iterations: unknown key (did you mean `max_iteration`?)") for line in lines
    )
    assert any(line.startswith("  - foo: unknown key; valid keys are: model_id, base_url,") for line in lines)
    assert "multi_thread: use `parallel: N`" in message
    assert "statis_path: a TritonBench dataset setting" in message


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("temperature: 2.5\n", "temperature: Input should be less than or equal to 2 (got 2.5)"),
        ("temperature: -0.1\n", "temperature: Input should be greater than or equal to 0 (got -0.1)"),
        ("max_tokens: 0\n", "max_tokens: Input should be greater than 0 (got 0)"),
        ("timeout_s: 0\n", "timeout_s: Input should be greater than 0 (got 0)"),
        ("max_retries: -1\n", "max_retries: Input should be greater than or equal to 0 (got -1)"),
        ("max_iteration: 0\n", "max_iteration: Input should be greater than or equal to 1 (got 0)"),
        ("parallel: 0\n", "parallel: Input should be greater than or equal to 1 (got 0)"),
        ("ancestor_num: 0\n", "ancestor_num: Input should be greater than or equal to 1 (got 0)"),
        ("descendant_num: 0\n", "descendant_num: Input should be greater than or equal to 1 (got 0)"),
        ("max_perf_debug_num: 0\n", "max_perf_debug_num: Input should be greater than or equal to 1 (got 0)"),
        ("search_time_s: 0\n", "search_time_s: Input should be greater than 0 (got 0)"),
        ("search_budget: 24\n", "search_budget: the launch-configuration search's budget is now a time"),
        ("timeout_per_check_s: 0\n", "timeout_per_check_s: Input should be greater than 0 (got 0)"),
        ("bench_rounds: 2\n", "bench_rounds: Input should be greater than or equal to 3 (got 2)"),
        ("fresh_inputs: -1\n", "fresh_inputs: Input should be greater than or equal to 0 (got -1)"),
        ("start_iter: -2\n", "start_iter: Input should be greater than or equal to 0 (got -2)"),
        ("gpu_id: -1\n", "gpu_id: Input should be greater than or equal to 0 (got -1)"),
        ("parallel: many\n", "parallel: Input should be a valid integer"),
        ("search: maybe\n", "search: Input should be a valid boolean"),
        ("corpus_path: [1]\n", "corpus_path.0: Input should be a file system path (a string)"),
        ("base_url: localhost:8000\n", "base_url: must be an http:// or https:// URL"),
    ],
)
def test_each_validation_error_is_readable(tmp_path: Path, yaml_text: str, expected: str) -> None:
    message = error_of(write(tmp_path, yaml_text))
    assert str(tmp_path / "geak.yaml") in message
    assert expected in message
    assert "pydantic" not in message and "errors.pydantic.dev" not in message


def test_all_problems_are_reported_together(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "temperature: 9\nparallel: 0\nbogus: 1\n"))
    assert len(message.splitlines()) == 4
    assert "temperature:" in message and "parallel:" in message and "bogus:" in message


def test_file_errors(tmp_path: Path) -> None:
    assert error_of(tmp_path / "missing.yaml") == f"Configuration file not found: {tmp_path / 'missing.yaml'}"
    assert "not a file" in error_of(tmp_path)
    syntax = error_of(write(tmp_path, "model_id: x\nparallel: [1, 2\ntemperature: 1\n"))
    assert syntax.startswith(f"YAML syntax error in {tmp_path / 'geak.yaml'} at line ")
    bad_indent = error_of(write(tmp_path, "model_id: x\n  parallel: 2\n"))
    assert "at line 2" in bad_indent
    listing = error_of(write(tmp_path, "- model_id: x\n"))
    assert "must be a mapping" in listing and "not a list" in listing
    assert load_config(write(tmp_path, "# only comments\n")) == AgentConfig()


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="Invalid GEAK configuration in settings"):
        config_from_mapping({"parallel": "x"}, source="settings")


def test_direct_construction_and_assignment_are_validated_without_echoing_inputs() -> None:
    with pytest.raises(ValidationError) as info:
        AgentConfig(api_key="sk-secret-value")
    assert "sk-secret-value" not in str(info.value)
    cfg = AgentConfig()
    with pytest.raises(ValidationError):
        cfg.temperature = 5


def test_public_dict_has_no_secrets() -> None:
    cfg = AgentConfig(model_id="m", base_url="https://user:hunter2@llm.example.com/v1?api-key=abc123")
    public = cfg.to_public_dict()
    text = repr(public)
    assert "hunter2" not in text and "abc123" not in text
    assert public["base_url"] == "https://***@llm.example.com/v1?***"
    assert public["api_key_env"] == "OPENAI_API_KEY"
    assert all("key" not in k or k == "api_key_env" for k in public)
    assert (
        AgentConfig(base_url="http://localhost:8000/v1").to_public_dict()["base_url"]
        == "http://localhost:8000/v1"
    )


def test_result_path_resolves_to_the_memory_snapshot_of_its_round(tmp_path):
    from geak.agent.checkpoint import memory_for_results

    (tmp_path / "softmax_mem_3.json").write_text("{}")
    assert memory_for_results(tmp_path / "softmax_3.jsonl") == tmp_path / "softmax_mem_3.json"
    with pytest.raises(ValueError, match="missing"):
        memory_for_results(tmp_path / "softmax_4.jsonl")
    with pytest.raises(ValueError, match="not a round's results file"):
        memory_for_results(tmp_path / "results.txt")


def test_reasoning_options_are_read_and_checked() -> None:
    cfg = config_from_mapping({"reasoning_effort": " high ", "extra_body": {"reasoning": {"effort": "high"}}})
    assert cfg.reasoning_effort == "high" and cfg.extra_body == {"reasoning": {"effort": "high"}}
    with pytest.raises(ConfigError, match="extra_body: Input should be a valid dictionary"):
        config_from_mapping({"extra_body": "enable_thinking"})
