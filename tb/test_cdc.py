# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb benches of the clock-domain crossings (issue [nic-fit] item 2):
:class:`rtl.common.stream_cdc.StreamCdc` and :class:`rtl.common.axi_cdc.AxiCdc`.

Every bench runs its two clocks at one of two ratios, ``RATIOS`` (write side 4 ns, read side
7 ns; and write 7 ns, read 3 ns), the second clock started at a random phase; both simulators,
W = 64 and 512. A monitor on each side records every beat in the cycle of its handshake.

Stream crossing (domains ``wr`` and ``rd``: ports ``wr_clk``, ``wr_rst``, ``rd_clk``,
``rd_rst``):

- ``stream_random``: seeded random frames (1..3000 bytes, random ``tuser``) from cocotbext-axi's
  ``AxiStreamSource`` with random idle, into an ``AxiStreamSink`` with random backpressure (both
  in phases): every beat out (tdata, tkeep, tlast, tuser) equals its beat in, in order, none
  lost or duplicated, every frame received equals its frame sent, and the sink ends empty.
- ``stream_rate``: back-to-back beats into an always-ready sink: the beats leave at one per
  cycle of the slower clock (at least 95 % of it, measured from the first beat out to the
  last); the latency of the first beat, in read cycles, is logged and bounded (at most 4).
- ``stream_resets``: the read side's reset pulsed several times under random traffic loses and
  duplicates nothing (the FIFO keeps its beats, ``o_tvalid`` is low during it); then the write
  side's reset with beats held in the FIFO empties it: nothing of them comes out, and a batch
  sent after it comes out alone and whole.
- ``link_input`` (``always_ready``: no ``i_tready``, the input facing a link): random frames
  back to back into a sink with heavy backpressure, so the FIFO fills and beats are dropped:
  every beat out equals a beat in, in order; every frame out not marked bad (``tuser`` bit 0 on
  its last beat) equals a frame in whole; beats in = beats out + ``dropped`` pulses; and with an always-ready sink and a read clock at least as fast nothing is dropped.

