# The torch build this machine needs, from what the machine shows; scripts/setup.sh sources this file, and
# `bash scripts/setup.sh --plan` prints the choice and the pip commands without installing anything.
#   an NVIDIA GPU (`nvidia-smi -L` lists one, or /dev/nvidia0)  -> torch from PyPI (a CUDA build, with its Triton)
#   an AMD GPU (a gfx agent in `rocminfo`, /dev/kfd, or a GPU in `rocm-smi`) -> torch from PyTorch's index for the
#     installed ROCm's X.Y ($ROCM_PATH, default /opt/rocm: .info/version, else `hipconfig --version`), else for
#     ROCm $DEFAULT_ROCM (with pytorch-triton-rocm, the Triton that carries AMD's linker)
#   neither -> torch from PyTorch's CPU index (no CUDA libraries; no Triton either: setup adds GEAK's `triton` extra)
# GEAK_TORCH_INDEX_URL overrides the index; set but empty, pip's own configuration decides (PyPI or a mirror).
# GEAK_DEV_DIR (default /dev) is where the device nodes are looked for; the tests point it at a folder of fakes.
# shellcheck shell=bash

TORCH_INDEXES=https://download.pytorch.org/whl
# ROCm release whose index setup uses where no installed ROCm says its version. Not checked against the pinned
# torch's published builds (no AMD machine was at hand): where pip finds no such torch there, set
# GEAK_TORCH_INDEX_URL to the ROCm index that PyTorch's install matrix gives for that release.
DEFAULT_ROCM=7.1

# Sets TORCH_MACHINE (cuda, rocm or cpu), TORCH_FOUND (what showed it, in words) and TORCH_INDEX (the index URL;
# empty: pip's own configuration).
torch_choice() {
  local dev=${GEAK_DEV_DIR:-/dev} gpu rocm
  if gpu=$(nvidia_gpu "$dev"); then
    TORCH_MACHINE=cuda
    TORCH_FOUND="an NVIDIA GPU ($gpu)"
    TORCH_INDEX=
  elif gpu=$(amd_gpu "$dev"); then
    TORCH_MACHINE=rocm
    if rocm=$(rocm_version); then
      TORCH_FOUND="an AMD GPU ($gpu), ROCm $rocm"
    else
      rocm=$DEFAULT_ROCM
      TORCH_FOUND="an AMD GPU ($gpu), no ROCm version found (${ROCM_PATH:-/opt/rocm}/.info/version, hipconfig): ROCm $rocm assumed"
    fi
    TORCH_INDEX=$TORCH_INDEXES/rocm$rocm
  else
    TORCH_MACHINE=cpu
    TORCH_FOUND="no GPU (no nvidia-smi, rocminfo, rocm-smi, $dev/nvidia0 or $dev/kfd shows one)"
    TORCH_INDEX=$TORCH_INDEXES/cpu
  fi
  if [ -n "${GEAK_TORCH_INDEX_URL+set}" ]; then
    TORCH_INDEX=$GEAK_TORCH_INDEX_URL
  fi
}

# Prints the first NVIDIA GPU's name (or its device node); fails where there is none.
nvidia_gpu() {
  local listed
  listed=$(nvidia-smi -L 2>/dev/null | sed -n 's/^GPU [0-9]*: \(.*\) (UUID.*/\1/p' | head -n 1) || true
  if [ -n "$listed" ]; then
    echo "nvidia-smi: $listed"
  elif [ -e "$1/nvidia0" ]; then
    echo "$1/nvidia0"
  else
    return 1
  fi
}

# Prints what shows an AMD GPU (its gfx target where rocminfo names it); fails where nothing does. rocm-smi's output
# is read whole, not piped to `grep -q`: under pipefail, its SIGPIPE when grep stops reading would fail the test.
amd_gpu() {
  local target
  target=$(rocminfo 2>/dev/null | grep -oE '\bgfx[0-9a-f]+\b' | head -n 1) || true
  if [ -n "$target" ]; then
    echo "rocminfo: $target"
  elif [ -e "$1/kfd" ]; then
    echo "$1/kfd"
  elif [[ $(rocm-smi --showproductname 2>/dev/null) == *"GPU["* ]]; then
    echo "rocm-smi"
  else
    return 1
  fi
}

# Prints the installed ROCm's major.minor version; fails where none is found.
rocm_version() {
  local root=${ROCM_PATH:-/opt/rocm} version=
  if [ -r "$root/.info/version" ]; then
    version=$(head -n 1 "$root/.info/version")
  fi
  if [ -z "$version" ]; then
    version=$(hipconfig --version 2>/dev/null) || true
  fi
  printf '%s\n' "$version" | grep -oE '^[0-9]+\.[0-9]+' || return 1
}
