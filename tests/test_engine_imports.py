"""The library stands alone: `engine/` never imports lab, hypothesis or pytest (nor the harness, the
tests or freezegun), neither at module level nor lazily inside a function.

Two checks: every `import` statement anywhere in engine/*.py, read from the syntax tree (this
catches function-level imports that never run in a test), and a fresh interpreter that imports
every engine module, resolves every lazy `engine.<name>` and replays a scenario, after which none
of those packages may be in sys.modules.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = frozenset({"lab", "hypothesis", "pytest", "_pytest", "freezegun", "benchmarks", "tests"})


def forbidden_imports(source: str, filename: str = "<src>") -> list[str]:
    """`file:line import name` for every import of a FORBIDDEN top-level package in `source`."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{filename}:{node.lineno} import {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    return found


def test_no_engine_source_imports_lab_hypothesis_or_pytest_even_lazily():
    files = sorted((ROOT / "engine").rglob("*.py"))
    assert len(files) > 30  # the whole package was read, not an empty glob
    found = [hit for f in files for hit in forbidden_imports(f.read_text(encoding="utf-8"), str(f.relative_to(ROOT)))]
    assert found == []


def test_the_scanner_sees_module_and_function_level_imports():
    src = "import os\nfrom lab.state import x\ndef f():\n    import hypothesis.strategies\n    from pytest import raises\n"
    assert [h.split(" import ")[1] for h in forbidden_imports(src)] == ["lab.state", "hypothesis.strategies", "pytest"]
    assert forbidden_imports("from .lab import x\nimport labrador\n") == []  # relative and look-alike names pass


_PROBE = r"""
import importlib, json, pkgutil, sys
import engine
for info in pkgutil.walk_packages(engine.__path__, "engine."):
    importlib.import_module(info.name)
for name in dir(engine):
    getattr(engine, name)
from engine.eval.scenario import load_scenario, replay
replay(load_scenario(sys.argv[1]))
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def test_importing_and_running_the_engine_loads_none_of_them():
    out = subprocess.run([sys.executable, "-c", _PROBE, str(ROOT / "scenarios" / "needle-basic.yaml")],
                         cwd=str(ROOT), capture_output=True, text=True, timeout=240, check=True)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert {"engine", "numpy", "yaml"} <= loaded  # the probe really imported and ran the engine
    assert loaded & FORBIDDEN == set()
