# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb benches of the NIC self-test (``rtl/selftest_nic.py``) and its host-side parts.

``pattern_memory`` (``rtl/pattern_memory.py``): a cocotbext-axi ``AxiMaster`` makes random reads
and writes (any address and length, several at once, random idle and backpressure on every
channel); a monitor replays every AR, R, AW, W and B handshake on
:class:`models.selftest_nic.PatternMemoryModel` and compares every R beat with the model's and,
at the end, every counter. Writes are of four kinds: the pattern of their source address into the
check window (good), the same with bytes flipped (bad, counted), anywhere outside the window, and
random bytes. One ``inject`` pulse must flip exactly one R beat (bit 0 of every byte). A burst
with a wrong WLAST (driven by hand) counts ``last_errors`` and still ends after AWLEN + 1 beats.

``wr_generator`` (``rtl/wr_generator.py``): every work request equals
:func:`models.selftest_nic.work_requests`; the bench completes them after random delays, in order
per QP, with random backpressure on ``m_wr``; never more than ``window`` outstanding; a wrong
``req_id``, a bad status and receive completions are counted; the watchdog rises when a request
stays outstanding.

``selftest_nic``: the whole core (work-request generator -> NIC engine -> switch -> the same NIC
-> pattern memory): N Writes complete with status OK, every placed byte checks good and their
number is the bytes sent, nothing is written outside the window; then one ``inject`` pulse (a
payload beat read wrong) is seen as bad bytes and the status turns to failure.
"""

import logging
from collections import deque

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from models.records import COMPLETION, WORK_REQUEST, CompletionStatus
from models.selftest_nic import (PatternMemoryModel, PatternWindow, WrGenConfig, pattern_bytes,
                                 work_requests)

WINDOW = dict(source_base=0x3_0000_0000, check_base=0x5_0000_0000, span=1 << 14)
WRGEN = dict(n_qps=4, max_length=700, window=1 << 12)


def _mask(width):
    return (1 << width) - 1


# --- pattern memory -------------------------------------------------------------------------------

class AxiMonitor:
    """Replays every handshake of the slave on the model and compares the R beats."""

    def __init__(self, dut, model):
        self.dut, self.model = dut, model
        self.reads = deque()          # expected R beats (data, last, id)
        self.writes = deque()         # (beats, id) of each accepted AW
        self.w_addrs = deque()        # the address of every W beat to come
        self.w_done = 0               # beats of the first burst of ``writes`` taken
        self.bids = deque()
        self.flipped = []
        self.beats_compared = 0
        self.flip = int.from_bytes(b"\x01" * model.lanes, "little")
        cocotb.start_soon(self._run())

    async def _run(self):
        d = self.dut
        while True:
            await RisingEdge(d.clk)
            if d.s_axi_arvalid.value and d.s_axi_arready.value:
                beats = int(d.s_axi_arlen.value) + 1
                data = self.model.read(int(d.s_axi_araddr.value), beats,
                                       int(d.s_axi_arsize.value))
                rid = int(d.s_axi_arid.value)
                self.reads.extend((w, n == beats - 1, rid) for n, w in enumerate(data))
            if d.s_axi_rvalid.value and d.s_axi_rready.value:
                data, last, rid = self.reads.popleft()
                got = int(d.s_axi_rdata.value)
                if got != data:
                    assert got ^ data == self.flip, f"R beat {got:#x}, model {data:#x}"
                    self.flipped.append(got)
                assert int(d.s_axi_rlast.value) == last and int(d.s_axi_rid.value) == rid
                self.beats_compared += 1
            if d.s_axi_awvalid.value and d.s_axi_awready.value:
                beats = int(d.s_axi_awlen.value) + 1
                self.w_addrs.extend(self.model.beat_addresses(
                    int(d.s_axi_awaddr.value), beats, int(d.s_axi_awsize.value)))
                self.writes.append((beats, int(d.s_axi_awid.value)))
            if d.s_axi_wvalid.value and d.s_axi_wready.value:
                beats, awid = self.writes[0]
                self.model.write_beat(self.w_addrs.popleft(), int(d.s_axi_wdata.value),
                                      int(d.s_axi_wstrb.value))
                self.w_done += 1
                last = self.w_done == beats
                if int(d.s_axi_wlast.value) != last:
                    self.model.count("last_errors")
                if last:
                    self.w_done = 0
                    self.writes.popleft()
                    self.model.count("write_bursts")
                    self.bids.append(awid)
            if d.s_axi_bvalid.value and d.s_axi_bready.value:
                assert int(d.s_axi_bid.value) == self.bids.popleft()
                assert int(d.s_axi_bresp.value) == 0


async def _raw_write_bad_last(dut, addr, lanes):
    """AW of two beats, both W beats with WLAST = 1 and no strobe, driven by hand; waits for
    the B."""
    dut.s_axi_awaddr.value = addr
    dut.s_axi_awlen.value = 1
    dut.s_axi_awsize.value = lanes.bit_length() - 1
    dut.s_axi_awid.value = 0
    dut.s_axi_awvalid.value = 1
    while True:
        await RisingEdge(dut.clk)
        if dut.s_axi_awready.value:
            break
    dut.s_axi_awvalid.value = 0
    dut.s_axi_wdata.value = 0
    dut.s_axi_wstrb.value = 0
    dut.s_axi_wlast.value = 1
    dut.s_axi_wvalid.value = 1
    sent = 0
    while sent < 2:
        await RisingEdge(dut.clk)
        sent += int(dut.s_axi_wready.value)
    dut.s_axi_wvalid.value = 0
    dut.s_axi_bready.value = 1
    while True:
        await RisingEdge(dut.clk)
        if dut.s_axi_bvalid.value:
            break


@cocotb.test()
async def pattern_memory(dut):
    from cocotbext.axi import AxiBus, AxiMaster

    from verif.bench import frames, make_rng, params, random_pause, start, write_result

    p = params()
    rng = make_rng(dut)
    lanes = p["data_width"] // 8
    window = PatternWindow(**WINDOW)
    model = PatternMemoryModel(window, p["data_width"])
    dut.inject.value = 0
    master = AxiMaster(AxiBus.from_prefix(dut, "s_axi"), dut.clk, dut.rst)
    for side in (master.write_if, master.read_if):
        side.log.setLevel(logging.WARNING)
    for channel in (master.write_if.aw_channel, master.write_if.w_channel,
                    master.write_if.b_channel, master.read_if.ar_channel,
                    master.read_if.r_channel):
        channel.set_pause_generator(random_pause(rng, 0.2))
    await start(dut)
    monitor = AxiMonitor(dut, model)
    span = window.span
    count = frames(120)
    expect = {"good": 0, "bad": 0}

    async def one(kind):
        length = rng.choice((1, 2, lanes, rng.randrange(0, 3 * lanes), rng.randrange(0, 1500)))
        length = max(length, 1)
        if kind == "read":
            addr = rng.choice((window.source_base, window.check_base, rng.getrandbits(40))) + \
                rng.randrange(0, span - length)
            got = (await master.read(addr, length)).data
            assert got == pattern_bytes(addr, length), f"read {addr:#x}+{length}"
            return
        offset = rng.randrange(0, span - length)
        data = bytearray(pattern_bytes(window.source_base + offset, length))
        addr = window.check_base + offset
        if kind == "bad":
            for k in rng.sample(range(length), min(length, rng.randint(1, 4))):
                data[k] ^= 1 << rng.randrange(8)
            expect["bad"] += sum(a != b for a, b in zip(data, pattern_bytes(
                window.source_base + offset, length)))
        elif kind == "outside":
            addr = window.check_base + span + rng.randrange(0, 1 << 20)
        elif kind == "random":
            addr = window.check_base + offset
            data = bytearray(rng.randbytes(length))
        await master.write(addr, bytes(data))

    kinds = ["read"] * 4 + ["good"] * 4 + ["bad", "outside", "random"]
    for _ in range(count // 4):
        tasks = [cocotb.start_soon(one(rng.choice(kinds))) for _ in range(4)]
        for task in tasks:
            await task
    # One inject pulse during a long read: exactly one beat comes back flipped.
    addr = window.source_base + lanes
    reading = cocotb.start_soon(master.read(addr, 16 * lanes))
    await ClockCycles(dut.clk, rng.randrange(2, 8))
    dut.inject.value = 1
    await RisingEdge(dut.clk)
    dut.inject.value = 0
    got = (await reading).data
    want = pattern_bytes(addr, 16 * lanes)
    assert sum(a != b for a, b in zip(got, want)) in range(1, lanes + 1)
    assert len(monitor.flipped) == 1, f"{len(monitor.flipped)} R beats flipped by one inject"
    await ClockCycles(dut.clk, 10)
    assert not monitor.reads and not monitor.writes and not monitor.bids
    for name in PatternMemoryModel.COUNTERS:
        assert int(getattr(dut, name).value) == model.counts[name], \
            f"{name}: RTL {int(getattr(dut, name).value)}, model {model.counts[name]}"
    assert model.counts["outside_beats"] > 0
    assert model.counts["bad_bytes"] >= expect["bad"] > 0
    dut._log.info("pattern memory: %d R beats compared, counters %s", monitor.beats_compared,
                  model.counts)
    write_result(dut, "pattern_memory", count)


@cocotb.test()
async def pattern_memory_bad_last(dut):
    """A burst of two beats whose first beat has WLAST: counted, and the burst still ends after
    its second beat with one B response (run after ``pattern_memory``, with a fresh reset)."""
    from verif.bench import params, start

    lanes = params()["data_width"] // 8
    for name in ("arvalid", "rready", "awvalid", "wvalid", "bready", "inject"):
        getattr(dut, name if name == "inject" else f"s_axi_{name}").value = 0
    await start(dut)
    await _raw_write_bad_last(dut, PatternWindow(**WINDOW).check_base, lanes)
    await ClockCycles(dut.clk, 4)
    counts = {name: int(getattr(dut, name).value) for name in PatternMemoryModel.COUNTERS}
    assert counts == dict.fromkeys(PatternMemoryModel.COUNTERS, 0) | dict(
        last_errors=1, write_beats=2, write_bursts=1), counts


# --- work-request generator -----------------------------------------------------------------------

@cocotb.test()
async def wr_generator(dut):
    from verif.bench import (RecordSink, RecordSource, frames, make_rng, params, random_pause,
                                 start, write_result)

    p = params()
    rng = make_rng(dut)
    cfg = WrGenConfig(**WRGEN)
    window = p["window"]
    count = frames(300)
    expected = work_requests(cfg, count + window)
    dut.enable.value = 0
    sink = RecordSink(dut, "m_wr", random_pause(rng, 0.3))
    cpl = RecordSource(dut, "s_cpl", random_pause(rng, 0.3))
    await start(dut)
    dut.enable.value = 1
    got = []
    pending = {q: deque() for q in range(cfg.n_qps)}
    completed = 0
    imm_expected = 0
    peak = 0
    for cycle in range(count * 40):
        await RisingEdge(dut.clk)
        while sink.queue:
            wr = WORK_REQUEST.unpack(sink.queue.popleft())
            assert wr == expected[len(got)], f"request {len(got)}: {wr}, model " \
                f"{expected[len(got)]}"
            got.append(wr)
            pending[wr["qpn"]].append(wr)
        outstanding = int(dut.outstanding.value)
        assert outstanding <= window
        peak = max(peak, len(got) - completed)
        assert len(got) - completed <= window
        if len(got) >= count:
            dut.enable.value = 0
        queued = [q for q in pending if pending[q]]
        if queued and rng.random() < 0.3:
            q = rng.choice(queued)
            wr = pending[q].popleft()
            cpl.send(COMPLETION.pack(qpn=q, req_id=wr["req_id"], msn=0,
                                     status=CompletionStatus.OK, is_recv=0, has_imm=0, imm=0))
            if wr["has_imm"] and rng.random() < 0.5:
                cpl.send(COMPLETION.pack(qpn=q, req_id=0, msn=0, status=0, is_recv=1,
                                         has_imm=1, imm=wr["imm"]))
                imm_expected += 1
            completed += 1
        if len(got) >= count and completed == len(got) and cpl.empty():
            break
    else:
        raise AssertionError(f"{len(got)} requests, {completed} completed")
    await ClockCycles(dut.clk, 4)
    assert peak == window, f"never {window} outstanding (peak {peak})"
    assert int(dut.outstanding.value) == 0 and not int(dut.stalled.value)
    sent = len(got)
    counters = dict(wrs_sent=sent, bytes_sent=sum(w["length"] for w in got) & _mask(32),
                    cpl_ok=sent, cpl_error=0, cpl_recv=imm_expected, order_errors=0)
    for name, value in counters.items():
        assert int(getattr(dut, name).value) == value, f"{name}: {int(getattr(dut, name).value)}"
    # One more request, completed with an error status and the wrong req_id, then one that
    # stays outstanding: the watchdog.
    dut.enable.value = 1
    while not sink.queue:
        await RisingEdge(dut.clk)
    dut.enable.value = 0
    await ClockCycles(dut.clk, 3)
    extra = [WORK_REQUEST.unpack(w) for w in sink.queue]
    sink.queue.clear()
    assert extra == expected[sent:sent + len(extra)]
    first = extra[0]
    cpl.send(COMPLETION.pack(qpn=first["qpn"], req_id=first["req_id"] ^ 1, msn=0,
                             status=CompletionStatus.RETRY_EXCEEDED, is_recv=0, has_imm=0, imm=0))
    await ClockCycles(dut.clk, 4)
    assert int(dut.cpl_error.value) == 1 and int(dut.order_errors.value) == 1
    assert int(dut.outstanding.value) == len(extra) - 1
    if len(extra) > 1:
        await ClockCycles(dut.clk, p["timeout"] + 4)
        assert int(dut.stalled.value) == 1
    write_result(dut, "wr_generator", sent)


# --- the whole self-test -------------------------------------------------------------------------

def _counters(dut):
    from rtl.pattern_memory import COUNTERS as MEM
    from rtl.wr_generator import COUNTERS as WR

    out = {f"wr_{name}": int(getattr(dut, f"wr_{name}").value) for name in WR}
    out.update({f"mem_{name}": int(getattr(dut, f"mem_{name}").value) for name in MEM})
    return out


async def _wait(dut, condition, limit, what):
    for _ in range(limit):
        await RisingEdge(dut.clk)
        if condition():
            return
    raise AssertionError(f"{what} not within {limit} cycles: {_counters(dut)}")


@cocotb.test()
async def selftest_nic(dut):
    from verif.bench import frames, make_rng, params, start, write_result

    p = params()
    make_rng(dut)
    count = frames(16)
    dut.enable.value = 0
    dut.inject.value = 0
    await start(dut)
    await _wait(dut, lambda: dut.ready.value, 2000, "set-up")
    t0 = cocotb.utils.get_sim_time("ns")
    dut.enable.value = 1
    await _wait(dut, lambda: int(dut.wr_cpl_ok.value) >= count, 4000 * count, f"{count} Writes")
    dut.enable.value = 0
    await _wait(dut, lambda: int(dut.outstanding.value) == 0, 20000, "the last completions")
    await ClockCycles(dut.clk, 200)
    cycles = (cocotb.utils.get_sim_time("ns") - t0) // 4
    c = _counters(dut)
    sent = c["wr_wrs_sent"]
    wrs = work_requests(WrGenConfig(**p["wrgen"]), sent)
    payload = sum(w["length"] for w in wrs)
    assert c["wr_cpl_ok"] == sent and c["wr_cpl_error"] == 0 and c["wr_order_errors"] == 0, c
    assert c["wr_bytes_sent"] == payload & 0xFFFF_FFFF, c
    assert c["wr_cpl_recv"] == sum(w["has_imm"] for w in wrs), c
    assert c["mem_good_bytes"] == payload, f"{payload} bytes sent, {c}"
    for name in ("mem_bad_bytes", "mem_outside_beats", "mem_last_errors"):
        assert c[name] == 0, c
    assert int(dut.errors.value) == 0 and not int(dut.stalled.value)
    assert int(dut.passed.value) == 1 and int(dut.failed.value) == 0
    dut._log.info("selftest_nic: %d Writes, %d payload bytes placed and checked in %d cycles "
                  "(%.2f bytes per cycle); %s", sent, payload, cycles, payload / cycles, c)
    # One injected error: a payload beat read wrong is sent, placed and found bad.
    dut.enable.value = 1
    dut.inject.value = 1
    await RisingEdge(dut.clk)
    dut.inject.value = 0
    await _wait(dut, lambda: int(dut.mem_bad_bytes.value) > 0, 20000, "the injected error")
    await ClockCycles(dut.clk, 4)
    assert int(dut.failed.value) == 1 and int(dut.passed.value) == 0
    assert int(dut.errors.value) >= int(dut.mem_bad_bytes.value) > 0
    dut.enable.value = 0
    await _wait(dut, lambda: int(dut.outstanding.value) == 0, 20000, "the last completions")
    c = _counters(dut)
    assert c["wr_cpl_ok"] == c["wr_wrs_sent"] and not int(dut.stalled.value), c
    write_result(dut, "selftest_nic", sent, bytes_per_cycle=round(payload / cycles, 3))


# --- pytest -------------------------------------------------------------------------------------

def run_pattern_memory(sim, width):
    from rtl.pattern_memory import PatternMemory
    from verif.runner import run_bench

    run_bench(PatternMemory(data_width=width, window=PatternWindow(**WINDOW)),
              name=f"pattern_memory-w{width}", toplevel="pattern_memory",
              test_module="tb.test_selftest_nic", sim=sim, params=dict(data_width=width),
              testcase=["pattern_memory", "pattern_memory_bad_last"])


def run_wr_generator(sim, window):
    from rtl.wr_generator import WrGenerator
    from verif.runner import run_bench

    timeout = 300
    run_bench(WrGenerator(WrGenConfig(**WRGEN), window=window, timeout=timeout),
              name=f"wr_generator-win{window}", toplevel="wr_generator",
              test_module="tb.test_selftest_nic", sim=sim,
              params=dict(window=window, timeout=timeout), testcase="wr_generator")


def run_selftest_nic(sim, frames=None):
    from dataclasses import asdict

    from rtl.selftest_nic import SelfTestNic
    from verif.runner import run_bench

    core = SelfTestNic(tick_hz=16_000_000)
    run_bench(core, name="selftest_nic", toplevel="selftest_nic",
              test_module="tb.test_selftest_nic", sim=sim, params=dict(wrgen=asdict(core.wrgen)),
              testcase="selftest_nic", frames=frames)


# Default runs stay lean (the Verilator builds of the pattern memory's hash networks and of the
# whole core take minutes on a shared 2-core machine): both simulators on the generator, Icarus
# on the rest; the Verilator runs of the others are marked full.
FULL = pytest.mark.full


@pytest.mark.sim
@pytest.mark.parametrize("sim,width", [("icarus", 64), ("icarus", 512),
                                       pytest.param("verilator", 64, marks=FULL),
                                       pytest.param("verilator", 512, marks=FULL)])
def test_pattern_memory(sim, width):
    run_pattern_memory(sim, width)


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("width", [128, 256])
def test_pattern_memory_more_widths(width):
    run_pattern_memory("verilator", width)


@pytest.mark.sim
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_wr_generator(sim):
    run_wr_generator(sim, 4)


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("window", [1, 16])
def test_wr_generator_windows(window):
    run_wr_generator("verilator", window)


@pytest.mark.sim
@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=FULL)])
def test_selftest_nic(sim):
    run_selftest_nic(sim)


@pytest.mark.sim
@pytest.mark.full
def test_selftest_nic_more():
    """Five times the Writes, on Verilator."""
    run_selftest_nic("verilator", frames=120)


def test_parameters_are_checked():
    from rtl.pattern_memory import PatternMemory
    from rtl.selftest_nic import SelfTestNic
    from rtl.wr_generator import WrGenerator

    for make in (lambda: PatternMemory(data_width=32),
                 lambda: PatternMemory(window=PatternWindow(check_base=1 << 40), addr_width=32),
                 lambda: WrGenerator(window=0),
                 lambda: WrGenerator(config=dict(n_qps=1)),
                 lambda: SelfTestNic(nic=dict(n_planes=2)),
                 lambda: SelfTestNic(wrgen=WrGenConfig(n_qps=2)),
                 lambda: SelfTestNic(start_psn=1 << 24)):
        with pytest.raises(ValueError):
            make()
