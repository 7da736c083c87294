# SPDX-License-Identifier: BSD-2-Clause
"""verif.runner without a simulator: seeds and the ccache switch."""

from verif import runner


def test_ccache_on_when_installed(monkeypatch, tmp_path):
    monkeypatch.delenv("OBJCACHE", raising=False)
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    monkeypatch.setattr(runner.shutil, "which", lambda cmd: "/usr/bin/ccache")
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    runner.use_ccache()
    assert runner.os.environ["OBJCACHE"] == "ccache"
    assert runner.os.environ["CCACHE_DIR"] == str(tmp_path / "ccache")


def test_ccache_left_alone(monkeypatch):
    # Not installed: nothing set, Verilator compiles as it would without us.
    monkeypatch.delenv("OBJCACHE", raising=False)
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
