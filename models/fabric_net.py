# SPDX-License-Identifier: BSD-2-Clause
"""The network of the fabric model: events, packets, switches, links and their faults.

One implementation serves both uses of the fabric model (``models/fabric.py``):

- **frames** (bytes mode): a packet carries its Ethernet frame (bytes, no FCS). Switches run it
  through the uN stage of :class:`models.un_stage.UnStageModel` (destination shifted, Hop Limit
  decremented, exact-match table of docs/protocol.md 3) and the egress ports trim and mark the bytes as
  :mod:`models.switch_queue` does, so a frame that leaves the fabric is the frame an RTL switch
  would emit. This is the mode that joins RTL NIC engine tops (:meth:`Network.inject`,
  :class:`FrameTap`).
- **light packets**: a packet carries its fields only (frame size, outer destination, Hop Limit,
  DSCP, ECN, and the transport fields the model NICs read). Switches route with
  :func:`models.usid.un_step` on the same tables (its answer cached per destination address: it
  depends on nothing else once the Hop Limit is above 1), and the egress ports trim and mark the
  fields. This is the mode for fabrics at scale.

Both go through the same :class:`Switch`, :class:`FabricPort` (a
:class:`models.switch_queue.EgressPort`: byte-counted data and control queues, trimming,
ECN, control-first dequeue with the anti-starvation rule, port down) and :class:`Wire` (one
direction of a link: serialization at the link rate, propagation delay, faults).

Time is an integer number of picoseconds. A frame occupies its wire for ``(size +
wire_overhead) x 8 / rate`` and arrives ``delay`` after its last bit left (store and forward);
a switch admits it to its egress port ``switch_latency`` later. A frame leaves its egress queue
when its transmission starts, so ``q`` of the admission rule counts frames waiting behind the
one on the wire.

Faults (:class:`Impairment`, set on wires): a fraction of frames lost, a fraction of trimmable
data frames trimmed (as a fabric-facing switch port does: first ``trim_size`` bytes, DSCP
TRIMMED), a fraction of ECN-capable frames marked CE, an extra delay and a random extra delay
(jitter, which reorders frames). A path (plane, T1 j) fault is set on every wire leaving T1 j,
so a packet meets it once. A cut link (:meth:`Network.set_link`) takes the egress ports at both
ends down (queues flushed, frames routed to them dropped, counted by
:class:`models.switch_queue.EgressPort`) and loses the frames on the wire; healing brings them
up. Every random choice comes from a generator seeded by the fabric seed and the wire's name,
so a run is reproducible and a fault on one wire does not change the draws of another.

Light packets take a fast path that does the same steps: a switch remembers, per outer
destination, the rewritten destination, the egress port and its wire once it has routed one
packet there; the ports admit and release packets with :meth:`FabricPort.admit` and
:meth:`FabricPort.pull` (the rule of :meth:`FabricPort.enqueue` and ``dequeue`` without the
records they return); a wire launches a frame in line when no fault is set on it.

Nothing here imports cocotb, Amaranth or scapy.
"""

import random
import zlib
from dataclasses import dataclass
from heapq import heappop, heappush

from .layouts import (BTH_OFFSET, Dscp, Ecn, INNER_OFFSET, IPV6, OUTER_OFFSET, UDP,
                      UDP_OFFSET, TRIM_MIN_BYTES)
from .switch_queue import (CONTROL_DSCPS, ECN_SCALE, LFSR_TAPS, TRIMMABLE_DSCPS, Admission,
                           EgressPort, FrameClass, Queue, Verdict, classify, ecn_mark,
                           frame_bytes, lfsr_step, set_outer_ecn, trim)
from .un_stage import Forwarded, UnStageModel
from .usid import Forward, un_step
from .fabric_topology import HOST, T0, T1

__all__ = ["PS_PER_NS", "PS_PER_US", "EventLoop", "Packet", "FabricPort", "Impairment", "Wire",
           "Switch", "Network", "FrameTap", "WireTap", "ps", "us"]

PS_PER_NS = 1000
PS_PER_US = 1_000_000
_DST_BYTE = OUTER_OFFSET + IPV6["dst"].offset // 8
_HOP_LIMIT_BYTE = OUTER_OFFSET + IPV6["hop_limit"].offset // 8
_FLOW_LOW_BYTE = OUTER_OFFSET + 2      # Flow Label[15:0]
_SPORT_BYTE = UDP_OFFSET + UDP["sport"].offset // 8


