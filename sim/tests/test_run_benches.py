# SPDX-License-Identifier: BSD-2-Clause
"""sim.run_benches without simulators: a stand-in for pytest writes result lines and a JUnit file,
and the summary and exit code must follow them."""

import json

import pytest

from sim import run_benches

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tb.test_a" name="test_a[verilator-64]" time="1"/>
<testcase classname="tb.test_b" name="test_b[verilator-64]" time="1">{failure}</testcase>
<testcase classname="tb.test_c" name="test_c[verilator-512]" time="0"><skipped/></testcase>
</testsuite></testsuites>"""


def fake_pytest(results_dir, lines, *, rc=0, failure="", stale=None):
    """A stand-in for the pytest subprocess: checks the folder was cleared, then writes lines."""
    def run(cmd):
        assert not stale or not (results_dir / stale).exists(), "results not cleared"
        for i, line in enumerate(lines):
            (results_dir / f"bench{i}.json").write_text(json.dumps(line))
        (results_dir / "perf-x-64-verilator.json").write_text(json.dumps({"block": "x"}))
        junit = next(a.split("=", 1)[1] for a in cmd if a.startswith("--junitxml="))
        with open(junit, "w") as f:
            f.write(JUNIT.format(failure=failure))
        return rc
    return run


def line(block, bench, sim="verilator", frames=10, result="pass"):
    return dict(block=block, bench=bench, sim=sim, frames=frames, result=result)


def test_all_pass(tmp_path, monkeypatch, capsys):
    (tmp_path / "old-verilator.json").write_text(json.dumps(line("old", "old", result="fail")))
    lines = [line("un_stage", "un_stage-64", frames=300), line("header_inserter", "hi-64"),
             line("header_inserter", "hi-64", sim="icarus")]    # another simulator: not shown
    monkeypatch.setattr(run_benches, "run_pytest",
                        fake_pytest(tmp_path, lines, stale="old-verilator.json"))
    assert run_benches.main(["--sim", "verilator"], results_dir=tmp_path) == 0
    out = capsys.readouterr().out
    table = out[out.index("block"):].splitlines()
    assert table[2].split() == ["header_inserter", "hi-64", "verilator", "10", "pass"]
    assert table[3].split() == ["un_stage", "un_stage-64", "verilator", "300", "pass"]
    assert "total: 2 bench runs on verilator, 2 passed, 0 failed, 310 frames checked" in out
    assert "icarus" not in out[out.index("block"):]
    assert "old" not in out


def test_failed_result_line_fails(tmp_path, monkeypatch, capsys):
    lines = [line("un_stage", "u", result="fail")]
    monkeypatch.setattr(run_benches, "run_pytest", fake_pytest(tmp_path, lines))
    assert run_benches.main(["--sim", "verilator"], results_dir=tmp_path) == 1
    assert "0 passed, 1 failed" in capsys.readouterr().out


def test_failed_pytest_test_is_listed(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run_benches, "run_pytest", fake_pytest(
        tmp_path, [line("a", "a")], rc=1, failure='<failure message="boom"/>'))
    assert run_benches.main(["--sim", "verilator"], results_dir=tmp_path) == 1
    out = capsys.readouterr().out
    assert "FAIL  tb.test_b::test_b[verilator-64]" in out
    assert "pytest: 2 tests, 1 failed, exit code 1 -> FAIL" in out


def test_no_bench_ran(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run_benches, "run_pytest", lambda cmd: run_benches.NO_TESTS_COLLECTED)
    assert run_benches.main(["--sim", "icarus"], results_dir=tmp_path) == 1
    out = capsys.readouterr().out
    assert "no bench wrote a result line" in out
    assert "no bench matched the selection on icarus" in out


def test_pytest_passing_without_result_lines_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(run_benches, "run_pytest", fake_pytest(tmp_path, []))
    assert run_benches.main(["--sim", "verilator"], results_dir=tmp_path) == 1


@pytest.mark.parametrize("full, keyword", [(False, ""), (True, "tick")])
def test_command(full, keyword):
    cmd = run_benches.pytest_command("icarus", 3, full, keyword, "j.xml")
    assert cmd[1:4] == ["-m", "pytest", "-v"]
    assert cmd[cmd.index("-n") + 1] == "3"
    assert "tb" in cmd and "--junitxml=j.xml" in cmd
    assert cmd[cmd.index("-k") + 1] == ("(icarus) and (tick)" if keyword else "icarus")
    assert ("not full" in cmd) is not full
