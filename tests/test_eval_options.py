"""EvalOptions as plain data: ``to_dict`` / ``from_dict`` round-trip, and a key that names no option is refused."""

import json

import pytest

from geak.evaluator.compare import Tolerance
from geak.evaluator.options import EvalOptions


def test_options_round_trip_through_json_with_their_tolerances():
    options = EvalOptions(
        timeout_s=12.5,
        tolerances={"float16": Tolerance(1e-2, 2e-2, 1e-4), "float32": Tolerance(0.0, 0.0, 0.0)},
        bench_rounds=7,
        backend="interpreter",
        host_jobs=None,
        gpu_id=3,
        compile_cache=None,
    )
    data = json.loads(json.dumps(options.to_dict()))
    assert data["tolerances"]["float16"] == {"rtol": 1e-2, "atol": 2e-2, "floor": 1e-4}
    assert EvalOptions.from_dict(data) == options
    assert EvalOptions.from_dict(EvalOptions().to_dict()) == EvalOptions()


def test_fields_left_out_keep_their_defaults():
    assert EvalOptions.from_dict({"timeout_s": 5.0}) == EvalOptions(timeout_s=5.0)
    assert EvalOptions.from_dict({}) == EvalOptions()


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"timeout": 5.0}, "unknown evaluator option(s): timeout"),
        ({"tolerances": {"float16": {"rtol": 1, "atol": 1, "floor": 0, "eps": 1}}}, "tolerance field for float16"),
        ({"tolerances": {"float16": {"rtol": 1, "atol": 1}}}, "the tolerance for float16 lacks floor"),
        ({"tolerances": {"float16": [1, 1, 0]}}, "must be a mapping"),
    ],
)
def test_an_unknown_or_malformed_key_is_a_clear_value_error(data, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        EvalOptions.from_dict(data)
