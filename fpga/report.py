# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""``make report``: LUT4, FF, block RAM and Fmax of every top block and every board build.

For every entry of :data:`rtl.gen.TOPS` (W = 64, default sizes), plus the configurations of
:data:`EXTRA` (reduced ones where a default does not fit, and the shared parts of
``rtl/common/``), it runs :func:`fpga.flow.run`: Yosys and nextpnr out of context on the ECP5
LFE5U-85F (speed 6, CABGA381, 125 MHz target); when the ECP5 numbers leave it a chance, on the
iCE40 UP5K (SG48); and on the Gowin GW5AST-138C (figures indicative) for the blocks that do not
fit the ECP5 and those of :data:`GOWIN`. Each is placed and routed with the three seeds of
:data:`fpga.flow.SEEDS`, and the table states the median Fmax with its spread (min-max) and
the seeds. Then it builds every board of :data:`fpga.boards.BOARDS` (``make fpga``, one seed)
and reads its numbers. Results go to ``fpga/results.json`` and ``fpga/results.md``, and the
table replaces the one in README.md between its FPGA markers.

    python -m fpga.report [--targets switch,un_stage] [--devices ecp5,ice40,gowin]
                          [--boards ulx3s] [--jobs 2] [--pnr-timeout S] [--seeds 1,2,3]
                          [--collect]

