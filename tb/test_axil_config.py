# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.axil_config.AxilConfig through rtl.axil_top.AxilTop, against
models.axil_config.

``axil_random``: cocotbext-axi's AxiLiteMaster drives :class:`ConfigTestBlock` (a small map of
rw registers, read-only words and counters, with ``read_latency - 1`` extra register stages on
its read data) wrapped by ``AxilTop``. A writer and a reader run at once with random idle, random
pauses on AW, W and AR (so AW and W arrive skewed either way) and on BREADY and RREADY; writes
include partial strobes (SLVERR, nothing written) and addresses above the map (DECERR, as for
reads). A monitor on the AXI4-Lite port checks every cycle: the ready outputs against the
bridge's rules (one transaction at a time, fair alternation, AW and W in any order), BVALID and
RVALID exactly at the documented latency, and every response and read word against the model,
applied in the order the bridge accepted the transactions. A counter of ``cfg_we`` pulses in the
map makes a missing, extra or partial write visible. Then counters are checked with events in
between transactions, and the back-to-back rates are measured and must equal the documented
ones.

``axil_switch``: the same wrapper around a real block, the trimming switch (two ports): its
read-only sizes, a register, partial and out-of-range accesses, and two ingress counters after
bad frames, all through AXI4-Lite.
"""

import logging
from collections import deque
from types import SimpleNamespace

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from models.axil_config import (DECERR, OKAY, RESP_NAMES, SLVERR, AxilConfigModel,
                                RegisterMapModel, read_cycles, read_response, write_cycles,
                                write_response)
from rtl.axil_config import AxilConfig
from rtl.axil_top import AxilTop
from rtl.common.config import ConfigMap
from rtl.common.ports import config_members
from verif.runner import SIMULATORS, run_bench

OPS = 300                   # transactions of axil_random (writes and reads together)
FULL_OPS = 3000
LATENCIES = (1, 3)
FULL_LATENCIES = (2, 8)
ADDR_WIDTH = 8              # word-address bits of the test block
BURST = 16                  # transactions per kind in the rate measurement
# The test block's map (word addresses); LAST is the highest word, (1 << addr_width) - 1.
FULL, NARROW, RO_IN, RO_LATENCY, EVENTS, WRITES = range(6)
NARROW_BITS, FULL_INIT, NARROW_INIT, LAST_INIT = 12, 0x0BAD_CAFE, 0x5A5, 0x600D_600D
# The bench's switch: two ports, small queues.
SWITCH = dict(ports=2, data_width=64, data_limit=4096, control_limit=8192, table_depth=4,
              ingress_bytes=8192)


class ConfigTestBlock(wiring.Component):
    """A configuration map of each kind of word, behind ``read_latency`` cycles of read latency.

    Map: ``FULL`` rw 32 bits; ``NARROW`` rw 12 bits; ``RO_IN`` ro, the ``ro_in`` port;
    ``RO_LATENCY`` ro, ``read_latency``; ``EVENTS`` counter of ``event``; ``WRITES`` counter of
    ``cfg_we`` pulses (a write to it clears it and counts itself: it reads 1); the last word
    ``(1 << addr_width) - 1`` rw 32 bits. ``reg_full`` shows ``FULL``.
    """

    def __init__(self, addr_width, read_latency):
        if addr_width < 3:
            raise ValueError(f"ConfigTestBlock: addr_width must be at least 3, not {addr_width}")
        self.addr_width = addr_width
        self.read_latency = read_latency
        super().__init__({
            **config_members(addr_width),
            "event": In(1),
            "ro_in": In(32),
            "reg_full": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        first = Signal(32)      # cfg_rdata after one cycle (ConfigMap), then more stages
        cfg = ConfigMap(m, SimpleNamespace(cfg_addr=self.cfg_addr, cfg_wdata=self.cfg_wdata,
                                           cfg_we=self.cfg_we, cfg_rdata=first), "test")
        m.d.comb += self.reg_full.eq(cfg.reg(FULL, "full", init=FULL_INIT))
        cfg.reg(NARROW, "narrow", NARROW_BITS, init=NARROW_INIT)
        cfg.ro(RO_IN, "ro_in", self.ro_in)
        cfg.ro(RO_LATENCY, "read_latency", self.read_latency)
        cfg.counter(EVENTS, "events", self.event)
        cfg.counter(WRITES, "writes", self.cfg_we)
        cfg.reg((1 << self.addr_width) - 1, "last", init=LAST_INIT)
        cfg.finish()
        stage = first
        for i in range(self.read_latency - 1):
            nxt = Signal(32, name=f"rdata_stage{i}")
            m.d.sync += nxt.eq(stage)
            stage = nxt
        m.d.comb += self.cfg_rdata.eq(stage)
        return m


class ConfigTestBlockModel(RegisterMapModel):
    """:class:`ConfigTestBlock`'s map: every performed write also counts in ``WRITES``."""

    def __init__(self, addr_width, read_latency, ro_in):
        super().__init__()
        self.reg(FULL, init=FULL_INIT)
        self.reg(NARROW, NARROW_BITS, init=NARROW_INIT)
        self.ro(RO_IN, ro_in)
        self.ro(RO_LATENCY, read_latency)
        self.counter(EVENTS)
        self.counter(WRITES)
        self.reg((1 << addr_width) - 1, init=LAST_INIT)

    def write(self, word, value):
        super().write(word, value)
        self.count(WRITES)


