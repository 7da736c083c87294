# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.header_inserter.HeaderInserter against models.header_inserter.

:func:`frames_match_model` sends the conformance frames of ``vectors/packets.json`` and then seeded
random traffic (all six Writes, SACK, NACK and probe with random header fields, payloads 0..PMTU,
and bad input: unknown opcodes, control records with a payload, oversize records, short and long
packets, upstream-bad packets, tkeep holes) with random idle on both sources and random
backpressure on the sink. Every output frame is compared beat by beat with the model (data, keep,
last, user), every frame not flagged bad is read by scapy (:func:`verif.scapy_check.
check_frame`), the counters are read back and compared, and every stream must be empty at the end.

:func:`perf` measures steady-state cycles per frame (and checks it is ``ceil(frame bytes / (W/8))``:
no bubble), throughput and latency for each of ``PERF_SIZES``.
"""

import logging
import math

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout

from models.header_inserter import (
    COUNTERS, INFO, HeaderInserterModel, Packet, frame_beats, packet_bytes, record_from_vector,
)
from models.layouts import CONTROL_OPCODES, DATA_OPCODES, KNOWN_OPCODES, Opcode
from models.packets import frame_length
from models.records import TX_HEADER
from models import conformance as vectors

WIDTHS = (64, 512)
FULL_WIDTHS = (128, 256)
FRAMES = 500                # random frames a run (plus the conformance frames)
PMTU = 4096
PERF_FRAMES = 32
MASK32 = 0xFFFF_FFFF
UNKNOWN_OPCODES = [op for op in range(256) if op not in KNOWN_OPCODES]


def random_size(rng, lanes, max_size):
    """A payload length up to ``max_size``: 0, 1..7, small, around multiples of the width (up to
    1 KiB), any, or the largest."""
    kind = rng.random()
    if kind < 0.06:
        return 0
    if kind < 0.18:
        return rng.randint(1, 7)
    if kind < 0.50:
        return rng.randint(8, min(256, max_size))
    if kind < 0.86:
        k = rng.randint(1, max(1, min(max_size, 1024) // lanes))
        return max(1, min(max_size, k * lanes + rng.randint(-4, 4)))
    if kind < 0.98:
        return rng.randint(1, max_size)
    return max_size


def random_record(rng, lanes, max_payload):
    """One (record, sent packet or None); a sent packet is (bytes, keep list or None, tuser).
    About one record in five is bad input of some kind."""
    rec = {name: rng.getrandbits(width) for name, width in TX_HEADER.fields}
    kind = rng.random()
    if kind < 0.62:
        rec["opcode"] = rng.choice(DATA_OPCODES)
        rec["length"] = random_size(rng, lanes, max_payload)
    elif kind < 0.86:
        rec["opcode"] = rng.choice(CONTROL_OPCODES)
        rec["length"] = 0
    elif kind < 0.92:
        rec["opcode"] = rng.choice(UNKNOWN_OPCODES)
        rec["length"] = rng.choice((0, random_size(rng, lanes, max_payload)))
    elif kind < 0.96:
        rec["opcode"] = rng.choice(CONTROL_OPCODES)
        rec["length"] = rng.randint(1, 3 * lanes)
    else:
        rec["opcode"] = rng.choice(DATA_OPCODES)
        rec["length"] = rng.randint(max_payload + 1, (1 << 16) - 1)
    length = rec["length"]
    if not length:
        return rec, None
    size = min(length, max_payload + 2 * lanes)       # oversize records get a shorter packet
    mismatch = rng.random()
    if mismatch < 0.05 and size > 1:
        size = rng.randint(1, size - 1)                  # short
    elif mismatch < 0.10:
        size += rng.randint(1, 2 * lanes + 5)            # long
    data = bytes(rng.getrandbits(8) for _ in range(size))
    keep = None
    if rng.random() < 0.03:                              # a tkeep hole
        keep = [1] * size
        keep[rng.randrange(size)] = 0
    return rec, (data, keep, int(rng.random() < 0.03))


def vector_traffic():
    """The conformance frames as (record, sent packet or None, expected frame bytes)."""
    cases = vectors.load("packets.json")
    out = []
    for case in cases:
        rec, payload = record_from_vector(case)
        out.append((rec, (payload, None, 0) if payload else None, bytes.fromhex(case["frame_hex"])))
    return out


class SampledOnce:
    """A read-only stand-in for a signal handle whose value is read once per time step.

    cocotbext-axi's AxiStreamSink reads ``tdata``, ``tkeep`` and ``tuser`` once per byte lane of
    every beat: 192 reads of up to 512 bits per beat at W = 512, most of the bench's run time.
    The sink gets these stand-ins for its three data signals (it only reads them, at the clock
    edge), which return the same value for every read in one time step.
    """

    def __init__(self, handle):
        self.handle = handle
        self.time = None
        self.sample = 0

    def __len__(self):
        return len(self.handle)

    @property
    def value(self):
        from cocotb.utils import get_sim_time

        now = get_sim_time()
        if now != self.time:
            self.time, self.sample = now, int(self.handle.value)
        return self.sample


def make_streams(dut, rng=None, idle=0.0, backpressure=0.0):
    """The record source, payload source, frame sink and configuration driver, created before
    reset (so the cocotbext-axi drivers follow it)."""
    from cocotbext.axi import AxiStreamBus, AxiStreamSink, AxiStreamSource

    from verif.bench import ConfigDriver, RecordSource, random_pause

    records = RecordSource(dut, "s_hdr", pause=random_pause(rng, idle) if idle else None)
    payload = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst)
    out_bus = AxiStreamBus.from_prefix(dut, "m_axis")
    for name in ("tdata", "tkeep", "tuser"):
        setattr(out_bus, name, SampledOnce(getattr(out_bus, name)))
    sink = AxiStreamSink(out_bus, dut.clk, dut.rst)
    for stream in (payload, sink):
        stream.log.setLevel(logging.WARNING)     # not one line per frame
    if idle:
        payload.set_pause_generator(random_pause(rng, idle))
    if backpressure:
        sink.set_pause_generator(random_pause(rng, backpressure))
    return records, payload, sink, ConfigDriver(dut)


def send(records, payload, rec, packet):
    from cocotbext.axi import AxiStreamFrame

    records.send(TX_HEADER.pack(rec))
    if packet is not None:
        data, keep, user = packet
        payload.send_nowait(AxiStreamFrame(data, tkeep=keep, tuser=user))


def check_beats(got, expected, width, what):
    """Compare a frame received with ``recv(compact=False)`` with the model's beats."""
    lanes = width // 8
    beats = frame_beats(expected, width)
    assert len(got.tdata) == len(beats) * lanes, \
        f"{what}: {len(got.tdata) // lanes} beats, model {len(beats)}"
    user = got.tuser if isinstance(got.tuser, list) else [got.tuser] * len(got.tdata)
    for index, (data, keep, _last, tuser) in enumerate(beats):
        start = index * lanes
        got_keep = sum(k << i for i, k in enumerate(got.tkeep[start:start + lanes]))
        got_data = bytes(got.tdata[start:start + len(data)])
        assert (got_keep, got_data, user[start]) == (keep, data, tuser), \
            f"{what}, beat {index}: keep {got_keep:#x} user {user[start]} data {got_data.hex()}" \
            f"; model keep {keep:#x} user {tuser} data {data.hex()}"


