# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""rtl.common.memory.BlockRam in Amaranth's simulator against models.memory.BlockRamModel
(random reads and writes with random enables, many on the same address, both latencies, with
and without init), and the ECP5 variant's structure: DP16KD tiles, their output register and
their INITVAL words (the ECP5 variant itself runs under Icarus and Verilator in
tb/test_memory.py, with a DP16KD model)."""

import random
import re

import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from models.memory import BlockRamModel
from rtl.common.memory import BlockRam, dp16kd_initvals, dp16kd_tiling
from rtl.common.target import Target, family


def run_memory(width, depth, output_register, cycles, seed, init=(), hot=4):
    """Drive random writes and reads (addresses mostly among ``hot`` ones, so reads meet writes
    at one address) and compare r_data with the model every cycle; returns the cycles compared
    in which a read met a write at its address."""
    dut = BlockRam(width, depth, init=init, output_register=output_register)
    model = BlockRamModel(width, depth, dut.latency, init)
    rng = random.Random(seed)
    hot_addrs = [rng.randrange(depth) for _ in range(hot)]
    state = {"collisions": 0}

    def addr():
        return rng.choice(hot_addrs) if rng.random() < 0.7 else rng.randrange(depth)

    async def bench(ctx):
        for cycle in range(cycles):
            w_en, r_en = rng.random() < 0.6, rng.random() < 0.8
            w_addr, r_addr = addr(), addr()
            if rng.random() < 0.2:
                r_addr = w_addr
            w_data = rng.getrandbits(width)
            for port, value in ((dut.w_en, w_en), (dut.w_addr, w_addr), (dut.w_data, w_data),
                                (dut.r_en, r_en), (dut.r_addr, r_addr)):
                ctx.set(port, value)
            want = model.cycle(w_en, w_addr, w_data, r_en, r_addr)
            got = ctx.get(dut.r_data)
            assert got == want, f"cycle {cycle}: r_data {got:#x}, model {want:#x}"
            state["collisions"] += w_en and r_en and w_addr == r_addr
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return state["collisions"]


@pytest.mark.parametrize("output_register", [True, False])
@pytest.mark.parametrize("width,depth", [(36, 1024), (8, 16), (3, 100)])
def test_reads_match_the_model(width, depth, output_register):
    collisions = run_memory(width, depth, output_register, 1500, seed=width * depth)
    assert collisions > 50          # write-first reads were exercised


def test_init_is_read_back():
    init = [random.Random(1).getrandbits(20) for _ in range(60)]
    run_memory(20, 64, True, 800, seed=3, init=init)


@pytest.mark.parametrize("kwargs,match", [
    ({"width": 0, "depth": 4}, "width must be an integer of at least 1, not 0"),
    ({"width": 8, "depth": 1}, "depth must be an integer of at least 2, not 1"),
    ({"width": 8, "depth": 4, "init": [1] * 5}, "init has 5 words, more than depth 4"),
    ({"width": 4, "depth": 4, "init": [16]}, r"init word 0 \(16\) is not a 4-bit"),
    ({"width": 4, "depth": 4, "output_register": 1}, "output_register must be True or False"),
    ({"width": 4, "depth": 4, "target": "xilinx"}, "target must be None or one of"),
])
def test_bad_parameters_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BlockRam(**kwargs)


def test_tiling_takes_the_fewest_blocks_then_the_fewest_rows():
    assert dp16kd_tiling(36, 1024) == ((18, 1024, 4), 2, 1)
    assert dp16kd_tiling(72, 512) == ((18, 1024, 4), 4, 1)
    assert dp16kd_tiling(1, 16384) == ((1, 16384, 0), 1, 1)
    assert dp16kd_tiling(32, 4096) == ((4, 4096, 2), 8, 1)      # 8 either way, one row
    assert dp16kd_tiling(3, 20000) == ((4, 4096, 2), 1, 5)      # 5 rows beat 6 blocks
    assert dp16kd_tiling(64, 64) == ((18, 1024, 4), 4, 1)


def test_the_variant_follows_the_platform():
    ram = BlockRam(36, 1024)
    assert ram.variant(None) == "generic" and ram.variant(Target("ice40")) == "generic"
    assert ram.variant(Target("ecp5")) == "ecp5"
    assert BlockRam(36, 1024, target="generic").variant(Target("ecp5")) == "generic"
    assert family(type("P", (), {"family": "ecp5"})()) == "ecp5"
    with pytest.raises(ValueError, match="family must be one of"):
        Target("virtex")


def _verilog(ram, platform):
    return verilog.convert(ram, name="ram", platform=platform, emit_src=False)


@pytest.mark.parametrize("output_register,regmode", [(True, "OUTREG"), (False, "NOREG")])
def test_the_ecp5_variant_is_dp16kd_with_the_output_register(output_register, regmode):
    text = _verilog(BlockRam(36, 1024, output_register=output_register), Target("ecp5"))
    assert text.count("DP16KD #(") == 2
    assert text.count(f".REGMODE_B(\"{regmode}\")") == 2
    assert ".DATA_WIDTH_B(32'd18)" in text
    generic = _verilog(BlockRam(36, 1024, output_register=output_register), None)
    assert "DP16KD" not in generic and "reg [35:0] mem [1023:0]" in generic


def test_a_deep_memory_gets_rows_and_a_row_select():
    text = _verilog(BlockRam(3, 20000), Target("ecp5"))
    assert text.count("DP16KD #(") == 5 and "row_sel2" in text


def test_initval_layout():
    # 18-bit mode: word a in row a; 4-bit mode: four words per row, around bit 8.
    vals = dp16kd_initvals([0x3FFFF, 0, 1], (18, 1024, 4))
    assert vals == {"INITVAL_00": 0x3FFFF | 1 << 40}
    vals = dp16kd_initvals([0xF, 0, 0xF, 0, 0x1], (4, 4096, 2))
    assert vals == {"INITVAL_00": 0xF | 0xF << 9 | 1 << 20}
    vals = dp16kd_initvals([1] * 2048, (9, 2048, 3))
    assert vals["INITVAL_3F"] == sum(1 << (20 * s) | 1 << (20 * s + 9) for s in range(16))


def test_init_reaches_the_dp16kd_parameters():
    text = _verilog(BlockRam(18, 1024, init=[5, 0, 7]), Target("ecp5"))
    found = re.findall(r"\.(INITVAL_[0-9A-F]{2})\(320'h([0-9a-f]+)\)", text)
    assert [(n, int(v, 16)) for n, v in found] == [("INITVAL_00", 5 | 7 << 40)]