# --- the cocotb side -----------------------------------------------------------------------------

AXIL_SIGNALS = ("awaddr", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready", "bresp",
                "bvalid", "bready", "araddr", "arvalid", "arready", "rdata", "rresp", "rvalid",
                "rready")


class Sample:
    """The port's values at one clock edge, read on first use (payloads are X while their valid
    is low, so only the ones needed are converted)."""

    def __init__(self, handles):
        self.handles = handles
        self.values = {}

    def __getitem__(self, name):
        if name not in self.values:
            self.values[name] = int(self.handles[name].value)
        return self.values[name]


class AxilMonitor:
    """Checks the bridge's AXI4-Lite port every cycle against its rules and ``model``.

    ``model`` (an :class:`AxilConfigModel`) predicts every response and read word, applied in the
    order the bridge accepts transactions; with ``model=None`` (a target too large to model)
    only the response codes, the handshakes and the timing are checked.
    """

    def __init__(self, dut, addr_width, read_latency, model=None):
        self.dut = dut
        self.addr_width = addr_width
        self.read_latency = read_latency
        self.model = model
        self.handles = {name: getattr(dut, f"s_axil_{name}") for name in AXIL_SIGNALS}
        self.aw = deque()           # AW beats held: addresses
        self.w = deque()            # W beats held: (data, strb)
        self.current = None         # (kind, accept cycle, expected response)
        self.last_write = False
        self.cycle = 0
        self.accepted = []          # (kind, cycle)
        self.responses = {OKAY: 0, SLVERR: 0, DECERR: 0}
        self.contended = 0          # idle cycles with a read and a write waiting
        self.stalls = {"b": 0, "r": 0}  # cycles with BVALID (RVALID) high and BREADY (RREADY) low
        self.skews = {"aw": 0, "w": 0}  # writes whose AW (W) beat was taken first, alone
        cocotb.start_soon(self._run())

    def idle(self):
        return self.current is None and not self.aw and not self.w

    async def _run(self):
        while True:
            await RisingEdge(self.dut.clk)
            if int(self.dut.rst.value):
                continue
            self.cycle += 1
            self._check(Sample(self.handles))

    def _check(self, s):
        c = self.cycle
        # Ready outputs: what the bridge may accept this cycle.
        if self.current is None:
            started = bool(self.aw or self.w)
            write_req = s["awvalid"] or s["wvalid"] or started
            grant_write = write_req and (started or not s["arvalid"] or not self.last_write)
            grant_read = s["arvalid"] and not grant_write
            self.contended += bool(write_req and s["arvalid"])
            expected = (int(grant_write and not self.aw), int(grant_write and not self.w),
                        int(grant_read))
        else:
            expected = (0, 0, 0)
        got = (s["awready"], s["wready"], s["arready"])
        assert got == expected, f"cycle {c}: (awready, wready, arready) = {got}, expected " \
            f"{expected} (busy: {self.current}, AW held {len(self.aw)}, W held {len(self.w)})"
        # The response of the transaction in flight, at its documented cycle.
        if self.current is not None:
            kind, accepted, want = self.current
            due = accepted + (1 if kind == "w" else 2 + self.read_latency)
            valid = s["bvalid"] if kind == "w" else s["rvalid"]
            channel = "b" if kind == "w" else "r"
            self.stalls[channel] += valid and not s[f"{channel}ready"]
            assert valid == int(c >= due), f"cycle {c}: {kind} accepted in cycle {accepted}: " \
                f"valid {valid}, due from cycle {due}"
            other = s["rvalid"] if kind == "w" else s["bvalid"]
            assert not other, f"cycle {c}: a response of the other kind while {kind} is busy"
            if kind == "w" and s["bvalid"] and s["bready"]:
                assert s["bresp"] == want, f"cycle {c}: BRESP {RESP_NAMES[s['bresp']]}, " \
                    f"expected {RESP_NAMES[want]}"
                self._done(want)
            elif kind == "r" and s["rvalid"] and s["rready"]:
                got_r = (s["rresp"], s["rdata"])
                assert got_r[0] == want[0] and (want[1] is None or got_r[1] == want[1]), \
                    f"cycle {c}: R (resp, data) = {got_r}, expected {want}"
                self._done(want[0])
        else:
            assert not s["bvalid"] and not s["rvalid"], f"cycle {c}: a response with none due"
        # Beats taken this cycle.
        aw_taken = s["awvalid"] and s["awready"]
        w_taken = s["wvalid"] and s["wready"]
        if aw_taken != w_taken and not self.aw and not self.w:
            self.skews["aw" if aw_taken else "w"] += 1
        if aw_taken:
            self.aw.append(s["awaddr"])
        if w_taken:
            self.w.append((s["wdata"], s["wstrb"]))
        if self.aw and self.w:
            address, (data, strb) = self.aw.popleft(), self.w.popleft()
            want = (self.model.write(address, data, strb) if self.model else
                    write_response(address, strb, self.addr_width))
            self._accept("w", want)
        if s["arvalid"] and s["arready"]:
            address = s["araddr"]
            want = (self.model.read(address) if self.model else
                    (read_response(address, self.addr_width), None))
            self._accept("r", want)

    def _accept(self, kind, want):
        assert self.current is None, f"cycle {self.cycle}: {kind} accepted while busy"
        self.current = (kind, self.cycle, want)
        self.last_write = kind == "w"
        self.accepted.append((kind, self.cycle))

    def _done(self, resp):
        self.responses[resp] += 1
        self.current = None

    def gaps(self, kind, since):
        """Cycles between consecutive acceptances of ``kind`` from index ``since`` of
        :attr:`accepted`."""
        cycles = [c for k, c in self.accepted[since:] if k == kind]
        return [b - a for a, b in zip(cycles, cycles[1:])]


