"""GEAK's stand-in for the part of GEAK-eval that benchmark files import (see geak.evaluator.rocm_bench)."""
