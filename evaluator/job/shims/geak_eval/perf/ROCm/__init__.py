"""GEAK's stand-in for the part of GEAK-eval that benchmark files import (see evaluator/job/rocm_bench.py)."""