def axil_master(dut):
    from cocotbext.axi import AxiLiteBus, AxiLiteMaster

    logging.getLogger(f"cocotb.{dut._name}.s_axil").setLevel(logging.WARNING)
    return AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)


def channels(master):
    return (master.write_if.aw_channel, master.write_if.w_channel, master.write_if.b_channel,
            master.read_if.ar_channel, master.read_if.r_channel)


def out_of_range(rng, addr_width, address_bits=32):
    """A word-aligned byte address whose highest set bit, at any position above the map, is
    either alone there or has random bits below it."""
    top = rng.randrange(addr_width + 2, address_bits)
    between = rng.getrandbits(top - addr_width - 2) if rng.random() < 0.5 else 0
    return (1 << top | between << (addr_width + 2)) + (rng.randrange(1 << addr_width) << 2)


async def wait_idle(dut, master, monitor):
    await master.wait()
    while not monitor.idle():
        await RisingEdge(dut.clk)


@cocotb.test()
async def axil_random(dut):
    from verif.bench import frames, make_rng, params, random_pause, start, write_result

    p = params()
    addr_width, latency = p["addr_width"], p["read_latency"]
    n_ops = frames(OPS)
    rng = make_rng(dut)
    words = 1 << addr_width
    ro_in = rng.getrandbits(32)
    dut.event.value = 0
    dut.ro_in.value = ro_in
    await start(dut)
    master = axil_master(dut)
    model = AxilConfigModel(addr_width, ConfigTestBlockModel(addr_width, latency, ro_in))
    monitor = AxilMonitor(dut, addr_width, latency, model)
    mapped = [FULL, NARROW, RO_IN, RO_LATENCY, EVENTS, WRITES, words - 1]

    def word():
        return rng.choice(mapped) if rng.random() < 0.7 else rng.randrange(words)

    # --- random writes and reads at once, every channel paused at random ---------------------
    for channel in channels(master):
        channel.set_pause_generator(random_pause(rng, rng.uniform(0.2, 0.6)))

    async def idle_cycles():
        if rng.random() < 0.5:
            await ClockCycles(dut.clk, rng.randrange(1, 6))

    def random_write():
        """``(address, data, expected BRESP)``: mostly full words, some partial strobes, some
        addresses above the map."""
        r = rng.random()
        data = rng.getrandbits(32).to_bytes(4, "little")
        if r < 0.65:
            return word() << 2, data, OKAY
        if r < 0.85:
            offset = rng.randrange(4)
            length = rng.randrange(1, 4 - offset + 1) if offset else rng.randrange(1, 4)
            return word() << 2 | offset, data[:length], SLVERR
        if rng.random() < 0.3:                                  # DECERR before SLVERR
            return out_of_range(rng, addr_width) | 1, data[:2], DECERR
        return out_of_range(rng, addr_width), data, DECERR

    def random_read():
        """``(address, length, expected RRESP)``; some addresses not word-aligned."""
        if rng.random() < 0.85:
            offset = rng.randrange(4) if rng.random() < 0.2 else 0
            return word() << 2 | offset, 4 - offset, OKAY
        return out_of_range(rng, addr_width), 4, DECERR

    async def writer(count):
        """Groups of 1 to 3 writes in flight at once (the next AW or W beat waits on the port
        while the bridge holds one beat of the previous write)."""
        while count > 0:
            group = [random_write() for _ in range(min(count, rng.randrange(1, 4)))]
            count -= len(group)
            tasks = [cocotb.start_soon(master.write(address, data)) for address, data, _ in group]
            for task, (address, _, want) in zip(tasks, group):
                result = await task
                assert int(result.resp) == want, \
                    f"write {address:#x}: {result.resp}, want {RESP_NAMES[want]}"
            await idle_cycles()

    async def reader(count):
        while count > 0:
            group = [random_read() for _ in range(min(count, rng.randrange(1, 4)))]
            count -= len(group)
            tasks = [cocotb.start_soon(master.read(address, length))
                     for address, length, _ in group]
            for task, (address, length, want) in zip(tasks, group):
                result = await task
                assert int(result.resp) == want, \
                    f"read {address:#x}: {result.resp}, want {RESP_NAMES[want]}"
                if want == DECERR:
                    assert result.data == bytes(length)
            await idle_cycles()

    writes = n_ops // 2
    tasks = [cocotb.start_soon(writer(writes)), cocotb.start_soon(reader(n_ops - writes))]
    for task in tasks:
        await task
    await wait_idle(dut, master, monitor)

    # --- counters: events between transactions, reads, clears, a partial write ---------------
    target = model.target
    for _ in range(6):
        for _ in range(rng.randrange(0, 40)):
            dut.event.value = 1
            await RisingEdge(dut.clk)
            dut.event.value = 0
            target.count(EVENTS)
            await ClockCycles(dut.clk, rng.randrange(0, 3))
        op = rng.randrange(3)
        if op == 0:
            await master.write(EVENTS << 2, rng.getrandbits(32).to_bytes(4, "little"))
        elif op == 1:
            await master.write(EVENTS << 2 | 2, b"\x00")
        result = await master.read(EVENTS << 2, 4)
        assert int.from_bytes(result.data, "little") == target.read(EVENTS)
        await wait_idle(dut, master, monitor)
    assert int(dut.reg_full.value) == target.read(FULL)

    # --- back-to-back rates: no pauses, BREADY and RREADY high ---------------------------------
    for channel in channels(master):
        channel.clear_pause_generator()
        channel.pause = False
    since = len(monitor.accepted)
    tasks = [cocotb.start_soon(master.write(word() << 2, rng.randbytes(4)))
             for _ in range(BURST)]
    for task in tasks:
        await task
    tasks = [cocotb.start_soon(master.read(word() << 2, 4)) for _ in range(BURST)]
    for task in tasks:
        await task
    await wait_idle(dut, master, monitor)
    write_gaps, read_gaps = monitor.gaps("w", since), monitor.gaps("r", since)
    assert set(write_gaps) == {write_cycles()}, f"cycles between writes: {write_gaps}"
    assert set(read_gaps) == {read_cycles(latency)}, f"cycles between reads: {read_gaps}"
    assert master.idle() and monitor.idle()

    total = len(monitor.accepted)
    dut._log.info("addr_width %d, read latency %d: %d transactions (%s; %d cycles with a read "
                  "and a write waiting; first beat of a write alone %s; response stalls %s), "
                  "all as the model; back to back %d cycles per write, %d per read",
                  addr_width, latency, total,
                  {RESP_NAMES[k]: v for k, v in monitor.responses.items()}, monitor.contended,
                  monitor.skews, monitor.stalls, write_cycles(), read_cycles(latency))
    covered = [monitor.responses[SLVERR], monitor.responses[DECERR], monitor.contended,
               *monitor.stalls.values(), *monitor.skews.values()]
    assert n_ops < 50 or all(covered), f"the traffic missed a case: {covered}"
    write_result(dut, "axil_config", total, write_cycles=write_cycles(),
                 read_cycles=read_cycles(latency))


