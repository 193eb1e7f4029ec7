"""Output comparison: per-dtype tolerances on the reference's scale, NaN/inf placement, structure."""

import pytest
import torch

from geak.evaluator.compare import compare, parse_tolerance_overrides, tolerance_for


def test_identical_and_within_tolerance():
    x = torch.randn(1000)
    assert compare(x, x.clone(), "out") == []
    assert compare(x, x * (1 + 5e-4), "out") == []  # fp32 rtol 1e-3


def test_tf32_sized_error_on_a_gemm_scale_passes_but_a_real_error_fails():
    torch.manual_seed(0)
    ref = torch.randn(64, 64) @ torch.randn(64, 64)  # rms ~8
    noise = torch.randn_like(ref) * 2e-4 * ref.pow(2).mean().sqrt()
    assert compare(ref, ref + noise, "gemm") == []
    wrong = ref.clone()
    wrong[3, 5] += 1.0
    (m,) = compare(ref, wrong, "gemm")
    assert "1 of 4096 elements differ" in m.message and "[3, 5]" in m.message


def test_nan_where_the_reference_has_a_number_fails():
    ref = torch.ones(10)
    cand = ref.clone()
    cand[7] = float("nan")
    (m,) = compare(ref, cand, "out")
    assert "NaN mismatch: 1 NaN" in m.message


def test_nan_in_the_same_places_passes():
    ref = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare(ref, ref.clone(), "out") == []
    assert compare(ref, torch.tensor([1.0, float("nan"), float("-inf")]), "out")


def test_shape_dtype_structure():
    assert "shape" in compare(torch.ones(3), torch.ones(4), "o")[0].message
    assert "dtype" in compare(torch.ones(3), torch.ones(3, dtype=torch.float16), "o")[0].message
    assert "keys differ" in compare({"a": 1}, {"b": 1}, "o")[0].message
    assert "expected a tuple of 2" in compare((1, 2), (1,), "o")[0].message
    assert compare([1, 2.0, "x", None], [1, 2.0, "x", None], "o") == []


def test_integers_exact_and_bf16_loose():
    assert compare(torch.arange(5), torch.arange(5) + torch.tensor([0, 0, 1, 0, 0]), "i")
    ref = torch.randn(100).bfloat16()
    assert compare(ref, (ref.float() * 1.01).bfloat16(), "b") == []


def test_overrides():
    tol = parse_tolerance_overrides(["float32=1e-6,1e-6"])
    x = torch.randn(100)
    assert compare(x, x * (1 + 5e-4), "o", tol)
    assert tolerance_for("float8_e4m3fn").rtol == 0.26
    with pytest.raises(ValueError, match="DTYPE=RTOL,ATOL"):
        parse_tolerance_overrides(["float32"])


def test_an_infinity_of_the_wrong_sign_is_named_with_its_place():
    (m,) = compare(torch.tensor([1.0, float("inf"), 2.0]), torch.tensor([1.0, float("-inf"), 2.0]), "out")
    assert "1 of 3 elements differ; infinities differ; at [1]: -inf vs reference inf" in m.message


def test_a_tight_float32_tolerance_catches_one_float32_step():
    ref = torch.full((4,), 3000.0)
    cand = ref.clone()
    cand[2] = torch.nextafter(torch.tensor(3000.0), torch.tensor(4000.0))  # one float32 step: 8e-8 relative
    tight = parse_tolerance_overrides(["float32=1e-8,1e-8"])
    (m,) = compare(ref, cand, "out", tight)
    assert "1 of 4 elements differ" in m.message and "[2]" in m.message
    assert compare(ref, cand, "out") == []  # the default float32 tolerance admits it


def test_complex_outputs_are_weighed_with_a_tolerance_not_exactly():
    torch.manual_seed(0)
    ref = torch.randn(64, dtype=torch.complex64)
    assert compare(ref, ref * (1 + 1e-5), "out") == []  # rounding: complex64 takes float32's tolerance
    wrong = ref.clone()
    wrong[9] += 1j
    (m,) = compare(ref, wrong, "out")
    assert "1 of 128 elements differ" in m.message and "[9, 1]" in m.message  # the imaginary part of element 9
    assert compare(ref, ref * (1 + 1e-5), "out", parse_tolerance_overrides(["complex64=1e-8,1e-8"]))


def test_a_tensor_weighed_slice_by_slice_gets_the_whole_tensors_verdict(monkeypatch):
    """Large outputs are weighed a slice at a time (``CHUNK_ELEMENTS``): counts, the worst element's place and the
    NaN and infinity rules span the slices."""
    from geak.evaluator import compare as compare_module

    monkeypatch.setattr(compare_module, "CHUNK_ELEMENTS", 4)
    ref = torch.arange(1.0, 11.0)  # three slices: 4, 4 and 2 elements
    cand = ref.clone()
    cand[1] += 0.5
    cand[9] += 2.0
    (m,) = compare(ref, cand, "out")
    assert m.message.startswith("2 of 10 elements differ; max |Δ| 2 ") and "at [9]: 12 vs reference 10" in m.message
    cand[5] = float("inf")
    (m,) = compare(ref, cand, "out")
    assert m.message.startswith("1 of 10 elements differ; infinities differ; at [5]: inf")
    cand[2] = cand[8] = float("nan")
    (m,) = compare(ref, cand, "out")
    assert "NaN mismatch: 2 NaN where the reference has a number" in m.message
    undefined = torch.zeros(10, dtype=torch.bool)
    undefined[[1, 2, 5, 8, 9]] = True  # what the reference never wrote is not compared, in any slice
    assert compare(ref, cand, "out", undefined={"out": undefined}) == []
    assert compare(ref.reshape(2, 5), cand.reshape(2, 5), "out", undefined={"out": undefined.reshape(2, 5)}) == []
