# SPDX-License-Identifier: BSD-2-Clause
"""verif.runner without a simulator: seeds and the ccache switch."""

import pytest

from verif import runner


def _unset(monkeypatch, *names):
    # setenv first, so that monkeypatch records the variable and restores its absence after the
    # test: delenv of a variable that is not set records nothing, and use_ccache()'s writes to
    # os.environ would leak into the worker's later benches (a cold throw-away ccache).
    for name in names:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def test_ccache_on_when_installed(monkeypatch, tmp_path):
    _unset(monkeypatch, "OBJCACHE", "CCACHE_DIR")
    monkeypatch.setattr(runner.shutil, "which", lambda cmd: "/usr/bin/ccache")
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    runner.use_ccache()
    assert runner.os.environ["OBJCACHE"] == "ccache"
    assert runner.os.environ["CCACHE_DIR"] == str(tmp_path / "ccache")


def test_ccache_left_alone(monkeypatch):
    # Not installed: nothing set, Verilator compiles as it would without us.
    _unset(monkeypatch, "OBJCACHE", "CCACHE_DIR")
    monkeypatch.setattr(runner.shutil, "which", lambda cmd: None)
    runner.use_ccache()
    assert "OBJCACHE" not in runner.os.environ
    # Turned off by the user (empty OBJCACHE): kept off.
    monkeypatch.setenv("OBJCACHE", "")
    monkeypatch.setattr(runner.shutil, "which", lambda cmd: "/usr/bin/ccache")
    runner.use_ccache()
    assert runner.os.environ["OBJCACHE"] == ""


def test_bench_seed(monkeypatch):
    monkeypatch.delenv("SEED", raising=False)
    assert runner.bench_seed("switch-64") == runner.bench_seed("switch-64")
    assert runner.bench_seed("switch-64") != runner.bench_seed("switch-512")
    monkeypatch.setenv("SEED", "7")
    assert runner.bench_seed("switch-64") == 7


def test_results_without_a_test_fail(tmp_path):
    # cocotb writes a results file with no testcase when `testcase` matches no @cocotb.test.
    empty = tmp_path / "results.xml"
    empty.write_text('<?xml version="1.0"?><testsuites><testsuite name="all"/></testsuites>')
    with pytest.raises(AssertionError, match="no cocotb test ran"):
        runner.check_results(empty, "no_such_test")
    with pytest.raises(AssertionError, match="did not run"):
        runner.check_results(tmp_path / "missing.xml")
    one = tmp_path / "one.xml"
    one.write_text('<testsuites><testsuite><testcase name="a"/></testsuite></testsuites>')
    assert runner.check_results(one, "a") == ["a"]
    with pytest.raises(AssertionError, match=r"\['b'\] did not run"):
        runner.check_results(one, ["a", "b"])
    failed = tmp_path / "failed.xml"
    failed.write_text('<testsuites><testsuite><testcase name="a"><failure/></testcase>'
                      '</testsuite></testsuites>')
    with pytest.raises(AssertionError, match="failed"):
        runner.check_results(failed)


@pytest.mark.sim
def test_run_bench_fails_when_testcase_matches_nothing():
    # Audit finding 23: a misspelt testcase ran nothing and passed.
    from rtl.tick_generator import TickGenerator

    with pytest.raises(AssertionError, match="no cocotb test ran"):
        runner.run_bench(TickGenerator(250_000_000), name="runner-no-test", toplevel="tick_generator",
                         test_module="tb.test_tick_generator", sim="icarus",
                         params={"clk_hz": 250_000_000}, frames=2, testcase="no_such_test")


def test_build_lock_serialises_one_folder(tmp_path):
    """Two processes asking for one build folder run one after the other (audit #19: two
    xdist workers once built into and read one folder); another folder does not wait."""
    import multiprocessing
    import time

    from verif.runner import build_lock

    def hold(folder, log, seconds):
        with build_lock(folder):
            with open(log, "a") as f:
                f.write(f"in {time.monotonic()}\n")
            time.sleep(seconds)
            with open(log, "a") as f:
                f.write(f"out {time.monotonic()}\n")

    log = tmp_path / "log"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=hold, args=(tmp_path / "sim" / "a-icarus", log, 0.3))
             for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(10)
    events = [line.split()[0] for line in log.read_text().splitlines()]
    assert events == ["in", "out", "in", "out"], events
    with build_lock(tmp_path / "sim" / "a-icarus"):
        with build_lock(tmp_path / "sim" / "b-icarus"):    # another folder: no wait
            pass
