# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.common.memory.BlockRam and rtl.common.rmw.ReadModifyWrite, the block-RAM
parts every table uses (docs/protocol.md section 8: state in block RAM, read-modify-written
through a pipeline with hazard forwarding), on Icarus and Verilator, in both forms: the generic
one (Amaranth's inferred memory) and the ECP5 one (DP16KD instances, simulated with the
behavioural model verif/dp16kd_sim.v, which returns a wrong word whenever a read meets a write
at one address, as the silicon's is undefined).

- ``memory_random``: every cycle a random write (``w_en`` 60%) and a random read (``r_en``
  80%), addresses mostly among four (so reads meet writes at one address); ``r_data`` is
  compared every cycle with models.memory.BlockRamModel (write-first, ``r_en`` moving the read
  pipeline).
- ``rmw_random``: operations (bursts of up to 8 on one address among a few, built-in codes)
  under random valid and ready (phases of back-to-back and of heavy stalls); every result is
  compared, in order, with models.memory.RmwModel.
- ``rmw_perf``: 600 increments of one counter back to back into an always-ready sink: one
  operation per cycle after the stated latency, ``req_tready`` never low, and every result one
  more than the one before.
"""

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

CYCLES = 4000
OPS = 3000


def _memory_params():
    from verif.bench import params

    p = params()
    return p["width"], p["depth"], p["latency"], p.get("init", [])


@cocotb.test()
async def memory_random(dut):
    from models.memory import BlockRamModel
    from verif.bench import frames, make_rng, start, write_result

    width, depth, latency, init = _memory_params()
    rng = make_rng(dut)
    model = BlockRamModel(width, depth, latency, init)
    for port in (dut.w_en, dut.w_addr, dut.w_data, dut.r_addr):
        port.value = 0
    dut.r_en.value = 1
    await start(dut)
    # The reset cycles read address 0 with r_en high: bring the model to the same state.
    for _ in range(5):
        model.cycle(0, 0, 0, 1, 0)
    hot = [rng.randrange(depth) for _ in range(4)]

    def addr():
        return rng.choice(hot) if rng.random() < 0.7 else rng.randrange(depth)

    collisions = 0
    n = frames(CYCLES)
    for cycle in range(n):
        w_en, r_en = int(rng.random() < 0.6), int(rng.random() < 0.8)
        w_addr, r_addr = addr(), addr()
        if rng.random() < 0.2:
            r_addr = w_addr
        w_data = rng.getrandbits(width)
        dut.w_en.value, dut.w_addr.value, dut.w_data.value = w_en, w_addr, w_data
        dut.r_en.value, dut.r_addr.value = r_en, r_addr
        # At the edge that ends this cycle, r_data still shows this cycle's value.
        await RisingEdge(dut.clk)
        want = model.cycle(w_en, w_addr, w_data, r_en, r_addr)
        got = int(dut.r_data.value)
        assert got == want, f"cycle {cycle}: r_data {got:#x}, model {want:#x}"
        collisions += w_en and r_en and w_addr == r_addr
    assert collisions > n // 20, f"only {collisions} reads met a write"
    write_result(dut, "block_ram", n, collisions=collisions)


def _rmw_params():
    from verif.bench import params

    p = params()
    return p["width"], p["depth"], p["addr_width"], p["latency"]


def _pack_req(addr, code, arg, aw):
    from models.memory import OP_CODE_BITS

    return addr | (code | arg << OP_CODE_BITS) << aw


def _unpack_res(word, width, aw):
    from models.memory import OP_CODE_BITS

    op_bits = OP_CODE_BITS + width
    addr = word & ((1 << aw) - 1)
    word >>= aw + op_bits
    return addr, word & ((1 << width) - 1), word >> width


def _random_ops(rng, n, width, depth):
    from models.memory import ADD, CLEAR, READ, SET, WRITE

    hot = [rng.randrange(depth) for _ in range(3)]
    ops = []
    while len(ops) < n:
        addr = rng.choice(hot) if rng.random() < 0.6 else rng.randrange(depth)
        for _ in range(rng.choice((1, 1, 2, 3, 8))):
            code = rng.choice((READ, WRITE, ADD, ADD, SET, CLEAR))
            arg = rng.choice((1, rng.getrandbits(width), (1 << width) - 1,
                              1 << rng.randrange(width)))
            ops.append((addr, code, arg))
    return ops[:n]


@cocotb.test()
async def rmw_random(dut):
    from models.memory import RmwModel
    from verif.bench import RecordSink, RecordSource, frames, make_rng, phased_pause, start, \
        write_result

    width, depth, aw, _ = _rmw_params()
    rng = make_rng(dut)
    source = RecordSource(dut, "req", phased_pause(rng, (0.0, 0.3, 0.8), 100))
    sink = RecordSink(dut, "res", phased_pause(rng, (0.0, 0.5, 0.9), 100))
    await start(dut)
    ops = _random_ops(rng, frames(OPS), width, depth)
    for addr, code, arg in ops:
        source.send(_pack_req(addr, code, arg, aw))
    for _ in range(40 * len(ops)):
        await RisingEdge(dut.clk)
        if len(sink.queue) >= len(ops) and source.empty():
            break
    else:
        raise AssertionError(f"only {len(sink.queue)} of {len(ops)} results came out")
    await ClockCycles(dut.clk, 20)
    model = RmwModel(width, depth)
    got = [_unpack_res(w, width, aw) for w in sink.queue]
    assert len(got) == len(ops), f"{len(got)} results for {len(ops)} operations"
    for i, ((addr, code, arg), result) in enumerate(zip(ops, got)):
        want = (addr, *model.apply(addr, (code, arg)))
        assert result == want, f"operation {i} ({code} {arg:#x} at {addr}): result " \
                               f"{result}, model {want}"
    assert int(dut.res_tvalid.value) == 0, "a result left over after the last"
    write_result(dut, "rmw", len(ops))


@cocotb.test()
async def rmw_perf(dut):
    from models.memory import ADD
    from verif.bench import RecordSink, RecordSource, params, start, write_perf

    width, depth, aw, latency = _rmw_params()
    source = RecordSource(dut, "req")
    sink = RecordSink(dut, "res")
    await start(dut)
    n = 600
    for _ in range(n):
        source.send(_pack_req(7, ADD, 1, aw))
    cycles = ready_low = 0
    while len(sink.queue) < n:
        await RisingEdge(dut.clk)
        cycles += 1
        ready_low += int(dut.req_tready.value) == 0
        assert cycles < 4 * n, "the pipeline stalled with an always-ready sink"
    # RecordSource puts an operation on the wire one edge after it is queued.
    assert cycles <= n + latency + 2, f"{n} operations took {cycles} cycles: not one per cycle"
    assert ready_low == 0, "req_tready fell although res never stalled"
    # The counter starts wherever an earlier test of the same run left it.
    results = [_unpack_res(w, width, aw) for w in sink.queue]
    start_value = results[0][1]
    mask = (1 << width) - 1
    assert [new for _, _, new in results] == [(start_value + i) & mask
                                              for i in range(1, n + 1)], \
        "a back-to-back increment missed its predecessor"
    write_perf(dut, "rmw", width, [dict(payload=0, frames=n, cycles_per_frame=1.0,
                                        bytes_per_cycle=0.0, efficiency=1.0,
                                        latency=params()["latency"])])


# (name, width, depth, output register, form, init)
MEMORIES = [
    ("36x1024-reg", 36, 1024, True, "generic", False),
    ("36x1024-noreg", 36, 1024, False, "generic", False),
    ("36x1024-reg", 36, 1024, True, "ecp5", False),
    ("36x1024-noreg", 36, 1024, False, "ecp5", False),
    ("3x20000-reg-init", 3, 20000, True, "ecp5", True),     # 5 rows of x4 blocks
]
# (name, width, depth, output register, form)
RMWS = [
    ("18x1024-reg", 18, 1024, True, "generic"),
    ("18x1024-reg", 18, 1024, True, "ecp5"),
    ("36x64-noreg", 36, 64, False, "ecp5"),
]


def _form(form):
    from rtl.common.target import Target
    from verif.runner import DP16KD_MODEL

    if form == "ecp5":
        return {"platform": Target("ecp5"), "extra_sources": [DP16KD_MODEL]}
    return {}


def run_memory(sim, name, width, depth, output_register, form, init):
    import random

    from rtl.common.memory import BlockRam
    from verif.runner import run_bench

    words = [random.Random(depth).getrandbits(width) for _ in range(depth)] if init else []
    ram = BlockRam(width, depth, init=words, output_register=output_register)
    run_bench(ram, name=f"block_ram-{name}-{form}", toplevel="block_ram",
              test_module="tb.test_memory", sim=sim, testcase="memory_random",
              params={"width": width, "depth": depth, "latency": ram.latency, "init": words},
              frames=CYCLES, **_form(form))


def run_rmw(sim, name, width, depth, output_register, form, testcase=None):
    from rtl.common.rmw import ReadModifyWrite
    from verif.runner import run_bench

    rmw = ReadModifyWrite(width, depth, output_register=output_register)
    run_bench(rmw, name=f"rmw-{name}-{form}", toplevel="rmw", test_module="tb.test_memory",
              sim=sim, testcase=testcase or ["rmw_random", "rmw_perf"],
              params={"width": width, "depth": depth, "addr_width": rmw.mem.addr_width,
                      "latency": rmw.latency},
              frames=OPS, **_form(form))


@pytest.mark.sim
@pytest.mark.parametrize("config", MEMORIES, ids=lambda c: f"{c[0]}-{c[4]}")
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_block_ram(sim, config):
    run_memory(sim, *config)


@pytest.mark.sim
@pytest.mark.parametrize("config", RMWS, ids=lambda c: f"{c[0]}-{c[4]}")
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_read_modify_write(sim, config):
    run_rmw(sim, *config)
