# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.link.Link against models.link.

A monitor samples both streams, ``m_axis_tready`` and the configuration port at every clock edge
(values as the edge sees them): every beat accepted in and out with its cycle, every cycle the
source offered a beat the link refused, and every configuration write with its cycle. After the
run the golden model replays it (:func:`models.link.replay`): the frames at the cycles their
first beats were accepted, the writes at their cycles, the sink as it was ready. The model's
decisions give the frames that must come out; every beat out is compared with its beat in (tdata,
tkeep, tlast, tuser) and its cycle with the model's; the delay and rate rules are also checked on
the observed cycles as the link promises them (:func:`models.link.check_timing`); every refused
beat must have met a full FIFO (and none inside a frame being dropped); every counter, the LFSR
and the beats held are read back and compared; the sink ends empty. The seed is printed.

- ``link_random``: random frames of 1..4096 bytes (a tenth with ``tkeep`` holes, or zero on
  beats that are not the last, and ``tuser`` changing per beat: bad input passes as it comes),
  random idle on the source and backpressure on the sink, and random writes under traffic: cut and
  heal, loss (also at the value the next frame will draw, and one above), seed (0 included), delay
  and rate (above their maxima included), counter clears; a part of them in the cycle a frame
  starts (after a frame's last beat, when the next follows back to back).
- ``line_rate``: delay 0 and rate 0, no loss, sink always ready: back-to-back frames of random
  sizes take exactly their beat count of cycles, every beat a latency of 2; the same at
  ``delay = delay_max`` (latency delay_max); ``s_axis_tready`` never low. Then the sink stalls
  far longer than the FIFO and the release line span (1536 cycles at delay_max 64) with the
  FIFO full: every beat still leaves at the cycle the model gives.
- ``perf`` (``make bench`` and the full tests): 32 back-to-back frames of each payload size of
  ``PERF_SIZES``, with the same assertions, measured.
"""

import pytest
from amaranth.utils import bits_for

import cocotb
from cocotb.triggers import ClockCycles, Event, RisingEdge, with_timeout

from models.layouts import Opcode
from models.link import (COUNTERS, MIN_LATENCY, LinkModel, Verdict, check_timing, departures,
                         replay)
from models.packets import build_frame
from models.switch_queue import lfsr_step
from rtl.link import ADDR, ADDR_COUNTERS, ADDR_LEVEL, ADDR_LFSR, Link
from verif.runner import SIMULATORS, run_bench

WIDTHS = (64, 512)
FULL_WIDTHS = (128, 256)
FRAMES = 150
MAX_BYTES = 4096
DELAY_MAX = 64
RATE_MAX = 7
PERF_FRAMES = 32
LINE_RATE_FRAMES = 8
MEAN_FRAME_BYTES = 832       # of random_frame's sizes
BAD_FRACTION = 0.1
AIMED_WRITES = 0.4

NAMES = {**{addr: name for name, addr in ADDR.items()},
         **{addr: name for name, addr in ADDR_COUNTERS.items()}}


# --- Monitor -------------------------------------------------------------------------------------

class Log:
    """What the monitor saw, cycle by cycle (cycle 0 is the first edge after reset)."""

    def __init__(self):
        self.cycle = 0
        self.inputs = []        # (cycle, tdata, tkeep, tlast, tuser) accepted on s_axis
        self.outputs = []       # the same on m_axis
        self.refused = []       # cycles with s_axis_tvalid high and s_axis_tready low
        self.ready = bytearray()    # m_axis_tready at every edge
        self.writes = []        # (cycle, cfg_addr, cfg_wdata)
        self.frame_end = Event()    # set at the edge that takes a frame's last beat in
        self.running = True

    def frames(self):
        """The accepted input beats grouped in frames (the last may be unfinished)."""
        frames, current = [], []
        for beat in self.inputs:
            current.append(beat)
            if beat[3]:
                frames.append(current)
                current = []
        if current:
            frames.append(current)
        return frames

    def is_ready(self, cycle):
        return cycle >= len(self.ready) or bool(self.ready[cycle])


async def monitor(dut, log):
    s_valid, s_ready, s_data, s_keep, s_last = (getattr(dut, f"s_axis_{n}") for n in (
        "tvalid", "tready", "tdata", "tkeep", "tlast"))
    m_valid, m_ready, m_data, m_keep, m_last = (getattr(dut, f"m_axis_{n}") for n in (
        "tvalid", "tready", "tdata", "tkeep", "tlast"))
    s_user = getattr(dut, "s_axis_tuser", None)
    m_user = getattr(dut, "m_axis_tuser", None)
    cfg_we, cfg_addr, cfg_wdata = dut.cfg_we, dut.cfg_addr, dut.cfg_wdata
    edge = RisingEdge(dut.clk)
    while log.running:
        await edge
        cycle = log.cycle
        if int(s_valid.value):
            if int(s_ready.value):
                last = int(s_last.value)
                log.inputs.append((cycle, int(s_data.value), int(s_keep.value), last,
                                   int(s_user.value) if s_user is not None else 0))
                if last:
                    log.frame_end.set()
            else:
                log.refused.append(cycle)
        ready = int(m_ready.value)
        log.ready.append(ready)
        if ready and int(m_valid.value):
            log.outputs.append((cycle, int(m_data.value), int(m_keep.value), int(m_last.value),
                                int(m_user.value) if m_user is not None else 0))
        if int(cfg_we.value):
            log.writes.append((cycle, int(cfg_addr.value), int(cfg_wdata.value)))
        log.cycle = cycle + 1


# --- Traffic -------------------------------------------------------------------------------------

def random_frame(rng, lanes, user):
    """``AxiStreamFrame`` of 1..4096 bytes, mostly small; a tenth are bad input."""
    from cocotbext.axi import AxiStreamFrame

    r = rng.random()
    size = rng.randint(1, 128) if r < 0.5 else rng.randint(129, 1500) if r < 0.8 else \
        rng.randint(1501, MAX_BYTES)
    payload = rng.randbytes(size)
    if rng.random() >= BAD_FRACTION:
        return AxiStreamFrame(payload, tuser=rng.getrandbits(user) if user else None)
    keep = []
    for start in range(0, size, lanes):
        n = min(lanes, size - start)
        kind = rng.random()
        if kind < 0.3 and start + lanes < size:
            keep += [0] * n                                     # an empty beat, not the last
        elif kind < 0.8:
            keep += [rng.getrandbits(1) for _ in range(n)]      # holes
        else:
            keep += [1] * n
    tuser = [rng.getrandbits(user) for _ in range(size)] if user else None
    return AxiStreamFrame(payload, tkeep=keep, tuser=tuser)


def random_write(rng, delay_max, rate_max):
    """One configuration write under traffic: ``(name, value)``."""
    kind = rng.choices(("up", "loss", "edge", "seed", "delay", "rate", "clear"),
                       (30, 16, 6, 8, 15, 15, 6))[0]
    if kind == "edge":      # loss at the next draw (kept: r == loss), or one above (dropped)
        return "edge", rng.randint(0, 1)
    if kind == "up":
        return "up", rng.choice((1, 1, 1, 1, 0, 0xFFFFFFFF, 2))       # 2: bit 0 is 0, a cut
    if kind == "loss":
        return "loss", rng.choice((0, 0, 0, 0x4000, 0x8000, 0xC000, 0xFFFF, rng.getrandbits(16)))
    if kind == "seed":
        return "seed", rng.choice((0, rng.getrandbits(16), rng.getrandbits(32)))
    if kind == "delay":
        return "delay", rng.choice((0, 1, 2, 3, rng.randint(0, delay_max), delay_max,
                                    delay_max + 3, 0x12345))
    if kind == "rate":
        return "rate", rng.choice((0, 0, 0, 1, 2, rng.randint(0, rate_max), rate_max + 1))
    return rng.choice(COUNTERS), rng.getrandbits(32)


async def writer(cfg, rng, state, delay_max, rate_max, clk, gap, log):
    """Random writes, ``gap`` cycles apart at most, until ``state["running"]`` is False. Some are
    aimed at the cycle after a frame's last beat, when back-to-back frames start."""
    while state["running"]:
        await ClockCycles(clk, rng.randint(5, gap))
        if rng.random() < AIMED_WRITES and state["running"]:
            log.frame_end.clear()
            await log.frame_end.wait()
        if state["running"]:
            name, value = random_write(rng, delay_max, rate_max)
            if name == "edge":
                name, value = "loss", lfsr_step(await cfg.read(ADDR_LFSR)) + value
            addr = ADDR_COUNTERS[name] if name in ADDR_COUNTERS else ADDR[name]
            await cfg.write(addr, value)
            state["writes"] += 1


def compact(beats, lanes):
    """The bytes of ``beats`` whose tkeep bit is set (what cocotbext-axi's sink returns)."""
    out = bytearray()
    for _, tdata, tkeep, _, _ in beats:
        for j in range(lanes):
            if tkeep >> j & 1:
                out.append(tdata >> 8 * j & 0xFF)
    return bytes(out)


async def wait_empty(cfg, dut, timeout_cycles):
    """Wait until the link holds no beat (read through the configuration port)."""
    for _ in range(timeout_cycles // 8):
        if await cfg.read(ADDR_LEVEL) == 0 and not int(dut.m_axis_tvalid.value):
            return
        await ClockCycles(dut.clk, 6)
    raise AssertionError("the link did not drain")


# --- The random bench ----------------------------------------------------------------------------

def check_run(log, model, depth):
    """Replay ``log`` on ``model`` and compare every output; returns the :class:`Run`."""
    frames = log.frames()
    writes = [(cycle, NAMES[addr], value) for cycle, addr, value in log.writes]
    run = replay(model, [[beat[0] for beat in frame] for frame in frames], writes, log.is_ready)

    expected = [frames[f][b] for f, b in zip(run.frame, run.beat)]
    assert len(log.outputs) == len(expected), \
        f"{len(log.outputs)} beats out, the model expects {len(expected)}"
    for i, (got, want, leave) in enumerate(zip(log.outputs, expected, run.leaves)):
        if got[1:] != want[1:]:
            raise AssertionError(f"beat out {i} (frame {run.frame[i]} beat {run.beat[i]}) at "
                                 f"cycle {got[0]}: {got[1:]!r}, sent {want[1:]!r}")
        if got[0] != leave:
            raise AssertionError(f"beat out {i} (frame {run.frame[i]} beat {run.beat[i]}, in at "
                                 f"{want[0]}) left at cycle {got[0]}, the model says {leave}")
    delays = [run.decisions[f].delay for f in run.frame]
    rates = [run.decisions[f].rate for f in run.frame]
    problems = check_timing([b[0] for b in expected], [b[0] for b in log.outputs], delays, rates)
    assert not problems, problems[:8]

    # s_axis_tready: low only against a full FIFO, never inside a frame being dropped.
    dropping = set()
    for f, frame in enumerate(frames):
        if run.decisions[f].verdict != Verdict.PASSED and len(frame) > 1:
            dropping.update(range(frame[0][0] + 1, frame[-1][0] + 1))
    for cycle in log.refused:
        assert cycle not in dropping, f"cycle {cycle}: tready low inside a dropped frame"
        assert run.level(cycle) == depth, \
            f"cycle {cycle}: tready low with {run.level(cycle)} of {depth} beats in the FIFO"
    for cycle, *_ in log.inputs:
        if cycle not in dropping:
            assert run.level(cycle) < depth, f"cycle {cycle}: a beat taken into a full FIFO"
    return frames, run


@cocotb.test()
async def link_random(dut):
    from verif.bench import ConfigDriver, axis_ends, frames, make_rng, params, start, \
        write_result

    p = params()
    width, delay_max, rate_max = p["data_width"], p["delay_max"], p["rate_max"]
    lanes = width // 8
    user = len(dut.s_axis_tuser) if hasattr(dut, "s_axis_tuser") else 0
    n_frames = frames(FRAMES)
    rng = make_rng(dut)
    cfg = ConfigDriver(dut)
    source, sink = axis_ends(dut, rng, idle=(0.0, 0.0, 0.2, 0.6),
                             backpressure=(0.0, 0.0, 0.3, 0.8))
    await start(dut)
    log = Log()
    cocotb.start_soon(monitor(dut, log))
    await cfg.write(ADDR["seed"], rng.getrandbits(16))

    state = {"running": True, "writes": 0}
    gap = 5 + 2 * MEAN_FRAME_BYTES // lanes                  # about one write per frame
    writes_task = cocotb.start_soon(writer(cfg, rng, state, delay_max, rate_max, dut.clk, gap,
                                           log))
    sent_bytes = 0
    for _ in range(n_frames):
        frame = random_frame(rng, lanes, user)
        sent_bytes += len(frame.tdata)
        await source.send(frame)
    # Worst case: every beat at rate_max + 1 cycles, a sink paused 80 % of the time.
    timeout = 10 * (rate_max + 2) * (sent_bytes // lanes + 2 * n_frames) + 10_000
    await with_timeout(source.wait(), 4 * timeout, "ns")
    state["running"] = False
    log.frame_end.set()                 # wakes a writer waiting for a frame end
    await writes_task
    await wait_empty(cfg, dut, timeout)
    await ClockCycles(dut.clk, 4)
    log.running = False

    model = LinkModel(delay_max=delay_max, rate_max=rate_max)
    frames_in, run = check_run(log, model, delay_max + 2)
    passed = [f for f, d in enumerate(run.decisions) if d.verdict == Verdict.PASSED]
    for f in passed:
        got = sink.recv_nowait()
        assert bytes(got.tdata) == compact(frames_in[f], lanes), f"frame {f} (sink)"
    assert sink.empty(), f"{sink.count()} unexpected frames at the sink"
    assert int(dut.m_axis_tvalid.value) == 0

    counters = {name: await cfg.read(ADDR_COUNTERS[name]) for name in COUNTERS}
    assert counters == model.counters, f"counters {counters}, model {model.counters}"
    assert await cfg.read(ADDR_LFSR) == model.read("lfsr")
    assert await cfg.read(ADDR_LEVEL) == 0
    for name in ADDR:
        assert await cfg.read(ADDR[name]) == model.read(name), name
    await cfg.write(ADDR_COUNTERS["beats_passed"], 0)
    assert await cfg.read(ADDR_COUNTERS["beats_passed"]) == 0

    verdicts = [d.verdict for d in run.decisions]
    starts = {frame[0][0] for frame in frames_in}
    dut._log.info("%d frames (%d beats) in %d cycles, %d writes (%d in the cycle of a frame "
                  "start): %d passed, %d cut, %d lost; %d refused cycles", len(frames_in),
                  len(log.inputs), log.cycle, state["writes"],
                  sum(cycle in starts for cycle, *_ in log.writes),
                  verdicts.count(Verdict.PASSED), verdicts.count(Verdict.CUT),
                  verdicts.count(Verdict.LOST), len(log.refused))
    assert len(frames_in) == n_frames
    assert 0 < len(passed) < n_frames, "the run should pass some frames and drop some"
    write_result(dut, "link", n_frames)


def stall_cycles(link):
    """A sink stall far longer than anything the link counts: 3 << bits_for(delay_max + depth
    + 2) + 1 cycles (1536 at delay_max 64; the range of release stamps the link once kept)."""
    return 3 << bits_for(link.delay_max + link.depth + 2) + 1


# --- Full line rate and performance --------------------------------------------------------------

async def back_to_back(dut, source, sink, log, frames):
    """Send ``frames`` back to back and take them at the sink; returns the input and output beats
    of this batch."""
    n_in, n_out = len(log.inputs), len(log.outputs)
    for frame in frames:
        await source.send(frame)
    for frame in frames:
        got = await with_timeout(sink.recv(), 100 * len(frame.tdata) + 10_000, "ns")
        assert bytes(got.tdata) == bytes(frame.tdata)
    await ClockCycles(dut.clk, 2)
    return log.inputs[n_in:], log.outputs[n_out:]


def check_line_rate(ins, outs, latency, what):
    assert len(ins) == len(outs), f"{what}: {len(ins)} beats in, {len(outs)} out"
    span = outs[-1][0] - outs[0][0] + 1
    assert span == len(outs), f"{what}: {len(outs)} beats took {span} cycles"
    assert ins[-1][0] - ins[0][0] + 1 == len(ins), f"{what}: the input stalled"
    latencies = {o[0] - i[0] for i, o in zip(ins, outs)}
    assert latencies == {latency}, f"{what}: latencies {latencies}, expected {latency}"


async def line_rate_setup(dut):
    """The bench of the line-rate tests: no idle, no backpressure; returns its parts."""
    from verif.bench import ConfigDriver, axis_ends, make_rng, params, start

    p = params()
    rng = make_rng(dut)
    cfg = ConfigDriver(dut)
    source, sink = axis_ends(dut)
    await start(dut)
    log = Log()
    cocotb.start_soon(monitor(dut, log))
    return p["data_width"] // 8, p.get("delay_max", DELAY_MAX), rng, cfg, source, sink, log


@cocotb.test()
async def line_rate(dut):
    from cocotbext.axi import AxiStreamFrame

    from verif.bench import params, write_result

    lanes, delay_max, rng, cfg, source, sink, log = await line_rate_setup(dut)
    batch = [AxiStreamFrame(rng.randbytes(rng.randint(1, MAX_BYTES)))
             for _ in range(LINE_RATE_FRAMES)]
    ins, outs = await back_to_back(dut, source, sink, log, batch)
    check_line_rate(ins, outs, MIN_LATENCY, "delay 0")
    await cfg.write(ADDR["delay"], delay_max)
    ins, outs = await back_to_back(dut, source, sink, log, batch)
    check_line_rate(ins, outs, max(delay_max, MIN_LATENCY), f"delay {delay_max}")
    assert not log.refused, f"s_axis_tready low at cycles {log.refused[:8]}"
    batch_beats = len(ins)

    # A sink stalled far longer than the FIFO and the release line (and the range of any
    # cycle stamp they might keep): every beat still leaves as the model says.
    p = params()
    stall = stall_cycles(Link(p["data_width"], p["delay_max"], p["rate_max"]))
    await cfg.write(ADDR["delay"], delay_max // 2)
    n_in, n_out = len(log.inputs), len(log.outputs)
    sink.pause = True
    stalled = [AxiStreamFrame(rng.randbytes(MAX_BYTES)) for _ in range(3)]   # > the FIFO
    for frame in stalled:
        await source.send(frame)
    await ClockCycles(dut.clk, stall)
    sink.pause = False
    for frame in stalled:
        got = await with_timeout(sink.recv(), 100 * len(frame.tdata) + 10_000, "ns")
        assert bytes(got.tdata) == bytes(frame.tdata)
    ins, outs = log.inputs[n_in:], log.outputs[n_out:]
    n = len(ins)
    _, leaves = departures([b[0] for b in ins], [delay_max // 2] * n, [0] * n, log.is_ready)
    assert [o[0] for o in outs] == leaves, "departures after a long stall"
    assert log.refused, "the stall should have filled the FIFO"
    assert sink.empty()
    log.running = False
    dut._log.info("%d frames of %d beats back to back at delay 0 and %d: no bubble; %d cycles of "
                  "stall", LINE_RATE_FRAMES, batch_beats, delay_max, stall)
    write_result(dut, "link", 2 * LINE_RATE_FRAMES + 3)


@cocotb.test()
async def perf(dut):
    from cocotbext.axi import AxiStreamFrame

    from verif.bench import PERF_SIZES, write_perf

    lanes, _, _, _, source, sink, log = await line_rate_setup(dut)
    rows = []
    for size in PERF_SIZES:
        hdr = {"opcode": Opcode.WRITE_ONLY, "hop_limit": 64, "length": size,
               "eth_dst": 0x020000000009, "eth_src": 0x020000000007}
        frame = build_frame(hdr, bytes(range(256)) * (size // 256) + bytes(size % 256))
        ins, outs = await back_to_back(dut, source, sink, log,
                                       [AxiStreamFrame(frame) for _ in range(PERF_FRAMES)])
        beats = -(-len(frame) // lanes)
        check_line_rate(ins, outs, MIN_LATENCY, f"payload {size}")
        lasts = [o[0] for o in outs if o[3]]
        cycles = (lasts[-1] - lasts[0]) / (PERF_FRAMES - 1)
        assert cycles == beats
        rows.append(dict(
            payload=size, frames=PERF_FRAMES, cycles_per_frame=cycles,
            bytes_per_cycle=size / cycles, efficiency=size / cycles / lanes,
            latency=MIN_LATENCY, frame_bytes=len(frame), beats_per_frame=beats,
            frame_bytes_per_cycle=len(frame) / cycles, beat_efficiency=beats / cycles))
    assert sink.empty() and not log.refused
    log.running = False
    write_perf(dut, "link", lanes * 8, rows)


# --- pytest ------------------------------------------------------------------------------------

def cases(name, sims, widths):
    return [pytest.param(sim, width, id=f"{sim}-{width}",
                         marks=pytest.mark.xdist_group(f"{name}-{width}-{sim}"))
            for sim in sims for width in widths]


def run(name, sim, width, *, testcase, frames=None):
    run_bench(Link(data_width=width, delay_max=DELAY_MAX, rate_max=RATE_MAX),
              name=f"{name}-{width}", toplevel="link", test_module="tb.test_link", sim=sim,
              params={"data_width": width, "delay_max": DELAY_MAX, "rate_max": RATE_MAX},
              frames=frames, testcase=testcase)


@pytest.mark.sim
@pytest.mark.parametrize("sim, width", cases("link", SIMULATORS, WIDTHS))
def test_link(sim, width):
    run("link", sim, width, testcase=["link_random", "line_rate"], frames=FRAMES)


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("sim, width", cases("link-full", SIMULATORS, FULL_WIDTHS + WIDTHS))
def test_link_full(sim, width):
    run("link-full", sim, width, testcase=["link_random", "line_rate", "perf"],
        frames=4 * FRAMES)


@pytest.mark.parametrize("kwargs", [dict(data_width=32), dict(delay_max=-1),
                                    dict(delay_max=0x10000), dict(delay_max=4.0),
                                    dict(rate_max=0), dict(rate_max=0x10000),
                                    dict(user_width=65), dict(user_width=True)])
def test_link_rejects_parameters(kwargs):
    with pytest.raises(ValueError, match="Link"):
        Link(**kwargs)


@pytest.mark.parametrize("delay_max", [0, 1, 64, 65535])
def test_link_sizes(delay_max):
    link = Link(delay_max=delay_max)
    assert link.depth == delay_max + 2 and link.latency == MIN_LATENCY
    assert link.release_positions == max(1, delay_max - 1)
    assert stall_cycles(link) > 2 * (delay_max + link.depth + 1)
