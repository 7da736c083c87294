# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""``make fpga BOARD=<board>``: a self-test core on an open board: the NIC engine loop
(``rtl/selftest_nic.py``; ``ulx3s``, ``orangecrab``) or the switch loop (``rtl/selftest.py``;
``icebreaker`` and ``ulx3s_frame`` without the switch, ``colorlight`` and the ``*_switch``
boards).

    python -m fpga.boards <board> [<board> ...] [--clk-mhz F]
    python -m fpga.boards --list

Each board has a thin top (:class:`BoardTop`): its oscillator into a PLL that makes the core
clock (the 125 MHz target is not met on ECP5 speed 6: the switch loops run at 30 MHz, the
frame loop at 50 MHz and the NIC loops at 15 MHz, where they close timing; ``--clk-mhz`` asks
for another), the core
held in reset until the PLL locks, a button that injects one error (debounced),
the LEDs and the UART report line where the board has them. The core's parameters per board are
in :data:`BOARDS` (sized to fit). The build goes through amaranth-boards and the YoWASP tools
(``scripts/env.sh`` names them) into ``build/fpga/<board>/``; nextpnr's report and Yosys's cell
counts land there too, and :func:`build` returns the numbers (``result.json``).
"""

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field

from amaranth.hdl import ClockDomain, Elaboratable, Module, Signal
from amaranth.lib.cdc import FFSynchronizer, ResetSynchronizer

from fpga.pll import ecp5_pll_instance, ice40_pll_instance
from rtl.selftest import SelfTest
from rtl.selftest_nic import SelfTestNic
from project import BUILD

__all__ = ["Board", "BOARDS", "BoardTop", "build", "build_dir", "main"]


@dataclass(frozen=True)
class Board:
    """One board: its amaranth-boards platform, the core clock and the core's parameters."""
    platform: str               # "module:Class" in amaranth_boards
    family: str                 # "ecp5" or "ice40"
    clk_mhz: float              # core clock asked of the PLL
    core: dict = field(default_factory=dict)   # the core's parameters (clk_hz is added)
    leds: str = "leds"          # how the status is shown: leds, rgb, red_green, single
    uart: bool = True           # the report goes out on the board's "uart" resource
    button: tuple = ("button", 0)   # the resource that injects an error
    note: str = ""
    nic: bool = False           # the core is SelfTestNic (else SelfTest)


BOARDS = {
    "ulx3s": Board("amaranth_boards.ulx3s:ULX3S_85F_Platform", "ecp5", 15.0,
                   dict(nic=dict(n_qps=1, pmtu=1024, mpr=128, ring=32), window=4),
                   button=("button_fire", 0), nic=True,
                   note="LFE5U-85F: one NIC engine (1 QP, 1 plane, W = 64) looped back "
                        "through a switch of 2 ports"),
    "orangecrab": Board("amaranth_boards.orangecrab_r0_2:OrangeCrabR0_2_85FPlatform", "ecp5",
                        14.77, dict(nic=dict(n_qps=1, pmtu=1024, mpr=128, ring=32), window=4),
                        leds="rgb", uart=False, nic=True,
                        note="LFE5U-85F (speed 8): the NIC engine loop of ulx3s"),
    "icebreaker": Board("amaranth_boards.icebreaker:ICEBreakerPlatform", "ice40", 24.0,
                        dict(data_width=64, ports=0, passes=0, max_payload=64, window=2),
                        leds="red_green",
                        note="iCE40 UP5K: no switch (its queues alone need 96 EBR, the UP5K "
                             "has 30); frames looped back through a FIFO"),
    "ulx3s_frame": Board("amaranth_boards.ulx3s:ULX3S_85F_Platform", "ecp5", 50.0,
                         dict(data_width=64, ports=0, passes=0, max_payload=64, window=2),
                         button=("button_fire", 0),
                         note="LFE5U-85F: the frame loop of icebreaker (no switch), the ECP5 "
                              "bitstream `make test` builds"),
    "ulx3s_switch": Board("amaranth_boards.ulx3s:ULX3S_85F_Platform", "ecp5", 30.0,
                          dict(data_width=64, ports=2, passes=3, max_payload=1024, window=4),
                          button=("button_fire", 0),
                          note="LFE5U-85F: switch of 2 ports, 3 crossings per frame"),
    "orangecrab_switch": Board("amaranth_boards.orangecrab_r0_2:OrangeCrabR0_2_85FPlatform",
                               "ecp5", 30.0, dict(data_width=64, ports=2, passes=3,
                                                  max_payload=1024, window=4),
                               leds="rgb", uart=False,
                               note="LFE5U-85F (speed 8); no UART: status on the RGB LED"),
    "colorlight": Board("amaranth_boards.colorlight_5a75b_r7_0:Colorlight_5A75B_R70Platform",
                        "ecp5", 30.0, dict(data_width=64, ports=2, passes=2, max_payload=512,
                                            window=2),
                        leds="single", uart=False,
                        note="LFE5U-25F; its UART pins are its LED and button"),
}