AXI4 crossing (``s_axi`` in ``sync``: ``clk``, ``rst``, the core; ``m_axi`` in ``mem``:
``mem_clk``, ``mem_rst``): ``axi_random``: cocotbext-axi's ``AxiMaster`` on ``s_axi`` and an
``AxiRam`` on ``m_axi``, random pauses on every channel of both; random writes (1..1500 bytes,
any alignment, several in flight, each in its own 4 KB slot), then the memory compared byte by
byte with the model, then random reads (several in flight) compared with it; every channel
ends empty.
"""

import pytest

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, Timer

WIDTHS = (64, 512)
FULL_WIDTHS = (128,)
RATIOS = ((4, 7), (7, 3))      # (write-side period, read-side period) in ns
FRAMES = 120
DEPTH = 16
USER = 2
AXI_OPS = 40
MEM_SLOT = 4096


# --- common ------------------------------------------------------------------------------------

async def start_clocks(dut, rng, clocks, reset_slow_cycles=8):
    """Start each ``(clk, rst, period_ns)`` of ``clocks`` (all but the first at a random phase),
    hold every reset for ``reset_slow_cycles`` cycles of the slowest clock, release them."""
    slow = max(period for _, _, period in clocks)
    for _, rst, _ in clocks:
        rst.value = 1
    for k, (clk, _, period) in enumerate(clocks):
        clk.value = 0
        phase = 0 if k == 0 else rng.randrange(period * 1000)

        async def run(clk=clk, period=period, phase=phase):
            if phase:
                await Timer(phase, unit="ps")
            await Clock(clk, period, unit="ns").start()

        cocotb.start_soon(run())
    await Timer(slow * reset_slow_cycles, unit="ns")
    for clk, rst, _ in clocks:
        await RisingEdge(clk)
        rst.value = 0
    await Timer(slow * 4, unit="ns")


class Beats:
    """Every beat accepted on stream ``prefix`` (tdata, tkeep, tlast, tuser), with its time."""

    def __init__(self, dut, prefix, clk):
        self.clk = clk
        self.sig = {n: getattr(dut, f"{prefix}_t{n}") for n in ("data", "keep", "last", "user",
                                                                 "valid")}
        self.ready = getattr(dut, f"{prefix}_tready", None)
        self.beats, self.times = [], []
        cocotb.start_soon(self._run())

    async def _run(self):
        edge = RisingEdge(self.clk)
        s, ready = self.sig, self.ready
        while True:
            await edge
            if int(s["valid"].value) and (ready is None or int(ready.value)):
                self.beats.append((int(s["data"].value), int(s["keep"].value),
                                   int(s["last"].value), int(s["user"].value)))
                self.times.append(cocotb.utils.get_sim_time("ps"))


def compare_beats(got, sent, what):
    assert len(got) == len(sent), f"{what}: {len(got)} beats out for {len(sent)} in"
    first = next((k for k, (a, b) in enumerate(zip(got, sent)) if a != b), None)
    assert first is None, f"{what}: beat {first} out {got[first]} differs from beat in " \
                          f"{sent[first]}"


def random_size(rng):
    r = rng.random()
    return rng.randint(1, 64) if r < 0.4 else rng.randint(65, 1500) if r < 0.85 else \
        rng.randint(1501, 3000)


# --- stream crossing ---------------------------------------------------------------------------

async def stream_setup(dut, rng, idle=None, backpressure=None):
    from cocotbext.axi import AxiStreamBus, AxiStreamSink, AxiStreamSource

    from verif.bench import params, phased_pause

    p = params()
    always_ready = p.get("always_ready", False)
    dut.i_tvalid.value = 0
    dut.o_tready.value = 0
    await start_clocks(dut, rng, [(dut.wr_clk, dut.wr_rst, p["w_period"]),
                                  (dut.rd_clk, dut.rd_rst, p["r_period"])])
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "i"), dut.wr_clk)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "o"), dut.rd_clk)
    for end in (source, sink):
        end.log.setLevel("WARNING")
    if idle:
        source.set_pause_generator(phased_pause(rng, idle, 200))
    if backpressure:
        sink.set_pause_generator(phased_pause(rng, backpressure, 200))
    ins, outs = Beats(dut, "i", dut.wr_clk), Beats(dut, "o", dut.rd_clk)
    return p, always_ready, source, sink, ins, outs


def random_frames(rng, n):
    from cocotbext.axi import AxiStreamFrame

    return [AxiStreamFrame(rng.randbytes(random_size(rng)), tuser=rng.getrandbits(USER))
            for _ in range(n)]


async def drain(dut, source, outs, n_in_beats_fn, limit_ns):
    """Wait until the source is idle and the output beats stop growing (the sink drained)."""
    waited = 0
    while not (source.idle()):
        await Timer(100, unit="ns")
        waited += 100
        assert waited < limit_ns, "the source did not finish sending"
    last = -1
    while len(outs.beats) != last or int(dut.o_tvalid.value):
        last = len(outs.beats)
        await Timer(400, unit="ns")
        waited += 400
        assert waited < limit_ns, f"the sink did not drain ({len(outs.beats)} beats out of " \
                                  f"{n_in_beats_fn()})"


@cocotb.test()
async def stream_random(dut):
    from verif.bench import frames, make_rng, write_result

    rng = make_rng(dut)
    p, _, source, sink, ins, outs = await stream_setup(dut, rng, idle=(0.0, 0.3, 0.8),
                                                       backpressure=(0.0, 0.5, 0.9))
    sent = random_frames(rng, frames(FRAMES))
    for f in sent:
        await source.send(f)
    await drain(dut, source, outs, lambda: len(ins.beats), 4000 * len(sent) * max(
        p["w_period"], p["r_period"]))
    compare_beats(outs.beats, ins.beats, "stream_random")
    got = []
    while not sink.empty():
        got.append(sink.recv_nowait())
    assert len(got) == len(sent), f"{len(got)} frames out for {len(sent)} in"
    for k, (a, b) in enumerate(zip(got, sent)):
        assert bytes(a.tdata) == bytes(b.tdata), f"frame {k}: data differs"
        user = a.tuser[-1] if isinstance(a.tuser, list) else a.tuser
        assert user == b.tuser, f"frame {k}: tuser {user} out, {b.tuser} in"
    assert int(dut.o_tvalid.value) == 0, "a beat left over after the last"
    write_result(dut, "stream_cdc", len(sent), beats=len(ins.beats))


@cocotb.test()
async def stream_rate(dut):
    from verif.bench import make_rng

    rng = make_rng(dut)
    p, _, source, sink, ins, outs = await stream_setup(dut, rng)
    width = p["width"]
    n_beats = 600
    for f in random_frames(rng, 1):
        f.tdata = rng.randbytes(n_beats * width // 8)
        await source.send(f)
    await drain(dut, source, outs, lambda: len(ins.beats), 100 * n_beats * max(
        p["w_period"], p["r_period"]))
    compare_beats(outs.beats, ins.beats, "stream_rate")
    slow = max(p["w_period"], p["r_period"]) * 1000
    span = outs.times[-1] - outs.times[0]
    rate = (len(outs.times) - 1) * slow / span
    latency = (outs.times[0] - ins.times[0]) / (p["r_period"] * 1000)
    dut._log.info("stream_rate: %.3f beats per slower-clock cycle over %d beats; first beat "
                  "%.2f read cycles after it was written", rate, len(outs.times), latency)
    assert rate >= 0.95, f"{rate:.3f} beats per cycle of the slower clock: not full rate"
    assert latency <= 4, f"first beat {latency:.2f} read cycles after its write"


@cocotb.test()
async def stream_resets(dut):
    from verif.bench import make_rng

    rng = make_rng(dut)
    p, _, source, sink, ins, outs = await stream_setup(dut, rng, idle=(0.0, 0.5),
                                                       backpressure=(0.0, 0.5))
    slow = max(p["w_period"], p["r_period"])
    sent = random_frames(rng, 30)
    for f in sent:
        await source.send(f)
    # The read side's reset, pulsed under traffic: the FIFO keeps its beats.
    pulses = 0
    while not (source.idle()) or pulses < 3:
        await ClockCycles(dut.rd_clk, rng.randint(10, 60))
        await RisingEdge(dut.rd_clk)
        dut.rd_rst.value = 1
        for _ in range(rng.randint(1, 10)):
            await RisingEdge(dut.rd_clk)
            assert not int(dut.o_tvalid.value), "o_tvalid high during the read side's reset"
        dut.rd_rst.value = 0
        pulses += 1
    await drain(dut, source, outs, lambda: len(ins.beats), 4000 * len(sent) * slow)
    compare_beats(outs.beats, ins.beats, "stream_resets: read-side reset")
    # The write side's reset with beats in the FIFO: they are gone.
    sink.set_pause_generator(None)
    sink.pause = True
    await RisingEdge(dut.rd_clk)
    lanes = p["width"] // 8
    held = 0
    frames_held = []
    from cocotbext.axi import AxiStreamFrame

    for _ in range(20):
        f = AxiStreamFrame(rng.randbytes(rng.randint(1, 3 * lanes)), tuser=rng.getrandbits(USER))
        beats = -(-len(f.tdata) // lanes)
        if held + beats > DEPTH - 1:
            break
        held += beats
        frames_held.append(f)
        await source.send(f)
    while not (source.idle()):
        await RisingEdge(dut.wr_clk)
    before = len(outs.beats)
    await ClockCycles(dut.rd_clk, 6)
    assert held and int(dut.o_tvalid.value), "beats written but o_tvalid low"
    await RisingEdge(dut.wr_clk)
    dut.wr_rst.value = 1
    await Timer(8 * slow, unit="ns")
    await RisingEdge(dut.wr_clk)
    dut.wr_rst.value = 0
    await ClockCycles(dut.rd_clk, 4)
    assert not int(dut.o_tvalid.value), "o_tvalid high after the write side's reset"
    sink.pause = False
    while not sink.empty():
        sink.recv_nowait()
    await ClockCycles(dut.rd_clk, 20)
    assert len(outs.beats) == before, "beats came out of a FIFO emptied by the write reset"
    mark = len(ins.beats)
    after = random_frames(rng, 10)
    for f in after:
        await source.send(f)
    await drain(dut, source, outs, lambda: len(ins.beats), 4000 * len(after) * slow)
    compare_beats(outs.beats[before:], ins.beats[mark:], "stream_resets: after write reset")
    dut._log.info("stream_resets: %d read-side pulses; %d beats emptied by the write reset",
                  pulses, held)


@cocotb.test()
async def link_input(dut):
    from verif.bench import make_rng, write_result

    rng = make_rng(dut)
    p, _, source, sink, ins, outs = await stream_setup(dut, rng, backpressure=(0.5, 0.9))
    dropped = 0

    async def count():
        nonlocal dropped
        while True:
            await RisingEdge(dut.wr_clk)
            dropped += int(dut.dropped.value)

    cocotb.start_soon(count())
    sent = random_frames(rng, 60)
    for f in sent:
        f.tuser = 0           # a bad mark out can only be the crossing's
        await source.send(f)
    slow = max(p["w_period"], p["r_period"])
    await drain(dut, source, outs, lambda: len(ins.beats), 4000 * len(sent) * slow)
    # Every beat out is a beat in (the closing beat of a cut frame with last and user bit 0 set).
    k = 0
    closing = 0
    for n, (data, keep, last, user) in enumerate(outs.beats):
        while k < len(ins.beats) and ins.beats[k][:2] != (data, keep):
            k += 1
        assert k < len(ins.beats), f"link_input: beat {n} out is no beat in (in order)"
        if (last, user & 1) != ins.beats[k][2:4]:
            assert last == 1 and user & 1, f"link_input: beat {n} changed but not closing"
            closing += 1
        k += 1
    # Frames out not marked bad are frames in, whole.
    frames_in, cur = set(), []
    for beat in ins.beats:
        cur.append(beat)
        if beat[2]:
            frames_in.add(tuple(cur))
            cur = []
    good = bad = 0
    cur = []
    for beat in outs.beats:
        cur.append(beat)
        if beat[2]:
            if beat[3] & 1:
                bad += 1
            else:
                assert tuple(cur) in frames_in, "link_input: a frame out not marked bad was " \
                                                "not a frame in"
                good += 1
            cur = []
    assert not cur, "link_input: the last frame out has no last beat"
    assert len(ins.beats) == len(outs.beats) + dropped, \
        f"{len(ins.beats)} beats in, {len(outs.beats)} out ({closing} closing), {dropped} dropped"
    assert dropped > 0, "the bench never filled the FIFO"
    dut._log.info("link_input: %d frames whole, %d marked bad, %d beats dropped", good, bad,
                  dropped)
    # With an always-ready sink and a read clock at least as fast, nothing is dropped.
    if p["r_period"] <= p["w_period"]:
        sink.set_pause_generator(None)
        sink.pause = False
        dropped = 0
        mark_in, mark_out = len(ins.beats), len(outs.beats)
        for f in random_frames(rng, 40):
            f.tuser = 0
            await source.send(f)
        await drain(dut, source, outs, lambda: len(ins.beats), 4000 * 40 * slow)
        assert dropped == 0, f"{dropped} beats dropped with the sink always ready"
        compare_beats(outs.beats[mark_out:], ins.beats[mark_in:], "link_input: fast reader")
    write_result(dut, "stream_cdc_link", len(sent), good=good, bad=bad, dropped=dropped)


# --- AXI4 crossing -----------------------------------------------------------------------------

@cocotb.test()
async def axi_random(dut):
    from cocotbext.axi import AxiBus, AxiMaster, AxiRam

    from verif.bench import frames, make_rng, params, phased_pause, write_result

    p = params()
    rng = make_rng(dut)
    for name in ("awvalid", "wvalid", "arvalid", "bready", "rready"):
        getattr(dut, f"s_axi_{name}").value = 0
    for name in ("awready", "wready", "arready", "bvalid", "rvalid"):
        getattr(dut, f"m_axi_{name}").value = 0
    await start_clocks(dut, rng, [(dut.clk, dut.rst, p["core_period"]),
                                  (dut.mem_clk, dut.mem_rst, p["mem_period"])])
    n_ops = frames(AXI_OPS)
    size = MEM_SLOT * n_ops
    master = AxiMaster(AxiBus.from_prefix(dut, "s_axi"), dut.clk, dut.rst)
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.mem_clk, dut.mem_rst, size=size)
    for part in (master.write_if, master.read_if, ram.write_if, ram.read_if):
        part.log.setLevel("WARNING")
    for channel in (master.write_if.aw_channel, master.write_if.w_channel,
                    master.write_if.b_channel, master.read_if.ar_channel,
                    master.read_if.r_channel, ram.write_if.aw_channel, ram.write_if.w_channel,
                    ram.write_if.b_channel, ram.read_if.ar_channel, ram.read_if.r_channel):
        channel.set_pause_generator(phased_pause(rng, (0.0, 0.2, 0.6), 150))
    model = bytearray(rng.randbytes(size))
    ram.write(0, bytes(model))
    lanes = p["width"] // 8

    async def run_all(jobs, in_flight):
        pending = list(jobs)
        running = []
        while pending or running:
            while pending and len(running) < in_flight:
                running.append(cocotb.start_soon(pending.pop(0)))
            await running.pop(0)

    writes = []
    for slot in rng.sample(range(n_ops), n_ops):
        length = rng.randint(1, 1500)
        offset = rng.randrange(MEM_SLOT - length + 1)
        addr = slot * MEM_SLOT + offset
        data = rng.randbytes(length)
        model[addr:addr + length] = data
        writes.append((addr, data))

    async def write(addr, data):
        await master.write(addr, data)

    await run_all([write(a, d) for a, d in writes], in_flight=4)
    got = ram.read(0, size)
    first = next((k for k in range(size) if got[k] != model[k]), None)
    assert first is None, f"memory byte {first:#x}: {got[first]:#x}, model {model[first]:#x}"

    reads = []
    for _ in range(n_ops):
        length = rng.randint(1, 2 * MEM_SLOT)
        addr = rng.randrange(size - length + 1)
        reads.append((addr, length))
    results = {}

    async def read(k, addr, length):
        results[k] = (await master.read(addr, length)).data

    await run_all([read(k, a, n) for k, (a, n) in enumerate(reads)], in_flight=4)
    for k, (addr, length) in enumerate(reads):
        assert bytes(results[k]) == bytes(model[addr:addr + length]), \
            f"read {k} ({length} B at {addr:#x}) differs from the model"
    await ClockCycles(dut.clk, 30)
    for name in ("s_axi_bvalid", "s_axi_rvalid", "m_axi_awvalid", "m_axi_wvalid",
                 "m_axi_arvalid"):
        assert not int(getattr(dut, name).value), f"{name} high after the last transaction"
    beats = sum(-(-(a % lanes + len(d)) // lanes) for a, d in writes)
    dut._log.info("axi_random: %d writes (%d W beats), %d reads checked", len(writes), beats,
                  len(reads))
    write_result(dut, "axi_cdc", len(writes) + len(reads))


# --- runners -----------------------------------------------------------------------------------

def ratio_id(ratio):
    return f"{ratio[0]}ns-{ratio[1]}ns"


def run_stream(sim, width, ratio, always_ready=False):
    from rtl.common.stream import Beat
    from rtl.common.stream_cdc import StreamCdc
    from verif.runner import run_bench

    w_period, r_period = ratio
    kind = "link" if always_ready else "stream"
    tests = ["link_input"] if always_ready else ["stream_random", "stream_rate", "stream_resets"]
    run_bench(StreamCdc(Beat(width, USER), DEPTH, w_domain="wr", r_domain="rd",
                        always_ready=always_ready),
              name=f"{kind}_cdc-{width}-{ratio_id(ratio)}", toplevel="stream_cdc",
              test_module="tb.test_cdc", sim=sim, testcase=tests, frames=FRAMES,
              params=dict(width=width, w_period=w_period, r_period=r_period,
                          always_ready=always_ready))


def run_axi(sim, width, ratio):
    from rtl.common.axi_cdc import AxiCdc
    from verif.runner import run_bench

    core, mem = ratio
    run_bench(AxiCdc(width, 64, 1, DEPTH, s_domain="sync", m_domain="mem"),
              name=f"axi_cdc-{width}-{ratio_id(ratio)}", toplevel="axi_cdc",
              test_module="tb.test_cdc", sim=sim, testcase="axi_random", frames=AXI_OPS,
              params=dict(width=width, core_period=core, mem_period=mem))


def widths():
    return [*WIDTHS, *(pytest.param(w, marks=pytest.mark.full) for w in FULL_WIDTHS)]


@pytest.mark.sim
@pytest.mark.parametrize("ratio", RATIOS, ids=ratio_id)
@pytest.mark.parametrize("width", widths())
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_stream_cdc(sim, width, ratio):
    run_stream(sim, width, ratio)


@pytest.mark.sim
@pytest.mark.parametrize("ratio", RATIOS, ids=ratio_id)
@pytest.mark.parametrize("width", widths())
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_stream_cdc_link(sim, width, ratio):
    run_stream(sim, width, ratio, always_ready=True)


@pytest.mark.sim
@pytest.mark.parametrize("ratio", RATIOS, ids=ratio_id)
@pytest.mark.parametrize("width", widths())
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_axi_cdc(sim, width, ratio):
    run_axi(sim, width, ratio)


def test_cdc_parameters():
    """Bad parameters are refused at construction, each with a ValueError naming the block."""
    from rtl.common.axi_cdc import AxiCdc
    from rtl.common.stream import Beat
    from rtl.common.stream_cdc import StreamCdc

    for depth in (0, 2, 3, 12, 16.0, True):
        with pytest.raises(ValueError, match="StreamCdc: depth"):
            StreamCdc(8, depth, w_domain="a", r_domain="b")
    with pytest.raises(ValueError, match="both 'a'"):
        StreamCdc(8, 16, w_domain="a", r_domain="a")
    with pytest.raises(ValueError, match="domain name"):
        StreamCdc(8, 16, w_domain="", r_domain="b")
    with pytest.raises(ValueError, match="always_ready needs a Beat"):
        StreamCdc(Beat(64), 16, w_domain="a", r_domain="b", always_ready=True)
    with pytest.raises(ValueError, match="AxiCdc: axi4: data_width"):
        AxiCdc(12)
    with pytest.raises(ValueError, match="AxiCdc: StreamCdc: depth"):
        AxiCdc(64, depth=6)
    with pytest.raises(ValueError, match="AxiCdc: at least one"):
        AxiCdc(64, read=False, write=False)
    with pytest.raises(ValueError, match="AxiCdc: StreamCdc: w_domain and r_domain"):
        AxiCdc(64, s_domain="mem", m_domain="mem")
    assert AxiCdc(64, read=False).signature.members.keys() >= {"s_axi", "m_axi"}


@pytest.mark.full
def test_nic_cdc_verilog(tmp_path):
    """The NIC engine with both crossings converts to Verilog with the engine's ports plus
    ``link_clk``/``link_rst`` and ``mem_clk``/``mem_rst``; without them it is the engine's top."""
    import re

    from rtl.gen import write_verilog
    from rtl.nic_cdc import NicCdc

    small = dict(n_qps=1, n_planes=2, data_width=64, wrs_per_qp=2, slots=4, backups=2,
                 ev_min_active=1, max_outstanding=4, n_regions=1, pmtu=1024, buffer_bytes=4096, ring=16,
                 probe_entries=2, wr_depth=4)
    text = write_verilog(NicCdc(**small, link_clock=True, memory_clock=True), "nic_cdc",
                         tmp_path / "nic_cdc.v").read_text()
    header = text[text.index("module nic_cdc("):].split(");", 1)[0]
    ports = set(re.findall(r"\b(\w+)\b", header))
    assert {"clk", "rst", "link_clk", "link_rst", "mem_clk", "mem_rst", "m_axis0_tvalid",
            "s1_axis_tdata", "m_axi_awvalid"} <= ports, sorted(ports)
    with pytest.raises(ValueError, match="NicCdc: StreamCdc: depth"):
        NicCdc(**small, link_clock=True, cdc_depth=6)
