# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb benches of rtl.rx_front.RxFront against models.rx_front.RxFrontModel.

One coroutine drives the bench every cycle (:class:`FrontBench`): it puts frames on the plane
ports (never backpressured: the ports have no ``tready``; random idle where the scenario allows)
and takes the four outputs with random backpressure (``m_meta``, ``m_fb``, ``m_ctrl`` records,
``m_axis`` payloads). It samples the ``decision_trace`` output every cycle and replays it on the
golden model: each frame end with its plane outcome and the free body words its room was judged
on (:meth:`RxFrontModel.arrive` checks the room rule and the tuser flag against them), then the
merge's grants (:meth:`RxFrontModel.merge`), which give the records and the payloads the front
must emit. At the end every record, field for field, and every payload, byte for byte and beat
by beat (byte 0 in lane 0, full words but the last), equals the model's, in order; nothing more
came out; every counter (parser reasons, per-plane counters) and status word equals the model's.
The seed is printed.

Scenarios (cocotb tests; one build runs them all):

- ``rx_front_random``: the traffic of ``models/rx_traffic.py`` on every plane: good frames (the six
  Writes on several QPs, trimmed Writes from the switch model's trim, SACKs, NACKs, probes; CE
  marks, retransmissions) mixed with at least 2000 malformed ones (truncated at every header
  boundary, each length field wrong, EtherType, Next Header, inner destination, UDP port, TVer,
  P_Key, unknown opcode, PadCnt, extra bytes, trimmed too short, unknown or disabled QP, bad
  ICRC, corrupted payload and header, flagged bad, wrong R_Key, VA out of bounds); random idle
  on the planes, random backpressure on every output. Every malformed kind must reach its
  counter.
- ``rx_front_full``: every plane at full rate with large Writes and control frames while the
  outputs are nearly stopped: the body rings fill (NO_BUFFER: data frames NACKed NO_PKT_BUFFER,
  control frames dropped), then the header slots (NO_ROOM); then the outputs run again and
  everything kept drains, equal to the model.
- ``rx_front_slots``: valid traffic only, outputs always ready: plane 0 sends Writes of about
  4 KB back to back while every other plane sends the smallest Writes back to back, each frame
  of a size the core carries at the planes' rate (N x its core words <= its beats), so the merge
  keeps up and every small frame waits for one large frame. With the default header slots
  (``models.rx_front.header_slots_needed``) no frame finds them all in use (no NO_ROOM, no
  NO_BUFFER); the pytest run also builds the front with 8 slots, where the same traffic must
  lose small frames for want of a slot (the bench can fail).
