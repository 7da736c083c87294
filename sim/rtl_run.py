# SPDX-License-Identifier: BSD-2-Clause
"""``make sim``: run a fabric scenario on the RTL fabric (Verilator, cocotb) and print its summary.

    python -m sim.rtl_run [sim/scenarios/link_down.yaml] [--out build/sim-out/<name>-rtl]
        [--seed N]

The scenario file's ``rtl`` form is played (``sim/rtl_scenario.py`` says how it maps onto the
RTL fabric): its topology, NIC and switch settings build an :class:`sim.rtl_fabric.RtlFabric`
(its Verilog, then a Verilator model: a few minutes), and the cocotb test configures it through
AXI4-Lite, posts the traffic, applies the faults on time and checks every byte. Progress is
logged as it runs. Into the output folder (default ``build/sim-out/<scenario name>-rtl``):
``plane<p>.pcapng`` (one per plane, every frame arriving at either end of every host cable),
``goodput.png`` (goodput per receiving host against time, faults marked), ``summary.txt`` and
``summary.json``. ``WAVES=1`` also writes an FST waveform into ``build/sim/``.

The exit status is 0 when the run passed every check of the scenario.
"""

import argparse
import json
import sys
from pathlib import Path

import yaml

from models.fabric import load_scenario
from project import ROOT

from .rtl_scenario import check_fabric, flows_of, nic_params, qp_plan, switch_params

__all__ = ["DEFAULT_SCENARIO", "build_fabric", "run", "main"]

DEFAULT_SCENARIO = ROOT / "sim" / "scenarios" / "link_down.yaml"
DEFAULT_OUT = ROOT / "build" / "sim-out"


def build_fabric(scenario):
    """The :class:`sim.rtl_fabric.RtlFabric` of ``scenario`` (its rtl form)."""
    from .rtl_fabric import RtlFabric

    check_fabric(scenario)
    peers, _ = qp_plan(flows_of(scenario), scenario.topology.hosts)
    used = max((q + 1 for table in peers.values() for q in table), default=1)
    n_qps = 1 << (used - 1).bit_length()        # the NIC takes a power of two
    return RtlFabric(scenario.topology, nic=nic_params(scenario, n_qps),
                     switch=switch_params(scenario))


def run(path, out=None, seed=None):
    """Build the fabric of the scenario file ``path`` (rtl form) and play it; returns the
    ``summary.json`` mapping (``failed`` lists the failed checks). Raises when the cocotb test
    fails without writing its summary."""
    from verif.runner import run_bench

    scenario = load_scenario(path, rtl=True)
    if seed is not None:
        scenario = scenario.with_changes(seed=seed)
    out = Path(out) if out else DEFAULT_OUT / f"{scenario.name}-rtl"
    summary = out / "summary.json"
    summary.unlink(missing_ok=True)
    fabric = build_fabric(scenario)
    spec = dict(path=str(Path(path).resolve()), out=str(out.resolve()), seed=seed)
    try:
        run_bench(fabric, name=f"rtl_fabric-{scenario.name}", toplevel="rtl_fabric",
                  test_module="sim.rtl_scenario", sim="verilator", params=fabric.nic_params,
                  testcase="scenario", extra_env={"MRC_SCENARIO": json.dumps(spec)},
                  extra_sources=fabric.part_sources)
    except Exception:
        if not summary.exists():
            raise
    return json.loads(summary.read_text())


def main(argv=None):
    ap = argparse.ArgumentParser(description="Run a fabric scenario (its rtl form) on the RTL "
                                             "fabric under Verilator and print the summary.")
    ap.add_argument("scenario", type=Path, nargs="?", default=DEFAULT_SCENARIO,
                    help="a scenario file (default: sim/scenarios/link_down.yaml)")
    ap.add_argument("--out", type=Path, help=f"output folder (default {DEFAULT_OUT}/<name>-rtl)")
    ap.add_argument("--seed", type=int, help="override the scenario's seed")
    args = ap.parse_args(argv)
    try:
        load_scenario(args.scenario, rtl=True)
    except (OSError, ValueError, yaml.YAMLError) as error:
        sys.exit(f"rtl_run: {error}")
    result = run(args.scenario, args.out, args.seed)
    out = Path(result["plot"]).parent
    print((out / "summary.txt").read_text())
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
