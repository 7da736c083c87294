# SPDX-License-Identifier: BSD-2-Clause
"""cocotb side of every bench: parameters, seed, clock and reset, record streams, configuration
port driver, pause generators and the result line that ``make sim`` summarises.

Imported only inside a simulator (it imports cocotb).
"""

import json
import os
import random
import warnings
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge

__all__ = ["params", "frames", "make_rng", "start", "wait_until", "ConfigDriver", "RecordSource", "RecordSink",
           "random_pause", "phased_pause", "axis_ends", "write_result", "write_perf", "PERF_SIZES",
           "CLK_PERIOD_NS"]

CLK_PERIOD_NS = 4   # nominal 250 MHz (docs/protocol.md section 8)

# cocotbext-axi 0.1.28 and cocotb-bus 0.3.0 still call cocotb 1.x APIs that cocotb 2.1 deprecates
# (``setimmediatevalue``, ``Edge``, ``Task.kill``); their warnings say nothing about this project,
# so benches and ``make sim`` do not print them. The project's own warnings still show.
for _module in (r"cocotbext(\.|$)", r"cocotb_bus(\.|$)"):
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=_module)


def params():
    return json.loads(os.environ.get("MRC_PARAMS", "{}"))


def frames(default):
    return int(os.environ.get("MRC_FRAMES", default))


def make_rng(dut):
    seed = cocotb.RANDOM_SEED
    # cocotb derives each test's seed from the run's seed and the test name; SEED sets the run's.
    rerun = os.environ.get("COCOTB_RANDOM_SEED", seed)
    dut._log.info("bench %s on %s, seed %d (rerun with SEED=%s)",
                  os.environ.get("MRC_BENCH", "?"), os.environ.get("MRC_SIM", "?"), seed, rerun)
    return random.Random(seed)


async def start(dut, reset_cycles=4):
    """Start the clock on ``dut.clk`` and pulse ``dut.rst``."""
    cocotb.start_soon(Clock(dut.clk, CLK_PERIOD_NS, unit="ns").start())
    dut.rst.value = 1
    for _ in range(reset_cycles):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


async def wait_until(dut, condition, max_cycles, what):
    """Wait on ``dut.clk`` until ``condition()`` holds; raise naming ``what`` after
    ``max_cycles`` cycles (a DUT that stops answering fails the bench instead of hanging CI).
    Returns the cycles waited."""
    for waited in range(max_cycles + 1):
        if condition():
            return waited
        await RisingEdge(dut.clk)
    raise AssertionError(f"{what}: not within {max_cycles} cycles")


def random_pause(rng, probability):
    """An endless generator for cocotbext-axi's ``set_pause_generator``: True = pause this cycle."""
    while True:
        yield rng.random() < probability


def phased_pause(rng, probabilities, phase_cycles=150):
    """A pause generator whose probability changes every ``phase_cycles`` cycles, drawn from
    ``probabilities``: stretches of back-to-back beats alternate with idle-heavy ones."""
    while True:
        p = rng.choice(probabilities)
        for _ in range(phase_cycles):
            yield rng.random() < p


def axis_ends(dut, rng=None, idle=None, backpressure=None, phase_cycles=200):
    """cocotbext-axi ``AxiStreamSource`` on ``s_axis`` and ``AxiStreamSink`` on ``m_axis`` of a
    one-in, one-out block; ``idle`` and ``backpressure`` (lists of probabilities) give them
    :func:`phased_pause` generators. The valid and ready inputs are driven low from time 0
    (cocotbext-axi drives them only once its coroutines run)."""
    from cocotbext.axi import AxiStreamBus, AxiStreamSink, AxiStreamSource

    dut.s_axis_tvalid.value = 0
    dut.m_axis_tready.value = 0
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst)
    for end in (source, sink):
        end.log.setLevel("WARNING")     # one line per frame would dominate the run time
    if idle:
        source.set_pause_generator(phased_pause(rng, idle, phase_cycles))
    if backpressure:
        sink.set_pause_generator(phased_pause(rng, backpressure, phase_cycles))
    return source, sink


class ConfigDriver:
    """Drives the configuration port (``cfg_addr``, ``cfg_wdata``, ``cfg_we``, ``cfg_rdata``)."""

    def __init__(self, dut):
        self.dut = dut
        dut.cfg_we.value = 0
        dut.cfg_addr.value = 0
        dut.cfg_wdata.value = 0

    async def write(self, addr, value):
        self.dut.cfg_addr.value = addr
        self.dut.cfg_wdata.value = value & 0xFFFFFFFF
        self.dut.cfg_we.value = 1
        await RisingEdge(self.dut.clk)
        self.dut.cfg_we.value = 0

    async def read(self, addr):
        self.dut.cfg_addr.value = addr
        await RisingEdge(self.dut.clk)   # the address is sampled at this edge
        await RisingEdge(self.dut.clk)   # read latency one cycle: the value the edge sees
        return int(self.dut.cfg_rdata.value)