- ``perf`` (``make bench``): per payload size of ``PERF_SIZES``: the latency of one Write on an
  idle front (first beat in to first payload beat out; last beat in to its ``m_meta`` record);
  Writes back to back on every plane at full rate with the outputs always ready (payload bytes
  per cycle on ``m_axis``, which must keep up with what the planes bring); then Writes held in
  the plane buffers while the outputs stop, and drained: the merge must move one core word per
  cycle with no bubble between frames (grants exactly a frame's words apart), which gives the
  core's payload bytes per cycle against its width.
"""

import inspect
import os
from collections import Counter, deque

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from models.layouts import Opcode
from models.packets import frame_length
from models.records import CONTROL_RECORD, FEEDBACK_RECORD, RX_META
from models.rx_front import (BAD, NO_BUFFER, NO_ROOM, PARSER_COUNTERS, PLANE_COUNTERS, RxFrontModel,
                             header_slots_needed, header_words)
from rtl.plane_merge import plane_bits
from rtl.rx_front import (ADDR_COUNTERS, ADDR_INFO, ADDR_INNER_DST, ADDR_QP_ENABLE, INFO,
                          RxFront, plane_reg, region_reg)
from verif.runner import run_bench
from models.rx_traffic import MALFORMED_KINDS, Labelled, RxTraffic

MASK32 = 0xFFFF_FFFF
# The bench's front: the default body ring (a plane at full rate with back-to-back 4096-byte
# Writes needs two of them and the store-and-forward delay), half the header slots.
FRONT = dict(n_qps=4, n_regions=4, buffer_bytes=16384, header_slots=8, pmtu=4096)
PMTU = 1024                 # payloads of the random traffic
MALFORMED = 2000            # malformed frames a run of rx_front_random
GOOD = 600                  # good frames a run of rx_front_random
FULL_FRAMES = 40            # frames per plane in rx_front_full
SLOT_FRAMES = 6             # large frames in rx_front_slots
PERF_FRAMES = 12            # frames per plane and payload size in perf
BUILD_NAME = os.environ.get("MRC_BENCH", "rx_front")


def decode_trace(value, n_planes, free_bits):
    """The fields of an integer ``decision_trace`` value (``rtl.plane_merge.trace_layout``)."""
    out, offset = {}, 0
    for name, width in (("arrive", n_planes), ("outcome", 2 * n_planes),
                        ("free", free_bits * n_planes), ("grant", 1),
                        ("grant_plane", plane_bits(n_planes))):
        out[name] = value >> offset & ((1 << width) - 1)
        offset += width
    return out


class FrontBench:
    """The plane drivers, the output sinks, the trace monitor and the model of one front under
    test. One coroutine runs every cycle: at each rising edge it samples the outputs and the
    trace (the values the edge saw), then drives the plane ports and the sinks' ``tready`` for
    the next cycle (cocotbext-axi's sources and sinks cost several coroutines and a loop per
    byte lane each cycle; here the whole bench is one)."""

    SINKS = ("m_meta", "m_fb", "m_ctrl", "m_axis")

    def __init__(self, dut, rng, params, idle=0.0, backpressure=0.0):
        from verif.bench import ConfigDriver

        self.dut = dut
        self.rng = rng
        self.front = front = front_params(params)
        self.n_planes = front["n_planes"]
        self.width = front["data_width"]
        self.model = RxFrontModel(n_planes=self.n_planes, data_width=self.width,
                                  n_qps=front["n_qps"], n_regions=front["n_regions"],
                                  header_slots=front["header_slots"])
        self.core = self.model.config.core_width
        self.free_bits = 0
        self.cfg = ConfigDriver(dut)
        self.idle = idle
        self.backpressure = backpressure
        self.pause = dict.fromkeys(self.SINKS, False)   # True: the sink stops
        # per plane: the handles a beat (data, keep, last, user) drives, and tvalid
        self.planes = [tuple(getattr(dut, f"s{p}_axis_{name}")
                             for name in ("tdata", "tkeep", "tlast", "tuser"))
                       for p in range(self.n_planes)]
        self.valids = [getattr(dut, f"s{p}_axis_tvalid") for p in range(self.n_planes)]
        for handle in self.valids + [h for handles in self.planes for h in handles]:
            handle.value = 0
        self.sinks = {name: (getattr(dut, f"{name}_tdata"), getattr(dut, f"{name}_tvalid"),
                             getattr(dut, f"{name}_tready")) for name in self.SINKS}
        for _, _, tready in self.sinks.values():
            tready.value = 0
        self.ready = dict.fromkeys(self.SINKS, 0)        # what the bench drives on tready
        self.queued = [deque() for _ in range(self.n_planes)]      # beats still to drive
        self.sent = [deque() for _ in range(self.n_planes)]        # (frame, tuser) not ended
        self.kinds = [deque() for _ in range(self.n_planes)]       # of the frames sent
        self.pending_kinds = [deque() for _ in range(self.n_planes)]   # of the frames stored
        self.outcomes = Counter()
        self.reasons = Counter()            # (kind, counter reached) of every frame
        self.cycle = 0
        self.got = {name: [] for name in self.SINKS}
        self.beat = []                      # the payload being received: (data, keep) beats
        self.log = None                     # per-cycle log for perf (see log_cycles)

    async def start(self, traffic):
        from cocotb.clock import Clock

        from verif.bench import CLK_PERIOD_NS

        dut = self.dut
        # The clock in the simulator (GPI), not a Python task: half the bench's cost otherwise.
        Clock(dut.clk, CLK_PERIOD_NS, unit="ns", impl="gpi").start()
        dut.rst.value = 1
        await ClockCycles(dut.clk, 4)
        dut.rst.value = 0
        await RisingEdge(dut.clk)
        self.free_bits = int(await self.cfg.read(ADDR_INFO["body_words"])).bit_length()
        for name, want in {"n_planes": self.n_planes, "data_width": self.width,
                           "core_width": self.core,
                           "slot_words": header_words(self.core)}.items():
            got = await self.cfg.read(ADDR_INFO[name])
            assert got == want, f"info {name}: {got}, expected {want}"
        await self.configure(traffic)
        cocotb.start_soon(self._run())

    async def configure(self, traffic):
        """The traffic's receiver configuration, into the front and the model."""
        mask = traffic.qp_mask
        await self.cfg.write(ADDR_QP_ENABLE, mask & MASK32)
        await self.cfg.write(ADDR_QP_ENABLE + 1, mask >> 32)
        for i in range(4):
            await self.cfg.write(ADDR_INNER_DST + i, traffic.inner_dst >> (32 * i))
        for r, (rkey, base, length) in enumerate(traffic.regions):
            for name, value in (("rkey", rkey), ("base_lo", base), ("base_hi", base >> 32),
                                ("length_lo", length), ("length_hi", length >> 32),
                                ("valid", 1)):
                await self.cfg.write(region_reg(r, name), value & MASK32)
        traffic.configure(self.model)

    def send(self, plane, case):
        """Queue one :class:`models.rx_traffic.Labelled` frame on ``plane``."""
        lanes = self.width // 8
        frame = case.frame
        count = -(-len(frame) // lanes)
        for i in range(count):
            chunk = frame[i * lanes:(i + 1) * lanes]
            last = i == count - 1
            self.queued[plane].append((int.from_bytes(chunk, "little"), (1 << len(chunk)) - 1,
                                       int(last), case.tuser if last else 0))
        self.sent[plane].append((frame, case.tuser))
        self.kinds[plane].append(case.kind)

    def idle_planes(self):
        return not any(self.queued)

    async def wait_sent(self):
        """Until every frame queued has been driven."""
        while not self.idle_planes():
            await ClockCycles(self.dut.clk, 20)
        await ClockCycles(self.dut.clk, 2)

    def log_cycles(self):
        """Start logging cycle numbers: first and last beats in per plane, payload beats out,
        m_meta records out, and merge grants (with the words of the frame granted)."""
        self.log = {"first": [[] for _ in range(self.n_planes)],
                    "last": [[] for _ in range(self.n_planes)], "beats": [], "metas": [],
                    "grants": []}

    async def _run(self):
        dut, rng = self.dut, self.rng
        trace = dut.decision_trace
        n_planes, fb = self.n_planes, self.free_bits
        driving = [None] * n_planes         # the beat on the port this cycle
        driven = [[0, 0, 0, 0] for _ in range(n_planes)]     # values on the beat handles
        starting = [True] * n_planes        # the next beat starts a frame
        # the trace bits that report something: frame ends and grants
        events = (1 << n_planes) - 1 | 1 << (n_planes * (3 + fb))
        keep_out = dut.m_axis_tkeep
        last_out = dut.m_axis_tlast
        while True:
            await RisingEdge(dut.clk)
            self.cycle += 1
            # --- what the edge saw ---------------------------------------------------------
            for name, (tdata, tvalid, _) in self.sinks.items():
                if self.ready[name] and int(tvalid.value):
                    if name == "m_axis":
                        self.beat.append((int(tdata.value), int(keep_out.value)))
                        if self.log is not None:
                            self.log["beats"].append(self.cycle)
                        if int(last_out.value):
                            self.got[name].append(self.beat)
                            self.beat = []
                    else:
                        self.got[name].append(int(tdata.value))
                        if name == "m_meta" and self.log is not None:
                            self.log["metas"].append(self.cycle)
            if self.log is not None:
                for p, beat in enumerate(driving):
                    if beat is not None:
                        if starting[p]:
                            self.log["first"][p].append(self.cycle)
                        if beat[2]:
                            self.log["last"][p].append(self.cycle)
            for p, beat in enumerate(driving):
                if beat is not None:
                    starting[p] = bool(beat[2])
            value = int(trace.value)
            if value & events:
                self._replay(decode_trace(value, n_planes, fb))
            # --- the next cycle ---------------------------------------------------------------
            for p, handles in enumerate(self.planes):
                queue = self.queued[p]
                beat = None
                if queue and not (self.idle and rng.random() < self.idle):
                    beat = queue.popleft()
                    shadow = driven[p]
                    for i in range(4):          # write only what changes (writes are costly)
                        if beat[i] != shadow[i]:
                            handles[i].value = beat[i]
                            shadow[i] = beat[i]
                if (beat is None) != (driving[p] is None):
                    self.valids[p].value = int(beat is not None)
                driving[p] = beat
            for name, (_, _, tready) in self.sinks.items():
                ready = int(not self.pause[name] and
                            not (self.backpressure and rng.random() < self.backpressure))
                if ready != self.ready[name]:
                    tready.value = ready
                    self.ready[name] = ready

    def _replay(self, t):
        model = self.model
        for p in range(self.n_planes):
            if t["arrive"] >> p & 1:
                frame, tuser = self.sent[p].popleft()
                outcome = t["outcome"] >> (2 * p) & 3
                free = t["free"] >> (self.free_bits * p) & ((1 << self.free_bits) - 1)
                model.arrive(p, frame, bad=bool(tuser), outcome=outcome, free=free)
                self.outcomes[outcome] += 1
                kind = self.kinds[p].popleft()
                if outcome in (NO_ROOM, BAD):
                    self.reasons[(kind, "plane")] += 1
                else:
                    self.pending_kinds[p].append(kind)
        if t["grant"]:
            plane = t["grant_plane"]
            if self.log is not None:
                frame, no_buffer = model.stored[plane][0]
                words = -(-len(frame) // (self.core // 8))
                self.log["grants"].append(
                    (self.cycle, min(words, header_words(self.core)) if no_buffer else words))
            result = model.merge(plane)
            kind = self.pending_kinds[plane].popleft()
            denied = result.meta is not None and result.meta["opcode"] != Opcode.PROBE \
                and not result.meta["access_ok"]
            self.reasons[(kind, "access_denied" if denied else result.reason)] += 1

    def done(self):
        """Every frame judged and every output out, or more outputs than the model's (then
        :meth:`compare` says which)."""
        model, got = self.model, self.got
        counts = [(len(got["m_meta"]), len(model.metas)), (len(got["m_fb"]), len(model.feedbacks)),
                  (len(got["m_ctrl"]), len(model.controls)),
                  (len(got["m_axis"]), len(model.payloads))]
        return any(have > want for have, want in counts) or (
            not any(self.sent) and model.empty() and all(have == want for have, want in counts))

    async def drain(self, max_cycles=400_000):
        """Until every frame sent has been judged and every output the model expects is out;
        then :meth:`compare`."""
        await self.wait_sent()
        waited = 0
        model, got = self.model, self.got
        while not self.done():
            assert waited < max_cycles, (
                f"not drained after {max_cycles} cycles: frames not ended "
                f"{[len(s) for s in self.sent]}, in the plane buffers "
                f"{[len(s) for s in model.stored]}; meta {len(got['m_meta'])} of "
                f"{len(model.metas)}, payloads {len(got['m_axis'])} of {len(model.payloads)}, "
                f"feedback {len(got['m_fb'])} of {len(model.feedbacks)}, control "
                f"{len(got['m_ctrl'])} of {len(model.controls)}")
            await ClockCycles(self.dut.clk, 50)
            waited += 50
        await ClockCycles(self.dut.clk, 50)
        self.compare()

    def compare(self):
        """Every output equals the model's, in order, and nothing more came out."""
        model, got = self.model, self.got
        for name, want, record in (("m_meta", model.metas, RX_META),
                                   ("m_fb", model.feedbacks, FEEDBACK_RECORD),
                                   ("m_ctrl", model.controls, CONTROL_RECORD)):
            for i, (word, fields) in enumerate(zip(got[name], want)):
                rec = record.unpack(word)
                if rec != fields:
                    diff = {k: (rec[k], fields[k]) for k in fields if rec[k] != fields[k]}
                    raise AssertionError(f"{name} record {i}: fields (got, model) {diff}")
            assert len(got[name]) == len(want), \
                f"{name}: {len(got[name])} records, the model's {len(want)}"
        assert len(got["m_axis"]) == len(model.payloads), \
            f"m_axis: {len(got['m_axis'])} payloads, the model's {len(model.payloads)}"
        lanes = self.core // 8
        full = (1 << lanes) - 1
        for i, (beats, want) in enumerate(zip(got["m_axis"], model.payloads)):
            assert len(beats) == -(-len(want) // lanes), \
                f"payload {i}: {len(beats)} beats of {lanes} lanes for {len(want)} B"
            tail = len(want) - (len(beats) - 1) * lanes
            keeps = [keep for _, keep in beats]
            assert keeps == [full] * (len(beats) - 1) + [(1 << tail) - 1], \
                f"payload {i}: tkeep {[hex(k) for k in keeps]} for {len(want)} B"
            data = b"".join(word.to_bytes(lanes, "little") for word, _ in beats)[:len(want)]
            if data != want:
                diff = [k for k, (a, b) in enumerate(zip(data, want)) if a != b]
                raise AssertionError(f"payload {i} ({len(want)} B): bytes {diff[:12]} differ")

    async def check_counters(self):
        model = self.model
        for name in PARSER_COUNTERS:
            got = await self.cfg.read(ADDR_COUNTERS[name])
            assert got == model.counters[name] & MASK32, \
                f"counter {name}: {got}, the model's {model.counters[name]}"
        for p in range(self.n_planes):
            for name in PLANE_COUNTERS:
                got = await self.cfg.read(plane_reg(p, name))
                want = model.plane_counters[p][name]
                assert got == want, f"plane {p} {name}: {got}, the model's {want}"
            body = await self.cfg.read(ADDR_INFO["body_words"])
            assert await self.cfg.read(plane_reg(p, "body_free")) == body
            assert await self.cfg.read(plane_reg(p, "slots_used")) == 0
        await self.cfg.write(ADDR_COUNTERS["data"], 0)
        assert await self.cfg.read(ADDR_COUNTERS["data"]) == 0, "counter not cleared by a write"

    def finish(self, name, frames):
        from verif.bench import write_result

        os.environ["MRC_BENCH"] = f"{BUILD_NAME}-{name}"
        write_result(self.dut, "rx_front", frames,
                     outcomes={k: self.outcomes[i] for i, k in
                               enumerate(("stored", "no_buffer", "no_room", "bad"))})
        os.environ["MRC_BENCH"] = BUILD_NAME


def front_params(params):
    """The parameters the front was built with: ``params["front"]`` (the pytest runs), or, under
    ``make bench``, the parameters given (``data_width``, ``n_planes``) and RxFront's defaults."""
    if "front" in params:
        return params["front"]
    defaults = {name: p.default for name, p in inspect.signature(RxFront).parameters.items()}
    return {**defaults, **{k: v for k, v in params.items() if k in defaults}}


async def new_bench(dut, idle=0.0, backpressure=0.0, pmtu=PMTU):
    from verif.bench import make_rng, params

    rng = make_rng(dut)
    bench = FrontBench(dut, rng, params(), idle=idle, backpressure=backpressure)
    traffic = RxTraffic(rng, n_qps=bench.front["n_qps"], n_regions=bench.front["n_regions"],
                        pmtu=pmtu)
    await bench.start(traffic)
    return bench, traffic


# --- Scenarios -----------------------------------------------------------------------------------

@cocotb.test()
async def rx_front_random(dut):
    from verif.bench import frames, params

    bench, traffic = await new_bench(dut, idle=0.2, backpressure=0.2)
    rng = bench.rng
    n_malformed = params().get("malformed", MALFORMED)
    cases = [traffic.good() for _ in range(frames(GOOD))]
    cases += [traffic.malformed(kind) for kind in MALFORMED_KINDS]     # each kind once at least
    cases += [traffic.malformed() for _ in range(n_malformed - len(MALFORMED_KINDS))]
    rng.shuffle(cases)
    for case in cases:
        bench.send(rng.randrange(bench.n_planes), case)
    await bench.drain()
    await bench.check_counters()
    for kind, reason in MALFORMED_KINDS.items():
        seen = {r for (k, r) in bench.reasons if k == kind}
        want = {"cut": {"short", "length"}, "tuser": {"plane"}}.get(kind, {reason})
        assert seen and seen <= want, f"malformed {kind}: reached {seen}, expected {want}"
    dut._log.info("%d frames (%d malformed) in %d cycles, outcomes %s, counters %s", len(cases),
                  n_malformed, bench.cycle, dict(bench.outcomes),
                  {k: v for k, v in bench.model.counters.items() if v})
    assert bench.outcomes[NO_BUFFER] + bench.outcomes[NO_ROOM] == 0, \
        "frames found the buffers full at this load"
    bench.finish("random", len(cases))


@cocotb.test()
async def rx_front_full(dut):
    """Outputs stopped while every plane sends: NO_BUFFER, then NO_ROOM; then drain."""
    from verif.bench import frames

    bench, traffic = await new_bench(dut, backpressure=0.2, pmtu=4096)
    rng = bench.rng
    count = frames(FULL_FRAMES)
    for name in bench.pause:
        bench.pause[name] = True
    controls = {"sack": Opcode.SACK, "nack": Opcode.NACK, "probe": Opcode.PROBE}
    big = bench.front["buffer_bytes"] // 4096 + 2      # more than a body ring holds
    for i in range(count):
        for plane in range(bench.n_planes):
            if i < big:
                kind, frame = "data", traffic.data(payload=4096)
            elif rng.random() < 0.25:
                kind = rng.choice(tuple(controls))
                frame = traffic.control(controls[kind])
            else:
                kind = "data"
                frame = traffic.data(payload=rng.choice((4096, 2048, 1500, 700, 100, 20)))
            bench.send(plane, Labelled(frame, 0, kind, kind))
    await bench.wait_sent()
    await ClockCycles(dut.clk, 100)
    for name in bench.pause:
        bench.pause[name] = False
    await bench.drain()
    await bench.check_counters()
    counters = bench.model.counters
    planes = bench.model.plane_counters
    dut._log.info("outcomes %s; no_buffer_data %d, no_buffer_control %d, per plane %s",
                  dict(bench.outcomes), counters["no_buffer_data"],
                  counters["no_buffer_control"], planes)
    assert counters["no_buffer_data"] > 0
    assert sum(p["dropped_no_room"] for p in planes) > 0
    control_dropped = counters["no_buffer_control"] + sum(
        bench.reasons[(kind, "plane")] for kind in controls)
    assert control_dropped > 0, "no control frame found the buffer full"
    assert counters["data"] > 0
    bench.finish("full", bench.n_planes * count)


def carried(n_planes, width, core, size):
    """Whether a Write of ``size`` payload bytes needs at most its share of the core: N times
    its core words no more than its beats on a plane (the condition under which
    :func:`models.rx_front.header_slots_needed` bounds the slots)."""
    frame = frame_length(Opcode.WRITE_ONLY, size)
    return n_planes * -(-frame // (core // 8)) <= -(-frame // (width // 8))


@cocotb.test()
async def rx_front_slots(dut):
    """Small frames beside the largest ones, every output ready: no frame without a slot with
    the default header slots; with fewer (``expect_no_room``), some (module docstring)."""
    from verif.bench import frames, params

    bench, traffic = await new_bench(dut, pmtu=4096)
    rng = bench.rng
    n, width, core = bench.n_planes, bench.width, bench.core
    expect_no_room = params().get("expect_no_room", False)
    large = [s for s in range(3900, 4097) if carried(n, width, core, s)]
    small = [s for s in range(0, 65) if carried(n, width, core, s)]
    assert large and small, "no frame size the core carries at the planes' rate"
    lanes = width // 8
    count = frames(SLOT_FRAMES)
    sent_small = 0
    for _ in range(count):
        size = rng.choice(large)
        bench.send(0, Labelled(traffic.data(payload=size, opcode=Opcode.WRITE_ONLY), 0,
                               "data", "data"))
        beats = -(-frame_length(Opcode.WRITE_ONLY, size) // lanes)
        for plane in range(1, n):
            used = 0
            while used < beats:         # as many small frames as the large one lasts
                s = rng.choice(small)
                bench.send(plane, Labelled(traffic.data(payload=s, opcode=Opcode.WRITE_ONLY),
                                           0, "data", "data"))
                used += -(-frame_length(Opcode.WRITE_ONLY, s) // lanes)
                sent_small += 1
    await bench.drain()
    await bench.check_counters()
    no_room = sum(p["dropped_no_room"] for p in bench.model.plane_counters)
    dut._log.info("%d large and %d small frames, %d header slots: outcomes %s, no_room %d",
                  count, sent_small, bench.front["header_slots"], dict(bench.outcomes), no_room)
    assert bench.outcomes[NO_BUFFER] == 0, "valid frames found the body ring full"
    if expect_no_room:
        assert bench.outcomes[NO_ROOM] > 0 and no_room > 0, \
            f"{bench.front['header_slots']} header slots were enough: the scenario tests nothing"
    else:
        assert bench.outcomes[NO_ROOM] == 0 and no_room == 0, \
            f"{no_room} valid frames found no header slot of {bench.front['header_slots']}"
    bench.finish("slots" + ("-few" if expect_no_room else ""), count + sent_small)


@cocotb.test()
async def perf(dut):
    """Throughput, drain rate and latency per payload size (module docstring)."""
    from verif.bench import PERF_SIZES, params, write_perf

    n_frames = params().get("perf_frames", PERF_FRAMES)
    bench, traffic = await new_bench(dut, pmtu=4096)
    core_bytes = bench.core // 8
    lanes = bench.width // 8
    bench.log_cycles()
    log = bench.log

    def write(size):
        return Labelled(traffic.data(payload=size, opcode=Opcode.WRITE_ONLY), 0, "data", "data")

    rows = []
    for size in PERF_SIZES:
        frame_bytes = frame_length(Opcode.WRITE_ONLY, size)
        # Latency: one frame on an idle front.
        beats0, metas0, first0 = len(log["beats"]), len(log["metas"]), len(log["first"][0])
        bench.send(0, write(size))
        await bench.drain()
        latency_last = log["metas"][metas0] - log["last"][0][first0]
        latency = log["beats"][beats0] - log["first"][0][first0] if size else None

        # Throughput: every plane at full rate, back to back, outputs always ready.
        beats0, payloads0 = len(log["beats"]), len(bench.model.payloads)
        grants0 = len(log["grants"])
        full0 = bench.outcomes[NO_BUFFER] + bench.outcomes[NO_ROOM]
        for _ in range(n_frames):
            for plane in range(bench.n_planes):
                bench.send(plane, write(size))
        await bench.drain()
        beats = log["beats"][beats0:]
        frame_beats = -(-frame_bytes // lanes)
        frame_words = -(-frame_bytes // core_bytes)
        in_rate = bench.n_planes * size / frame_beats
        # the core carries one word a cycle: N frames of b beats need N x ceil(b / (C/W)) cycles,
        # more than b when C = N x W and the frames do not fill their last word
        overloaded = bench.n_planes * frame_words > frame_beats
        no_buffer = bench.outcomes[NO_BUFFER] + bench.outcomes[NO_ROOM] - full0
        grants = log["grants"][grants0:]
        busy = sum(words for _, words in grants[:-1]) / (grants[-1][0] - grants[0][0])
        cycles_per_frame = (grants[-1][0] - grants[0][0]) / (len(grants) - 1)
        bytes_per_cycle = 0.0
        if size:
            out_bytes = sum(len(p) for p in bench.model.payloads[payloads0:])
            bytes_per_cycle = out_bytes / (beats[-1] - beats[0] + 1)
        if overloaded:
            # the merge never waits while frames do; what the core cannot carry finds no room
            assert busy >= 0.98, f"payload {size}: the merge moved {busy:.3f} words per cycle"
        else:
            assert not no_buffer, f"payload {size}: {no_buffer} frames without room"
            assert bytes_per_cycle >= 0.9 * in_rate, \
                f"payload {size}: {bytes_per_cycle:.2f} B/cycle out, {in_rate:.2f} in"

        # The core's rate: frames held in the plane buffers while the outputs stop, then
        # drained: the merge must move one word per cycle, no bubble between frames.
        held = max(1, min(n_frames, bench.front["header_slots"] - 1,
                          bench.front["buffer_bytes"] // frame_bytes - 1))
        full0 = bench.outcomes[NO_BUFFER] + bench.outcomes[NO_ROOM]
        for name in bench.pause:
            bench.pause[name] = True
        for _ in range(held):
            for plane in range(bench.n_planes):
                bench.send(plane, write(size))
        await bench.wait_sent()
        await ClockCycles(dut.clk, 20)
        release = bench.cycle
        for name in bench.pause:
            bench.pause[name] = False
        await bench.drain()
        grants = [(cycle, words) for cycle, words in log["grants"] if cycle > release]
        words = sum(w for _, w in grants[:-1])
        core_rate = words / (grants[-1][0] - grants[0][0]) if len(grants) > 1 else None
        if core_rate is not None:
            assert core_rate == 1.0, f"payload {size}: the merge moved {core_rate:.3f} words " \
                                     f"per cycle with frames waiting"
        rows.append(dict(
            payload=size, frames=n_frames * bench.n_planes, frame_bytes=frame_bytes,
            n_planes=bench.n_planes, core_width=bench.core,
            cycles_per_frame=round(cycles_per_frame, 3),
            bytes_per_cycle=round(bytes_per_cycle, 3),
            efficiency=round(bytes_per_cycle / core_bytes, 4),
            input_bytes_per_cycle=round(in_rate, 3),
            core_words_per_cycle=core_rate and round(core_rate, 4),
            core_payload_bytes_per_cycle=round(size / frame_words, 3),
            core_efficiency=round(size / frame_words / core_bytes, 4),
            core_words_per_cycle_at_full_rate=round(busy, 4),
            latency=latency, latency_last=latency_last, no_buffer_at_full_rate=no_buffer))
        assert bench.outcomes[NO_BUFFER] + bench.outcomes[NO_ROOM] == full0, \
            "frames held for the drain found no room"
    write_perf(dut, "rx_front", bench.width, rows)


# --- pytest --------------------------------------------------------------------------------------
# One build per simulator and configuration runs every scenario.

SCENARIOS = ["rx_front_random", "rx_front_full"]


def run(name, sim, n_planes, width, *, testcase, frames=None, front=None, **extra):
    front = dict(FRONT, n_planes=n_planes, data_width=width, **(front or {}))
    run_bench(RxFront(**front), name=f"{name}-n{n_planes}-w{width}", toplevel="rx_front",
              test_module="tb.test_rx_front", sim=sim, params={"front": front, **extra},
              frames=frames, testcase=testcase)


def cases(name, configs):
    return [pytest.param(sim, n, w, id=f"{sim}-n{n}-w{w}",
                         marks=pytest.mark.xdist_group(f"{name}-{sim}-{n}-{w}"))
            for sim, n, w in configs]


@pytest.mark.sim
@pytest.mark.parametrize("sim, n_planes, width",
                         cases("rx_front", [("icarus", 2, 64), ("verilator", 3, 64)]))
def test_rx_front(sim, n_planes, width):
    """Every scenario; on Verilator also a short ``perf`` (its assertions)."""
    perf = ["perf"] if sim == "verilator" else []
    run("rx_front", sim, n_planes, width, testcase=SCENARIOS + perf, perf_frames=4)


@pytest.mark.sim
@pytest.mark.parametrize("sim, n_planes, width, slots", [
    pytest.param("verilator", 2, 64, None, id="verilator-n2-w64-default"),
    pytest.param("icarus", 3, 64, None, id="icarus-n3-w64-default"),
    pytest.param("verilator", 2, 64, 8, id="verilator-n2-w64-8"),
    pytest.param("verilator", 8, 64, None, id="verilator-n8-w64-default",
                 marks=pytest.mark.full),
    pytest.param("icarus", 2, 512, None, id="icarus-n2-w512-default", marks=pytest.mark.full)])
def test_rx_front_slots(sim, n_planes, width, slots):
    """Valid traffic that would exhaust the header slots of a plane while the largest frames
    fill another: none lost with the default slots (header_slots_needed), some with 8."""
    if slots is None:
        slots = header_slots_needed(n_planes, width, FRONT["pmtu"])
    run(f"rx_front-slots{slots}", sim, n_planes, width, testcase="rx_front_slots",
        front=dict(header_slots=slots), expect_no_room=slots < header_slots_needed(
            n_planes, width, FRONT["pmtu"]))


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("sim, n_planes, width", cases("rx_front-full", [
    ("icarus", 4, 64), ("verilator", 4, 64), ("icarus", 2, 512), ("verilator", 2, 512),
    ("verilator", 1, 64), ("verilator", 8, 64)]))
def test_rx_front_full(sim, n_planes, width):
    run("rx_front-full", sim, n_planes, width, testcase=SCENARIOS + ["perf"], frames=3 * GOOD,
        malformed=3 * MALFORMED)


@pytest.mark.parametrize("kwargs, word", [
    (dict(n_planes=0), "n_planes"), (dict(n_planes=9), "n_planes"),
    (dict(data_width=32), "data_width"), (dict(n_planes=8, data_width=1024), "data_width"),
    (dict(n_qps=3), "n_qps"), (dict(n_regions=17), "n_regions"),
    (dict(buffer_bytes=4000), "buffer_bytes"), (dict(header_slots=3), "header_slots"),
    (dict(pmtu=8192), "pmtu")])
def test_rx_front_rejects_parameters(kwargs, word):
    with pytest.raises(ValueError, match=word):
        RxFront(**kwargs)


def test_rx_front_sizes():
    front = RxFront(n_planes=4, data_width=64)
    assert front.core_width == 256 and front.body_words == 512
    assert RxFront(n_planes=3, data_width=128, buffer_bytes=5000).body_words == 128
    assert len(INFO) == 8 and ADDR_COUNTERS["access_denied"] == 0x040 + len(PARSER_COUNTERS) - 1



def test_icrc_residue():
    """The plane buffers' ICRC check: the CRC register after a frame's covered bytes and its own
    ICRC holds a constant, whatever the frame, and only for a good ICRC."""
    import random

    from models.layouts import ICRC_MASKED_BITS, INNER_OFFSET
    from models.packets import ICRC_PREFIX, parse_frame
    from rtl.common.crc import CRC_INIT, crc32_bitwise
    from rtl.rx_plane_buffer import ICRC_RESIDUE

    assert ICRC_RESIDUE == 0xDEBB20E3
    traffic = RxTraffic(random.Random(5))
    for _ in range(20):
        frame = bytearray(traffic.any_good_frame())
        for bit, width in ICRC_MASKED_BITS:        # what the buffer's masks do
            for b in range(bit, bit + width):
                frame[b // 8] |= 0x80 >> (b % 8)
        covered = ICRC_PREFIX + bytes(frame[INNER_OFFSET:])
        trimmed = parse_frame(bytes(frame)).trimmed and frame[102] in range(0xC6, 0xCC)
        assert (crc32_bitwise(CRC_INIT, covered) == ICRC_RESIDUE) != trimmed
        covered = bytearray(covered)
        covered[-1] ^= 0x10
        assert crc32_bitwise(CRC_INIT, bytes(covered)) != ICRC_RESIDUE
