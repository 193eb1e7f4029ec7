"""Knowledge texts for prompts: the general Triton guidance plus the text of the target GPU family, with the
sections that concern the kernel's family (matrix multiplies, reductions, atomics, random numbers) only where its
code has such a kernel."""

from __future__ import annotations

import re
from functools import cache

from geak.snippets import KNOWLEDGE_DIR

GENERAL_TEXT = "triton"
AMD_CDNA = "amd_cdna"
NVIDIA_AMPERE = "nvidia_ampere"
NVIDIA_HOPPER = "nvidia_hopper"

_USES_DOT = re.compile(r"\btl\.dot(?:_scaled)?\b")
# A section whose heading starts with one of these is kept only where the code matches (others always are).
_SECTION_RULES = (
    ("## Matrix multiply", _USES_DOT),
    ("## Matrix cores", _USES_DOT),
    ("## Program ordering, persistent kernels", re.compile(r"\btl\.dot(?:_scaled)?\b|\bpersistent|tl\.num_programs")),
    ("## Reductions and scans", re.compile(r"\btl\.(?:sum|max|min|reduce|cum\w+|associative_scan|arg\w+)\b")),
    ("## Atomics", re.compile(r"\btl\.atomic_\w+")),
    ("## Random numbers", re.compile(r"\btl\.(?:rand|randn|randint|randint4x)\b")),
)
_SECTION = re.compile(r"(?m)^(?=##? )")  # at each section, and at each text's title
_SM_ARCH = re.compile(r"^(?:sm_?|compute_?)?(\d+)(?:\.(\d))?[a-z]?$")  # sm_80, sm_90a, sm100, 8.6, 90
_GPU_NAMES = (  # (pattern over the upper-cased device name, text); first match wins
    (re.compile(r"\bMI\s?\d{2,3}[A-Z]?\b|\bINSTINCT\b"), AMD_CDNA),
    (re.compile(r"\bG?H(?:100|200|800|20)\b"), NVIDIA_HOPPER),
    (re.compile(r"\bA(?:100|800|40|30|16|10G?|2)\b|\bL(?:4|40S?|20)\b|\bRTX\s?(?:30|40)\d{2}\b"), NVIDIA_AMPERE),
    (re.compile(r"\bRTX\s?A\d{4}\b|\bRTX\s?\d{4}\s?ADA\b"), NVIDIA_AMPERE),
)


def available_texts() -> list[str]:
    """Names of the knowledge texts shipped with the package (file stems of ``snippets/knowledge/*.md``)."""
    return sorted(path.stem for path in KNOWLEDGE_DIR.glob("*.md"))


def target_text(backend: str | None, arch: str | None = None, target_gpu: str | None = None) -> str | None:
    """The name of the GPU-family text for this target, or None when the target is not recognised.

    An ``arch`` decides first: "gfx9..." (CDNA: gfx90a, gfx942, gfx950) selects the AMD CDNA text (other gfx
    targets are RDNA consumer GPUs with 32-wide waves: unknown), sm_80-sm_89 the Ampere/Ada text, sm_90 and
    newer the Hopper text. Then ``backend`` "rocm"/"hip" selects AMD CDNA, then ``target_gpu`` (a device name
    such as "NVIDIA A100-SXM4-80GB", "NVIDIA H200" or "AMD Instinct MI300X") by model.
    """
    if arch:
        normalized = arch.strip().lower()
        if normalized.startswith("gfx"):
            return AMD_CDNA if normalized.startswith("gfx9") else None
        capability = _compute_capability(normalized)
        if capability is not None and capability >= 80:
            return NVIDIA_HOPPER if capability >= 90 else NVIDIA_AMPERE
    if backend is not None and backend.strip().lower() in ("rocm", "hip"):
        return AMD_CDNA
    if target_gpu:
        name = target_gpu.upper()
        for pattern, text in _GPU_NAMES:
            if pattern.search(name):
                return text
    return None


def _compute_capability(arch: str) -> int | None:
    """``sm_86`` / ``sm_90a`` / ``8.6`` / ``90`` -> 86, 90, 86, 90; None when not of that form."""
    match = _SM_ARCH.match(arch)
    if match is None:
        return None
    major, minor = match.groups()
    if minor is not None:
        return int(major) * 10 + int(minor)
    return int(major) * 10 if len(major) == 1 else int(major)


def knowledge_for(backend: str | None, arch: str | None = None, target_gpu: str | None = None) -> str:
    """The general Triton text followed by the target family's text (or a note that the target is unknown)."""
    general = _read(GENERAL_TEXT)
    family = target_text(backend, arch, target_gpu)
    if family is None:
        described = ", ".join(
            f"{label}={value}" for label, value in (("backend", backend), ("arch", arch), ("gpu", target_gpu)) if value
        )
        note = (
            f"(No GPU-specific notes: the target ({described or 'not given'}) is not a known AMD CDNA, "
            "NVIDIA Ampere/Ada or Hopper GPU; keep launch options portable.)"
        )
        return f"{general.rstrip()}\n\n{note}\n"
    return f"{general.rstrip()}\n\n{_read(family)}"


@cache
def _read(name: str) -> str:
    path = KNOWLEDGE_DIR / f"{name}.md"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FileNotFoundError(f"knowledge text {name!r} is missing from the package ({path})") from exc


def for_code(knowledge: str, code: str) -> str:
    """`knowledge` without the sections of kernel families `code` has none of (``_SECTION_RULES``); a memory-bound
    kernel's prompt has no use for matrix-core and atomics notes, and every section costs every call."""
    kept = []
    for section in _SECTION.split(knowledge):
        rule = next((pattern for heading, pattern in _SECTION_RULES if section.startswith(heading)), None)
        if rule is None or rule.search(code):
            kept.append(section)
    return "".join(kept)


# The sections a prompt keeps first where it has room for only part of the knowledge (``fit``): correctness, then
# the kernel family's, then how the target executes, then tuning and hardware figures (the launch search measures
# those anyway). Sections not named here come after.
_PRIORITY = (
    "## Correctness rules",
    "## Matrix multiply",
    "## Reductions and scans",
    "## Atomics",
    "## Random numbers",
    "## Execution model",
    "## What Triton does",
    "## Matrix cores",
    "## Memory access",
    "## Memory-bound kernels",
    "## Contract of the task",
    "## `tl.constexpr`",
    "## AMD-only launch",
    "## Pipelining and shared memory",
    "## Launch parameters and autotuning",
    "## Program ordering",
    "## Wave quantization",
    "## The hardware",
    "## Good starting configurations",
)


def fit(knowledge: str, room: int) -> str:
    """`knowledge` within `room` characters: whole sections, in the order of ``_PRIORITY`` while they fit, shown in
    their own order, each text's title with the first of its sections kept. '' where no section fits."""
    if len(knowledge) <= room:
        return knowledge
    sections = _SECTION.split(knowledge)
    titles = [i for i, section in enumerate(sections) if not section.startswith("## ")]
    title_of = {i: max((t for t in titles if t < i), default=None) for i in range(len(sections))}
    chosen: set[int] = set()
    used = 0
    for i in sorted((i for i in range(len(sections)) if i not in titles), key=lambda i: (_rank(sections[i]), i)):
        title = title_of[i]
        cost = len(sections[i]) + (len(sections[title]) if title is not None and title not in chosen else 0)
        if used + cost <= room:
            chosen |= {i} if title is None else {i, title}
            used += cost
    return "".join(section for i, section in enumerate(sections) if i in chosen)


def _rank(section: str) -> int:
    return next((i for i, heading in enumerate(_PRIORITY) if section.startswith(heading)), len(_PRIORITY))