def ps(ns):
    """Nanoseconds (int or float) as integer picoseconds."""
    return int(round(ns * PS_PER_NS))


def us(picoseconds):
    """Picoseconds as microseconds (float)."""
    return picoseconds / PS_PER_US


def seeded(seed, name):
    """A random generator for ``name`` under the fabric ``seed`` (stable across runs)."""
    return random.Random(zlib.crc32(f"{seed}/{name}".encode()))


class EventLoop:
    """A discrete-event loop: callbacks ``fn(arg)`` at integer picosecond times, in time order,
    ties in scheduling order.

    The heap holds plain integers, ``time << SEQ_BITS | sequence number`` (the order of
    ``(time, sequence)``, compared without tuples), and the callbacks wait in a dictionary under
    the same key."""

    SEQ_BITS = 40

    def __init__(self):
        self.now = 0
        self.events = 0
        self._heap = []
        self._calls = {}
        self._seq = 0
        self._halted = False

    def at(self, time, fn, arg=None):
        """Call ``fn(arg)`` at ``time`` (integer picoseconds, not before now)."""
        if time < self.now:
            raise ValueError(f"event at {time} ps is in the past (now {self.now} ps)")
        self._seq += 1
        key = time << self.SEQ_BITS | self._seq
        self._calls[key] = (fn, arg)
        heappush(self._heap, key)

    def after(self, delay, fn, arg=None):
        self.at(self.now + delay, fn, arg)

    def halt(self):
        """Make :meth:`run` return once the current event is over."""
        self._halted = True

    def run(self, until=None):
        """Run events up to and including time ``until`` (integer picoseconds; None: until none
        is left), or until an event calls :meth:`halt`. Returns the number of events run.
        ``now`` ends at ``until`` when given and nothing halted the run early."""
        if until is not None and not isinstance(until, int):
            raise TypeError(f"until must be an integer number of picoseconds, not {until!r}")
        heap = self._heap
        take = self._calls.pop
        shift = self.SEQ_BITS
        limit = None if until is None else (until + 1) << shift
        count = 0
        self._halted = False
        while heap:
            if limit is not None and heap[0] >= limit:
                break
            key = heappop(heap)
            fn, arg = take(key)
            self.now = key >> shift
            fn(arg)
            count += 1
            if self._halted:
                self.events += count
                return count
        if until is not None and until > self.now:
            self.now = until
        self.events += count
        return count

    def pending(self):
        return len(self._heap)

    def next_time(self):
        return self._heap[0] >> self.SEQ_BITS if self._heap else None