@cocotb.test()
async def frames_match_model(dut):
    from verif.bench import frames, make_rng, params, start, write_result
    from verif.scapy_check import check_frame

    p = params()
    width, max_payload = p["data_width"], p["max_payload"]
    lanes = width // 8
    rng = make_rng(dut)
    idle, backpressure = rng.uniform(0.05, 0.3), rng.uniform(0.05, 0.3)
    records, payload, sink, cfg = make_streams(dut, rng, idle, backpressure)
    await start(dut)
    model = HeaderInserterModel(width, max_payload)

    expected = []        # (model frame, conformance bytes or None)
    for rec, packet, frame in vector_traffic():
        out = model.push(rec, Packet(packet[0]) if packet else None)
        expected.append((out, frame))
        send(records, payload, rec, packet)
    wanted = len(expected) + frames(FRAMES)
    while len(expected) < wanted:          # random frames, besides the dropped records
        rec, packet = random_record(rng, lanes, max_payload)
        pkt = None
        if packet is not None:
            data, keep, user = packet
            pkt = Packet(packet_bytes(data, keep or [1] * len(data), width), bool(user))
        out = model.push(rec, pkt)
        if out is not None:
            expected.append((out, None))
        send(records, payload, rec, packet)
    dut._log.info("idle %.2f, backpressure %.2f: %d frames expected, model counters %s",
                  idle, backpressure, len(expected), model.counters)

    for index, (frame, conformance) in enumerate(expected):
        got = await with_timeout(sink.recv(compact=False), 2_000_000, "ns")
        what = f"frame {index} ({len(frame.data)} B, bad {frame.bad})"
        check_beats(got, frame, width, what)
        if conformance is not None:
            assert frame.data == conformance, f"{what}: model differs from packets.json"
        if not frame.bad:
            check_frame(frame.data)
    # The last records may be dropped ones whose packets are still being discarded.
    await with_timeout(payload.wait(), 1_000_000, "ns")
    await ClockCycles(dut.clk, 20)
    assert sink.empty(), f"{sink.count()} frames more than the model's"
    assert records.empty(), f"{len(records.queue)} records not taken"

    for name, addr in {**COUNTERS, **INFO}.items():
        value = await cfg.read(addr)
        want = {**model.counters, **model.info()}[name] & MASK32
        assert value == want, f"counter {name} at {addr:#x}: {value}, model {want}"
    await cfg.write(COUNTERS["frames_out"], 0)
    assert await cfg.read(COUNTERS["frames_out"]) == 0, "frames_out not cleared by a write"
    dut._log.info("%d frames equal to the model, counters %s", len(expected), model.counters)
    write_result(dut, "header_inserter", len(expected))


