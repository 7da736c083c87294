# SPDX-License-Identifier: BSD-2-Clause
"""``make sim``: run every cocotb bench under ``tb/`` on one simulator, then print a summary.

    python -m sim.run_benches --sim verilator [--jobs N] [--full] [-k EXPR]

The benches run through pytest in a subprocess (``python -m pytest -n JOBS tb -k SIM -m "not
full"``), its progress printed as it goes. Each bench writes one JSON line into ``build/results/``
(:func:`verif.bench.write_result`); this script clears that folder first, so that no stale
result shows, and afterwards prints one row per bench (block, bench, simulator, frames, result),
the pytest tests that failed, and a total line.

The exit code is 0 only if pytest passed, at least one bench ran, and every result line says pass.
Knobs such as ``SEED`` and ``WAVES`` reach the benches through the environment.
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from project import RESULTS, ROOT
from verif.runner import SIMULATORS

__all__ = ["main", "pytest_command", "read_results", "read_junit", "summarize"]

JUNIT_NAME = "junit-{sim}.xml"
NO_TESTS_COLLECTED = 5      # pytest's exit code when nothing matched the selection


def pytest_command(sim, jobs, full, keyword, junit):
    """The pytest command line that runs the benches of ``sim``."""
    selection = sim if not keyword else f"({sim}) and ({keyword})"
    cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
           "-n", str(jobs), "--dist", "loadgroup", "tb", "-k", selection,
           f"--junitxml={junit}"]
    if not full:
        cmd += ["-m", "not full"]
    return cmd


def read_results(folder, sim):
    """The result lines of ``sim`` in ``folder`` (performance files excluded), sorted."""
    rows = []
    for path in sorted(Path(folder).glob("*.json")):
        if path.name.startswith("perf-"):
            continue
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                if row.get("sim") == sim:
                    rows.append(row)
    return sorted(rows, key=lambda r: (r["block"], r["bench"]))


def read_junit(path):
    """``(tests run, [failed test ids])`` from a pytest JUnit XML file; (0, []) if it is absent."""
    path = Path(path)
    if not path.exists():
        return 0, []
    run, failed = 0, []
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("skipped") is not None:
            continue
        run += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(f"{case.get('classname')}::{case.get('name')}")
    return run, failed


def _table(header, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    return [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]


def summarize(results, tests_run, failed_tests, pytest_rc, sim):
    """The summary text and whether the run passed."""
    lines = [f"== make sim: benches on {sim} =="]
    if results:
        lines += _table(["block", "bench", "simulator", "frames", "result"],
                        [[r["block"], r["bench"], r["sim"], r["frames"], r["result"]]
                         for r in results])
    else:
        lines.append("no bench wrote a result line")
    if failed_tests:
        lines.append("")
        lines.append("pytest tests that failed (a failing bench writes no result line):")
        lines += [f"  FAIL  {name}" for name in failed_tests]
    passed = sum(r["result"] == "pass" for r in results)
    frames = sum(int(r.get("frames", 0)) for r in results)
    ok = (pytest_rc == 0 and bool(results) and passed == len(results) and not failed_tests)
    lines.append("")
    lines.append(f"total: {len(results)} bench runs on {sim}, {passed} passed, "
                 f"{len(results) - passed} failed, {frames} frames checked; pytest: {tests_run} "
                 f"tests, {len(failed_tests)} failed, exit code {pytest_rc} -> "
                 f"{'PASS' if ok else 'FAIL'}")
    return "\n".join(lines), ok


def run_pytest(cmd):
    """Run ``cmd`` from the repository root with its output going straight to the terminal."""
    print("+ " + shlex.join(cmd), flush=True)
    return subprocess.run(cmd, cwd=ROOT).returncode


def main(argv=None, results_dir=RESULTS):
    parser = argparse.ArgumentParser(prog="python -m sim.run_benches", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sim", choices=SIMULATORS, default="verilator")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", 2)),
                        help="pytest-xdist workers (default $JOBS or 2)")
    parser.add_argument("--full", action="store_true", help="include the wide sweeps (full mark)")
    parser.add_argument("-k", dest="keyword", default="", help="further pytest -k selection")
    args = parser.parse_args(argv)

    results_dir = Path(results_dir)
    shutil.rmtree(results_dir, ignore_errors=True)
    results_dir.mkdir(parents=True)
    junit = results_dir / JUNIT_NAME.format(sim=args.sim)
    rc = run_pytest(pytest_command(args.sim, args.jobs, args.full, args.keyword, junit))
    tests_run, failed_tests = read_junit(junit)
    text, ok = summarize(read_results(results_dir, args.sim), tests_run, failed_tests, rc,
                         args.sim)
    print()
    print(text)
    if rc == NO_TESTS_COLLECTED:
        print(f"no bench matched the selection on {args.sim}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
