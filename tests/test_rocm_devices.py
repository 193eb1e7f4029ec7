"""AMD Instinct devices as a ROCm torch shows them (``gcnArchName``, 64 lanes, one XCD's L2 as ``L2_cache_size``):
the cache the ceilings probe and the timing flush are sized from, the datasheet rows per device torch shows, and the
peaks cache kept per partition mode. No GPU: the devices are simulated from the properties a HIP torch reports."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from geak.evaluator import peaks as peaks_cache
from geak.evaluator.job import device_ceilings, timing
from geak.evaluator.results import Peaks
from geak.evaluator.runtime_facts import RuntimeFacts
from geak.evaluator.shared import amd_devices

MB = 1 << 20


def hip_props(name: str, arch: str, l2: int, units: int, memory: int = 192 << 30) -> SimpleNamespace:
    """A HIP torch's ``get_device_properties`` (the fields the evaluator reads)."""
    return SimpleNamespace(name=name, gcnArchName=arch, L2_cache_size=l2, multi_processor_count=units,
                           warp_size=64, total_memory=memory)  # fmt: skip


MI300X = hip_props("AMD Instinct MI300X", "gfx942:sramecc+:xnack-", 4 * MB, 304)
MI250X_GCD = hip_props("AMD Instinct MI250X", "gfx90a:sramecc+:xnack-", 8 * MB, 110, 64 << 30)
MI355X = hip_props("AMD Instinct MI355X", "gfx950:sramecc+:xnack-", 4 * MB, 256, 288 << 30)
H100 = SimpleNamespace(name="NVIDIA H100 80GB HBM3", L2_cache_size=50 * MB, multi_processor_count=132)


def test_the_l2_probe_is_sized_from_the_infinity_cache_not_one_xcds_l2():
    """4 MB (one XCD's L2) made the probe's buffers 512 KB each: its copies timed their launches, the measurement
    was rejected and the peaks job ran again at every start."""
    found = device_ceilings.device_facts(MI300X)
    assert found["l2_bytes"] == 256 * MB and found["units"] == 304
    assert 2 * 4 * device_ceilings.l2_probe_elements(found["l2_bytes"]) == 64 * MB  # a quarter of the cache
    assert device_ceilings.device_facts(MI355X)["l2_bytes"] == 256 * MB
    assert device_ceilings.device_facts(MI250X_GCD)["l2_bytes"] == 8 * MB  # CDNA2: no Infinity Cache
    assert device_ceilings.device_facts(H100)["l2_bytes"] == 50 * MB


def test_the_flush_evicts_the_infinity_cache():
    """A 256 MB flush equals MI300X's Infinity Cache: part of a "flushed" input would stay in it."""
    assert timing.device_flush_bytes(MI300X) == 512 * MB
    assert timing.device_flush_bytes(MI355X) == 512 * MB
    assert timing.device_flush_bytes(MI250X_GCD) == 256 * MB
    assert timing.device_flush_bytes(H100) == 256 * MB


def test_architectures_are_read_as_torch_names_them():
    assert amd_devices.amd_arch("gfx942:sramecc+:xnack-").lds_per_cu == 64 * 1024
    assert amd_devices.amd_arch("gfx950").lds_per_cu == 160 * 1024
    assert amd_devices.amd_arch("gfx1100") is None and amd_devices.amd_arch(None) is None
    assert amd_devices.last_level_cache(4 * MB, "gfx1100") == 4 * MB


def measured(device: str, bandwidth: float, tflops: float, fp32: float, units: int) -> Peaks:
    return Peaks(device, bandwidth, tflops, fp32, "measured", 256 * MB, 3 * bandwidth, 0.015, units)


def test_mi250x_rows_are_per_gcd():
    """torch shows each GCD of an MI250X as a device: its figures are half the module's."""
    sheet = peaks_cache.datasheet_peaks("AMD Instinct MI250X", 8 * MB, 110)
    assert (sheet.bandwidth_gbps, sheet.tflops_16bit) == (1638.4, 191.5)
    assert peaks_cache.believable(measured("AMD Instinct MI250X", 1300.0, 150.0, 20.0, 110))
    assert not peaks_cache.believable(measured("AMD Instinct MI250X", 3000.0, 150.0, 20.0, 110))  # a whole module's
    assert peaks_cache.datasheet_peaks("AMD Instinct MI250", 8 * MB).tflops_16bit == 181.0


def test_a_partition_is_judged_against_its_share_of_the_device():
    """An MI300X in CPX mode shows 38 of its 304 CUs (an eighth of its bandwidth and rates)."""
    cpx = measured("AMD Instinct MI300X", 550.0, 150.0, 18.0, 38)
    assert peaks_cache.believable(cpx)
    assert not peaks_cache.believable(replace(cpx, units=304))  # a whole MI300X does not copy at 550 GB/s
    assert not peaks_cache.believable(replace(cpx, bandwidth_gbps=4000.0))  # an eighth of one cannot do 4000


def test_the_peaks_cache_keeps_each_partition_mode_apart(tmp_path):
    spx = RuntimeFacts(backend="rocm", device="AMD Instinct MI300X", units=304, memory_bytes=192 << 30)
    cpx = replace(spx, units=38, memory_bytes=24 << 30)
    nps4 = replace(spx, memory_bytes=48 << 30)
    assert len({peaks_cache.cache_key(r) for r in (spx, cpx, nps4)}) == 3
    path = tmp_path / "peaks.json"
    whole = measured("AMD Instinct MI300X", 4300.0, 1000.0, 120.0, 304)
    peaks_cache.store(spx, whole, path)
    assert peaks_cache.read_cached(spx, path) == whole
    assert peaks_cache.read_cached(cpx, path) is None


def test_a_measurement_that_names_no_units_is_judged_against_the_whole_device():
    identical = [[1.0]] * 4
    found = {"device": "AMD Instinct MI300X", "bandwidth_gbps": 4300.0, "tflops_16bit": 1000.0,
             "tflops_fp32": 120.0, "l2_bytes": 256 * MB, "l2_gbps": 12000.0,
             "aa_rounds": [{"a": identical, "b": identical}]}  # fmt: skip
    assert peaks_cache.measured_peaks(found, "AMD Instinct MI300X").units == 0
    assert peaks_cache.measured_peaks(found | {"units": 304}, "AMD Instinct MI300X").units == 304