class Packet:
    """One packet in the fabric (see the module docstring for the two modes).

    Fabric fields: ``size`` (frame bytes without FCS), ``da`` (outer destination), ``hop_limit``,
    ``dscp``, ``ecn``, and ``frame`` (bytes, or None for a light packet). Transport fields, set by
    the model NICs and read by them only (None when unknown): ``src``/``dst`` (hosts),
    ``plane``, ``opcode``, ``qpn`` (destination QPN), ``psn``, ``ev``, ``payload`` (bytes of
    payload carried), ``ackreq``, ``rtx``, ``info`` (the SACK, NACK or probe id, or the data
    packet's placement data), ``sent`` (time the sender put it on its port).
    """

    __slots__ = ("size", "da", "hop_limit", "dscp", "ecn", "frame", "src", "dst", "plane",
                 "opcode", "qpn", "psn", "ev", "payload", "ackreq", "rtx", "info", "sent",
                 "epoch", "inport")

    def __init__(self, size, da, hop_limit, dscp, ecn, frame=None, src=None, dst=None,
                 plane=None, opcode=None, qpn=None, psn=0, ev=0, payload=0, ackreq=0, rtx=0,
                 info=None, sent=0):
        self.size = size
        self.da = da
        self.hop_limit = hop_limit
        self.dscp = dscp
        self.ecn = ecn
        self.frame = frame
        self.src = src
        self.dst = dst
        self.plane = plane
        self.opcode = opcode
        self.qpn = qpn
        self.psn = psn
        self.ev = ev
        self.payload = payload
        self.ackreq = ackreq
        self.rtx = rtx
        self.info = info
        self.sent = sent
        self.epoch = 0
        self.inport = 0

    def __len__(self):
        return self.size

    def __repr__(self):
        return (f"Packet({self.size} B, op {self.opcode}, psn {self.psn}, ev {self.ev:#x}, "
                f"dscp {self.dscp}, ecn {self.ecn}, {'frame' if self.frame else 'light'})")

    @classmethod
    def from_frame(cls, frame, **fields):
        """A packet carrying ``frame``, its fabric fields read from the outer header (a frame
        too short for one gets zeros: the egress port drops it as malformed)."""
        frame = bytes(frame)
        packet = cls(len(frame), 0, 0, 0, 0, frame, **fields)
        packet.sync()
        return packet

    def sync(self):
        """Read the fabric fields of a bytes-mode packet back from its frame."""
        frame = self.frame
        self.size = len(frame)
        if len(frame) >= INNER_OFFSET:
            self.da = int.from_bytes(frame[_DST_BYTE:_DST_BYTE + 16], "big")
            self.hop_limit = frame[_HOP_LIMIT_BYTE]
            tc = (frame[OUTER_OFFSET] & 0xF) << 4 | frame[OUTER_OFFSET + 1] >> 4
            self.dscp, self.ecn = tc >> 2, tc & 3

    @property
    def wire_ev(self):
        """The EV of a bytes-mode frame (UDP source port and Flow Label[15:0], docs/protocol.md 1.1)."""
        frame = self.frame
        if frame is None or len(frame) < BTH_OFFSET:
            return self.ev
        return int.from_bytes(frame[_SPORT_BYTE:_SPORT_BYTE + 2], "big") << 16 | \
            int.from_bytes(frame[_FLOW_LOW_BYTE:_FLOW_LOW_BYTE + 2], "big")

    @property
    def trimmed(self):
        return self.dscp in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)

    def trim(self, trim_size, dscp):
        """Trim in place as a switch does (docs/protocol.md 7): keep ``trim_size`` bytes, DSCP ``dscp``."""
        if self.frame is not None:
            self.frame = trim(self.frame, trim_size, dscp)
            self.sync()
        else:
            self.size = min(self.size, trim_size)
            self.dscp = dscp

    def mark_ce(self):
        """Write CE in the outer ECN field, in place."""
        if self.frame is not None:
            self.frame = set_outer_ecn(self.frame, Ecn.CE)
        self.ecn = Ecn.CE


