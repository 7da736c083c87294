# SPDX-License-Identifier: BSD-2-Clause
"""NSCC on the fabric model (issue [cc], docs/protocol.md 5.1, docs/scenarios.md 8): the figures
of the issue's targets, measured, never asserted.

    python -m bench.nscc [--reduced] [--seeds 7,8,9] [--htsim 1,2,3,4,5]
                         [--set nscc_target_ns=6600 ...]

Runs ``incast_trim`` (its form, and the same with 40 messages per sender, so NSCC has time to
settle) with NSCC off and on: trimmed packets per data packet after 3 unloaded RTTs, Jain's index
of the incast flows and the bottleneck's goodput over the same bins (``models.fabric.Result``);
then the 64 x 8 permutation of ``sim/scenarios/permutation.yaml`` (16 messages of 1 MB per flow)
with NSCC on, each flow's goodput against its lone-flow goodput (lone also with NSCC on), per
seed; with ``--htsim`` the cross-check on htsim's topology (``sim/scenarios/htsim_permutation.yaml``)
for those seeds: oblivious spraying and ECMP with htsim's NSCC parameters against htsim's means
(0.903, 0.640), MRC with the project's. ``--reduced`` takes the reduced forms (seconds instead
of minutes); ``--set`` overrides
NIC settings (``nic:`` keys of the scenario files) for a sweep. Writes ``bench/nscc.json`` and
``bench/nscc.md`` (full forms only) and prints the table.
"""

import argparse
import json
from pathlib import Path

import yaml

from models.fabric import load_scenario, lone_goodputs, run_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "sim" / "scenarios"
OUT_JSON = ROOT / "bench" / "nscc.json"
OUT_MD = ROOT / "bench" / "nscc.md"
TARGETS = "trims <= 2%, Jain >= 0.98, bottleneck >= 0.9; permutation min >= 0.96, mean >= 0.98"


def incast(reduced, nic, messages=None):
    scenario = load_scenario(SCENARIOS / "incast_trim.yaml", reduced=reduced)
    scenario = scenario.with_changes(nic=nic, checks={"min_trims": 0, "min_retransmitted": 0})
    if messages:
        scenario = scenario.with_changes(traffic={"messages": messages},
                                         duration_us=scenario.duration_us * messages / 8)
    r = run_scenario(scenario)
    bins = r.settled_bins()
    return {"run": f"incast_trim{' (reduced)' if reduced else ''}, "
                   f"{scenario.traffic.messages} messages, NSCC {'on' if nic['nscc'] else 'off'}",
            "complete": r.ok, "trimmed": round(r.trim_fraction(), 4),
            "jain": round(r.fairness(), 4), "bottleneck": round(r.bottleneck_goodput(), 4),
            "bins_us": [bins.start * 2, bins.stop * 2], "trims": r.trims,
            "goodputs_gbps": [round(g, 1) for g in r.goodputs]}


def against_lone(scenario, run, **fields):
    """Run ``scenario``; one row: each flow's goodput against its lone-flow goodput."""
    r = run_scenario(scenario)
    lone = lone_goodputs(scenario, r.run)
    fractions = [g / l for g, l in zip(r.goodputs, lone)]
    return dict({"run": run, "complete": r.ok, "min": round(min(fractions), 4),
                 "mean": round(sum(fractions) / len(fractions), 4),
                 "lone_gbps": [round(min(lone), 1), round(max(lone), 1)], "trims": r.trims},
                **fields)


def permutation(reduced, nic, seed):
    scenario = load_scenario(SCENARIOS / "permutation.yaml", reduced=reduced)
    scenario = scenario.with_changes(traffic={"messages": 8 if reduced else 16}, seed=seed,
                                     nic=nic)
    if reduced:
        scenario = scenario.with_changes(topology={"hosts": 8, "t0s": 2})
    return against_lone(scenario, f"permutation {scenario.topology.hosts} x "
                                  f"{scenario.topology.planes}, seed {seed}, NSCC on")


HTSIM_MEANS = {"oblivious": 0.903, "ecmp": 0.640}


def htsim(reduced, nic, seed, transport):
    style = "project" if transport == "mrc" else "htsim"
    scenario = load_scenario(SCENARIOS / "htsim_permutation.yaml", reduced=reduced)
    scenario = scenario.with_changes(seed=seed, nic=dict(nic, transport=transport,
                                                         nscc_style=style))
    return against_lone(scenario, f"htsim topology{' (reduced)' if reduced else ''}, seed "
                                  f"{seed}, {transport}, NSCC ({style})", transport=transport)


def table(rows, settings):
    lines = [f"# NSCC on the fabric model (`python -m bench.nscc`)", "",
             f"Targets of issue [cc]: {TARGETS}. NIC settings: {settings or 'defaults'}.", "",
             "| run | complete | trimmed after 3 RTTs | Jain | bottleneck | worst / mean flow of "
             "its lone-flow goodput | trims |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        if "min" in row:
            lines.append(f"| {row['run']} | {row['complete']} | | | | {row['min']:.4f} / "
                         f"{row['mean']:.4f} (lone {row['lone_gbps'][0]}-{row['lone_gbps'][1]} "
                         f"Gb/s) | {row['trims']} |")
        else:
            lines.append(f"| {row['run']} | {row['complete']} | {row['trimmed']:.2%} | "
                         f"{row['jain']:.3f} | {row['bottleneck']:.1%} | | {row['trims']} |")
    for transport, reference in HTSIM_MEANS.items():
        means = [r["mean"] for r in rows if r.get("transport") == transport]
        if means:
            lines.append(f"\nhtsim topology, {transport}: mean over {len(means)} seeds "
                         f"{sum(means) / len(means):.3f} (htsim {reference:.3f})")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reduced", action="store_true", help="the reduced forms")
    parser.add_argument("--seeds", default="7,8,9", help="permutation seeds")
    parser.add_argument("--htsim", default="", help="seeds of the htsim cross-check (none)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="NIC settings (YAML values)")
    args = parser.parse_args(argv)
    settings = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.set)}
    on = dict(settings, nscc=True)
    rows = []
    for nic, messages in ((dict(settings, nscc=False), None), (on, None), (on, 40)):
        rows.append(incast(args.reduced, nic, messages))
        print(rows[-1], flush=True)
    for seed in (int(s) for s in args.seeds.split(",")):
        rows.append(permutation(args.reduced, on, seed))
        print(rows[-1], flush=True)
    for seed in (int(s) for s in args.htsim.split(",") if s):
        for transport in ("oblivious", "ecmp", "mrc"):
            rows.append(htsim(args.reduced, on, seed, transport))
            print(rows[-1], flush=True)
    text = table(rows, settings)
    print(text)
    if not args.reduced:
        OUT_JSON.write_text(json.dumps({"settings": settings, "rows": rows}, indent=1) + "\n")
        OUT_MD.write_text(text)
        print(f"wrote {OUT_JSON.relative_to(ROOT)} and {OUT_MD.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