_DEBOUNCE_BITS = 20         # a press injects once per 2^20 cycles at most (8 ms at 125 MHz)


class BoardTop(Elaboratable):
    """The pin-and-clock top of ``board`` (a :class:`Board`) around the self-test core, its
    clock ``clk_mhz`` (default: the board's)."""

    def __init__(self, board, clk_mhz=None):
        self.board = board
        self.clk_mhz = board.clk_mhz if clk_mhz is None else clk_mhz
        core = SelfTestNic if board.nic else SelfTest
        self.core = core(clk_hz=int(self.clk_mhz * 1e6), **board.core)

    def elaborate(self, platform):
        board = self.board
        m = Module()
        m.domains.sync = cd_sync = ClockDomain("sync")
        lock = Signal()
        clk_res = platform.lookup(platform.default_clk)
        f_in = clk_res.clock.frequency / 1e6
        if board.family == "ecp5":
            clk_in = platform.request(platform.default_clk, dir="i").i
            m.submodules.pll, settings = ecp5_pll_instance(f_in, self.clk_mhz, clk_in, lock)
        else:
            pad = platform.request(platform.default_clk, dir="-").io
            m.submodules.pll, settings = ice40_pll_instance(f_in, self.clk_mhz, pad, lock)
        self.f_core = settings["f_out"]
        platform.add_clock_constraint(cd_sync.clk, self.f_core * 1e6)
        m.submodules.reset_sync = ResetSynchronizer(~lock, domain="sync")

        m.submodules.core = core = self.core
        m.d.comb += core.enable.eq(1)

        # The inject button: synchronised, one pulse per press (and per debounce interval).
        button = platform.request(*board.button).i
        pressed = Signal()
        m.submodules.button_sync = FFSynchronizer(button, pressed)
        was = Signal()
        quiet = Signal(_DEBOUNCE_BITS)
        m.d.sync += was.eq(pressed)
        with m.If(quiet != 0):
            m.d.sync += quiet.eq(quiet + 1)
        m.d.comb += core.inject.eq(pressed & ~was & (quiet == 0))
        with m.If(core.inject):
            m.d.sync += quiet.eq(1)

        # good frames (switch loop) or completed Writes (NIC loop)
        ok = core.wr_cpl_ok if board.nic else core.frames_ok
        slow = 16 if board.nic else 19
        beat = ok[slow]                     # toggles about once a second
        if board.leds == "leds":
            leds = [platform.request("led", i).o for i in range(8)]
            m.d.comb += [leds[0].eq(core.passed), leds[1].eq(core.failed),
                         leds[2].eq(core.ready)]
            m.d.comb += [led.eq(ok[slow - 3 + i]) for i, led in enumerate(leds[3:])]
        elif board.leds == "rgb":
            rgb = platform.request("rgb_led", 0)
            m.d.comb += [rgb.g.o.eq(core.passed & beat), rgb.r.o.eq(core.failed),
                         rgb.b.o.eq(~core.ready)]
        elif board.leds == "red_green":
            m.d.comb += [platform.request("led_g", 0).o.eq(core.passed & beat),
                         platform.request("led_r", 0).o.eq(core.failed)]
        else:
            fast = Signal(24)
            m.d.sync += fast.eq(fast + 1)
            # slow blink: passing; fast blink: failed; steady: waiting
            m.d.comb += platform.request("led", 0).o.eq(
                (core.passed & beat) | (core.failed & fast[22]) |
                (~core.passed & ~core.failed))
        if board.uart:
            m.d.comb += platform.request("uart", 0).tx.o.eq(core.uart_tx)
        return m


def build_dir(board):
    return BUILD / "fpga" / board


def _platform(board):
    import importlib

    module, cls = board.platform.split(":")
    return getattr(importlib.import_module(module), cls)()


