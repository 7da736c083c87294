# SPDX-License-Identifier: BSD-2-Clause
"""`make bench`: performance of every datapath block, measured in simulation (never asserted).

For each block and data width it runs the block's cocotb ``perf`` test on Verilator: back-to-back
frames of 0, 64, 256, 1500 and 4096 payload bytes with no idle and no backpressure. Each ``perf``
test writes cycles per frame, payload bytes per cycle, efficiency against the width and latency
(definitions: docs/metrics.md). This script gathers them into ``bench/results.json`` and
``bench/results.md`` and refreshes the table in README.md between its BENCH markers.

    python -m bench.run [--blocks header_inserter,un_stage] [--widths 64,512] [--collect]

``--blocks`` measures only those blocks and keeps the other blocks' rows of the results file.

``--collect`` runs nothing: it gathers the perf results that earlier runs (for instance the quick
``*_perf`` tests of ``make test``) left in ``build/results/``.
"""

import argparse
import importlib
import json
import sys
import time

from models.rx_front import engine_header_slots
from project import RESULTS, ROOT, replace_between_markers
from verif.runner import run_bench

# block -> (component factory "module:Class", top-level name, cocotb module[, widths[, params]]).
# A block without a data width (a record-stream block) gives widths (0,): it is built from
# ``params`` (default: its default parameters), without a data_width argument, and measured once.
# ``params`` also reach the cocotb test (``verif.bench.params()``).
BLOCKS = {
    "header_inserter": ("rtl.header_inserter:HeaderInserter", "header_inserter",
                        "tb.test_header_inserter"),
    "un_stage": ("rtl.un_stage:UnStage", "un_stage", "tb.test_un_stage"),
    "switch": ("rtl.switch:Switch", "switch", "tb.test_switch", (64,)),
    "spray_scheduler": ("rtl.spray_scheduler:SprayScheduler", "spray_scheduler",
                        "tb.test_spray_scheduler", (0,),
                        dict(n_qps=4, n_planes=4, slots=4, backups=4, ev_min_active=4)),
    "rx_tracker": ("rtl.rx_tracker:RxTracker", "rx_tracker", "tb.test_rx_tracker", (0,)),
    "tx_engine": ("rtl.tx_engine:TxEngine", "tx_engine", "tb.test_tx_engine", (64,),
                  dict(n_qps=4, n_planes=8, pmtu=4096, wrs_per_qp=8, slots=16, backups=8,
                       ev_min_active=4, max_outstanding=16)),
    "segmenter": ("rtl.segmenter:Segmenter", "segmenter", "tb.test_segmenter", (64, 512),
                  dict(n_qps=4, wrs_per_qp=8, pmtu=4096, max_outstanding=16)),
    "reliability": ("rtl.reliability:Reliability", "reliability", "tb.test_reliability", (0,),
                    dict(n_qps=4, ring=32, probe_entries=8, wr_depth=32, timer_bits=10)),
    "placement": ("rtl.placement:Placement", "placement", "tb.test_placement"),
    "rx_front": ("rtl.rx_front:RxFront", "rx_front", "tb.test_rx_front", (64,),
                 dict(n_planes=8)),
    "rx_engine": ("rtl.rx_engine:RxEngine", "rx_engine", "tb.test_rx_engine", (64,),
                  dict(n_planes=8)),
    "nic_engine": ("tb.nic_pair:NicPair", "nic_pair", "tb.test_nic_engine", (64,),
                   dict(n_qps=4, n_planes=2, pmtu=1024, clk_hz=16_000_000, wrs_per_qp=4,
                        slots=4, backups=2, ev_min_active=2, max_outstanding=8, n_regions=4,
                        buffer_bytes=8192, header_slots=engine_header_slots(2, 64, 1024),
                        mpr=128, wimm_max=16, ring=32, probe_entries=4, wr_depth=4,
                        timer_bits=10)),
    "link": ("rtl.link:Link", "link", "tb.test_link"),
}
WIDTHS = (64, 512)
OUT_JSON = ROOT / "bench" / "results.json"
OUT_MD = ROOT / "bench" / "results.md"
README = ROOT / "README.md"
# The NIC top's cells and block RAM: Yosys ``synth_ecp5`` of ``rtl.gen.TOPS["nic_engine"]`` as
# ``make report`` caches it (about an hour on 2 cores, so not run here).
NIC_STAT = ROOT / "build" / "fpga" / "report" / "nic_engine-ecp5" / "stat.json"


def nic_top_resources():
    """A sentence on the NIC top's LUT4, FF and DP16KD, or how to get them."""
    from fpga import flow
    from rtl.gen import TOPS

    config = TOPS["nic_engine"].description
    if not NIC_STAT.exists():
        return f"NIC top ({config}): run `make report` for its cell and block RAM counts."
    got = flow.yosys_summary(json.loads(NIC_STAT.read_text()), flow.DEVICES["ecp5"], "nic_engine")
    return (f"NIC top ({config}), Yosys `synth_ecp5`: {got['lut4']:,} LUT4, {got['ff']:,} FF, "
            f"{got['bram']} DP16KD (the LFE5U-85F has 83,640 LUT4 and 208 DP16KD).")
