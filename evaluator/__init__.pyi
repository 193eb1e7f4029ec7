"""The public surface's types, for type checkers: ``__init__.py`` loads each name on first use."""

from .api import Evaluator as Evaluator
from .compare import DEFAULT_TOLERANCES as DEFAULT_TOLERANCES
from .compare import Tolerance as Tolerance
from .compare import parse_tolerance_overrides as parse_tolerance_overrides
from .compare import tolerance_for as tolerance_for
from .compile_store import default_root as default_root
from .input_contracts import tightened_contracts as tightened_contracts
from .inputs import BadInput as BadInput
from .isolation import job_environment as job_environment
from .module_shards import check_module_in_jobs as check_module_in_jobs
from .options import EvalOptions as EvalOptions
from .pool import WorkerPool as WorkerPool
from .pool import device_masks as device_masks
from .pool import pin_device as pin_device
from .pool import usable_cores as usable_cores
from .progress import Progress as Progress
from .python_source import parse as parse_python
from .redaction import register_secret as register_secret
from .reference_costs import longest_first as longest_first
from .repo_tests import ModuleTests as ModuleTests
from .repo_tests import RepositoryError as RepositoryError
from .repo_tests import as_module as as_module
from .repo_tests import cases_run as cases_run
from .repo_tests import module_tests as module_tests
from .repo_tests import needs_repository_tests as needs_repository_tests
from .repo_tests import node_definition as node_definition
from .results import NOT_RUN_KINDS as NOT_RUN_KINDS
from .results import BenchResult as BenchResult
from .results import CallCost as CallCost
from .results import CallTiming as CallTiming
from .results import CheckResult as CheckResult
from .results import CompiledKernelFacts as CompiledKernelFacts
from .results import KernelInfo as KernelInfo
from .results import ProfileResult as ProfileResult
from .results import ScreenedVariant as ScreenedVariant
from .results import ScreenResult as ScreenResult
from .shared.sequential import is_undecided as is_undecided
from .slowness import kernel_line as kernel_line
from .slowness import summary as slowness_summary
from .slowness import timing_cost as timing_cost
from .slowness import with_profile as with_profile
from .triton_file import AUTOTUNE_DECORATORS as AUTOTUNE_DECORATORS
from .triton_file import JIT_DECORATORS as JIT_DECORATORS
from .triton_file import SEPARATOR as SEPARATOR
from .triton_file import TEST_PREFIXES as TEST_PREFIXES
from .triton_file import TritonFile as TritonFile
from .triton_file import TritonFileError as TritonFileError
from .triton_file import constexpr_params as constexpr_params
from .triton_file import decorator_name as decorator_name
from .triton_file import defined_names as defined_names
from .triton_file import is_benchmark_test as is_benchmark_test
from .triton_file import is_config_call as is_config_call
from .triton_file import is_kernel_def as is_kernel_def
from .triton_file import is_test_code as is_test_code
from .triton_file import looks_like_triton as looks_like_triton
from .triton_file import parse_triton_file as parse_triton_file
from .triton_file import read_source as read_source
from .triton_file import read_triton_file as read_triton_file
from .triton_file import separator_index as separator_index
from .triton_file import statement_span as statement_span
from .zygote import WorkerStartError as WorkerStartError

__all__ = [
    "AUTOTUNE_DECORATORS",
    "DEFAULT_TOLERANCES",
    "JIT_DECORATORS",
    "NOT_RUN_KINDS",
    "SEPARATOR",
    "TEST_PREFIXES",
    "BadInput",
    "BenchResult",
    "CallCost",
    "CallTiming",
    "CheckResult",
    "CompiledKernelFacts",
    "EvalOptions",
    "Evaluator",
    "KernelInfo",
    "ModuleTests",
    "ProfileResult",
    "Progress",
    "RepositoryError",
    "ScreenResult",
    "ScreenedVariant",
    "Tolerance",
    "TritonFile",
    "TritonFileError",
    "WorkerPool",
    "WorkerStartError",
    "as_module",
    "cases_run",
    "check_module_in_jobs",
    "constexpr_params",
    "decorator_name",
    "default_root",
    "defined_names",
    "device_masks",
    "is_benchmark_test",
    "is_config_call",
    "is_kernel_def",
    "is_test_code",
    "is_undecided",
    "job_environment",
    "kernel_line",
    "longest_first",
    "looks_like_triton",
    "module_tests",
    "needs_repository_tests",
    "node_definition",
    "parse_python",
    "parse_tolerance_overrides",
    "parse_triton_file",
    "pin_device",
    "read_source",
    "read_triton_file",
    "register_secret",
    "separator_index",
    "slowness_summary",
    "statement_span",
    "tightened_contracts",
    "timing_cost",
    "tolerance_for",
    "usable_cores",
    "with_profile",
]
