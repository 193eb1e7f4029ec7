"""Package data: the one-shot kernel corpus (`kernels/`) and the knowledge texts (`knowledge/`)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent
KERNELS_DIR = ROOT / "kernels"
KNOWLEDGE_DIR = ROOT / "knowledge"
