# SPDX-License-Identifier: BSD-2-Clause
"""Speed of the fabric model (issue [system] item 7): events per second and simulated
microseconds per wall second on the 64 hosts x 8 planes permutation of
``sim/scenarios/permutation.yaml`` (flows of 100 MB: about 1.1 ms of simulated time), run until
every flow is done or for ``--us`` microseconds of simulated time. A measurement, never asserted.

    python -m bench.fabric_model [--us N] [--transport mrc|ecmp] [--reduced]

Writes ``bench/fabric_model.json`` and ``bench/fabric_model.md`` (the figures, with the topology,
traffic, settings and seed they were measured on) and prints them. Wall time depends on what
else the machine runs, so the CPU time of the process is recorded too. The figures kept in the
repository are of the first millisecond (``--us 1000``, the issue's 1 ms run).
"""

import argparse
import json
import platform
import time
from pathlib import Path

from models.fabric import load_scenario, run_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "sim" / "scenarios" / "permutation.yaml"
OUT_JSON = ROOT / "bench" / "fabric_model.json"
OUT_MD = ROOT / "bench" / "fabric_model.md"


def measure(sim_us, transport, reduced):
    """Run the permutation until every flow is done, or for ``sim_us`` simulated microseconds
    when given; returns ``(figures, Result)``."""
    scenario = load_scenario(SCENARIO, reduced=reduced).with_changes(nic={"transport": transport})
    if sim_us:
        scenario = scenario.with_changes(duration_us=sim_us)
    cpu = time.process_time()
    result = run_scenario(scenario)
    cpu = time.process_time() - cpu
    return {
        "scenario": scenario.name + (" (reduced)" if reduced else ""),
        "topology": scenario.topology.describe(),
        "traffic": f"{scenario.traffic.pattern}, {len(result.flows)} flows of "
                   f"{scenario.traffic.messages} x {scenario.traffic.message_bytes} B from 0 us",
        "transport": transport,
        "settings": f"profile {scenario.nic.profile}, PMTU {scenario.nic.pmtu}, W_max "
                    f"{scenario.nic.w_max}, sack_bytes {scenario.nic.sack_bytes}, timeout "
                    f"{scenario.nic.timeout_us:g} us, seed {scenario.seed}",
        "simulated_us": round(result.sim_us, 3),
        "data_packets": result.counters["data_sent"],
        "events": result.events,
        "wall_s": round(result.wall_s, 2),
        "cpu_s": round(cpu, 2),
        "events_per_wall_s": round(result.events / result.wall_s),
        "events_per_cpu_s": round(result.events / cpu),
        "sim_us_per_wall_s": round(result.sim_us / result.wall_s, 3),
        "sim_us_per_cpu_s": round(result.sim_us / cpu, 3),
        "flows_done": result.finished,
        "aggregate_goodput_gbps": round(result.aggregate_gbps, 1),
        "python": platform.python_version(),
    }, result


# Earlier measurements of the same run, kept beside the current one (docs/scenarios.md 4).
HISTORY = """
## Earlier measurements of the same run

| code | data packets | events | CPU s | events per CPU s | simulated us per CPU s |
|---|---|---|---|---|---|
| profile 1 (before [feedback-v2-model]), Python 3.11.7 | 1,431,845 | 19,946,314 | 348.76 | 57,193 | 2.867 |
"""


def markdown(row):
    return ("# Fabric model speed\n\nMeasured by `python -m bench.fabric_model` "
            "(a measurement, not a test).\n\n"
            f"- scenario: {row['scenario']}; {row['topology']}\n"
            f"- traffic: {row['traffic']}; transport {row['transport']}; {row['settings']}\n"
            f"- simulated {row['simulated_us']} us "
            f"({'every flow done' if row['flows_done'] else 'time limit'}): "
            f"{row['data_packets']} data packets, {row['events']} events\n"
            f"- wall {row['wall_s']} s, CPU {row['cpu_s']} s (Python {row['python']})\n\n"
            "| | per wall second | per CPU second |\n|---|---|---|\n"
            f"| events | {row['events_per_wall_s']:,} | {row['events_per_cpu_s']:,} |\n"
            f"| simulated us | {row['sim_us_per_wall_s']} | {row['sim_us_per_cpu_s']} |\n"
            + HISTORY)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--us", type=float, help="stop after this many simulated microseconds")
    ap.add_argument("--transport", choices=("mrc", "ecmp"), default="mrc")
    ap.add_argument("--reduced", action="store_true", help="the scenario's reduced topology")
    args = ap.parse_args(argv)
    row, _ = measure(args.us, args.transport, args.reduced)
    write(row)


def write(row):
    """Write the figures to bench/fabric_model.{json,md} and print them."""
    OUT_JSON.write_text(json.dumps(row, indent=1) + "\n")
    OUT_MD.write_text(markdown(row))
    print(markdown(row))
    print(f"bench: wrote {OUT_JSON.relative_to(ROOT)} and {OUT_MD.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
