# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of one egress port of the trimming switch (docs/protocol.md sections 6 and 7).

Frames go in as bytes (Ethernet frames without FCS) with :meth:`EgressPort.enqueue`, and out as
bytes with :meth:`EgressPort.dequeue`. The port holds two FIFO queues that count frame bytes:

- the data queue (limit ``data_limit``, default 8 x 4096 bytes) and the control queue (limit
  ``control_limit``, default 2 x the data limit);
- classification by the outer DSCP: CONTROL, TRIMMED and TRIMMED_LASTHOP go to the control queue;
  TRIMMABLE and TRIMMABLE_RETX to the data queue, trimmable; anything else to the data queue, not
  trimmable;
- frame bytes = 54 + the outer Payload Length. A frame shorter than 54 bytes, or whose length
  disagrees with it, is dropped and counted (``dropped_malformed``: the switch top attributes it
  to the ingress port, docs/protocol.md 7);
- with ``q`` the bytes already in a queue, a frame fits when ``q + frame bytes <= limit``;
- a trimmable frame that does not fit in the data queue is trimmed: its first ``trim_size`` bytes
  are kept (a frame not longer is kept whole), the outer and inner Payload Length and the UDP
  length are rewritten to the kept size, the outer DSCP becomes TRIMMED (fabric-facing port) or
  TRIMMED_LASTHOP (host-facing port), and the result is admitted to the control queue like any
  control frame. A trimmable frame shorter than 134 bytes (``TRIM_MIN_BYTES``: it cannot hold the
  headers a receiver needs to NACK it) is not trimmed but dropped like a non-trimmable one;
- a frame that does not fit (a data frame not trimmed, a control frame, a trimmed frame in the
  control queue) is dropped and counted (``dropped_full``). ``trimmed`` counts trimmed frames that
  entered the control queue;
- ECN, fabric-facing ports only, on every data frame enqueued whole into the data queue: the
  port's 16-bit Galois LFSR (taps 0xB400) steps once, ``r`` is its new value, and the frame is
  marked when ``q >= kmax``, or ``q > kmin`` and ``r < (q - kmin) * 65536 // (kmax - kmin)``
  (:func:`ecn_mark`). Marking writes CE (11) in the outer ECN field. Profile choice of this model:
  a Not-ECT frame (ECN 00) is never marked (RFC 3168: CE only on ECN-capable transports) although
  the LFSR still steps for it, so the LFSR sequence depends only on which frames are enqueued
  whole; ``ecn_marked`` counts the frames whose decision was to mark and that are ECN-capable
  (ECT(0), ECT(1) or already CE). Host-facing ports never mark and never step the LFSR;
- dequeue: the control queue first, except that after ``control_burst`` (16) control frames in a
  row while data waits, one data frame goes. The run counts control frames served while the data
  queue was not empty; it restarts at 0 when a data frame is served or a control frame is served
  with the data queue empty;
- a port that goes down (:meth:`EgressPort.set_up`) flushes both queues and drops every frame
  routed to it until it comes back up, all counted (``dropped_port_down``);
- ``forwarded`` counts frames dequeued.