class RecordSource:
    """Drives a record stream ``<prefix>_tdata/_tvalid/_tready`` from a queue of integers."""

    def __init__(self, dut, prefix, pause=None):
        self.dut = dut
        self.tdata = getattr(dut, f"{prefix}_tdata")
        self.tvalid = getattr(dut, f"{prefix}_tvalid")
        self.tready = getattr(dut, f"{prefix}_tready")
        self.queue = deque()
        self.pause = pause
        self.sent = 0
        self._valid = False
        self.tvalid.value = 0
        self.tdata.value = 0
        cocotb.start_soon(self._run())

    def send(self, word):
        self.queue.append(int(word))

    def empty(self):
        return not self.queue and not self._valid

    async def _run(self):
        # tvalid is kept in _valid: a write to a handle is not read back in the same time step,
        # so reading tvalid after clearing it would insert an idle cycle after every record.
        clk = self.dut.clk
        while True:
            await RisingEdge(clk)
            was_valid = self._valid
            if self._valid and int(self.tready.value):
                self._valid = False
                self.sent += 1
            if not self._valid:
                paused = self.pause is not None and next(self.pause)
                if self.queue and not paused:
                    self.tdata.value = self.queue.popleft()
                    self._valid = True
            if self._valid != was_valid:
                self.tvalid.value = int(self._valid)


class RecordSink:
    """Collects a record stream's words; ``pause`` (a generator) drops tready on some cycles."""

    def __init__(self, dut, prefix, pause=None):
        self.dut = dut
        self.tdata = getattr(dut, f"{prefix}_tdata")
        self.tvalid = getattr(dut, f"{prefix}_tvalid")
        self.tready = getattr(dut, f"{prefix}_tready")
        self.queue = deque()
        self.pause = pause
        self.tready.value = 0 if pause else 1
        cocotb.start_soon(self._run())

    def empty(self):
        return not self.queue

    async def _run(self):
        clk = self.dut.clk
        while True:
            await RisingEdge(clk)   # values read here are the ones the edge sampled
            if int(self.tvalid.value) and int(self.tready.value):
                self.queue.append(int(self.tdata.value))
            self.tready.value = 0 if (self.pause is not None and next(self.pause)) else 1


def write_result(dut, block, frames_checked, result="pass", tag=None, **extra):
    """One JSON line per bench run, read by ``make sim`` and ``make bench``; ``tag`` names a
    second result of the same run (bench ``<bench>-<tag>``)."""
    path = os.environ.get("MRC_RESULTS")
    if not path:
        return
    os.makedirs(path, exist_ok=True)
    name = os.environ.get("MRC_BENCH", block) + (f"-{tag}" if tag else "")
    sim = os.environ.get("MRC_SIM", "?")
    line = dict(block=block, bench=name, sim=sim, frames=frames_checked, result=result, **extra)
    with open(os.path.join(path, f"{name}-{sim}.json"), "w") as f:
        json.dump(line, f)
    dut._log.info("result: %s", line)


PERF_SIZES = (0, 64, 256, 1500, 4096)


def write_perf(dut, block, data_width, rows):
    """Performance rows of one block at one width, read by ``make bench``.

    ``rows``: one dict per payload size with keys ``payload`` (bytes), ``frames``,
    ``cycles_per_frame`` (steady state, back-to-back, no idle, sink always ready),
    ``bytes_per_cycle`` (payload bytes per cycle), ``efficiency`` (bytes_per_cycle / (W/8)),
    ``latency`` (cycles from a frame's first beat in to its first beat out) and, where the block
    stores and forwards, ``latency_last`` (from the last beat in).
    """
    path = os.environ.get("MRC_RESULTS")
    if not path:
        return
    os.makedirs(path, exist_ok=True)
    line = dict(block=block, data_width=data_width, sim=os.environ.get("MRC_SIM", "?"), rows=rows)
    with open(os.path.join(path, f"perf-{block}-{data_width}-{line['sim']}.json"), "w") as f:
        json.dump(line, f)
    for r in rows:
        dut._log.info("perf %s W=%d: %s", block, data_width, r)
