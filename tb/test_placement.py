# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.placement.Placement against models.placement.PlacementModel.

``place_random`` sends seeded random place commands (placed or discarded, payloads 0..PMTU at any
byte alignment, VAs across 4 KB boundaries and at the top of the 64-bit address space, where it
wraps) back to back with their payload packets, bad ones mixed in (short, long, a ``tkeep`` hole
on the last beat), with random idle on both sources and random pauses on the AW, W and B channels
of the memory (cocotbext-axi ``AxiRamWrite``, which also asserts that no burst crosses 4 KB and
that ``wlast`` ends each burst). A monitor records every AW and W handshake: each burst (address,
length, size, type) and each beat (strobe, last, strobed bytes) must equal the model's, every
byte of the memory (random background first) must equal the model's memory, every counter must
be read back equal, and every stream must be empty at the end.

``perf`` measures, with an always-ready memory, cycles per packet back to back for each payload
size of ``PERF_SIZES`` (aligned, and misaligned by 5 bytes) and asserts one W beat per cycle with
no gap between packets; the latency is from a command's handshake to its first W handshake.
"""

import logging
import math

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout

from models.header_inserter import packet_bytes
from models.placement import COUNTERS, INFO, PlacementModel
from models.records import PLACE_COMMAND
from verif.runner import SIMULATORS, run_bench

WIDTHS = (64, 512)
FULL_WIDTHS = (128, 256)
FRAMES = {64: 150, 128: 250, 256: 300, 512: 400}   # about 15 000 W beats a run at W = 64
FULL_FRAMES = 3000
PMTU = 4096
MEM_SIZE = 1 << 18           # the memory: addresses modulo MEM_SIZE
TOP_WINDOW = 8192            # its last bytes: the VAs at the top of the 64-bit space only
PERF_FRAMES = 12
PERF_MISALIGN = 5
MASK32 = 0xFFFF_FFFF
TIMEOUT_NS = 20_000_000


def random_size(rng, lanes):
    """A payload length 0..PMTU: 0, tiny, around multiples of the width, any, or PMTU."""
    kind = rng.random()
    if kind < 0.06:
        return 0
    if kind < 0.2:
        return rng.randint(1, 2 * lanes)
    if kind < 0.5:
        return max(1, rng.randint(1, 16) * lanes + rng.randint(-3, 3))
    if kind < 0.95:
        return rng.randint(1, PMTU)
    return PMTU


def random_va(rng, length):
    """A VA anywhere in the memory, next to a 4 KB boundary, or at the top of the address space,
    where it wraps to 0. The memory sees addresses modulo MEM_SIZE; only the VAs at the top reach
    its last TOP_WINDOW bytes, so two different addresses never meet in one memory byte."""
    kind = rng.random()
    if kind < 0.2:
        return rng.randrange(1, (MEM_SIZE - TOP_WINDOW) // 4096 - 1) * 4096 - rng.randint(0, 80)
    if kind < 0.23:
        return (1 << 64) - rng.randint(1, PMTU + 64)
    return rng.randrange(0, MEM_SIZE - TOP_WINDOW - length)


def random_packet(rng, length, lanes):
    """``(data, keep or None)`` sent for a command of ``length`` > 0: mostly exact; short, long,
    or with a tkeep hole on the last beat now and then."""
    kind = rng.random()
    size = length
    if kind < 0.04 and length > 1:
        size = rng.randint(1, length - 1)
    elif kind < 0.08:
        size = length + rng.randint(1, 2 * lanes + 5)
    data = bytes(rng.getrandbits(8) for _ in range(size))
    keep = None
    if 0.08 <= kind < 0.10:
        last = (size - 1) // lanes * lanes
        keep = [1] * size
        keep[rng.randrange(last, size)] = 0
    return data, keep


class Monitor:
    """Records every AW and W handshake of ``m_axi`` (values seen at the clock edge) and the
    cycles of the W and command handshakes (``s_cmd``, when the design has it)."""

    def __init__(self, dut):
        self.dut = dut
        self.bursts = []     # (addr, len, size, burst)
        self.beats = []      # (strobe, last, data int)
        self.cycle = 0
        self.w_cycles = []
        self.cmd_cycles = []
        self.has_cmd = hasattr(dut, "s_cmd_tvalid")
        cocotb.start_soon(self._run())

    async def _run(self):
        d = self.dut
        while True:
            await RisingEdge(d.clk)
            self.cycle += 1
            if self.has_cmd and int(d.s_cmd_tvalid.value) and int(d.s_cmd_tready.value):
                self.cmd_cycles.append(self.cycle)
            if int(d.m_axi_awvalid.value) and int(d.m_axi_awready.value):
                self.bursts.append((int(d.m_axi_awaddr.value), int(d.m_axi_awlen.value),
                                    int(d.m_axi_awsize.value), int(d.m_axi_awburst.value)))
            if int(d.m_axi_wvalid.value) and int(d.m_axi_wready.value):
                self.beats.append((int(d.m_axi_wstrb.value), int(d.m_axi_wlast.value),
                                   int(d.m_axi_wdata.value)))
                self.w_cycles.append(self.cycle)


def strobed(data, strobe, lanes):
    """The bytes of a beat with every lane not strobed set to 0."""
    raw = data.to_bytes(lanes, "little") if isinstance(data, int) else data
    return bytes(b if strobe >> i & 1 else 0 for i, b in enumerate(raw[:lanes]))


async def wait_idle(dut, cfg, commands, payload, limit=200_000):
    """Until every command and payload beat is taken and the block reports idle."""
    await with_timeout(payload.wait(), TIMEOUT_NS, "ns")
    for _ in range(limit):
        if not commands.empty():
            await RisingEdge(dut.clk)
            continue
        if not await cfg.read(INFO["status"]) and not await cfg.read(INFO["status"]):
            return
    raise AssertionError("the placement block did not go idle")


@cocotb.test()
async def place_random(dut):
    from cocotbext.axi import AxiRamWrite, AxiStreamBus, AxiStreamFrame, AxiStreamSource, \
        AxiWriteBus

    from verif.bench import (ConfigDriver, RecordSource, frames, make_rng, params,
                                 random_pause, start, write_result)

    width = params()["data_width"]
    lanes = width // 8
    rng = make_rng(dut)
    idle, pause = rng.uniform(0.05, 0.3), rng.uniform(0.05, 0.3)
    commands = RecordSource(dut, "s_cmd", pause=random_pause(rng, idle))
    payload = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst)
    payload.set_pause_generator(random_pause(rng, idle))
    ram = AxiRamWrite(AxiWriteBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=MEM_SIZE)
    for channel in (ram.aw_channel, ram.w_channel, ram.b_channel):
        channel.set_pause_generator(random_pause(rng, pause))
    for stream in (payload, ram):
        stream.log.setLevel(logging.WARNING)
    cfg = ConfigDriver(dut)
    monitor = Monitor(dut)
    await start(dut)

    background = bytes(rng.getrandbits(8) for _ in range(MEM_SIZE))
    ram.write(0, background)
    model = PlacementModel(width)
    want_bursts, want_beats = [], []
    n = frames(FRAMES[width])
    for _ in range(n):
        length = random_size(rng, lanes)
        command = {"va": random_va(rng, length), "length": length,
                   "place": int(rng.random() < 0.75)}
        packet = None
        if length:
            data, keep = random_packet(rng, length, lanes)
            packet = packet_bytes(data, keep or [1] * len(data), width)
            payload.send_nowait(AxiStreamFrame(data, tkeep=keep))
        out = model.push(command, packet)
        want_bursts += out.bursts
        want_beats += out.beats
        commands.send(PLACE_COMMAND.pack(command))
    dut._log.info("idle %.2f, memory pauses %.2f: %d commands, %d bursts, %d beats, counters %s",
                  idle, pause, n, len(want_bursts), len(want_beats), dict(model.counters))

    await wait_idle(dut, cfg, commands, payload)
    assert len(monitor.bursts) == len(want_bursts), \
        f"{len(monitor.bursts)} bursts, model {len(want_bursts)}"
    size = (lanes - 1).bit_length()
    for index, (got, want) in enumerate(zip(monitor.bursts, want_bursts)):
        assert got == (want.addr, want.beats - 1, size, 1), \
            f"burst {index}: (addr, len, size, type) {got}, model {want}"
    assert len(monitor.beats) == len(want_beats), \
        f"{len(monitor.beats)} beats, model {len(want_beats)}"
    for index, ((strobe, last, data), want) in enumerate(zip(monitor.beats, want_beats)):
        assert (strobe, last) == (want.strobe, int(want.last)), \
            f"beat {index}: strobe {strobe:#x} last {last}, model {want.strobe:#x} {want.last}"
        assert strobed(data, strobe, lanes) == want.strobed(), \
            f"beat {index}: {strobed(data, strobe, lanes).hex()}, model {want.strobed().hex()}"

    memory = bytearray(background)
    for addr, byte in model.memory.items():
        memory[addr % MEM_SIZE] = byte
    got = ram.read(0, MEM_SIZE)
    if got != memory:
        wrong = [i for i in range(MEM_SIZE) if got[i] != memory[i]]
        errors = await cfg.read(COUNTERS["resp_error"])
        raise AssertionError(f"{len(wrong)} memory bytes differ from the model's ({errors} "
                             f"error responses), first at {wrong[0]:#x}: {got[wrong[0]]:#04x}, "
                             f"model {memory[wrong[0]]:#04x}; last at {wrong[-1]:#x}")

    for name, addr in {**COUNTERS, **INFO}.items():
        value = await cfg.read(addr)
        want = {**model.counters, **model.info()}[name] & MASK32
        assert value == want, f"{name} at {addr:#x}: {value}, model {want}"
    await cfg.write(COUNTERS["beats"], 0)
    assert await cfg.read(COUNTERS["beats"]) == 0, "beats not cleared by a write"
    await ClockCycles(dut.clk, 10)
    assert commands.empty() and payload.empty() and len(monitor.beats) == len(want_beats)
    dut._log.info("%d commands: every burst, beat, memory byte and counter equal to the model's",
                  n)
    write_result(dut, "placement", n)


async def ideal_memory(dut):
    """An AXI slave always ready on AW and W that answers each burst on B one cycle after its
    last beat (B is never stalled: ``bready`` is always 1)."""
    dut.m_axi_awready.value = 1
    dut.m_axi_wready.value = 1
    dut.m_axi_bvalid.value = 0
    dut.m_axi_bresp.value = 0
    dut.m_axi_bid.value = 0
    pending = 0
    while True:
        await RisingEdge(dut.clk)
        if int(dut.m_axi_wvalid.value) and int(dut.m_axi_wlast.value):
            pending += 1
        if int(dut.m_axi_bvalid.value):
            pending -= 1
        dut.m_axi_bvalid.value = int(pending > 0)


@cocotb.test()
async def perf(dut):
    """Back-to-back packets, no idle, memory always ready: cycles per packet (asserted to be the
    packet's W beats: no bubble), payload bytes per cycle and latency, per payload size."""
    from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSource

    from verif.bench import (PERF_SIZES, ConfigDriver, RecordSource, make_rng, params, start,
                                 write_perf)

    width = params()["data_width"]
    lanes = width // 8
    rng = make_rng(dut)
    commands = RecordSource(dut, "s_cmd")
    payload = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst)
    payload.log.setLevel(logging.WARNING)
    cfg = ConfigDriver(dut)
    monitor = Monitor(dut)
    cocotb.start_soon(ideal_memory(dut))
    await start(dut)
    rows = []
    for align in (0, PERF_MISALIGN):
        for size in PERF_SIZES:
            first, first_cmd = len(monitor.w_cycles), len(monitor.cmd_cycles)
            for k in range(PERF_FRAMES):
                if size:
                    payload.send_nowait(AxiStreamFrame(bytes(rng.getrandbits(8)
                                                             for _ in range(size))))
                commands.send(PLACE_COMMAND.pack(va=(k << 13) + align, length=size, place=1))
            await wait_idle(dut, cfg, commands, payload)
            accepted = monitor.cmd_cycles[first_cmd:]
            beats = math.ceil((align + size) / lanes) if size else 0
            if size:
                cycles = monitor.w_cycles[first:]
                assert len(cycles) == PERF_FRAMES * beats
                starts = cycles[::beats]
                steady = (starts[-1] - starts[1]) / (PERF_FRAMES - 2)
                assert cycles[-1] - cycles[0] == len(cycles) - 1, \
                    f"payload {size}, offset {align}: a bubble between W beats"
                latency = cycles[0] - accepted[0]
            else:
                steady = (accepted[-1] - accepted[1]) / (PERF_FRAMES - 2)
                latency = 0
            assert steady == max(beats, 1), f"payload {size}: {steady} cycles per packet"
            rows.append(dict(payload=size, offset=align, frames=PERF_FRAMES,
                             cycles_per_frame=steady, bytes_per_cycle=round(size / steady, 3),
                             efficiency=round(size / steady / lanes, 4), latency=latency))
    assert commands.empty() and payload.empty()
    write_perf(dut, "placement", width, rows)