BEGIN, END = "<!-- BENCH:BEGIN -->", "<!-- BENCH:END -->"


def factory(spec):
    module, cls = spec.split(":")
    return getattr(importlib.import_module(module), cls)


def width_label(block, w):
    """The W column of ``block`` measured at width ``w``: ``N x W`` for a block with N plane
    ports (its efficiency is then against the core, N x W bits)."""
    spec = BLOCKS[block]
    planes = spec[4].get("n_planes") if len(spec) > 4 else None
    return f"{planes} x {w}" if planes else str(w)


def measure(blocks, widths, sim="verilator"):
    rows = []
    for block in blocks:
        spec, top, tb, *fixed = BLOCKS[block]
        kwargs = fixed[1] if len(fixed) > 1 else {}
        for w in (fixed[0] if fixed else widths):
            t0 = time.time()
            print(f"bench: {block} W={w} on {sim} ...", flush=True)
            name = f"perf-{block}-{w}"
            for old in RESULTS.glob(f"perf-{block}-{w}-{sim}.json"):
                old.unlink()
            component = factory(spec)(data_width=w, **kwargs) if w else factory(spec)(**kwargs)
            run_bench(component, name=name, toplevel=top, test_module=tb,
                      sim=sim, params={"data_width": w, **kwargs}, testcase="perf")
            res = json.loads((RESULTS / f"perf-{block}-{w}-{sim}.json").read_text())
            for r in res["rows"]:
                rows.append(dict(block=block, data_width=w, **r))
            print(f"bench: {block} W={w} done in {time.time() - t0:.0f} s", flush=True)
    return rows


def collect(blocks, sim="verilator"):
    rows = []
    for block in blocks:
        spec = BLOCKS[block]
        widths = spec[3] if len(spec) > 3 else WIDTHS
        for w in widths:
            path = RESULTS / f"perf-{block}-{w}-{sim}.json"
            if not path.exists():
                continue
            res = json.loads(path.read_text())
            rows += [dict(block=block, data_width=res["data_width"], **r) for r in res["rows"]]
    return rows


def merge(rows, blocks):
    """``rows`` of the blocks measured now, with the rows of every other block kept from the
    results file (so ``--blocks`` refreshes only those), in the order of :data:`BLOCKS`."""
    kept = json.loads(OUT_JSON.read_text()) if OUT_JSON.exists() else []
    kept = [r for r in kept if r["block"] not in blocks and r["block"] in BLOCKS]
    order = {name: i for i, name in enumerate(BLOCKS)}
    return sorted(kept + rows, key=lambda r: (order[r["block"]], r["data_width"]))


def table(rows):
    head = ("| block | W | payload B | cycles/frame | payload B/cycle | of width | latency (cycles) |\n"
            "|---|---|---|---|---|---|---|\n")
    body = ""
    for r in rows:
        lat = str(r["latency"])
        if "latency_last" in r:
            lat += f" (last-in {r['latency_last']})"
        body += (f"| {r['block']} | {width_label(r['block'], r['data_width'])} | {r['payload']} | "
                 f"{r['cycles_per_frame']:.2f} | {r['bytes_per_cycle']:.2f} | "
                 f"{100 * r['efficiency']:.1f}% | {lat} |\n")
    return head + body


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", default=",".join(BLOCKS))
    ap.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    ap.add_argument("--collect", action="store_true",
                    help="gather existing build/results/perf-*.json instead of running")
    args = ap.parse_args(argv)
    blocks = [b for b in args.blocks.split(",") if b]
    unknown = [b for b in blocks if b not in BLOCKS]
    if unknown:
        sys.exit(f"bench: unknown block(s) {unknown}; known: {sorted(BLOCKS)}")
    widths = [int(w) for w in args.widths.split(",")]
    rows = merge(collect(blocks) if args.collect else measure(blocks, widths), blocks)
    OUT_JSON.write_text(json.dumps(rows, indent=1) + "\n")
    md = ("# Bench results\n\nMeasured by `make bench` (Verilator, back-to-back frames, no idle, "
          "no backpressure, 250 MHz nominal clock). Definitions: `docs/metrics.md`. "
          "Cycles per frame are steady-state; payload bytes per cycle count payload only "
          "(header beats count as time). W is the data width; N x W for a block with N plane "
          "ports, whose efficiency is against its core of N x W bits. nic_engine is the two-NIC "
          "bench with a path dying and healing (`tb/test_nic_engine.py`, `perf`): payload bytes "
          "per cycle of both NICs after the heal against both directions of both planes (32 B "
          "per cycle), and as latency the cycles from the path's death to its last use. "
          + nic_top_resources() + "\n\n" + table(rows))
    OUT_MD.write_text(md)
    print(table(rows))
    replace_between_markers(README, BEGIN, END, table(rows))
    print(f"bench: wrote {OUT_JSON.relative_to(ROOT)} and {OUT_MD.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