Every offset comes from :mod:`models.layouts`. Nothing here imports cocotb, Amaranth or scapy.
"""

from collections import deque
from dataclasses import dataclass

from .layouts import (IPV6, UDP, INNER_OFFSET, OUTER_OFFSET, TRIM_MIN_BYTES, UDP_OFFSET, Dscp,
                      Ecn)

__all__ = [
    "MAX_PMTU", "DATA_LIMIT_DEFAULT", "TRIM_SIZE_DEFAULT", "KMIN_DEFAULT", "KMAX_DEFAULT",
    "CONTROL_BURST", "LFSR_TAPS", "LFSR_SEED_DEFAULT", "FRAME_BYTES_BASE", "CONTROL_DSCPS",
    "TRIMMABLE_DSCPS", "COUNTERS", "FrameClass", "Verdict", "Queue", "lfsr_step", "ecn_threshold",
    "ecn_mark", "classify", "frame_bytes", "outer_header", "rewrite", "trim", "set_outer_ecn",
    "PortConfig", "Admission", "Departure", "EgressPort",
]

MAX_PMTU = 4096
DATA_LIMIT_DEFAULT = 8 * MAX_PMTU
TRIM_SIZE_DEFAULT = 256
KMIN_DEFAULT = 2 * MAX_PMTU
KMAX_DEFAULT = 6 * MAX_PMTU
CONTROL_BURST = 16
LFSR_TAPS = 0xB400             # x^16 + x^14 + x^13 + x^11 + 1 (docs/protocol.md 4.3)
LFSR_SEED_DEFAULT = 0xACE1
ECN_SCALE = 1 << 16
FRAME_BYTES_BASE = INNER_OFFSET    # 54: Ethernet + outer IPv6, not in the outer Payload Length

CONTROL_DSCPS = (Dscp.CONTROL, Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)
TRIMMABLE_DSCPS = (Dscp.TRIMMABLE, Dscp.TRIMMABLE_RETX)
COUNTERS = ("forwarded", "trimmed", "ecn_marked", "dropped_full", "dropped_port_down",
            "dropped_malformed")


class FrameClass:
    CONTROL = "control"
    TRIMMABLE = "trimmable"
    DATA = "data"          # data queue, not trimmable


class Queue:
    DATA = "data"
    CONTROL = "control"


class Verdict:
    """What :meth:`EgressPort.enqueue` did with a frame."""
    DATA = "data"                        # whole, into the data queue
    CONTROL = "control"                  # whole, into the control queue
    TRIMMED = "trimmed"                  # trimmed, into the control queue
    DROPPED_FULL = "dropped_full"
    DROPPED_PORT_DOWN = "dropped_port_down"
    MALFORMED = "malformed"


def lfsr_step(state):
    """One step of the 16-bit Galois LFSR of docs/protocol.md 4.3 (shift right, taps 0xB400)."""
    lsb = state & 1
    state >>= 1
    return state ^ LFSR_TAPS if lsb else state


def ecn_threshold(q, kmin, kmax):
    """The marking threshold on ``r`` for ``q`` queued bytes: mark when ``r`` is below it
    (0: never; 65536: always, as every 16-bit ``r`` is below it)."""
    if q >= kmax:
        return ECN_SCALE
    if q > kmin:
        return (q - kmin) * ECN_SCALE // (kmax - kmin)
    return 0


def ecn_mark(q, r, kmin, kmax):
    """The ECN rule of docs/protocol.md 7 for ``q`` bytes already queued and LFSR value ``r``."""
    return r < ecn_threshold(q, kmin, kmax)


def classify(dscp):
    """The :class:`FrameClass` of an outer DSCP."""
    if dscp in CONTROL_DSCPS:
        return FrameClass.CONTROL
    if dscp in TRIMMABLE_DSCPS:
        return FrameClass.TRIMMABLE
    return FrameClass.DATA


def outer_header(frame):
    """The outer IPv6 header's fields; raises ValueError if the frame is too short to hold it."""
    return IPV6.unpack(frame[OUTER_OFFSET:INNER_OFFSET])


def frame_bytes(frame):
    """54 + the outer Payload Length; None when the frame is too short or its length disagrees."""
    if len(frame) < FRAME_BYTES_BASE:
        return None
    n = FRAME_BYTES_BASE + outer_header(frame)["payload_length"]
    return n if n == len(frame) else None


def rewrite(frame, offset, header, **values):
    """``frame`` with fields of the ``header`` at byte ``offset`` set to ``values``."""
    fields = header.unpack(frame[offset:offset + header.size])
    fields.update(values)
    return frame[:offset] + header.pack(**fields) + frame[offset + header.size:]