def build(name, out=None, clk_mhz=None):
    """Build the bitstream of board ``name``; returns (and writes to ``result.json``) the numbers:
    ``status``, ``bitstream``, ``lut4``/``ff``/``bram`` (Yosys), ``logic``/``bram_used``
    (nextpnr, used and available), ``fmax_mhz``, ``target_mhz``, ``timing_met`` (Fmax at least
    the target; a bitstream is written either way), ``build_s``, ``config``, ``cached``. A build whose plan (every file Amaranth writes for the tools) is unchanged since
    a successful one is not run again."""
    from amaranth.build.plat import require_tool

    from fpga import flow

    board = BOARDS[name]
    out = build_dir(name) if out is None else out
    out.mkdir(parents=True, exist_ok=True)
    platform = _platform(board)
    top = BoardTop(board, clk_mhz)
    speed = getattr(platform, "speed", None)
    for tool in platform.required_tools:
        require_tool(tool)
    # router2: router1 (the default) needed hours for the NIC loop's 170,000 arcs. The build
    # goes on when timing fails, so every board gives its Fmax; ``timing_met`` says whether
    # the bitstream runs at the clock asked for.
    nextpnr_opts = "--report top.report.json --timing-allow-fail"
    if board.family == "ecp5":
        nextpnr_opts += " --router router2"
    plan = platform.prepare(top, name="top",
                            script_after_synth="tee -q -o top.stat.json stat -json",
                            nextpnr_opts=nextpnr_opts)
    digest = plan.digest().hex()
    result_path = out / "result.json"
    if result_path.exists():
        old = json.loads(result_path.read_text())
        if old.get("digest") == digest and old.get("status") == "built":
            return dict(old, cached=True)
    result = {"board": name, "digest": digest,
              "device": f"{platform.device}{f'-{speed}' if speed else ''} {platform.package}",
              "config": f"{type(top.core).__name__}("
                        f"{', '.join(f'{k}={v!r}' for k, v in board.core.items())})",
              "note": board.note, "target_mhz": round(top.f_core, 3)}
    for old in ("top.stat.json", "top.report.json", "top.bit", "top.bin"):
        (out / old).unlink(missing_ok=True)
    t0 = time.time()
    try:
        plan.execute_local(str(out))
        result["status"] = "built"
    except subprocess.CalledProcessError as exc:    # a failed build is a result too
        result["status"] = "failed"
        result["message"] = f"the build script exited with {exc.returncode}; see {out}/top.tim"
    result["build_s"] = round(time.time() - t0, 1)
    device = flow.DEVICES[board.family]
    stat = out / "top.stat.json"
    if stat.exists():
        summary = flow.yosys_summary(json.loads(stat.read_text()), device, "top")
        result.update(lut4=summary["lut4"], ff=summary["ff"], bram=summary["bram"])
    report = out / "top.report.json"
    log = (out / "top.tim").read_text(errors="replace") if (out / "top.tim").exists() else ""
    report_json = json.loads(report.read_text()) if report.exists() else None
    result.update(flow.nextpnr_summary(report_json, log, device))
    if result.get("fmax_mhz") is not None:
        result["timing_met"] = result["fmax_mhz"] >= result["target_mhz"]
    bitstream = out / ("top.bin" if board.family == "ice40" else "top.bit")
    if bitstream.exists() and result["status"] == "built":
        result["bitstream"] = str(bitstream)
        result["bitstream_bytes"] = bitstream.stat().st_size
    result_path.write_text(json.dumps(result, indent=1))
    return dict(result, cached=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("boards", nargs="*", metavar="BOARD", help=f"any of {sorted(BOARDS)}")
    ap.add_argument("--list", action="store_true", help="list the boards and exit")
    ap.add_argument("--clk-mhz", type=float, help="core clock instead of the board's")
    args = ap.parse_args(argv)
    if args.list or not args.boards:
        for name, board in BOARDS.items():
            print(f"{name:12} {board.family} {board.clk_mhz:g} MHz  {board.note}")
        return 0 if args.list else 2
    unknown = [b for b in args.boards if b not in BOARDS]
    if unknown:
        ap.error(f"unknown board(s) {unknown}; known: {sorted(BOARDS)}")
    t0 = time.time()
    failed = []
    for name in args.boards:
        res = build(name, clk_mhz=args.clk_mhz)
        print(json.dumps(res, indent=1), flush=True)
        print(f"fpga: {name} {res['status']} in {res['build_s']:.0f} s", flush=True)
        if res["status"] != "built":
            failed.append(name)
    print(f"fpga: {len(args.boards) - len(failed)} of {len(args.boards)} boards built in "
          f"{time.time() - t0:.0f} s (wall)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