Each block's Verilog is written for the device's family (``Target("ecp5")`` etc., see
:mod:`rtl.common.target`), so a part with a family form (``BlockRam``: DP16KD on ECP5) is
measured in it. Builds run at most ``--jobs`` at a time (default 2), largest first; each is
cached in ``build/fpga/report/<target>-<device>/`` by the hash of its Verilog and commands, so a
second run redoes only what changed (and a result measured with fewer seeds gets only the
missing ones). A block whose Yosys counts exceed the device is recorded as "does not fit"
without place and route. ``--pnr-timeout S`` (default 1800: 30 minutes) bounds each seed's
nextpnr run, on the shared 2-core machine; when the first seed is stopped the row says "did not
finish in 30 min" with the Yosys counts, and the other seeds are not run. ``--collect`` runs
nothing and tabulates the cached results: it regenerates each block's Verilog and takes a
cached block result only if its key matches that Verilog (a result built from older code is
left out). The rows built or collected replace the same rows of ``fpga/results.json``; the
others stay as they were.
"""

import argparse
import json
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

from fpga import boards, flow
from rtl.common.target import Target
from rtl.gen import TOPS, top
from project import BUILD, ROOT, replace_between_markers

__all__ = ["targets", "EXTRA", "GOWIN", "ROUTER1", "measure", "collect", "merge", "table",
           "fmax_cells", "main", "PNR_TIMEOUT"]


def registered(module, cls, **params):
    """A factory of ``cls(**params)`` inside :class:`fpga.registered.Registered` (a register on
    every port), for a part whose ports reach its block RAM directly."""
    inner = top(module, cls, **params)

    def factory():
        from fpga.registered import Registered
        return Registered(inner())
    factory.description = f"fpga.registered.Registered({inner.description})"
    return factory


# Configurations beside rtl.gen.TOPS: name -> (Verilog top name, factory).
EXTRA = {
    # The default switch needs 304 DP16KD (K = 4 ports, 32 KB data and 64 KB control queue and a
    # 16 KB ingress FIFO per port, each 256 bits wide); the LFE5U-85F has 208.
    "switch_k4_16k": ("switch", top("rtl.switch", "Switch", ports=4, data_width=64,
                                    data_limit=16384, ingress_bytes=8192)),
    # The shared parts of rtl/common/ (docs/protocol.md section 8): the register slice at a
    # 72-bit payload, the block RAM (with and without its output register, between registers),
    # and the read-modify-write pipeline of 1024 words of 18 and 36 bits (1 and 2 DP16KD).
    "register_slice_72": ("register_slice", top("rtl.common.register_slice", "RegisterSlice",
                                                shape=72)),
    "block_ram_36x1024": ("block_ram", registered("rtl.common.memory", "BlockRam", width=36,
                                                  depth=1024)),
    "block_ram_36x1024_noreg": ("block_ram", registered("rtl.common.memory", "BlockRam",
                                                        width=36, depth=1024,
                                                        output_register=False)),
    "rmw_18x1024": ("rmw", top("rtl.common.rmw", "ReadModifyWrite", width=18, depth=1024)),
    "rmw_36x1024": ("rmw", top("rtl.common.rmw", "ReadModifyWrite", width=36, depth=1024)),
    # The header inserter at W = 512 (issue [tx-speed]: measured on the GW5AST-138C).
    "header_inserter_512": ("header_inserter", top("rtl.header_inserter", "HeaderInserter",
                                                   data_width=512)),
}

# Blocks placed and routed with nextpnr's router1 instead of router2 (flow.ECP5's default): the
# small parts of rtl/common/ route in seconds with either, and router1 gives them more
# (measured, seeds 1-3, same netlists: rmw_36x1024 203.4-209.6 MHz with router1, 162.4-191.8
# with router2; register_slice_72 375.7-389.3 against 267.2-307.8). (un_stage was here while
# its flat read-back multiplexer and 64 parallel comparators made router2 diverge; rebuilt, it
# routes with router2.)
ROUTER1 = {"register_slice_72", "block_ram_36x1024", "block_ram_36x1024_noreg",
           "rmw_18x1024", "rmw_36x1024"}

# Blocks built on the Gowin part even when they fit the ECP5: the flow's check (seconds).
GOWIN = {"tick_generator", "header_inserter_512"}

PNR_TIMEOUT = 1800          # seconds for each seed's nextpnr run (on the 2-core machine)

OUT_JSON = ROOT / "fpga" / "results.json"
OUT_MD = ROOT / "fpga" / "results.md"
README = ROOT / "README.md"
BEGIN, END = "<!-- FPGA:BEGIN -->", "<!-- FPGA:END -->"
REPORT_DIR = BUILD / "fpga" / "report"
# iCE40 UP5K: 5280 logic cells, 30 EBR of 4 kbit; a DP16KD holds 18 kbit.
UP5K_CELLS = 5280
UP5K_BRAM_KBIT = 30 * 4


def targets():
    """``{name: (Verilog top, factory)}``: every TOPS entry, then :data:`EXTRA`."""
    out = {name: (name, factory) for name, factory in TOPS.items()}
    out.update(EXTRA)
    return out


def ice40_chance(ecp5):
    """None if the block may fit the UP5K judging by its ECP5 synthesis, else the reason not."""
    if ecp5.get("lut4") is None:
        return "not attempted: the ECP5 synthesis failed"
    if ecp5["lut4"] > UP5K_CELLS or ecp5["ff"] > UP5K_CELLS:
        return (f"not attempted: {ecp5['lut4']} LUT4 and {ecp5['ff']} FF on ECP5; the UP5K has "
                f"{UP5K_CELLS} logic cells")
    if ecp5["bram"] * 18 > UP5K_BRAM_KBIT:
        return (f"not attempted: {ecp5['bram']} DP16KD ({ecp5['bram'] * 18} kbit) on ECP5; the "
                f"UP5K has {UP5K_BRAM_KBIT} kbit of EBR")
    return None


def gowin_wanted(name, ecp5):
    """Whether block ``name`` is built on the Gowin part, given its ECP5 result of this run
    (None: not built on ECP5 in this run): when it does not fit the ECP5, or is in
    :data:`GOWIN`, or the ECP5 is not part of the run."""
    return ecp5 is None or name in GOWIN or ecp5.get("status") == "does not fit"


def device_for(name, key):
    """The :data:`fpga.flow.DEVICES` entry ``key`` as block ``name`` is built on (its router)."""
    device = flow.DEVICES[key]
    return device.with_router("router1") if key == "ecp5" and name in ROUTER1 else device


def _verilog(name, top_name, factory, family):
    """The Verilog of target ``name`` for FPGA ``family`` as the current code generates it."""
    from rtl.gen import write_verilog

    path = REPORT_DIR / name / family / f"{top_name}.v"
    return write_verilog(factory(), top_name, path, platform=Target(family)).read_text()


def _block_job(name, top_name, factory, devices, pnr_timeout=None, seeds=flow.SEEDS):
    texts = {}
    rows = []
    ecp5 = None
    for key in devices:
        device = device_for(name, key)
        row = {"kind": "block", "target": name, "top": top_name,
               "config": factory.description, "device_key": key}
        if name in ROUTER1 and key == "ecp5":
            row["router"] = device.router
        if key == "gowin" and not gowin_wanted(name, ecp5):
            continue
        reason = ice40_chance(ecp5) if key == "ice40" and ecp5 is not None else None
        if reason:
            rows.append(dict(row, device=device.name, status="not attempted", message=reason))
            continue
        if device.family not in texts:
            texts[device.family] = _verilog(name, top_name, factory, device.family)
        t0 = time.time()
        print(f"report: {name} on {device.name} ...", flush=True)
        res = flow.run(texts[device.family], top_name, device, REPORT_DIR / f"{name}-{key}",
                       pnr_timeout=pnr_timeout, seeds=seeds)
        print(f"report: {name} on {device.name}: {res['status']}"
              f"{' (cached)' if res['cached'] else ''} in {time.time() - t0:.0f} s", flush=True)
        res.pop("key", None)
        res.pop("cached", None)
        rows.append(dict(row, **res))
        if key == "ecp5":
            ecp5 = res
    return rows


def _board_job(board):
    print(f"report: board {board} ...", flush=True)
    t0 = time.time()
    res = boards.build(board)
    print(f"report: board {board}: {res['status']} in {time.time() - t0:.0f} s", flush=True)
    return [dict(res, kind="board", target=board)]


def _safe(job, *args):
    try:
        return job(*args)
    except Exception as exc:     # report the job, go on with the others
        traceback.print_exc()
        return [{"kind": "block" if job is _block_job else "board", "target": args[0],
                 "status": "failed", "message": "".join(
                     traceback.format_exception_only(exc)).strip()}]


# Rough build cost, largest first, so two workers finish together.
_ORDER = ("rx_tracker", "switch", "switch_k4_16k", "spray_scheduler")


def measure(names, devices, board_names, jobs=2, pnr_timeout=None, seeds=flow.SEEDS):
    """Run the block builds and board builds, ``jobs`` at a time, each block placed and routed
    once per seed of ``seeds``, each seed's nextpnr run stopped after ``pnr_timeout`` seconds
    (None: no limit); returns the rows."""
    all_targets = targets()
    names = sorted(names, key=lambda n: _ORDER.index(n) if n in _ORDER else len(_ORDER))
    work = [(_block_job, n, *all_targets[n], devices, pnr_timeout, seeds) for n in names]
    work += [(_board_job, b) for b in board_names]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_safe, *w) for w in work]
        rows = [r for f in futures for r in f.result()]
    return rows


def collect(names, devices, board_names):
    """The cached results of earlier runs (nothing is synthesized or placed).

    A block's cached result is taken only if its key matches the Verilog the current code
    generates (:func:`fpga.flow.result_key`); a stale one is skipped with a note on stdout.
    Board results are taken as :func:`fpga.boards.build` left them.
    """
    rows = []
    all_targets = targets()
    for name in names:
        top_name, factory = all_targets[name]
        texts = {}
        for key in devices:
            path = REPORT_DIR / f"{name}-{key}" / "result.json"
            if not path.exists():
                continue
            device = device_for(name, key)
            if device.family not in texts:
                texts[device.family] = _verilog(name, top_name, factory, device.family)
            res = json.loads(path.read_text())
            if res.pop("key", None) != flow.result_key(texts[device.family], top_name, device):
                print(f"report: {name} on {key}: cached result is stale (built from other "
                      f"Verilog), left out", flush=True)
                continue
            row = dict(res, kind="block", target=name, device_key=key,
                       config=factory.description, top=top_name)
            if name in ROUTER1 and key == "ecp5":
                row["router"] = device.router
            rows.append(row)
    for board in board_names:
        path = boards.build_dir(board) / "result.json"
        if path.exists():
            rows.append(dict(json.loads(path.read_text()), kind="board", target=board))
    return rows


def _used(pair):
    return "" if not pair else f"{pair[0]}/{pair[1]} ({100 * pair[0] / pair[1]:.0f}%)"


def _cell(value):
    return "" if value is None else str(value)


def _seed_list(seeds):
    seeds = list(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def fmax_cells(row):
    """The two Fmax cells of ``row``: the median with the target (``"201.7 (125)"``, marked
    "indicative" on a device whose timing the report does not vouch for) and the spread with
    the seeds (``"200.4-201.8, seeds 1-3"``); a row measured before the report had three seeds
    (no ``seeds`` key) says ``"1 seed"``."""
    if row.get("fmax_mhz") is None:
        return "", ""
    median = f"{row['fmax_mhz']:.1f} ({row['target_mhz']})"
    if row.get("device_key") in flow.DEVICES and flow.DEVICES[row["device_key"]].indicative:
        median += ", indicative"
    if row.get("kind") == "board":
        return median, "1 seed (board build)"
    seeds = row.get("seeds")
    if not seeds:
        return median, "1 seed"
    if len(seeds) == 1:
        return median, f"1 seed (seed {seeds[0]})"
    return median, (f"{row['fmax_min']:.1f}-{row['fmax_max']:.1f}, "
                    f"seeds {_seed_list(seeds)}")


def table(rows):
    """The Markdown table of ``rows``."""
    head = ("| target | device | LUT4 | FF | block RAM | logic cells used (nextpnr) | "
            "Fmax MHz, median of seeds (target) | Fmax spread, seeds | result | build s |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n")
    body = ""
    for r in rows:
        median, spread = fmax_cells(r)
        status = r.get("status", "")
        if r.get("message") and status != "fits":
            status += f": {r['message']}"
        elif r.get("unfinished_seeds"):
            status += f" ({r['message']})"
        if r.get("timing_met") is False:
            status += " (timing not met at the target clock)"
        if r.get("router"):
            status += f" (nextpnr {r['router']})"
        if r.get("wrapper_in_bits") and r.get("status") != "does not fit":
            status += f" (P&R with the {r['wrapper_in_bits']}-bit pin wrapper)"
        secs = sum(r.get(k) or 0 for k in ("synth_s", "pnr_s", "build_s"))
        target = r["target"] if r.get("kind") == "block" else f"board {r['target']}"
        body += (f"| {target} | {r.get('device', '')} | {_cell(r.get('lut4'))} | "
                 f"{_cell(r.get('ff'))} | {_cell(r.get('bram'))} | {_used(r.get('logic'))} | "
                 f"{median} | {spread} | {status} | {secs:.0f} |\n")
    return head + body


def _row_id(row):
    return (row.get("kind"), row.get("target"), row.get("device_key"))


def merge(old_rows, new_rows):
    """``old_rows`` with every row of ``new_rows`` in place of the old row of the same block and
    device (or board), and new ones added; blocks in :func:`targets` order, devices in
    :data:`fpga.flow.DEVICES` order, boards last."""
    merged = {_row_id(r): r for r in old_rows}
    merged.update({_row_id(r): r for r in new_rows})
    names = list(targets())
    keys = list(flow.DEVICES)

    def order(row):
        kind, target, key = _row_id(row)
        if kind == "board":
            return (1, list(boards.BOARDS).index(target) if target in boards.BOARDS else 99, 0)
        return (0, names.index(target) if target in names else len(names),
                keys.index(key) if key in keys else len(keys))
    return sorted(merged.values(), key=order)


def _configs(rows):
    seen = {}
    for r in rows:
        if r.get("config"):
            seen.setdefault(r["target"], r["config"])
    return "".join(f"- `{name}`: `{cfg}`\n" for name, cfg in seen.items())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default=",".join(targets()))
    ap.add_argument("--devices", default=",".join(flow.DEVICES))
    ap.add_argument("--boards", default=",".join(boards.BOARDS),
                    help="boards to build (empty: none)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--pnr-timeout", type=float, default=PNR_TIMEOUT, metavar="S",
                    help=f"stop each seed's nextpnr run after S seconds (default {PNR_TIMEOUT}; "
                         f"0: no limit)")
    ap.add_argument("--seeds", default=",".join(map(str, flow.SEEDS)),
                    help="nextpnr seeds of every block (default %(default)s)")
    ap.add_argument("--collect", action="store_true", help="tabulate cached results only")
    args = ap.parse_args(argv)
    names = [t for t in args.targets.split(",") if t]
    devices = [d for d in args.devices.split(",") if d]
    board_names = [b for b in args.boards.split(",") if b]
    for kind, given, known in (("target", names, targets()), ("device", devices, flow.DEVICES),
                               ("board", board_names, boards.BOARDS)):
        unknown = [g for g in given if g not in known]
        if unknown:
            sys.exit(f"report: unknown {kind}(s) {unknown}; known: {sorted(known)}")
    seeds = tuple(int(x) for x in args.seeds.split(",") if x)
    pnr_timeout = args.pnr_timeout or None
    t0 = time.time()
    new = collect(names, devices, board_names) if args.collect else \
        measure(names, devices, board_names, args.jobs, pnr_timeout, seeds)
    old = json.loads(OUT_JSON.read_text()) if OUT_JSON.exists() else []
    rows = merge(old, new)
    OUT_JSON.write_text(json.dumps(rows, indent=1) + "\n")
    md = ("# FPGA results\n\nMeasured by `make report` (`fpga/report.py`): Yosys 0.70 and "
          "nextpnr 0.11.1 (YoWASP). Blocks: out of context, W = 64. ECP5: LFE5U-85F speed 6 "
          "CABGA381, `nextpnr-ecp5 --out-of-context`, 125 MHz target. iCE40: UP5K SG48 "
          "through a 4-pin wrapper (inputs shifted in, outputs XOR-reduced), 48 MHz target. "
          "Gowin: GW5AST-138C PG484 through the same wrapper, `nextpnr-himbaechel` 0.11.1, "
          "125 MHz target; its timing model is young, so its figures are indicative. "
          "Fmax: the median of the nextpnr seeds named in the spread column (three, 1-3, each "
          "stopped after 30 minutes); rows marked \"1 seed\" were measured before the report "
          "used three and have not been rebuilt since. "
          "LUT4 and FF: Yosys, the block alone (ECP5 LUT4 counts a CCU2C as two, Gowin an ALU "
          "as one). Block RAM: DP16KD (ECP5), EBR (iCE40) or BSRAM (Gowin). Boards: `make fpga "
          "BOARD=<board>`, whole design with pins and PLL, one seed.\n\n" + table(rows) +
          "\nConfigurations:\n\n" + _configs(rows))
    OUT_MD.write_text(md)
    print(table(rows))
    replace_between_markers(README, BEGIN, END, table(rows))
    print(f"report: wrote {OUT_JSON.relative_to(ROOT)} and {OUT_MD.relative_to(ROOT)} "
          f"in {time.time() - t0:.0f} s")
    failed = [r["target"] for r in rows if r.get("status") == "failed"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