def trim(frame, trim_size, dscp):
    """The first ``trim_size`` bytes of ``frame`` (all of it when not longer), with the outer and
    inner Payload Length and the UDP length rewritten to the kept size and the outer DSCP ``dscp``.
    The frame must hold at least ``TRIM_MIN_BYTES``."""
    if len(frame) < TRIM_MIN_BYTES:
        raise ValueError(f"a frame of {len(frame)} B is too short to trim")
    kept = bytes(frame[:trim_size])
    after_inner = len(kept) - UDP_OFFSET
    kept = rewrite(kept, OUTER_OFFSET, IPV6, payload_length=len(kept) - INNER_OFFSET, dscp=dscp)
    kept = rewrite(kept, INNER_OFFSET, IPV6, payload_length=after_inner)
    return rewrite(kept, UDP_OFFSET, UDP, length=after_inner)


def set_outer_ecn(frame, ecn):
    """``frame`` with its outer ECN field set to ``ecn``."""
    return rewrite(bytes(frame), OUTER_OFFSET, IPV6, ecn=ecn)


@dataclass(frozen=True)
class PortConfig:
    """Parameters of one egress port (defaults of docs/protocol.md 7). ``control_limit`` None means
    2 x ``data_limit``."""
    fabric_facing: bool = True
    data_limit: int = DATA_LIMIT_DEFAULT
    control_limit: int | None = None
    trim_size: int = TRIM_SIZE_DEFAULT
    kmin: int = KMIN_DEFAULT
    kmax: int = KMAX_DEFAULT
    lfsr_seed: int = LFSR_SEED_DEFAULT
    control_burst: int = CONTROL_BURST

    def __post_init__(self):
        def positive(name, value):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")

        positive("data_limit", self.data_limit)
        if self.control_limit is None:
            object.__setattr__(self, "control_limit", 2 * self.data_limit)
        positive("control_limit", self.control_limit)
        positive("trim_size", self.trim_size)
        positive("control_burst", self.control_burst)
        if self.trim_size < TRIM_MIN_BYTES:
            raise ValueError(f"trim_size must be at least {TRIM_MIN_BYTES} (headers through "
                             f"RETH), not {self.trim_size}")
        if self.trim_size > self.control_limit:
            raise ValueError(f"trim_size {self.trim_size} exceeds the control queue limit "
                             f"{self.control_limit}")
        if isinstance(self.kmin, bool) or not isinstance(self.kmin, int) or self.kmin < 0 or \
                isinstance(self.kmax, bool) or not isinstance(self.kmax, int) or \
                self.kmax <= self.kmin:
            raise ValueError(f"ECN thresholds must be integers with 0 <= kmin < kmax, not "
                             f"kmin={self.kmin!r}, kmax={self.kmax!r}")
        if isinstance(self.lfsr_seed, bool) or not isinstance(self.lfsr_seed, int) or \
                not 0 < self.lfsr_seed < 1 << 16:
            raise ValueError(f"lfsr_seed must be a non-zero 16-bit value, not {self.lfsr_seed!r}")

    @property
    def trimmed_dscp(self):
        return Dscp.TRIMMED if self.fabric_facing else Dscp.TRIMMED_LASTHOP


@dataclass(frozen=True)
class Admission:
    """The decision on one frame and the inputs it was taken on: the verdict, the frame bytes
    in, the queue judged last (None when no queue was), the bytes already in the data and the
    control queue when the frame arrived (``q_data`` is the ECN rule's ``q``), the frame as
    enqueued (None when dropped), and, when the ECN rule ran, the LFSR value ``r`` and its
    decision ``mark``."""
    verdict: str
    length: int
    q_data: int
    q_control: int
    queue: str | None = None
    frame: bytes | None = None
    lfsr: int | None = None
    mark: bool = False


@dataclass(frozen=True)
class Departure:
    """One frame dequeued, with the queue it came from."""
    queue: str
    frame: bytes