class FabricPort(EgressPort):
    """A :class:`models.switch_queue.EgressPort` whose queues hold :class:`Packet` objects.

    The admission is the parent's rule, step for step (the parent's queues, limits, control
    admission, dequeue order, port down and counters are used as they are); only reading the
    frame's fields and rewriting them go through the packet (:meth:`Packet.trim`,
    :meth:`Packet.mark_ce`), so light packets and frames meet the same rule.
    ``tests/test_fabric.py`` checks it against :class:`EgressPort` on the same frames.

    The switches use :meth:`admit` and :meth:`pull`: the same rule as :meth:`enqueue` and
    :meth:`dequeue` (the same queues, counters and LFSR steps, checked by the same test), written
    for speed (no :class:`Admission` or :class:`Departure` records).
    """

    def __init__(self, config=None, **params):
        super().__init__(config, **params)
        self._data = self.queues[Queue.DATA]            # emptied in place by set_up
        self._controls = self.queues[Queue.CONTROL]
        config = self.config                            # frozen: its values, at hand
        self._data_limit, self._control_limit = config.data_limit, config.control_limit
        self._marking, self._kmin, self._kmax = config.fabric_facing, config.kmin, config.kmax
        self._trim = config.trim_size, config.trimmed_dscp
        self._burst = config.control_burst

    def enqueue(self, packet):
        length = packet.size
        q_data, q_control = self.occupancy[Queue.DATA], self.occupancy[Queue.CONTROL]
        if not self.up:
            self.counters["dropped_port_down"] += 1
            return Admission(Verdict.DROPPED_PORT_DOWN, length, q_data, q_control)
        if packet.frame is not None and frame_bytes(packet.frame) is None:
            self.counters["dropped_malformed"] += 1
            return Admission(Verdict.MALFORMED, length, q_data, q_control)
        kind = classify(packet.dscp)
        if kind == FrameClass.CONTROL:
            return self._control(Verdict.CONTROL, packet, length, q_data)
        if self._fits(Queue.DATA, length):
            return self._enqueue_data(packet, length, q_data, q_control, packet.ecn)
        if kind == FrameClass.TRIMMABLE and length >= TRIM_MIN_BYTES:
            packet.trim(self.config.trim_size, self.config.trimmed_dscp)
            return self._control(Verdict.TRIMMED, packet, length, q_data)
        self.counters["dropped_full"] += 1
        return Admission(Verdict.DROPPED_FULL, length, q_data, q_control, Queue.DATA)

    def _enqueue_data(self, packet, length, q, q_control, ecn):
        r = None
        mark = False
        if self.config.fabric_facing:
            self.lfsr = r = lfsr_step(self.lfsr)
            mark = ecn_mark(q, r, self.config.kmin, self.config.kmax)
            if mark and ecn != Ecn.NOT_ECT:
                self.counters["ecn_marked"] += 1
                if ecn != Ecn.CE:
                    packet.mark_ce()
        self._push(Queue.DATA, packet)
        return Admission(Verdict.DATA, length, q, q_control, Queue.DATA, packet, r, mark)

    def admit(self, packet):
        """:meth:`enqueue`'s decision on ``packet``: True when it entered a queue (whole,
        marked or trimmed), False when it was dropped and counted."""
        if not self.up:
            self.counters["dropped_port_down"] += 1
            return False
        if packet.frame is not None and frame_bytes(packet.frame) is None:
            self.counters["dropped_malformed"] += 1
            return False
        dscp = packet.dscp
        if dscp in CONTROL_DSCPS:
            return self._admit_control(packet, False)
        occupancy = self.occupancy
        length = packet.size
        q = occupancy[Queue.DATA]
        if q + length <= self._data_limit:
            if self._marking:
                r = self.lfsr                               # lfsr_step and ecn_mark, inline
                self.lfsr = r = r >> 1 ^ LFSR_TAPS if r & 1 else r >> 1
                ecn = packet.ecn
                kmin = self._kmin
                if ecn != Ecn.NOT_ECT and q > kmin and \
                        (q >= self._kmax or r < (q - kmin) * ECN_SCALE // (self._kmax - kmin)):
                    self.counters["ecn_marked"] += 1
                    if ecn != Ecn.CE:
                        packet.mark_ce()
            self._data.append(packet)
            occupancy[Queue.DATA] = q + length
            return True
        if dscp in TRIMMABLE_DSCPS and length >= TRIM_MIN_BYTES:
            packet.trim(*self._trim)
            return self._admit_control(packet, True)
        self.counters["dropped_full"] += 1
        return False

    def _admit_control(self, packet, trimmed):
        occupancy = self.occupancy
        q = occupancy[Queue.CONTROL]
        if q + packet.size > self._control_limit:
            self.counters["dropped_full"] += 1
            return False
        self._controls.append(packet)
        occupancy[Queue.CONTROL] = q + packet.size
        if trimmed:
            self.counters["trimmed"] += 1
        return True

    # The wire's source interface.
    def pull(self):
        """:meth:`dequeue`, returning the packet (or None)."""
        data, controls = self._data, self._controls
        if controls and not (data and self.control_run >= self._burst):
            queue, packet = Queue.CONTROL, controls.popleft()
            self.control_run = self.control_run + 1 if data else 0
        elif data:
            queue, packet = Queue.DATA, data.popleft()
            self.control_run = 0
        else:
            return None
        self.occupancy[queue] -= packet.size
        self.counters["forwarded"] += 1
        return packet

    def sent(self):
        """Nothing to do when a frame leaves (the wire's source interface)."""

    def waiting(self):
        return bool(self.queues[Queue.DATA] or self.queues[Queue.CONTROL])


@dataclass
class Impairment:
    """A fault on a wire: fractions of frames ``loss`` (dropped), ``trim`` (trimmable data
    frames trimmed to ``trim_size`` bytes with DSCP TRIMMED), ``ce`` (ECN-capable frames marked
    CE), an extra delay ``delay_ns`` and a random extra delay uniform in ``[0, jitter_ns)``.
    ``rng`` is set by the wire it is attached to."""
    loss: float = 0.0
    trim: float = 0.0
    ce: float = 0.0
    delay_ns: float = 0.0
    jitter_ns: float = 0.0
    trim_size: int = 256

    def __post_init__(self):
        for name in ("loss", "trim", "ce"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"impairment {name} must be a fraction in [0, 1], not {value!r}")
        for name in ("delay_ns", "jitter_ns"):
            if getattr(self, name) < 0:
                raise ValueError(f"impairment {name} must be >= 0")
        if self.trim_size < TRIM_MIN_BYTES:
            raise ValueError(f"impairment trim_size must be at least {TRIM_MIN_BYTES}")


class Wire:
    """One direction of a link: takes frames from ``source`` (``pull()``, then ``sent()``, and
    ``waiting()``) one at a time at ``gbps``, delivers each ``delay`` after its last bit to
    ``sink.receive(packet, sink_port)``. :meth:`kick` tells it the source has a frame."""

    def __init__(self, loop, name, gbps, delay_ps, overhead, source, sink, sink_port, seed=0):
        self.loop = loop
        self.name = name
        self.ps_per_byte = 8000.0 / gbps
        self.delay = delay_ps
        self.overhead = overhead
        self.source = source
        self.sink = sink
        self.sink_port = sink_port
        self.rng = seeded(seed, name)
        self.impairments = []
        self.up = True
        self.epoch = 0
        self.busy_until = 0
        self.wake = False
        self.frames = self.bytes = self.delivered = 0          # see counters
        self.lost = self.lost_cut = self.trimmed = self.ce_marked = 0
        self._start_call = self._start         # the event callbacks, bound once
        self._arrive_call = self._arrive

    @property
    def counters(self):
        """Frames and bytes sent, frames delivered, lost (faults), lost as the link was cut,
        trimmed and CE-marked by faults."""
        return dict(frames=self.frames, bytes=self.bytes, delivered=self.delivered,
                    lost=self.lost, lost_cut=self.lost_cut, trimmed=self.trimmed,
                    ce_marked=self.ce_marked)

    def kick(self):
        """The source has a frame: start now if idle, else when the current one is out."""
        if self.wake:
            return
        if self.loop.now >= self.busy_until:
            self._start(None)
        else:
            self.wake = True
            self.loop.at(self.busy_until, self._start_call)

    def _start(self, _):
        self.wake = False
        source = self.source
        packet = source.pull()
        if packet is None:
            return
        loop = self.loop
        size = packet.size
        end = loop.now + int((size + self.overhead) * self.ps_per_byte + 0.5)
        self.busy_until = end
        if self.up and not self.impairments:        # launch(), without faults
            self.frames += 1
            self.bytes += size
            packet.epoch = self.epoch
            loop.at(end + self.delay, self._arrive_call, packet)
        else:
            self.launch(packet, end)
        source.sent()
        if not self.wake and source.waiting():
            self.wake = True
            loop.at(end, self._start_call)

    def launch(self, packet, end):
        """``packet``'s last bit leaves at ``end``: apply the faults and schedule its arrival."""
        self.frames += 1
        self.bytes += packet.size
        if not self.up:
            self.lost_cut += 1
            return
        arrive = end + self.delay
        for imp in self.impairments:      # usually none
            rng = self.rng
            if imp.loss and rng.random() < imp.loss:
                self.lost += 1
                return
            if imp.trim and classify(packet.dscp) == FrameClass.TRIMMABLE and \
                    packet.size >= TRIM_MIN_BYTES and rng.random() < imp.trim:
                packet.trim(imp.trim_size, Dscp.TRIMMED)
                self.trimmed += 1
            if imp.ce and packet.ecn in (Ecn.ECT0, 1) and rng.random() < imp.ce:
                packet.mark_ce()
                self.ce_marked += 1
            if imp.delay_ns:
                arrive += ps(imp.delay_ns)
            if imp.jitter_ns:
                arrive += int(rng.random() * ps(imp.jitter_ns))
        packet.epoch = self.epoch
        self.loop.at(arrive, self._arrive_call, packet)

    def _arrive(self, packet):
        if packet.epoch != self.epoch:
            self.lost_cut += 1
            return
        self.delivered += 1
        self.sink.receive(packet, self.sink_port)

    def in_flight(self):
        """Frames launched and neither delivered nor lost yet."""
        return self.frames - self.delivered - self.lost - self.lost_cut

    def cut(self):
        """The link is cut: frames on the wire are lost, frames sent while down too."""
        self.up = False
        self.epoch += 1

    def heal(self):
        self.up = True


class Switch:
    """A T0 or T1 switch of one plane: the uN stage on every frame (docs/protocol.md 3), one
    :class:`FabricPort` and one outgoing :class:`Wire` per port (docs/protocol.md 7), counters per
    ingress port (``dropped_no_route``, ``dropped_hop_limit``, ``dropped_malformed``)."""

    def __init__(self, loop, name, role, plane, index, own_usid, routes, port_configs,
                 latency_ps, block):
        self.loop = loop
        self.name = name
        self.role = role
        self.plane = plane
        self.index = index
        self.own_usid = own_usid
        self.block = block
        self.routes = dict(routes)
        self.latency = latency_ps
        self.ports = [FabricPort(cfg) for cfg in port_configs]
        self.wires = [None] * len(self.ports)
        self.un = UnStageModel(table_depth=max(1, len(routes)),
                               port_width=max(1, (len(self.ports) - 1).bit_length()))
        self.un.set_own(block=block, usid=own_usid)
        for i, (key, port) in enumerate(sorted(self.routes.items())):
            self.un.set_entry(i, key, port)
        self._cache = {}               # outer destination -> un_step's answer (light packets)
        self._hops = {}                # outer destination -> (new one, egress port, its wire)
        self.ingress = [dict(dropped_no_route=0, dropped_hop_limit=0, dropped_malformed=0)
                        for _ in self.ports]

    def set_table(self, routes):
        """Write the route table (the controller's write after a restart; ``{}`` is the empty
        table of a switch that lost it): every entry rewritten, the route caches dropped."""
        self.routes = dict(routes)
        items = sorted(self.routes.items())
        for i in range(self.un.table_depth):
            key, port = items[i] if i < len(items) else (0, 0)
            self.un.set_entry(i, key, port, valid=i < len(items))
        self._cache.clear()
        self._hops.clear()

    def receive(self, packet, port):
        packet.inport = port
        if self.latency:
            self.loop.at(self.loop.now + self.latency, self.forward, packet)
            return
        if packet.frame is None and packet.hop_limit > 1:
            # A light packet on a route forward() already took: the same steps, inline.
            hop = self._hops.get(packet.da)
            if hop is not None:
                packet.da, egress, wire = hop
                packet.hop_limit -= 1
                if egress.admit(packet):
                    wire.kick()
                return
        self.forward(packet)

    def route(self, packet):
        """The egress port of ``packet`` after the uN step (rewriting it), or a drop reason."""
        if packet.frame is not None:
            result = self.un.process(packet.frame)
            if not isinstance(result, Forwarded):
                return "malformed" if result in ("short", "not_ipv6") else result
            packet.frame = result.frame
            packet.sync()
            return result.port
        if packet.hop_limit <= 1:
            return "hop_limit"
        step = self._cache.get(packet.da)
        if step is None:
            step = un_step(packet.da, 2, self.routes, self.own_usid, self.block)
            self._cache[packet.da] = step
        if not isinstance(step, Forward):
            return step
        packet.da = step.da
        packet.hop_limit -= 1
        return step.port

    def forward(self, packet):
        da = packet.da
        port = self.route(packet)
        if isinstance(port, str):
            self.ingress[packet.inport][f"dropped_{port}"] += 1
            return
        if port >= len(self.ports):
            self.ingress[packet.inport]["dropped_no_route"] += 1
            return
        if packet.frame is None:       # every light packet to da goes so (see receive)
            self._hops[da] = (packet.da, self.ports[port], self.wires[port])
        if self.ports[port].admit(packet):
            self.wires[port].kick()

    def counters(self):
        """Egress counters summed over ports, then the ingress ones."""
        total = {}
        for port in self.ports:
            for name, value in port.counters.items():
                total[name] = total.get(name, 0) + value
        for ingress in self.ingress:
            for name, value in ingress.items():
                total[name] = total.get(name, 0) + value
        return total


class FrameTap:
    """Where frames for one host land in bytes mode when no model NIC receives them (the
    cocotb bench of RTL NICs): ``frames`` holds ``(time_ps, plane, frame)`` in arrival order;
    :meth:`take` empties it."""

    def __init__(self, loop):
        self.loop = loop
        self.frames = []

    def receive(self, packet, plane):
        self.frames.append((self.loop.now, plane, packet.frame))

    def take(self):
        frames, self.frames = self.frames, []
        return frames


class WireTap:
    """Sees every frame a :class:`Wire` delivers, as it arrives (its last bit at the far end,
    after the propagation delay): it takes the wire's sink's place, calls ``record(time_ps,
    packet)`` and passes the packet on, unchanged. Frames the wire loses are not seen. Put it
    on a wire after the endpoints are attached (:meth:`Network.attach` sets the sinks of the
    host wires); untapped wires pay nothing."""

    def __init__(self, wire, record):
        self.wire = wire
        self.sink = wire.sink
        self.record = record
        wire.sink = self

    def receive(self, packet, port):
        self.record(self.wire.loop.now, packet)
        self.sink.receive(packet, port)


class Network:
    """The switches and wires of a :class:`models.fabric_topology.Topology`.

    ``port_config(role, port)`` gives the :class:`models.switch_queue.PortConfig` of each switch
    port (its ``fabric_facing`` is set from the topology). Hosts attach with :meth:`attach`: an
    endpoint with ``receive(packet, plane)`` gets every packet its T0s deliver, and (model NICs)
    a port object per plane (``pull()``, ``waiting()``) that feeds the wire to the T0.
    """

    def __init__(self, topology, port_config, seed=0, loop=None):
        self.topology = topo = topology
        self.loop = loop or EventLoop()
        self.seed = seed
        self.switches = {}
        self.host_wires = {}       # (host, plane) -> Wire host -> T0
        self.down_wires = {}       # (host, plane) -> Wire T0 -> host
        self.endpoints = {}
        delay = ps(topo.link_delay_ns)
        latency = ps(topo.switch_latency_ns)
        for p in range(topo.planes):
            for role, count in ((T0, topo.t0s), (T1, topo.t1s)):
                for i in range(count):
                    configs = [port_config(role, k, topo.fabric_facing(role, k))
                               for k in range(topo.switch_ports(role))]
                    self.switches[role, p, i] = Switch(
                        self.loop, f"{role}.{p}.{i}", role, p, i, topo.own_usid(role, p, i),
                        topo.routes(role, p, i), configs, latency, topo.block)
        for link in topo.links():
            node_a, node_b = link.a, link.b
            sw_b = self.switches[node_b]
            if node_a[0] == HOST:
                _, p, h = node_a
                tap = _Unattached(h)
                down = Wire(self.loop, f"{node_b}:{link.b_port}->host{h}", topo.link_gbps, delay,
                            topo.wire_overhead, sw_b.ports[link.b_port], tap, p, seed)
                sw_b.wires[link.b_port] = down
                self.down_wires[h, p] = down
                self.host_wires[h, p] = Wire(self.loop, f"host{h}.{p}->{node_b}", topo.link_gbps,
                                             delay, topo.wire_overhead, _NoSource(), sw_b,
                                             link.b_port, seed)
            else:
                sw_a = self.switches[node_a]
                up = Wire(self.loop, f"{node_a}:{link.a_port}->{node_b}", topo.link_gbps, delay,
                          topo.wire_overhead, sw_a.ports[link.a_port], sw_b, link.b_port, seed)
                down = Wire(self.loop, f"{node_b}:{link.b_port}->{node_a}", topo.link_gbps, delay,
                            topo.wire_overhead, sw_b.ports[link.b_port], sw_a, link.a_port, seed)
                sw_a.wires[link.a_port] = up
                sw_b.wires[link.b_port] = down

    # --- hosts -----------------------------------------------------------------------------------

    def attach(self, host, endpoint, ports=None):
        """Attach ``endpoint`` (``receive(packet, plane)``) to ``host``; ``ports[p]`` (optional)
        is the source of the host's wire on plane p (a model NIC port)."""
        self.endpoints[host] = endpoint
        for p in range(self.topology.planes):
            self.down_wires[host, p].sink = endpoint
        if ports is not None:
            for p, port in enumerate(ports):
                self.host_wires[host, p].source = port

    def host_wire(self, host, plane):
        return self.host_wires[host, plane]

    def inject(self, host, plane, frame):
        """A frame whose last bit left ``host``'s port on ``plane`` now (an RTL NIC already
        serialized it): it meets the link's faults and delay, then the T0. Returns the packet."""
        packet = frame if isinstance(frame, Packet) else Packet.from_frame(frame)
        self.host_wires[host, plane].launch(packet, self.loop.now)
        return packet

    # --- faults ----------------------------------------------------------------------------------

    def link_wires(self, plane, t0, t1):
        """The two wires of the link between T0 ``t0`` and T1 ``t1`` of ``plane``."""
        topo = self.topology
        return (self.switches[T0, plane, t0].wires[topo.uplink_port(t1)],
                self.switches[T1, plane, t1].wires[t0])

    def set_link(self, plane, t0, t1, up):
        """Cut (``up`` False) or heal the T0-T1 link: both egress ports go down or up, the
        wires lose what they carry while cut."""
        topo = self.topology
        ends = ((self.switches[T0, plane, t0], topo.uplink_port(t1)),
                (self.switches[T1, plane, t1], t0))
        for switch, port in ends:
            switch.ports[port].set_up(up)
            wire = switch.wires[port]
            wire.heal() if up else wire.cut()

    def set_host_link(self, host, plane, up):
        """Cut or heal the cable of ``host``'s port on ``plane`` (the T0 side: its downlink port
        goes down or up; the NIC side is the NIC's business, docs/protocol.md 4.6)."""
        topo = self.topology
        switch = self.switches[T0, plane, topo.t0_of(host)]
        port = topo.port_of(host)
        switch.ports[port].set_up(up)
        for wire in (switch.wires[port], self.host_wires[host, plane]):
            wire.heal() if up else wire.cut()

    def set_switch(self, plane, t1, up):
        """Take T1 ``t1`` of ``plane`` down with all its ports (every T0-T1 link to it cut) and
        its route table lost, or bring it back up: its links heal, its table still empty until
        :meth:`rewrite_table` (the controller's write)."""
        for t0 in range(self.topology.t0s):
            self.set_link(plane, t0, t1, up)
        if not up:
            self.switches[T1, plane, t1].set_table({})

    def rewrite_table(self, plane, t1):
        """The controller writes T1 ``t1`` of ``plane``'s route table again (docs/protocol.md 3)."""
        self.switches[T1, plane, t1].set_table(self.topology.routes(T1, plane, t1))

    def impair(self, wires, impairment):
        """Add ``impairment`` to every wire of ``wires``; returns a handle for :meth:`repair`."""
        wires = tuple(wires)
        for wire in wires:
            wire.impairments.append(impairment)
        return wires, impairment

    def repair(self, handle):
        wires, impairment = handle
        for wire in wires:
            wire.impairments.remove(impairment)

    def path_wires(self, plane, t1):
        """Every wire leaving T1 ``t1`` of ``plane``: a path fault there meets each packet of
        the path (plane, t1) once."""
        return [w for w in self.switches[T1, plane, t1].wires]

    def counters(self):
        """Every switch counter summed over the fabric, and the wires' fault counters."""
        total = {}
        for switch in self.switches.values():
            for name, value in switch.counters().items():
                total[name] = total.get(name, 0) + value
        wires = [w for s in self.switches.values() for w in s.wires] + \
            list(self.host_wires.values())
        for wire in wires:
            for name in ("lost", "lost_cut", "trimmed", "ce_marked"):
                key = f"wire_{name}"
                total[key] = total.get(key, 0) + wire.counters[name]
        return total

    def queued(self):
        """Frames waiting in every switch queue."""
        return sum(len(q) for s in self.switches.values() for port in s.ports
                   for q in port.queues.values())


class _Unattached:
    """The receiving end of a T0 -> host wire until an endpoint attaches to the host
    (:meth:`Network.attach` makes the endpoint the wire's sink)."""

    def __init__(self, host):
        self.host = host

    def receive(self, packet, plane):
        raise ValueError(f"{packet} reached host {self.host} on plane {plane}, which has no "
                         f"endpoint attached")


class _NoSource:
    """The source of a host wire until a model NIC attaches its port (frames are injected)."""

    @staticmethod
    def pull():
        return None

    @staticmethod
    def sent():
        """Nothing: no frame is ever pulled."""

    @staticmethod
    def waiting():
        return False
