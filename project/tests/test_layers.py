# SPDX-License-Identifier: BSD-2-Clause
"""The import rules of the repository: the layer contract of ``pyproject.toml`` holds
(``lint-imports``), it fails on a forbidden import, and no module imports a test module."""

import ast
import os
import shutil
import subprocess
import sys
import tomllib

import pytest

from project import ROOT

PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
    "root_packages"]
LINT = shutil.which("lint-imports") or str(os.path.join(os.path.dirname(sys.executable),
                                                        "lint-imports"))


def lint(cwd, config):
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([LINT, "--config", str(config)], cwd=cwd, env=env,
                          capture_output=True, text=True)


def test_layer_contract_is_kept():
    result = lint(ROOT, ROOT / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


@pytest.mark.parametrize("importer,imported,broken", [
    ("models", "rtl", True),      # a model importing the RTL
    ("rtl", "verif", True),       # the RTL importing the verification library
    ("verif", "tb", True),        # the library importing a bench
    ("tb", "sim", True),          # two independent top-level folders
    ("sim", "verif", False),      # allowed: a flow on the library
])
def test_a_forbidden_import_breaks_the_contract(tmp_path, importer, imported, broken):
    """The same contract, on a tree of empty packages with one import added."""
    for name in PACKAGES:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / importer / "probe.py").write_text(f"import {imported}\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    result = lint(tmp_path, tmp_path / "pyproject.toml")
    assert (result.returncode != 0) == broken, result.stdout + result.stderr
    assert ("BROKEN" in result.stdout) == broken


def imports_of(path):
    """Every module name ``path`` imports (absolute imports and ``from . import``)."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def test_no_module_imports_a_test_module():
    """A test module (``test_*.py``) is imported by nobody: shared test helpers live in the
    verification library, in the models, or in a tests package's own helper modules."""
    offenders = []
    for name in PACKAGES:
        for path in sorted((ROOT / name).rglob("*.py")):
            for module in imports_of(path):
                if module.split(".")[-1].startswith("test_"):
                    offenders.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not offenders, "\n".join(offenders)


def test_the_layer_check_sees_every_top_level_package():
    """Every top-level folder with Python code is under the contract."""
    found = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert found <= set(PACKAGES), found - set(PACKAGES)