@cocotb.test()
async def axil_switch(dut):
    from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSource

    from rtl.switch import (INFO, INFO_BASE, REG_CTRL, REG_KMIN, CTRL_UP, CTRL_FABRIC,
                            ingress_counter, port_reg)
    from verif.bench import make_rng, params, start, write_result

    p = params()
    rng = make_rng(dut)
    addr_width = 16
    sources = []
    for port in range(SWITCH["ports"]):
        getattr(dut, f"s{port}_axis_tvalid").value = 0
        getattr(dut, f"m{port}_axis_tready").value = 1
    await start(dut)
    for port in range(SWITCH["ports"]):
        source = AxiStreamSource(AxiStreamBus.from_prefix(dut, f"s{port}_axis"), dut.clk, dut.rst)
        source.log.setLevel("WARNING")
        sources.append(source)
    master = axil_master(dut)
    monitor = AxilMonitor(dut, addr_width, 1)

    async def read(word, want_resp=OKAY):
        result = await master.read(word << 2, 4)
        assert int(result.resp) == want_resp, f"read {word:#x}: {result.resp}"
        return int.from_bytes(result.data, "little")

    async def write(word, value, want_resp=OKAY, data=None):
        data = value.to_bytes(4, "little") if data is None else data
        result = await master.write(word << 2, data)
        assert int(result.resp) == want_resp, f"write {word:#x}: {result.resp}"

    info = [await read(INFO_BASE + i) for i in range(len(INFO))]
    assert info == [p["info"][name] for name in INFO], f"info {info}, expected {p['info']}"
    assert await read(port_reg(1, REG_CTRL)) == 1 << CTRL_UP | 1 << CTRL_FABRIC
    kmin = rng.randrange(1 << 20)
    await write(port_reg(1, REG_KMIN), kmin)
    assert await read(port_reg(1, REG_KMIN)) == kmin
    await write(port_reg(1, REG_KMIN), 0, SLVERR, data=b"\x00\x00")
    assert await read(port_reg(1, REG_KMIN)) == kmin
    assert await read(1 << addr_width, DECERR) == 0
    await write(rng.randrange(1, 1 << 14) << addr_width | port_reg(1, REG_KMIN), 0, DECERR)
    assert await read(port_reg(1, REG_KMIN)) == kmin

    # Bad frames at both ingresses: short ones at 0, ones flagged bad (tuser) at 1.
    counter = [ingress_counter(port, "dropped_malformed") for port in range(2)]
    assert [await read(a) for a in counter] == [0, 0]
    bad = [rng.randrange(1, 6), rng.randrange(1, 6)]
    for _ in range(bad[0]):
        await sources[0].send(AxiStreamFrame(rng.randbytes(rng.randrange(14, 54))))
    for _ in range(bad[1]):
        await sources[1].send(AxiStreamFrame(rng.randbytes(rng.randrange(60, 300)), tuser=1))
    for source in sources:
        await source.wait()
    await ClockCycles(dut.clk, 40)
    assert [await read(a) for a in counter] == bad
    await write(counter[0], rng.getrandbits(32))
    assert [await read(a) for a in counter] == [0, bad[1]]
    await wait_idle(dut, master, monitor)
    dut._log.info("switch through AXI4-Lite: info %s, kmin, partial and out-of-range accesses, "
                  "ingress counters %s, all as expected", info, bad)
    write_result(dut, "axil_config", len(monitor.accepted))


