# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the whole trimming switch (docs/protocol.md sections 3, 6, 7 and 8).

K ports, each an ingress and an egress. A frame (Ethernet without FCS, as bytes) goes through:

1. **Ingress** (:meth:`SwitchModel.arrive`), per ingress port. A frame that overflowed the
   ingress FIFO is dropped and counted (``dropped_overflow``); whether it did depends on timing,
   so the caller says so (the RTL reports it on its trace). Otherwise the frame is checked, in
   this order, and a failure is dropped and counted as ``dropped_malformed`` (the sub-reason is
   kept in :attr:`SwitchModel.malformed` for tests): ``bad`` (the frame was flagged bad upstream,
   ``tuser[0]`` on its last beat), ``short`` (fewer than 54 bytes: no outer IPv6 header),
   ``oversize`` (more than ``max_frame`` bytes, the largest frame the queues are sized for) and
   ``length`` (54 + the outer Payload Length is not the frame's length; docs/protocol.md 7: known only at
   the frame's end, so the RTL writes the frame and rolls its write pointer back). A frame that
   passes waits in its ingress FIFO.
2. **Arbiter** (:meth:`SwitchModel.grant`): frames leave the ingress FIFOs in the order the RTL's
   arbiter reports (one ingress port per frame, round-robin in the RTL; the model takes the order
   as an input, docs/protocol.md 8). Each goes through the uN stage (:class:`models.un_stage.UnStageModel`,
   one table for the switch): ``not_ipv6`` counts as ``dropped_malformed`` (sub-reason
   ``not_ipv6``), ``hop_limit`` as ``dropped_hop_limit``, a table miss and a route to a port number
   the switch does not have (K not a power of two) as ``dropped_no_route``, all charged to the
   ingress port. A forwarded frame (destination shifted, Hop Limit decremented) waits for its
   admission, in order.
3. **Egress** (:meth:`SwitchModel.admit`, :meth:`SwitchModel.dequeue`): one
   :class:`models.switch_queue.EgressPort` per port (classification, admission, trimming, ECN,
   two queues, anti-starvation, port down, counters). Admissions and dequeues interleave as the
   RTL reports them (the queue fill each admission sees depends on it); within one clock cycle the
   RTL's order is: configuration writes, then dequeues, then the admission.

The switch's state out of reset: every port up, the given roles, LFSR seeds and thresholds, the uN
stage as :class:`models.un_stage.UnStageModel` starts (own uSID 0x0000, every entry invalid).

Profile choices of this model (the RTL follows them): ingress frames are checked for length at
the ingress (so no malformed frame reaches the core); ``short`` frames never reach the uN stage;
frames routed to a port number >= K count as no route; an LFSR seed write of 0 is ignored (a
Galois LFSR must not hold 0). Nothing here imports cocotb, Amaranth or scapy.
"""

from collections import Counter, deque
from dataclasses import dataclass, replace

from .layouts import INNER_OFFSET, IPV6, OUTER_OFFSET
from .switch_queue import (CONTROL_BURST, DATA_LIMIT_DEFAULT, KMAX_DEFAULT, KMIN_DEFAULT,
                           LFSR_SEED_DEFAULT, TRIM_SIZE_DEFAULT, EgressPort, PortConfig)
from .un_stage import HOP_LIMIT, NO_ROUTE, NOT_IPV6, Forwarded, UnStageModel

__all__ = [
    "SwitchConfig", "SwitchModel", "Pending", "INGRESS_COUNTERS", "EGRESS_COUNTERS",
    "MALFORMED_REASONS", "MAX_FRAME_DEFAULT", "MAX_PORTS", "MIN_FRAME", "STORED", "OVERFLOW",
    "MALFORMED", "check_frame", "port_width",
]

MIN_FRAME = INNER_OFFSET            # 54: Ethernet + outer IPv6
MAX_FRAME_DEFAULT = 4352            # the largest MRC frame (4238 B at PMTU 4096) and some slack
MAX_PORTS = 8
INGRESS_COUNTERS = ("dropped_no_route", "dropped_hop_limit", "dropped_malformed",
                    "dropped_overflow")
EGRESS_COUNTERS = ("forwarded", "trimmed", "ecn_marked", "dropped_full", "dropped_port_down")
MALFORMED_REASONS = ("bad", "short", "oversize", "length", "not_ipv6")

# What arrive() did with a frame.
STORED = "stored"
OVERFLOW = "overflow"
MALFORMED = "malformed"

_PAYLOAD_LENGTH_BYTE = OUTER_OFFSET + IPV6["payload_length"].offset // 8     # 18


def port_width(ports):
    """Bits of an egress port number for ``ports`` ports (at least 1)."""
    return max(1, (ports - 1).bit_length())


def check_frame(frame, bad=False, max_frame=MAX_FRAME_DEFAULT):
    """The ingress check of one frame: None if it may enter, else its malformed sub-reason."""
    n = len(frame)
    if bad:
        return "bad"
    if n < MIN_FRAME:
        return "short"
    if n > max_frame:
        return "oversize"
    payload_length = int.from_bytes(frame[_PAYLOAD_LENGTH_BYTE:_PAYLOAD_LENGTH_BYTE + 2], "big")
    if MIN_FRAME + payload_length != n:
        return "length"
    return None


def _check_int(name, value, low, high=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < low or \
            (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {bound}, not {value!r}")


@dataclass(frozen=True)
class SwitchConfig:
    """Parameters of the switch (defaults of docs/protocol.md 7). ``fabric_facing`` and ``lfsr_seeds``
    give one value per port (None: every port fabric-facing, every seed the default);
    ``control_limit`` None means 2 x ``data_limit``."""
    ports: int = 4
    fabric_facing: tuple | None = None
    data_limit: int = DATA_LIMIT_DEFAULT
    control_limit: int | None = None
    trim_size: int = TRIM_SIZE_DEFAULT
    kmin: int = KMIN_DEFAULT
    kmax: int = KMAX_DEFAULT
    lfsr_seeds: tuple | None = None
    table_depth: int = 64
    max_frame: int = MAX_FRAME_DEFAULT
    control_burst: int = CONTROL_BURST

    def __post_init__(self):
        _check_int("ports", self.ports, 2, MAX_PORTS)
        if self.fabric_facing is None:
            object.__setattr__(self, "fabric_facing", (True,) * self.ports)
        if self.lfsr_seeds is None:
            object.__setattr__(self, "lfsr_seeds", (LFSR_SEED_DEFAULT,) * self.ports)
        for name in ("fabric_facing", "lfsr_seeds"):
            value = tuple(getattr(self, name))
            if len(value) != self.ports:
                raise ValueError(f"{name} needs one value per port ({self.ports}), not {value!r}")
            object.__setattr__(self, name, value)
        object.__setattr__(self, "fabric_facing", tuple(bool(f) for f in self.fabric_facing))
        _check_int("max_frame", self.max_frame, 138, 65535 + MIN_FRAME)
        for port in range(self.ports):     # PortConfig checks limits, trim size, ECN, seeds
            self.port_config(port)

    def port_config(self, port):
        """The :class:`PortConfig` of egress ``port``."""
        return PortConfig(fabric_facing=self.fabric_facing[port], data_limit=self.data_limit,
                          control_limit=self.control_limit, trim_size=self.trim_size,
                          kmin=self.kmin, kmax=self.kmax, lfsr_seed=self.lfsr_seeds[port],
                          control_burst=self.control_burst)


@dataclass(frozen=True)
class Pending:
    """A frame forwarded by the uN stage, waiting for its admission at ``port``."""
    frame: bytes
    port: int
    ingress: int


class SwitchModel:
    """The whole switch: ingress checks, the arbiter order given, the uN stage, K egress ports,
    per-port and per-ingress counters (see the module docstring)."""

    def __init__(self, config=None, **params):
        if config is not None and params:
            raise ValueError("give either a SwitchConfig or parameters, not both")
        self.config = config if config is not None else SwitchConfig(**params)
        cfg = self.config
        self.ports = cfg.ports
        self.un = UnStageModel(table_depth=cfg.table_depth, port_width=port_width(cfg.ports))
        self.egress = [EgressPort(cfg.port_config(p)) for p in range(cfg.ports)]
        self.stored = [deque() for _ in range(cfg.ports)]
        self.pending = deque()
        self.counters = [dict.fromkeys(INGRESS_COUNTERS, 0) for _ in range(cfg.ports)]
        self.malformed = [Counter() for _ in range(cfg.ports)]

    def _check_port(self, port):
        _check_int("port", port, 0, self.ports - 1)

    # --- the three steps ----------------------------------------------------------------------

    def arrive(self, port, frame, bad=False, overflow=False):
        """A frame ends at ingress ``port``; ``bad`` is its ``tuser[0]``, ``overflow`` whether
        the RTL dropped it for lack of room in the ingress FIFO. Returns :data:`STORED`,
        :data:`OVERFLOW` or :data:`MALFORMED`."""
        self._check_port(port)
        frame = bytes(frame)
        if overflow:
            self.counters[port]["dropped_overflow"] += 1
            return OVERFLOW
        reason = check_frame(frame, bad, self.config.max_frame)
        if reason is not None:
            self.counters[port]["dropped_malformed"] += 1
            self.malformed[port][reason] += 1
            return MALFORMED
        self.stored[port].append(frame)
        return STORED

    def grant(self, port):
        """The arbiter takes the oldest stored frame of ingress ``port`` into the core. Returns
        the :class:`Pending` admission, or the drop reason (``not_ipv6``, ``hop_limit`` or
        ``no_route``)."""
        self._check_port(port)
        if not self.stored[port]:
            raise ValueError(f"the arbiter took a frame from ingress {port}, which holds none")
        result = self.un.process(self.stored[port].popleft())
        if isinstance(result, Forwarded) and result.port >= self.ports:
            result = NO_ROUTE
        if result == NOT_IPV6:
            self.counters[port]["dropped_malformed"] += 1
            self.malformed[port][NOT_IPV6] += 1
            return result
        if result in (HOP_LIMIT, NO_ROUTE):
            self.counters[port][f"dropped_{result}"] += 1
            return result
        pending = Pending(result.frame, result.port, port)
        self.pending.append(pending)
        return pending

    def admit(self, port):
        """The oldest forwarded frame meets its egress ``port`` (which must be the one the uN
        stage chose); returns its :class:`models.switch_queue.Admission`."""
        self._check_port(port)
        if not self.pending:
            raise ValueError(f"an admission at port {port}, but no frame is on its way")
        if self.pending[0].port != port:
            raise ValueError(f"an admission at port {port}, but the next frame goes to port "
                             f"{self.pending[0].port}")
        return self.egress[port].enqueue(self.pending.popleft().frame)

    def dequeue(self, port):
        """Egress ``port`` starts sending its next frame: a
        :class:`models.switch_queue.Departure`, or None when both its queues are empty."""
        self._check_port(port)
        return self.egress[port].dequeue()

    # --- configuration ------------------------------------------------------------------------

    def set_up(self, port, up):
        """Bring egress ``port`` up or down (down flushes its queues, counted); returns the
        number of frames flushed."""
        self._check_port(port)
        return self.egress[port].set_up(up)

    def set_fabric_facing(self, port, fabric_facing):
        """Set the role of ``port``: fabric-facing (ECN, TRIMMED) or host-facing."""
        self._check_port(port)
        egress = self.egress[port]
        egress.config = replace(egress.config, fabric_facing=bool(fabric_facing))

    def set_ecn_thresholds(self, port, kmin=None, kmax=None):
        """Set Kmin and/or Kmax (bytes) of ``port``; the pair must keep 0 <= Kmin < Kmax."""
        self._check_port(port)
        egress = self.egress[port]
        changes = {k: v for k, v in (("kmin", kmin), ("kmax", kmax)) if v is not None}
        egress.config = replace(egress.config, **changes)

    def set_lfsr(self, port, value):
        """Load the LFSR of ``port`` with the low 16 bits of ``value``; 0 is ignored."""
        self._check_port(port)
        if value & 0xFFFF:
            self.egress[port].lfsr = value & 0xFFFF

    # --- state ----------------------------------------------------------------------------------

    def ingress_counters(self, port):
        self._check_port(port)
        return dict(self.counters[port])

    def egress_counters(self, port):
        self._check_port(port)
        return {name: self.egress[port].counters[name] for name in EGRESS_COUNTERS}

    def empty(self):
        """True when no frame waits anywhere: ingress FIFOs, admissions, egress queues."""
        return not self.pending and not any(self.stored) and \
            not any(q for e in self.egress for q in e.queues.values())