@cocotb.test()
async def perf(dut):
    """Back-to-back WRITE_ONLY frames, no idle, no backpressure: cycles per frame, throughput and
    latency (record accepted -> first output beat) for each payload size of PERF_SIZES."""
    from verif.bench import PERF_SIZES, make_rng, params, start, write_perf

    width = params()["data_width"]
    lanes = width // 8
    rng = make_rng(dut)
    records, payload, sink, _ = make_streams(dut)
    await start(dut)
    cycle = 0
    accepted, first_beats = [], []

    async def monitor():
        nonlocal cycle
        in_frame = False
        while True:
            await RisingEdge(dut.clk)
            cycle += 1
            if int(dut.s_hdr_tvalid.value) and int(dut.s_hdr_tready.value):
                accepted.append(cycle)
            if int(dut.m_axis_tvalid.value) and int(dut.m_axis_tready.value):
                if not in_frame:
                    first_beats.append(cycle)
                in_frame = not int(dut.m_axis_tlast.value)

    cocotb.start_soon(monitor())
    rows = []
    for size in PERF_SIZES:
        accepted.clear()
        first_beats.clear()
        for _ in range(PERF_FRAMES):
            rec = {name: rng.getrandbits(w) for name, w in TX_HEADER.fields}
            rec.update(opcode=Opcode.WRITE_ONLY, length=size)
            send(records, payload, rec, (bytes(rng.getrandbits(8) for _ in range(size)), None, 0)
                 if size else None)
        for _ in range(PERF_FRAMES):
            await with_timeout(sink.recv(), 1_000_000, "ns")
        beats = math.ceil(frame_length(Opcode.WRITE_ONLY, size) / lanes)
        steady = (first_beats[-1] - first_beats[1]) / (PERF_FRAMES - 2)
        assert steady == beats, f"payload {size}: {steady} cycles per frame, line rate is {beats}"
        rows.append(dict(
            payload=size, frames=PERF_FRAMES, cycles_per_frame=steady,
            bytes_per_cycle=round(size / steady, 3),
            efficiency=round(size / steady / lanes, 4),
            frame_efficiency=round(frame_length(Opcode.WRITE_ONLY, size) / steady / lanes, 4),
            latency=first_beats[0] - accepted[0]))
        await ClockCycles(dut.clk, 10)
    assert sink.empty() and payload.idle() and records.empty()
    write_perf(dut, "header_inserter", width, rows)


# --- pytest side -----------------------------------------------------------------------------

def run(sim, width, testcase="frames_match_model", tag="frames"):
    from rtl.header_inserter import HeaderInserter
    from verif.runner import run_bench

    # The benches are bound by Python, not by the model: Verilator's C++ unoptimised builds in
    # about half the time (W = 512: 27 s of CPU instead of 49 s).
    run_bench(HeaderInserter(width, max_payload=PMTU), name=f"header_inserter-{tag}-w{width}",
              toplevel="header_inserter", test_module="tb.test_header_inserter", sim=sim,
              params={"data_width": width, "max_payload": PMTU}, frames=FRAMES,
              testcase=testcase)


@pytest.mark.sim
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_header_inserter(sim, width):
    run(sim, width)


@pytest.mark.sim
def test_header_inserter_perf():
    run("verilator", 64, testcase="perf", tag="perf")


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("width", (128, 256, 512))
def test_header_inserter_perf_full(width):
    run("verilator", width, testcase="perf", tag="perf")


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("width", FULL_WIDTHS)
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_header_inserter_full(sim, width):
    run(sim, width)
