# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.rx_engine.RxEngine (receive front -> receive tracker -> placement) against
models.rx_engine.RxEngineModel.

One task per cycle (:class:`EngineBench`) drives the plane ports (no ``tready``: never
backpressured; random idle), the record sinks ``m_ctrl``, ``m_cpl`` and ``m_fb`` (random
backpressure), host memory (an AXI4 write slave over a sparse 64-bit memory with random pauses on
AW, W and B, which asserts INCR full-width bursts, never across 4 KB, and ``wlast`` on each
burst's last beat) and ``tick`` (random pulses), and samples the engine's two traces every cycle
and replays them on the model (docs/protocol.md 8): each frame end with its plane outcome and the free
body words its room was judged on, each merge grant (the front judges the frame), and each
verdict with the ticks the tracker applied before it (the model's verdict must be equal, field
for field). The placement block's own bench checks the same AXI traffic against cocotbext-axi's
``AxiRamWrite``.

``rx_engine_random`` runs three phases on one engine:

1. mixed: several QPs (tracker and front set up through the one configuration port; start PSNs
   anywhere, some just below the 24-bit wrap) with Write messages of 1 to 4 packets (with and
   without immediate) whose arrivals are reordered (late by up to 12 places), duplicated,
   trimmed first (the untrimmed copy later), CE-marked and retransmitted at random, a few PSNs
   beyond the window, probes (CE-marked and trimmed too), received SACKs and NACKs, and at least
   2000 malformed frames of every kind of ``models/rx_traffic.py`` (truncated at every header
   boundary, wrong lengths, unknown opcode or QP, wrong R_Key, VA out of bounds, bad ICRC,
   corrupted payload, flagged bad, ...), with random idle on the planes and random backpressure
   on every output and on the memory's AW, W and B channels;
2. buffer full: the outputs and the memory stop while every plane sends large Writes, so frames
   find the receive frame buffer full (NACK NO_PKT_BUFFER) or no header slot (dropped); then
   everything drains;
3. full rate right after: the frames of phase 2 again (on one plane), then new in-order messages
   on every plane back to back, no idle, no backpressure: every frame is stored and every data
   frame placed (verdict PLACED, or DUPLICATE for those already placed).

At the end (three ticks after the last event, so that every coalescing timer has fired) every
SACK, NACK and probe answer (the tracker's, in order, and the front's NACK NO_PKT_BUFFER, in
order), every completion and every feedback record equals the model's field for field; every
AXI burst and beat (strobes and strobed bytes) and every byte of memory equals the model's; no
strobed byte lies outside a registered region; no frame with a bad ICRC reached the tracker; every
malformed kind reached its counter; every counter of the three blocks equals the model's; no
record comes out after the end and every block is idle.

``perf`` (``make bench``): per payload size of ``PERF_SIZES``, WRITE_ONLY frames back to back on
every plane at full rate, outputs and memory always ready: payload bytes placed per cycle (W
handshakes) against the core width, and, on an idle engine, the latency from a frame's last beat
on its plane port to its SACK on ``m_ctrl`` (and to its first W beat); every output is then
compared with the model's as above.
"""

from collections import Counter, deque

import pytest

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

from models.layouts import (BTH_OFFSET, IMM_OPCODES, NETH, TRIM_MIN_BYTES, Dscp, NackReason,
                            Opcode)
from models.placement import COUNTERS as PLACEMENT_COUNTERS
from models.placement import INFO as PLACEMENT_INFO
from models.records import (COMPLETION, CONTROL_RECORD, FEEDBACK_RECORD, RX_VERDICT, RxVerdict,
                            int_to_ext)
from models.rx_engine import TRACKER_COUNTERS, RxEngineModel, is_front_control
from models.rx_front import (BAD, NO_BUFFER, NO_ROOM, PARSER_COUNTERS, PLANE_COUNTERS, STORED,
                             body_words_needed, header_words)
from models.rx_tracker import psn_add
from models.switch_queue import trim
from rtl import rx_engine as engine_map
from rtl.plane_merge import trace_layout
from rtl.rx_engine import RxEngine
from rtl.rx_front import ADDR_COUNTERS as FRONT_COUNTERS
from rtl.rx_front import ADDR_INFO as FRONT_INFO
from rtl.rx_front import ADDR_INNER_DST, ADDR_QP_ENABLE, plane_reg, region_reg
from rtl.rx_tracker import ADDR_COUNTERS as TRACKER_ADDR
from rtl.rx_tracker import ADDR_STATUS as TRACKER_STATUS
from rtl.rx_tracker import OFF_CACK, SETUP_ENABLE, qp_addr
from verif.runner import run_bench
from models.rx_traffic import MALFORMED_KINDS, Labelled, RxTraffic

MASK32 = 0xFFFF_FFFF
# The benches' engine: few header slots (phase 2 runs out of them); body rings of two of the
# largest frames, the least that takes a plane at full rate when the core is no wider than it
# (N = 1: the next frame arrives while the last one is read).
ENGINE = dict(n_qps=4, n_regions=4, buffer_bytes=16384, header_slots=8, pmtu=4096, mpr=256,
              wimm_max=16)
PMTU = 1024                 # payloads of the random traffic
MALFORMED = 600             # malformed frames of phase 1 (the hostile campaign sends more)
HOSTILE = 2000              # frames of rx_engine_hostile (make test-full: 10,000)
MESSAGES = 45               # messages per QP in phase 1
FULL_FRAMES = 12            # large frames per plane in phase 2
AFTER_MESSAGES = 6          # in-order messages per QP in phase 3
TICK_PROBABILITY = 1 / 150  # per cycle
PERF_FRAMES = 8             # frames per plane and payload size
DRAIN_LIMIT = 600_000       # cycles
BAD_ICRC_KINDS = ("icrc", "payload", "header_bit")
SINKS = ("m_ctrl", "m_cpl", "m_fb")
VERDICT_NAMES = {code: name.lower() for name, code in vars(RxVerdict).items() if name.isupper()}
DEFAULT_ENGINE = dict(n_planes=8, data_width=64, n_qps=4, n_regions=4, mpr=1024, wimm_max=16)


def decode(value, layout):
    """The fields of an integer value of a StructLayout."""
    return {name: value >> field.offset & ((1 << field.width) - 1)
            for name, field in layout}


class Flows:
    """Write messages in PSN order on each enabled QP, and their arrival order: late, duplicated,
    trimmed first, beyond the window, at random."""

    def __init__(self, traffic, rng, starts, mpr):
        self.traffic, self.rng, self.mpr = traffic, rng, mpr
        self.next = dict(starts)

    def message(self, q, payload=None, packets=None):
        """The frames of one message of QP ``q`` (``packets``, or 1 to 4 at random; with
        immediate or not)."""
        rng = self.rng
        n = packets or rng.choice((1, 1, 2, 3, 4))
        imm = rng.random() < 0.3
        if n == 1:
            opcodes = [Opcode.WRITE_ONLY_IMM if imm else Opcode.WRITE_ONLY]
        else:
            opcodes = [Opcode.WRITE_FIRST] + [Opcode.WRITE_MIDDLE] * (n - 2) + \
                [Opcode.WRITE_LAST_IMM if imm else Opcode.WRITE_LAST]
        frames = []
        for opcode in opcodes:
            length = payload if payload is not None else self.traffic.payload_length()
            frames.append(self.traffic.data(qpn=q, psn=self.next[q], opcode=opcode,
                                            payload=length))
            self.next[q] = psn_add(self.next[q], 1)
        return frames

    def arrivals(self, frames):
        """``frames`` (in PSN order) as they arrive, as Labelled cases."""
        rng = self.rng
        keyed = []
        for index, frame in enumerate(frames):
            key = index + (rng.randint(1, 12) if rng.random() < 0.12 else 0) + rng.random() / 2
            r = rng.random()
            if r < 0.05:
                size = rng.randrange(TRIM_MIN_BYTES, 301)
                keyed.append((key, Labelled(trim(frame, size, rng.choice(
                    (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP))), 0, "trimmed", "trimmed")))
                key += rng.randint(1, 20)
            elif r < 0.10:
                keyed.append((key + rng.randint(1, 30), Labelled(frame, 0, "data", "data")))
            if index == 0 or rng.random() < 0.02:     # its PSN first, wrong R_Key or VA
                qpn = int.from_bytes(frame[BTH_OFFSET + 5:BTH_OFFSET + 8], "big")
                psn = int.from_bytes(frame[BTH_OFFSET + 9:BTH_OFFSET + 12], "big")
                keyed.append((key - 0.1, Labelled(self.traffic.data(qpn=qpn, psn=psn,
                                                                    access=False),
                                                  0, "denied", "access_denied")))
            keyed.append((key, Labelled(frame, 0, "data", "data")))
        return [case for _, case in sorted(keyed, key=lambda kc: kc[0])]

    def beyond_window(self, q):
        """A data frame of QP ``q`` beyond its window (NACK PSN_OOR_WINDOW)."""
        psn = psn_add(self.next[q], self.mpr + self.rng.randrange(1, 2000))
        return Labelled(self.traffic.data(qpn=q, psn=psn), 0, "data", "data")


class EngineBench:
    """Everything around one engine under test, in one coroutine per cycle (a cocotb task per
    stream would cost most of the run time): the plane ports (random idle), the record sinks
    (random backpressure), host memory (an AXI4 write slave with random pauses on AW, W and B,
    checking every AXI rule it relies on), the tick, and the two traces replayed on the model.
    Inputs are driven just after the rising edge; handshakes and traces are sampled at the
    falling edge."""

    def __init__(self, dut, rng, engine):
        from verif.bench import ConfigDriver

        self.dut, self.rng = dut, rng
        self.n_planes, self.width = engine["n_planes"], engine["data_width"]
        self.model = RxEngineModel(n_planes=self.n_planes, data_width=self.width,
                                   n_qps=engine["n_qps"], n_regions=engine["n_regions"],
                                   header_slots=engine["header_slots"], mpr=engine["mpr"],
                                   wimm_max=engine["wimm_max"], profile=1)
        self.core = self.model.front.config.core_width
        self.cfg = ConfigDriver(dut)
        self.idle = 0.0                 # per plane and cycle
        self.backpressure = 0.0         # per sink, AXI channel and cycle
        self.stall = False              # sinks, AW and W stopped
        self.tick_probability = 0.0
        self.tick_requests = 0
        self.ticks_sent = 0
        self.cycle = 0
        # plane ports
        self.queues = [deque() for _ in range(self.n_planes)]      # beats to drive
        self.sent = [deque() for _ in range(self.n_planes)]        # frames not yet ended
        self.opcodes_sent = Counter()
        self.last_cycles = [[] for _ in range(self.n_planes)]      # cycles of tlast beats
        # sinks
        self.records = {name: [] for name in SINKS}
        self.ctrl_cycles = []
        # memory
        self.aw_open = deque()          # [addr, beats, beats received] of accepted bursts
        self.b_owed = 0
        self.bursts, self.beats, self.w_cycles = [], [], []
        self.pages = {}
        # the model's side
        self.stored_cases = [deque() for _ in range(self.n_planes)]
        self.judged = []                # (case, front outcome), in merge order
        self.to_tracker = deque()       # cases judged with an RX_META record, awaiting a verdict
        self.decided = []               # (case, verdict code)
        self.free_seen = [None] * self.n_planes     # free body words at each plane's last end
        self.outcomes = Counter()
        self.reasons = Counter()        # (frame kind, counter reached)
        self.verdict_counts = Counter()
        self.errors = []
        self.trace_layout = None
        self.live = False               # sampling starts once reset and set-up are done
        self.regions = []

    # --- set-up -------------------------------------------------------------------------------

    async def start(self, traffic, starts):
        """Reset, configure the engine and the model (the traffic's QPs, address and regions;
        the tracker's QPs from ``starts``: QP -> start PSN) and start the cycle task."""
        from verif.bench import start

        cocotb.start_soon(self._run())
        await start(self.dut)
        body = await self.cfg.read(engine_map.FRONT_BASE + FRONT_INFO["body_words"])
        self.trace_layout = trace_layout(self.n_planes, body.bit_length())
        self.live = True
        assert await self.cfg.read(engine_map.ENGINE_INFO) == self.core
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
        traffic.configure(self.model.front)
        self.regions = [(base, base + length) for _, base, length in traffic.regions]
        for q, start_psn in starts.items():
            await self.cfg.write(engine_map.TRACKER_BASE + qp_addr(q, OFF_CACK),
                                 start_psn | SETUP_ENABLE)
            self.model.setup_qp(q, start_psn)

    # --- traffic -------------------------------------------------------------------------------

    def send(self, plane, case, gap=0):
        """Queue one Labelled frame on ``plane`` (beats of W bits, ``tuser`` on every beat),
        after ``gap`` idle cycles."""
        lanes = self.width // 8
        frame = case.frame
        self.queues[plane].extend([None] * gap)
        for start in range(0, len(frame), lanes):
            chunk = frame[start:start + lanes]
            last = start + lanes >= len(frame)
            self.queues[plane].append((int.from_bytes(chunk, "little"), (1 << len(chunk)) - 1,
                                       int(last), case.tuser))
        self.sent[plane].append(case)
        if len(frame) > BTH_OFFSET:
            self.opcodes_sent[frame[BTH_OFFSET]] += 1

    def cover_nacks(self, controls):
        """Coverage: the NACK reasons of the control records out (docs/protocol.md 2.2)."""
        from verif import coverage

        names = {v: k for k, v in vars(NackReason).items() if k.isupper()}
        for record in controls:
            if record["opcode"] == Opcode.NACK:
                reason = NETH.unpack(int_to_ext(record["ext"], NETH.size))["nack_reason"]
                if reason in names:
                    coverage.hit("NACK reason (2.2)", names[reason])

    def cover(self, front, model):
        """Functional coverage (verif/coverage.py) of the counters just compared with the
        model, and the opcodes sent."""
        from verif import coverage

        coverage.hit_counts("receive drop (5)", front.counters)
        for p in range(self.n_planes):
            coverage.hit_counts("receive drop (5)", front.plane_counters[p],
                                {"dropped_bad": "plane_bad", "dropped_no_room": "plane_no_room"})
        coverage.hit_counts("receive drop (5)", model.trackers.counters,
                            {"out_of_window": "beyond_window"})
        coverage.hit_counts("QP", {"error": model.trackers.counters["qp_error"]})
        for opcode, count in self.opcodes_sent.items():
            name = coverage.opcode_name(opcode)
            if name:
                coverage.hit("opcode", name, count)

    def spread(self, cases, planes=None):
        """Queue ``cases`` in order, each on a random plane (or on plane ``planes``)."""
        for case in cases:
            self.send(self.rng.randrange(self.n_planes) if planes is None else planes, case)

    async def ticks(self, count):
        """``count`` ticks, 40 cycles apart."""
        self.tick_requests += count
        while self.tick_requests:
            await RisingEdge(self.dut.clk)
        await ClockCycles(self.dut.clk, 2)

    # --- the cycle task ------------------------------------------------------------------------

    async def _run(self):
        dut, rng = self.dut, self.rng
        planes = [[getattr(dut, f"s{p}_axis_{n}") for n in ("tdata", "tkeep", "tlast", "tuser",
                                                              "tvalid")]
                  for p in range(self.n_planes)]
        sinks = [(name, getattr(dut, f"{name}_tdata"), getattr(dut, f"{name}_tvalid"),
                  getattr(dut, f"{name}_tready")) for name in SINKS]
        axi = {n: getattr(dut, f"m_axi_{n}") for n in (
            "awaddr", "awlen", "awsize", "awburst", "awvalid", "awready", "wdata", "wstrb",
            "wlast", "wvalid", "wready", "bvalid", "bready", "bresp", "bid")}
        driven = {}

        def drive(handle, value):
            if driven.get(handle) != value:
                handle.value = value
                driven[handle] = value

        for _, _, _, tready in sinks:
            drive(tready, 0)
        for name in ("awready", "wready", "bvalid", "bresp", "bid"):
            drive(axi[name], 0)
        drive(dut.tick, 0)
        since_tick = 0
        lanes = self.core // 8
        size = (lanes - 1).bit_length()
        while True:
            await RisingEdge(dut.clk)
            self.cycle += 1
            for p, (tdata, tkeep, tlast, tuser, tvalid) in enumerate(planes):
                queue = self.queues[p]
                if queue and queue[0] is None:
                    queue.popleft()
                    drive(tvalid, 0)
                elif queue and not (self.idle and rng.random() < self.idle):
                    data, keep, last, user = queue.popleft()
                    drive(tdata, data)
                    drive(tkeep, keep)
                    drive(tlast, last)
                    drive(tuser, user)
                    drive(tvalid, 1)
                    if last:
                        self.last_cycles[p].append(self.cycle)
                else:
                    drive(tvalid, 0)

            def paused(stoppable=True):
                return (stoppable and self.stall) or \
                    (self.backpressure > 0 and rng.random() < self.backpressure)

            for _, _, _, tready in sinks:
                drive(tready, int(not paused()))
            drive(axi["awready"], int(len(self.aw_open) < 4 and not paused()))
            drive(axi["wready"], int(bool(self.aw_open) and not paused()))
            drive(axi["bvalid"], int(self.b_owed > 0 and not paused(stoppable=False)))
            since_tick += 1
            if self.tick_requests and since_tick >= 40:
                pulse = True
                self.tick_requests -= 1
            else:
                pulse = self.tick_probability > 0 and rng.random() < self.tick_probability
            since_tick = 0 if pulse else since_tick
            drive(dut.tick, int(pulse))
            self.ticks_sent += pulse

            await FallingEdge(dut.clk)
            if not self.live:
                continue
            try:
                for name, tdata, tvalid, tready in sinks:
                    if driven[tready] and int(tvalid.value):
                        self.records[name].append(int(tdata.value))
                        if name == "m_ctrl":
                            self.ctrl_cycles.append(self.cycle)
                if driven[axi["bvalid"]] and int(axi["bready"].value):
                    self.b_owed -= 1
                if driven[axi["awready"]] and int(axi["awvalid"].value):
                    burst = (int(axi["awaddr"].value), int(axi["awlen"].value),
                             int(axi["awsize"].value), int(axi["awburst"].value))
                    addr, length = burst[0], burst[1] + 1
                    assert burst[2:] == (size, 1), f"burst {burst}: not INCR of W/8 bytes"
                    assert addr % lanes == 0, f"burst at {addr:#x}: not aligned"
                    assert addr // 4096 == (addr + length * lanes - 1) // 4096, \
                        f"burst at {addr:#x} of {length} beats crosses 4 KB"
                    self.bursts.append(burst)
                    self.aw_open.append([addr, length, 0])
                if driven[axi["wready"]] and int(axi["wvalid"].value):
                    self._write_beat(int(axi["wdata"].value), int(axi["wstrb"].value),
                                     int(axi["wlast"].value), lanes)
                self._traces()
            except Exception as exc:        # reported by the test, which stops
                self.errors.append(exc)
                return

    def _write_beat(self, data, strobe, last, lanes):
        burst = self.aw_open[0]
        addr = burst[0] + burst[2] * lanes
        burst[2] += 1
        assert last == (burst[2] == burst[1]), f"wlast {last} on beat {burst[2]} of {burst[1]}"
        if last:
            self.aw_open.popleft()
            self.b_owed += 1
        self.beats.append((strobe, last, data))
        self.w_cycles.append(self.cycle)
        raw = data.to_bytes(lanes, "little")
        for lane in range(lanes):
            if strobe >> lane & 1:
                byte_addr = addr + lane
                assert any(lo <= byte_addr < hi for lo, hi in self.regions), \
                    f"cycle {self.cycle}: a write at {byte_addr:#x}, outside every registered region"
                page = self.pages.setdefault(byte_addr & ~0xFFF, bytearray(4096))
                page[byte_addr & 0xFFF] = raw[lane]

    def _traces(self):
        """The decision trace and the verdict trace of this cycle, replayed on the model."""
        dut, model = self.dut, self.model
        value = int(dut.decision_trace.value)
        if value:
            t = decode(value, self.trace_layout)
            free_bits = self.trace_layout["free"].width // self.n_planes
            for p in range(self.n_planes):
                if t["arrive"] >> p & 1:
                    case = self.sent[p].popleft()
                    outcome = t["outcome"] >> (2 * p) & 3
                    free = t["free"] >> (free_bits * p) & ((1 << free_bits) - 1)
                    model.arrive(p, case.frame, bad=bool(case.tuser), outcome=outcome,
                                 free=free)
                    self.free_seen[p] = free
                    self.outcomes[outcome] += 1
                    if outcome in (STORED, NO_BUFFER):
                        self.stored_cases[p].append(case)
                    else:
                        self.reasons[(case.kind, "plane")] += 1
                        self.judged.append((case, "plane_bad" if outcome == BAD else "no_room"))
            if t["grant"]:
                plane = t["grant_plane"]
                judgement = model.merge(plane)
                case = self.stored_cases[plane].popleft()
                meta = judgement.meta
                denied = meta is not None and meta["opcode"] != Opcode.PROBE and \
                    not meta["access_ok"]
                reached = "access_denied" if denied else judgement.reason
                self.reasons[(case.kind, reached)] += 1
                self.judged.append((case, reached))
                if meta is not None:
                    self.to_tracker.append(case)
        if int(dut.trace_verdict_valid.value):
            got = RX_VERDICT.unpack(int(dut.trace_verdict.value))
            assert model.pending, f"verdict {got} with no frame waiting for one"
            want = model.decide(got["ticks"])
            self.verdict_counts[got["verdict"]] += 1
            self.decided.append((self.to_tracker.popleft(), got["verdict"]))
            assert got == want, f"verdict {len(model.verdicts)}: {got}, the model's {want}"

    def check_errors(self):
        if self.errors:
            raise self.errors[0]

    # --- draining and comparing ------------------------------------------------------------------

    async def idle_blocks(self):
        """Whether the tracker, the placement and the engine's joins are idle (read twice)."""
        for _ in range(2):
            words = [await self.cfg.read(engine_map.TRACKER_BASE + TRACKER_STATUS),
                     await self.cfg.read(engine_map.PLACEMENT_BASE + PLACEMENT_INFO["status"]),
                     await self.cfg.read(engine_map.ENGINE_STATUS)]
            if any(words):
                return False
        return True

    async def drain(self):
        """Until every frame was sent, judged and decided, and every block is idle."""
        waited = 0
        while True:
            self.check_errors()
            if not any(self.queues) and not any(self.sent) and self.model.idle() and \
                    not self.aw_open and not self.b_owed and await self.idle_blocks():
                break
            assert waited < DRAIN_LIMIT, (
                f"not drained after {DRAIN_LIMIT} cycles: beats to send "
                f"{[len(q) for q in self.queues]}, frames not ended "
                f"{[len(s) for s in self.sent]}, in the plane buffers "
                f"{[len(s) for s in self.model.front.stored]}, waiting for a verdict "
                f"{len(self.model.pending)}")
            await ClockCycles(self.dut.clk, 50)
            waited += 50
        await ClockCycles(self.dut.clk, 20)
        self.check_errors()

    def compare_records(self):
        """Every record out equals the model's, in order (``m_ctrl`` split by source)."""
        model = self.model
        got_ctrl = [CONTROL_RECORD.unpack(w) for w in self.records["m_ctrl"]]
        pairs = (
            ("m_ctrl (tracker)", [r for r in got_ctrl if not is_front_control(r)],
             model.tracker_controls),
            ("m_ctrl (front, NO_PKT_BUFFER)", [r for r in got_ctrl if is_front_control(r)],
             model.front_controls),
            ("m_cpl", [COMPLETION.unpack(w) for w in self.records["m_cpl"]],
             model.completions),
            ("m_fb", [FEEDBACK_RECORD.unpack(w) for w in self.records["m_fb"]],
             model.feedbacks),
        )
        self.cover_nacks(got_ctrl)
        for what, got, want in pairs:
            assert len(got) == len(want), f"{what}: {len(got)} records, the model's {len(want)}"
            for i, (rec, fields) in enumerate(zip(got, want)):
                if rec != fields:
                    diff = {k: (rec[k], fields[k]) for k in fields if rec[k] != fields[k]}
                    raise AssertionError(f"{what} record {i}: fields (got, model) {diff}")
        return {what: len(got) for what, got, _ in pairs}

    def compare_memory(self):
        """Every AXI burst and beat, every memory byte, and every strobed byte in a region."""
        model, lanes = self.model, self.core // 8
        size = (lanes - 1).bit_length()
        assert len(self.bursts) == len(model.bursts), \
            f"{len(self.bursts)} bursts, the model's {len(model.bursts)}"
        assert len(self.beats) == len(model.beats), \
            f"{len(self.beats)} beats, the model's {len(model.beats)}"
        beats = iter(zip(self.beats, model.beats))
        for index, (got, want) in enumerate(zip(self.bursts, model.bursts)):
            assert got == (want.addr, want.beats - 1, size, 1), \
                f"burst {index}: (addr, len, size, type) {got}, the model's {want}"
            for k in range(want.beats):
                (strobe, last, data), beat = next(beats)
                assert (strobe, last) == (beat.strobe, int(beat.last)), \
                    f"burst {index} beat {k}: strobe {strobe:#x} last {last}, the model's " \
                    f"{beat.strobe:#x} {beat.last}"
                raw = data.to_bytes(lanes, "little")
                assert bytes(b if strobe >> i & 1 else 0 for i, b in enumerate(raw)) == \
                    beat.strobed(), f"burst {index} beat {k}: data differs from the model's"
                for lane in range(lanes):
                    if strobe >> lane & 1:
                        addr = got[0] + k * lanes + lane
                        assert any(lo <= addr < hi for lo, hi in self.regions), \
                            f"a write at {addr:#x}, outside every registered region"
        pages = {}
        for addr, byte in model.memory.items():
            pages.setdefault(addr & ~0xFFF, bytearray(4096))[addr & 0xFFF] = byte
        assert set(self.pages) == set(pages), \
            f"pages written {sorted(map(hex, set(self.pages) ^ set(pages)))[:8]} differ"
        for base, page in pages.items():
            if self.pages[base] != page:
                wrong = [i for i in range(4096) if self.pages[base][i] != page[i]]
                raise AssertionError(f"{len(wrong)} bytes of page {base:#x} differ from the "
                                     f"model's, first at +{wrong[0]:#x}")


    async def check_counters(self):
        model, cfg = self.model, self.cfg
        front = model.front
        for name in PARSER_COUNTERS:
            got = await cfg.read(engine_map.FRONT_BASE + FRONT_COUNTERS[name])
            assert got == front.counters[name] & MASK32, \
                f"front counter {name}: {got}, the model's {front.counters[name]}"
        for p in range(self.n_planes):
            for name in PLANE_COUNTERS:
                got = await cfg.read(engine_map.FRONT_BASE + plane_reg(p, name))
                want = front.plane_counters[p][name]
                assert got == want, f"plane {p} {name}: {got}, the model's {want}"
            assert await cfg.read(engine_map.FRONT_BASE + plane_reg(p, "slots_used")) == 0
        for name in TRACKER_COUNTERS:
            got = await cfg.read(engine_map.TRACKER_BASE + TRACKER_ADDR[name])
            want = model.trackers.counters[name]
            assert got == want & MASK32, f"tracker counter {name}: {got}, the model's {want}"
        self.cover(front, model)
        got = await cfg.read(engine_map.TRACKER_BASE + TRACKER_ADDR["tick"])
        assert got == self.ticks_sent, f"ticks counted {got}, sent {self.ticks_sent}"
        for name, addr in {**PLACEMENT_COUNTERS, **PLACEMENT_INFO}.items():
            got = await cfg.read(engine_map.PLACEMENT_BASE + addr)
            want = {**model.placement.counters, **model.placement.info()}[name] & MASK32
            assert got == want, f"placement {name}: {got}, the model's {want}"
        await cfg.write(engine_map.PLACEMENT_BASE + PLACEMENT_COUNTERS["beats"], 0)
        assert await cfg.read(engine_map.PLACEMENT_BASE + PLACEMENT_COUNTERS["beats"]) == 0
        assert await cfg.read(0x2020) == 0 and await cfg.read(0x3002) == 0, \
            "unmapped words read 0"


# --- Scenarios -----------------------------------------------------------------------------------

def engine_params(p):
    """The engine's parameters: the bench's build, or (``make bench``) the default engine with
    the parameters given."""
    if "engine" in p:
        return p["engine"]
    return {**DEFAULT_ENGINE, **{k: v for k, v in p.items() if k in DEFAULT_ENGINE}}


async def new_bench(dut, pmtu=PMTU, region_bytes=1 << 16):
    from verif.bench import make_rng, params

    rng = make_rng(dut)
    e = engine_params(params())
    bench = EngineBench(dut, rng, e)
    traffic = RxTraffic(rng, n_qps=e["n_qps"], n_regions=e["n_regions"], pmtu=pmtu,
                        region_bytes=region_bytes)
    starts = {q: rng.choice((rng.getrandbits(24), (1 << 24) - rng.randrange(1, 40), 0))
              for q in traffic.enabled}
    await bench.start(traffic, starts)
    return bench, traffic, Flows(traffic, rng, starts, e["mpr"])


async def fill_body_then_control(bench, traffic, flows, plane=0):
    """Phase 2b: with the outputs stopped, data frames on ``plane`` sized to fill its body ring
    to the last word (the free words each frame was judged on come from the trace), then a SACK,
    which needs one body word: it finds no room and is dropped, counted
    ``no_buffer_control``. Returns the data frames (phase 3 sends them again)."""
    lanes = bench.core // 8
    need_of = {}                                # body words -> payload (WRITE_ONLY)
    for payload in range(0, ENGINE["pmtu"] + 1):
        length = 138 + payload + (-payload % 4)
        need_of.setdefault(max(0, -(-length // lanes) - header_words(bench.core)), payload)
    bench.stall, frames = True, []
    q = traffic.enabled[0]

    async def send(case):
        bench.send(plane, case)
        while bench.sent[plane]:
            await ClockCycles(bench.dut.clk, 10)
        return bench.free_seen[plane]

    frames.append(flows.message(q, payload=0, packets=1)[0])    # no body word: reads `free`
    free = await send(Labelled(frames[-1], 0, "data", "data"))
    for _ in range(6):                          # 8 header slots: 1 taken above, 1 for the SACK
        if free == 0:
            break
        need = max(n for n in need_of if n <= free)
        frame = flows.message(q, payload=need_of[need], packets=1)[0]
        frames.append(frame)
        seen = await send(Labelled(frame, 0, "data", "data"))
        assert seen >= need, f"free body words {seen}, fewer than the {need} expected"
        free = seen - need
    assert free == 0, f"the body ring of plane {plane} still has {free} words free"
    before = bench.model.front.counters["no_buffer_control"]
    sack = traffic.control(Opcode.SACK)
    # At a core of 256 bits or more a SACK fits its header slot whole (it needs no body word),
    # so it cannot meet a full body ring there: the case exists only at narrower cores.
    needs_body = body_words_needed(sack, bench.core) > 0
    await send(Labelled(sack, 0, "sack", "sack"))
    await ClockCycles(bench.dut.clk, 100)
    bench.stall = False
    await bench.drain()
    assert bench.model.front.counters["no_buffer_control"] == before + needs_body, \
        f"the SACK ({'needing' if needs_body else 'needing no'} body words) " \
        f"{'did not find' if needs_body else 'found'} the body ring full"
    return frames


@cocotb.test()
async def rx_engine_random(dut):
    from verif.bench import params, write_result

    bench, traffic, flows = await new_bench(dut)
    rng, model = bench.rng, bench.model
    n_malformed = params().get("malformed", MALFORMED)
    messages = params().get("messages", MESSAGES)

    # Phase 1: mixed traffic with idle, backpressure and random ticks.
    bench.idle, bench.backpressure, bench.tick_probability = 0.15, 0.2, TICK_PROBABILITY
    streams = []
    for q in traffic.enabled:
        frames = [f for _ in range(messages) for f in flows.message(q)]
        arrivals = flows.arrivals(frames)
        for _ in range(2):
            arrivals.insert(rng.randrange(len(arrivals)), flows.beyond_window(q))
        streams.append(deque(arrivals))
    controls = []
    for _ in range(messages):
        opcode = rng.choice((Opcode.SACK, Opcode.NACK, Opcode.PROBE, Opcode.PROBE))
        name = {Opcode.SACK: "sack", Opcode.NACK: "nack", Opcode.PROBE: "probe"}[opcode]
        controls.append(Labelled(traffic.control(opcode), 0, name, name))
    malformed = [traffic.malformed(kind) for kind in MALFORMED_KINDS]
    malformed += [traffic.malformed() for _ in range(n_malformed - len(malformed))]
    rng.shuffle(malformed)
    streams += [deque(controls), deque(malformed)]
    cases = []
    while any(streams):
        stream = rng.choice([s for s in streams if s])
        cases.append(stream.popleft())
    bench.spread(cases)
    await bench.drain()
    phase1 = Counter(bench.outcomes)
    # The model takes "no room" from the RTL's trace and has no header-slot accounting, so a
    # frame wrongly dropped for lack of room would pass (both drop it). At phase 1's load the
    # plane buffers never fill: no such outcome may occur (audit #8).
    assert phase1[NO_ROOM] == 0, f"phase 1: {phase1[NO_ROOM]} frames dropped as no room"

    # Phase 2: outputs and memory stopped while every plane sends large Writes.
    bench.idle, bench.backpressure, bench.stall = 0.0, 0.0, True
    big = []
    for _ in range(FULL_FRAMES):
        for plane in range(bench.n_planes):
            q = rng.choice(traffic.enabled)
            frame = flows.message(q, payload=rng.choice((4096, 3000, 2048)), packets=1)[0]
            big.append(frame)
            bench.send(plane, Labelled(frame, 0, "data", "data"))
    while any(bench.queues):
        await ClockCycles(dut.clk, 50)
    await ClockCycles(dut.clk, 300)
    bench.stall = False
    await bench.drain()
    full = bench.outcomes - phase1
    assert full[NO_BUFFER] and full[NO_ROOM], f"phase 2 did not fill the buffers: {dict(full)}"
    big += await fill_body_then_control(bench, traffic, flows)

    # Phase 3: the frames of phase 2 again (on one plane: the holes are filled), then in-order
    # messages on every plane, back to back, no idle, no backpressure.
    before = (Counter(bench.outcomes), Counter(bench.verdict_counts))
    after = [f for q in traffic.enabled for _ in range(AFTER_MESSAGES)
             for f in flows.message(q, payload=rng.randrange(256, PMTU + 1))]
    bench.spread([Labelled(frame, 0, "data", "data") for frame in big], planes=0)
    await bench.drain()
    for index, frame in enumerate(after):
        bench.send(index % bench.n_planes, Labelled(frame, 0, "data", "data"))
    await bench.drain()
    outcomes = bench.outcomes - before[0]
    verdicts = bench.verdict_counts - before[1]
    assert set(outcomes) == {STORED}, f"phase 3: plane outcomes {dict(outcomes)}"
    assert sum(verdicts.values()) == len(big) + len(after) and \
        set(verdicts) <= {RxVerdict.PLACED, RxVerdict.DUPLICATE}, f"phase 3: verdicts {verdicts}"

    # The end: every timer fires, then everything is compared.
    bench.tick_probability = 0.0
    await bench.ticks(3)
    for _ in range(3):
        model.tick()
    await bench.drain()
    counts = bench.compare_records()
    bench.compare_memory()
    await bench.check_counters()
    for kind, reason in MALFORMED_KINDS.items():
        seen = {r for (k, r) in bench.reasons if k == kind}
        want = {"cut": {"short", "length"}, "tuser": {"plane"}}.get(kind, {reason})
        assert seen and seen <= want, f"malformed {kind}: reached {seen}, expected {want}"
    for kind in BAD_ICRC_KINDS:
        assert not {r for (k, r) in bench.reasons if k == kind} & {"data", "access_denied"}, \
            f"a frame of kind {kind} (bad ICRC) reached the tracker"
    ends = {name: len(got) for name, got in bench.records.items()}
    await ClockCycles(dut.clk, 50)
    assert ends == {name: len(got) for name, got in bench.records.items()}, \
        "records after the end"
    verdict_names = {code: name.lower() for name, code in vars(RxVerdict).items()
                     if name.isupper()}
    dut._log.info("%d frames (%d malformed) in %d cycles, outcomes %s, verdicts %s, records %s, "
                  "%d bytes written in %d bursts, %d ticks", sum(bench.outcomes.values()),
                  n_malformed, bench.cycle, dict(bench.outcomes),
                  {verdict_names[k]: v for k, v in bench.verdict_counts.items()}, counts,
                  len(model.memory), len(model.bursts), bench.ticks_sent)
    for code in (RxVerdict.PLACED, RxVerdict.DUPLICATE, RxVerdict.OUT_OF_WINDOW,
                 RxVerdict.TRIMMED, RxVerdict.ACCESS_ERROR, RxVerdict.PROBE):
        assert bench.verdict_counts[code], f"no verdict {verdict_names[code]} in the run"
    assert model.completions and model.front_controls and model.feedbacks
    write_result(dut, "rx_engine", sum(bench.outcomes.values()),
                 malformed=n_malformed, verdicts=sum(bench.verdict_counts.values()))


def hostile_gap(length, n_planes, width, core):
    """Idle cycles after a campaign frame of ``length`` bytes on its plane, so that N planes
    sending such frames never outrun the merge (one core word per cycle, so ``N x`` the frame's
    core words per frame of each plane), with a quarter to spare for the backpressure: the
    campaign judges the receive checks, not the header slots (phase 2 of ``rx_engine_random``
    and ``rx_front_full`` fill those). Without it, at W = 256 short frames (one beat each) on
    two planes filled the header slots and dropped campaign frames as no room."""
    beats = max(1, -(-length // (width // 8)))
    words = max(1, -(-length // (core // 8)))
    return max(0, -(-5 * n_planes * words // 4) + 1 - beats)


@cocotb.test()
async def rx_engine_hostile(dut):
    """The hostile-frame campaign (``verif/hostile.py``, issue [verify] item 3): ``hostile``
    frames (default :data:`HOSTILE`) of every mutation and kind, each PSN's mutated copies
    before its good copy on one plane, back to back with good frames, random idle and
    backpressure. Judged three ways: (1) each frame met an outcome the campaign states (front
    counter, then verdict); (2) the drop counters read from the engine sum to the frames the
    campaign says must be dropped, the frame counters to the frames sent, and each counter lies
    between the frames stated to reach it alone and those that may; (3) every record, AXI beat,
    memory byte and counter equals the model's, and every strobed byte is checked against the
    registered regions as it is written. Then full rate right after the storm: WRITE_ONLY
    frames of the PMTU back to back on every plane, no idle, no backpressure: every one stored
    and placed, payload bytes per cycle recorded."""
    from verif.bench import params, write_result
    from verif.hostile import BTH_AT, FRONT_DROPS, Campaign, Receiver

    bench, traffic, flows = await new_bench(dut)
    rng, model, cfg = bench.rng, bench.model, bench.cfg
    n = params().get("hostile", HOSTILE)
    receiver = Receiver(inner_dst=traffic.inner_dst, n_qps=traffic.n_qps,
                        enabled=traffic.enabled, regions=tuple(traffic.regions),
                        pmtu=traffic.pmtu, mpr=engine_params(params())["mpr"], profile=1)
    campaign = Campaign(rng, receiver, bench.n_planes, flows.next)
    storm = campaign.storm(n)
    bench.idle, bench.backpressure, bench.tick_probability = 0.1, 0.1, TICK_PROBABILITY
    # Writes with Immediate placed above a hole wait for it, at most wimm_max per QP (more is a
    # QP error, profile section 5): the storm is sent in runs of fewer than wimm_max / 2 such
    # writes per QP, each run drained (a QP's PSNs rise through the storm, so a hole holds back
    # only writes of its own run). With 4 planes a 10,000-frame storm sent at once left more
    # waiting.
    wimm_run = max(1, engine_params(params())["wimm_max"] // 2)
    imm_in_run = Counter()
    for case in storm:
        if case.psn is not None and "placed" in case.verdicts and \
                case.frame[BTH_AT] in IMM_OPCODES:
            if imm_in_run[case.psn[0]] == wimm_run:
                await bench.drain()
                imm_in_run.clear()
            imm_in_run[case.psn[0]] += 1
        bench.send(case.plane if case.plane is not None else rng.randrange(bench.n_planes), case,
                   gap=hostile_gap(len(case.frame), bench.n_planes, bench.width, bench.core))
    await bench.drain()

    # (1) every frame's outcome, in the order the engine judged and decided them
    assert len(bench.judged) == len(storm), f"{len(bench.judged)} of {len(storm)} judged"
    for index, (case, reached) in enumerate(bench.judged):
        assert reached in case.front, \
            f"judged frame {index} ({case.kind}): reached {reached}, stated {sorted(case.front)}"
    placed = Counter()
    for index, (case, code) in enumerate(bench.decided):
        verdict = VERDICT_NAMES[code]
        assert verdict in case.verdicts, \
            f"verdict {index} ({case.kind}): {verdict}, stated {sorted(case.verdicts)}"
        placed[case.psn] += verdict == "placed"
    psns = {case.psn for case in storm if case.psn is not None}
    assert {psn for psn, k in placed.items() if k} == psns and max(placed.values()) == 1, \
        "a PSN of the storm not placed exactly once"

    # (2) the engine's own counters against what was sent
    front = {name: await cfg.read(engine_map.FRONT_BASE + FRONT_COUNTERS[name])
             for name in PARSER_COUNTERS}
    planes = Counter()
    for p in range(bench.n_planes):
        for name in PLANE_COUNTERS:
            planes[name] += await cfg.read(engine_map.FRONT_BASE + plane_reg(p, name))
    assert planes["frames"] == len(storm), f"plane frames {planes['frames']}, sent {len(storm)}"
    drops = sum(front[r] for r in FRONT_DROPS if r in front) + planes["dropped_bad"] + \
        planes["dropped_no_room"]
    must_drop = sum(1 for case in storm if case.front <= FRONT_DROPS)
    assert drops == must_drop, f"{drops} frames dropped and counted, the campaign's {must_drop}"
    for name, got in front.items():
        # "data" counts every data frame that passed the front, access_denied ones included
        names = {name, "access_denied"} if name == "data" else {name}
        alone = sum(1 for case in storm if case.front <= names)
        may = sum(1 for case in storm if case.front & names)
        assert alone <= got <= may, f"front counter {name}: {got}, stated {alone}..{may}"
    assert planes["dropped_bad"] == sum(1 for case in storm if case.tuser)

    # Full rate right after the storm.
    bench.idle = bench.backpressure = bench.tick_probability = 0.0
    first_w, before = len(bench.w_cycles), Counter(bench.outcomes)
    placed_before = model.placement.counters["placed"]
    after = [flows.message(q, payload=traffic.pmtu, packets=1)[0]
             for _ in range(AFTER_MESSAGES) for q in traffic.enabled]
    for index, frame in enumerate(after):
        bench.send(index % bench.n_planes, Labelled(frame, 0, "data", "data"))
    await bench.drain()
    assert set(bench.outcomes - before) == {STORED}, f"after: {dict(bench.outcomes - before)}"
    assert model.placement.counters["placed"] - placed_before == len(after)
    w = bench.w_cycles[first_w:]
    rate = len(after) * traffic.pmtu / (w[-1] - w[0] + 1)

    # A QP error: one QP gets wimm_max + 1 Writes with Immediate above a hole, so one
    # completion too many waits (WIMM_OVERFLOW, the QP goes to the error state, its waiting
    # completions are flushed with QP_ERROR); then the hole's PSN gets the verdict QP_ERROR, and
    # the other QPs go on placing (no corrupted neighbour).
    victim, others = traffic.enabled[0], traffic.enabled[1:]
    hole = flows.next[victim]
    wimm = engine_params(params())["wimm_max"]
    bench.idle, bench.backpressure = 0.1, 0.1
    for k in range(1, wimm + 2):
        bench.send(0, Labelled(traffic.data(qpn=victim, psn=psn_add(hole, k), payload=16,
                                            opcode=Opcode.WRITE_ONLY_IMM), 0, "data", "data"))
    bench.send(0, Labelled(traffic.data(qpn=victim, psn=hole, payload=16), 0, "data", "data"))
    await bench.drain()
    tail = [VERDICT_NAMES[code] for _, code in bench.decided[-(wimm + 2):]]
    assert tail == ["placed"] * wimm + ["wimm_overflow", "qp_error"], tail
    before = bench.verdict_counts[RxVerdict.PLACED]
    for index, frame in enumerate(f for q in others for f in flows.message(q, packets=2)):
        bench.send(index % bench.n_planes, Labelled(frame, 0, "data", "data"))
    await bench.drain()
    assert bench.verdict_counts[RxVerdict.PLACED] - before == 2 * len(others)

    # The end: every timer fires, then everything equals the model's.
    await bench.ticks(3)
    for _ in range(3):
        model.tick()
    await bench.drain()
    bench.compare_records()
    bench.compare_memory()
    await bench.check_counters()
    kinds = dict(sorted(campaign.counts.items()))
    dut._log.info("hostile: %d frames (%d must be dropped, %d dropped), kinds %s; after the "
                  "storm %.2f payload bytes per cycle of %d", len(storm), must_drop, drops,
                  kinds, rate, bench.core // 8)
    write_result(dut, "rx_engine", len(storm), tag="hostile", dropped=drops,
                 kinds=len(kinds), bytes_per_cycle_after=round(rate, 3),
                 core_bytes=bench.core // 8)


@cocotb.test()
async def perf(dut):
    """Back-to-back WRITE_ONLY frames on every plane, outputs and memory always ready: payload
    bytes placed per cycle; then one frame on an idle engine: latency from its last beat to its
    SACK and to its first write. Every output is compared with the model's at the end."""
    from verif.bench import PERF_SIZES, params, write_perf

    p = params()
    bench, traffic, flows = await new_bench(dut, pmtu=4096, region_bytes=1 << 20)
    lanes = bench.core // 8
    frames = p.get("perf_frames", PERF_FRAMES)
    rows = []
    for size in PERF_SIZES:
        first = len(bench.w_cycles)
        placed_before = bench.model.placement.counters["placed"]
        beats = -(-(size + 138) // (bench.width // 8))
        for k in range(frames):
            for plane in range(bench.n_planes):     # staggered: the merge alternates
                q = traffic.enabled[plane % len(traffic.enabled)]
                bench.send(plane, Labelled(flows.message(q, payload=size, packets=1)[0], 0,
                                           "data", "data"),
                           gap=0 if k else plane * beats // bench.n_planes)
        await bench.drain()
        assert set(bench.outcomes) == {STORED}, f"payload {size}: outcomes {dict(bench.outcomes)}"
        placed = bench.model.placement.counters["placed"] - placed_before
        assert placed == (frames * bench.n_planes if size else 0), \
            f"payload {size}: {placed} frames placed"
        w = bench.w_cycles[first:]
        span = w[-1] - w[0] + 1 if w else 0
        rate = frames * bench.n_planes * size / span if span else 0.0
        # One frame on an idle engine.
        marks = (len(bench.last_cycles[0]), len(bench.ctrl_cycles), len(bench.w_cycles))
        q = traffic.enabled[0]
        bench.send(0, Labelled(flows.message(q, payload=size, packets=1)[0], 0, "data", "data"))
        await bench.drain()
        last = bench.last_cycles[0][marks[0]]
        sack_latency = bench.ctrl_cycles[marks[1]] - last
        rows.append(dict(payload=size, frames=frames * bench.n_planes, core_width=bench.core,
                         cycles_per_frame=round(span / (frames * bench.n_planes), 2),
                         bytes_per_cycle=round(rate, 3), efficiency=round(rate / lanes, 4),
                         latency=sack_latency, latency_last=sack_latency,
                         latency_first_write=bench.w_cycles[marks[2]] - last if size else None))
    bench.compare_records()
    bench.compare_memory()
    write_perf(dut, "rx_engine", bench.width, rows)


# --- pytest --------------------------------------------------------------------------------------
# One build per simulator and configuration runs every scenario.

CONFIGS = [("icarus", 2, 64), ("verilator", 2, 64)]
FULL_CONFIGS = [("verilator", 2, 256), ("icarus", 2, 256), ("verilator", 1, 64),
                ("verilator", 4, 128)]


def run(name, sim, n_planes, width, *, testcase, **extra):
    engine = dict(ENGINE, n_planes=n_planes, data_width=width)
    run_bench(RxEngine(**engine), name=f"{name}-n{n_planes}-w{width}", toplevel="rx_engine",
              test_module="tb.test_rx_engine", sim=sim, params={"engine": engine, **extra},
              testcase=testcase)


def cases(name, configs):
    return [pytest.param(sim, n, w, id=f"{sim}-n{n}-w{w}",
                         marks=pytest.mark.xdist_group(f"{name}-{sim}-{n}-{w}"))
            for sim, n, w in configs]


@pytest.mark.sim
@pytest.mark.parametrize("sim, n_planes, width", cases("rx_engine", CONFIGS))
def test_rx_engine(sim, n_planes, width):
    """The random run and the hostile campaign; on Verilator also a short ``perf``."""
    perf = ["perf"] if sim == "verilator" else []
    run("rx_engine", sim, n_planes, width,
        testcase=["rx_engine_random", "rx_engine_hostile"] + perf, perf_frames=3)


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("sim, n_planes, width", cases("rx_engine-full", FULL_CONFIGS))
def test_rx_engine_full(sim, n_planes, width):
    run("rx_engine-full", sim, n_planes, width,
        testcase=["rx_engine_random", "rx_engine_hostile", "perf"],
        malformed=6 * MALFORMED, messages=3 * MESSAGES, hostile=10_000)


@pytest.mark.parametrize("kwargs", [dict(n_planes=8, data_width=128), dict(n_planes=2,
                                                                           data_width=512)])
def test_rx_engine_rejects_a_core_wider_than_512(kwargs):
    with pytest.raises(ValueError, match="RxEngine"):
        RxEngine(**kwargs)