class EgressPort:
    """One egress port: two byte-limited queues, trimming, ECN marking, dequeue order, counters
    (see the module docstring)."""

    def __init__(self, config=None, **params):
        if config is not None and params:
            raise ValueError("give either a PortConfig or parameters, not both")
        self.config = config if config is not None else PortConfig(**params)
        self.lfsr = self.config.lfsr_seed
        self.up = True
        self.queues = {Queue.DATA: deque(), Queue.CONTROL: deque()}
        self.occupancy = {Queue.DATA: 0, Queue.CONTROL: 0}
        self.control_run = 0
        self.counters = dict.fromkeys(COUNTERS, 0)

    def _limit(self, queue):
        return self.config.data_limit if queue == Queue.DATA else self.config.control_limit

    def _fits(self, queue, length):
        return self.occupancy[queue] + length <= self._limit(queue)

    def _push(self, queue, frame):
        self.queues[queue].append(frame)
        self.occupancy[queue] += len(frame)

    def _control(self, verdict, frame, length, q_data):
        """Admit a whole control frame or a trimmed one into the control queue."""
        q_control = self.occupancy[Queue.CONTROL]
        if not self._fits(Queue.CONTROL, len(frame)):
            self.counters["dropped_full"] += 1
            return Admission(Verdict.DROPPED_FULL, length, q_data, q_control, Queue.CONTROL)
        self._push(Queue.CONTROL, frame)
        if verdict == Verdict.TRIMMED:
            self.counters["trimmed"] += 1
        return Admission(verdict, length, q_data, q_control, Queue.CONTROL, frame)

    def enqueue(self, frame):
        """Route one frame (bytes) to this port; returns its :class:`Admission`."""
        frame = bytes(frame)
        length = len(frame)
        q_data, q_control = self.occupancy[Queue.DATA], self.occupancy[Queue.CONTROL]
        if not self.up:
            self.counters["dropped_port_down"] += 1
            return Admission(Verdict.DROPPED_PORT_DOWN, length, q_data, q_control)
        if frame_bytes(frame) is None:
            self.counters["dropped_malformed"] += 1
            return Admission(Verdict.MALFORMED, length, q_data, q_control)
        outer = outer_header(frame)
        kind = classify(outer["dscp"])
        if kind == FrameClass.CONTROL:
            return self._control(Verdict.CONTROL, frame, length, q_data)
        if self._fits(Queue.DATA, length):
            return self._enqueue_data(frame, length, q_data, q_control, outer["ecn"])
        if kind == FrameClass.TRIMMABLE and length >= TRIM_MIN_BYTES:
            return self._control(Verdict.TRIMMED,
                                 trim(frame, self.config.trim_size, self.config.trimmed_dscp),
                                 length, q_data)
        self.counters["dropped_full"] += 1
        return Admission(Verdict.DROPPED_FULL, length, q_data, q_control, Queue.DATA)

    def _enqueue_data(self, frame, length, q, q_control, ecn):
        """A data frame enqueued whole, with the ECN rule on fabric-facing ports."""
        r = None
        mark = False
        if self.config.fabric_facing:
            self.lfsr = r = lfsr_step(self.lfsr)
            mark = ecn_mark(q, r, self.config.kmin, self.config.kmax)
            if mark and ecn != Ecn.NOT_ECT:
                self.counters["ecn_marked"] += 1
                if ecn != Ecn.CE:
                    frame = set_outer_ecn(frame, Ecn.CE)
        self._push(Queue.DATA, frame)
        return Admission(Verdict.DATA, length, q, q_control, Queue.DATA, frame, r, mark)

    def dequeue(self):
        """The next frame to send (a :class:`Departure`), or None when both queues are empty."""
        data_waits = bool(self.queues[Queue.DATA])
        if self.queues[Queue.CONTROL] and not (data_waits and
                                               self.control_run >= self.config.control_burst):
            queue = Queue.CONTROL
            self.control_run = self.control_run + 1 if data_waits else 0
        elif data_waits:
            queue = Queue.DATA
            self.control_run = 0
        else:
            return None
        frame = self.queues[queue].popleft()
        self.occupancy[queue] -= len(frame)
        self.counters["forwarded"] += 1
        return Departure(queue, frame)

    def set_up(self, up):
        """Bring the port up or down; going down flushes both queues (counted). Returns the
        number of frames flushed."""
        flushed = 0
        if not up:
            for queue in self.queues.values():
                flushed += len(queue)
                queue.clear()
            self.occupancy = dict.fromkeys(self.occupancy, 0)
            self.control_run = 0
            self.counters["dropped_port_down"] += flushed
        self.up = bool(up)
        return flushed