# --- pytest side ---------------------------------------------------------------------------------

def run(sim, read_latency, addr_width=ADDR_WIDTH, ops=OPS):
    name = f"axil_config-A{addr_width}-L{read_latency}"
    run_bench(AxilTop(ConfigTestBlock(addr_width, read_latency), read_latency),
              name=name, toplevel="axil_config_top", test_module="tb.test_axil_config", sim=sim,
              params={"addr_width": addr_width, "read_latency": read_latency}, frames=ops,
              testcase="axil_random")


@pytest.mark.sim
@pytest.mark.parametrize("read_latency", LATENCIES)
@pytest.mark.parametrize("sim", SIMULATORS)
def test_axil_config(sim, read_latency):
    run(sim, read_latency)


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("addr_width,read_latency", [(3, l) for l in FULL_LATENCIES] +
                         [(20, l) for l in FULL_LATENCIES])
@pytest.mark.parametrize("sim", SIMULATORS)
def test_axil_config_full(sim, addr_width, read_latency):
    run(sim, read_latency, addr_width, FULL_OPS)


@pytest.mark.sim
@pytest.mark.parametrize("sim", SIMULATORS)
def test_axil_switch(sim):
    from rtl.switch import INFO, Switch

    switch = Switch(**SWITCH)
    info = dict(ports=switch.ports, data_width=switch.data_width, core_width=switch.core_width,
                trim_size=switch.config.trim_size, data_limit=switch.config.data_limit,
                control_limit=switch.control_limit, max_frame=switch.config.max_frame)
    assert set(info) == set(INFO)
    run_bench(AxilTop(switch), name="axil_config-switch", toplevel="axil_switch",
              test_module="tb.test_axil_config", sim=sim, params={"info": info},
              testcase="axil_switch")


