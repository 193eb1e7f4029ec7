"""`geak.evaluator` exports what the agent and the server use, and loads it only when asked (PEP 562)."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import geak.evaluator as evaluator

ROOT = Path(__file__).resolve().parent.parent


def test_every_public_name_is_its_module_s_own():
    assert sorted(evaluator.__all__) == sorted(evaluator._EXPORTS)
    for name in evaluator.__all__:
        module, attribute = evaluator._EXPORTS[name]
        assert getattr(evaluator, name) is getattr(importlib.import_module(f"geak.evaluator.{module}"), attribute)


def test_importing_a_module_of_the_package_loads_none_of_the_caller_s_side():
    code = "import sys, geak.evaluator.shared.protocol; print(sorted(m for m in sys.modules if m.startswith('geak.')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "geak.evaluator.api" not in loaded and "geak.evaluator.pool" not in loaded, loaded


def test_the_surface_covers_what_the_agent_and_the_server_import():
    exported = set(evaluator._EXPORTS.values())
    missing = set()
    for path in [*ROOT.joinpath("agent").rglob("*.py"), *ROOT.joinpath("server").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("geak.evaluator."):
                module = node.module.removeprefix("geak.evaluator.")
                # a name imported through another module (EvalOptions through api) counts where it is defined
                missing |= {
                    f"{module}.{alias.name}"
                    for alias in node.names
                    if (module, alias.name) not in exported and alias.name not in evaluator.__all__
                }
    assert not missing, sorted(missing)


def test_the_type_stub_names_the_same_surface():
    stub = ast.parse(ROOT.joinpath("evaluator", "__init__.pyi").read_text())
    imported = {
        alias.asname: (node.module, alias.name)
        for node in stub.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    (listed,) = [ast.literal_eval(n.value) for n in stub.body if isinstance(n, ast.Assign)]
    assert sorted(listed) == sorted(evaluator.__all__)
    assert imported == evaluator._EXPORTS