# --- pytest ---------------------------------------------------------------------------------------

def run(sim, width, *, testcase, tag, frames=None):
    from rtl.placement import Placement

    run_bench(Placement(width), name=f"placement-{tag}-w{width}", toplevel="placement",
              test_module="tb.test_placement", sim=sim, params={"data_width": width},
              frames=frames or FRAMES[width], testcase=testcase)


def cases(widths, sims):
    return [pytest.param(sim, width, id=f"{sim}-w{width}",
                         marks=pytest.mark.xdist_group(f"placement-{width}-{sim}"))
            for sim in sims for width in widths]


@pytest.mark.sim
@pytest.mark.parametrize("sim, width", cases(WIDTHS, SIMULATORS))
def test_placement(sim, width):
    run(sim, width, testcase="place_random", tag="random")


@pytest.mark.sim
@pytest.mark.parametrize("sim, width", cases((64,), ["verilator"]))
def test_placement_perf(sim, width):
    run(sim, width, testcase="perf", tag="perf")


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("sim, width", cases((128, 256, 512), ["verilator"]))
def test_placement_perf_full(sim, width):
    run(sim, width, testcase="perf", tag="perf")


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("sim, width", cases(FULL_WIDTHS + WIDTHS, SIMULATORS))
def test_placement_full(sim, width):
    run(sim, width, testcase="place_random", tag="full", frames=FULL_FRAMES)


@pytest.mark.parametrize("kwargs", [dict(data_width=32), dict(data_width=1024),
                                    dict(addr_width=11), dict(addr_width=65),
                                    dict(addr_width=True), dict(queue_depth=1),
                                    dict(queue_depth=65)])
def test_placement_rejects_parameters(kwargs):
    from rtl.placement import Placement

    with pytest.raises(ValueError, match="Placement"):
        Placement(**kwargs)