@pytest.mark.parametrize("kwargs,word", [
    (dict(addr_width=0), "addr_width"), (dict(addr_width=31), "addr_width"),
    (dict(addr_width=True), "addr_width"), (dict(read_latency=0), "read_latency"),
    (dict(read_latency=9), "read_latency"), (dict(read_latency=1.0), "read_latency"),
    (dict(addr_width=16, axil_addr_width=17), "axil_addr_width"),
    (dict(axil_addr_width=65), "axil_addr_width"),
])
def test_axil_config_rejects_parameters(kwargs, word):
    with pytest.raises(ValueError, match=word):
        AxilConfig(**kwargs)


def test_axil_top_rejects_blocks_without_a_config_port():
    with pytest.raises(ValueError, match="inner must be"):
        AxilTop(Module())
    with pytest.raises(ValueError, match="cfg_addr"):
        AxilTop(AxilConfig())
    with pytest.raises(ValueError, match="read_latency"):
        AxilTop(ConfigTestBlock(4, 1), read_latency=0)
    with pytest.raises(ValueError, match="already has"):
        AxilTop(AxilPortBlock())


class AxilPortBlock(wiring.Component):
    """A block whose names clash with the wrapper's: it already has an ``s_axil_*`` member."""

    def __init__(self):
        super().__init__({**config_members(4), "s_axil_awaddr": In(8)})

    def elaborate(self, platform):
        return Module()
