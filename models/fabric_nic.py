# SPDX-License-Identifier: BSD-2-Clause
"""Model NICs of the fabric model: MRC senders and receivers at packet level (docs/protocol.md 2, 4, 5).

A :class:`Nic` is one host's NIC engine: one port per plane, sender QPs and receiver QPs (each
numbered from 0 at its NIC; a data packet carries the receiver's QPN, its SACKs and NACKs the
sender's).

**Sender.** Work requests (RDMA Writes) are cut into packets of at most PMTU bytes (opcodes
FIRST/MIDDLE/LAST/ONLY, AckReq on the last, RETH in every packet, docs/protocol.md 1.4-1.5). QPs are
served round-robin (:func:`models.spray.serve_qp`: a retransmission first, a new PSN only below
the PSN limit), and each packet's plane and EV come from the NIC's :class:`models.spray.EvTable`
(docs/protocol.md 4.3), asked with the planes that are up and have room in their port FIFO
(``port_fifo`` frames). The NIC's :class:`models.reliability.Reliability` block (docs/protocol.md 5) gets
a SEND_RECORD per packet sent or flushed, every SACK and NACK, the EV_MARKED answers, the work
request taps and the ticks; its output records drive the rest: RETX_REQUEST (a retransmission,
never on the EV to avoid), PSN_LIMIT, RETIRE, COMPLETION, EV_EVENT (applied to the EV table; BAD
answered by EV_MARKED) and probes. The host keeps at most ``wr_depth`` work requests posted per
QP (the block's work-request FIFO) and posts the next as one completes.

ECMP baseline (``transport = "ecmp"``): the same sender, but each QP is pinned to one path:
it uses one NIC port, and its T1 is fixed at set-up by a hash of its addresses and ports as an
ECMP switch picks an uplink (:func:`ecmp_path`). A flow uses one QP per plane, which share its
window (``w_max`` / P each). It has no EV table: EV events change nothing (BAD is answered with
no EV marked) and a retransmission goes on the same path (there is no other).

Oblivious spraying (``transport = "oblivious"``, UET's oblivious mode as htsim models it, the
cross-check of issue [cc] item 4): one QP per flow, as MRC, but no EV table: each packet takes
the next of 64 EVs, a power-of-two cycle of indices XORed with a random mask redrawn every
cycle, each EV on the T1 an ECMP switch would hash it to (:class:`Oblivious`). Feedback changes
no path choice (EV events are answered as for ECMP).

**Receiver.** Every data packet and probe of a QP goes to its
:class:`models.rx_tracker.RxTracker` (the checks of docs/protocol.md 5 after the frame's shape and ICRC),
placed payload is written to the QP's memory region (bytes mode: the bytes at their VA; light
mode: the count), and the SACKs and NACKs it produces go back on the reverse path of the packet
they answer (docs/protocol.md 4.5), as do probe answers.

**Ports.** A NIC port sends control frames (SACK, NACK, probes) before data frames; data frames
wait in a FIFO of ``port_fifo`` frames. A port that goes down (docs/protocol.md 4.6) leaves the EV table's
rotation at once; its FIFO is flushed (each data packet in it is reported with ``flushed`` = 1,
and the reliability block requests it again at once, no EV change, no retry charge) and its
control frames are dropped and counted.

In bytes mode every frame is built by :mod:`models.packets` (``build_frame``, with its ICRC),
read back by ``parse_frame`` at the receiver, and feedback reaches the reliability block as the
FEEDBACK_RECORD of the frame. In light mode the same fields travel without bytes and the parsed
SACK or NACK goes to the block's SACK or NACK step directly.

**Speed.** The NICs run fast forms of the three golden models, each a subclass that computes
exactly what its model computes (same outputs, same state; ``tests/test_fabric.py`` drives both
with the same random inputs): :class:`FastReliability` (SACKs acknowledged by bit masks, PSN
timers on a wheel), :class:`FastRxTracker` (mutable state, the SACK bitmap read from the receive
bitmap by integer operations, SACKs as :class:`LightSack` tuples) and :class:`FastEvTable` (the
choice made on a mutable copy of the QP's EV sets). Nothing here imports cocotb, Amaranth or
scapy.
"""

from collections import deque, namedtuple
from dataclasses import dataclass, fields as dataclass_fields
from hashlib import blake2b

from .fabric_net import PS_PER_US, Packet
from .fabric_topology import nic_address, plane_address, port_mac
from .layouts import (Dscp, Ecn, HOP_LIMIT_DEFAULT, IMM_OPCODES, NackReason, Opcode, PETH,
                      SackVerdict)
from .packets import (Addresses, FrameError, build_frame, data_packet, frame_length, sack_base,
                      nack_packet, parse_frame, probe_packet, sack_packet)
from .nscc import MIN_COST, STAMP_NS, NsccConfig, packet_cost
from .nscc import STYLES as NSCC_STYLES
from .records import CompletionStatus, EvEvent, RetxCause, ext_to_int, int_to_ext
from .reliability import STREAMS, PsnEntry, PsnState, QpConfig, Reliability
from .rx_tracker import (BITMAP_BITS, COALESCE_TICKS, COALESCE_UNIT, MPR_DEFAULT, MPR_UNIT,
                         OOO_MODULUS, PLACED_BYTES_MODULUS, PLACED_UNIT_SHIFT, PSN_MODULUS,
                         SACK_BYTES_DEFAULT, SACK_EVERY, WIMM_MAX_DEFAULT, Arrival, Nack, RxState,
                         RxTracker, Sack, Verdict, on_arrival, psn_add, psn_diff, received)
from .rx_tracker import Result as RxResult
from .spray import (Choice, EvTable, PlaneSet, QpSet, SlotState, ev_marked_records, ev_plane,
                    lfsr_step, make_ev)
from .tick import TICK_NS

__all__ = ["MRC", "ECMP", "OBLIVIOUS", "TRANSPORTS", "Oblivious", "NicConfig", "Message", "Flow", "Nic", "FastReliability",
           "FastRxTracker", "FastEvTable", "LightSack", "ecmp_path", "draw_ev_sets", "ev_set_layout",
           "TICK_PS",
           "COUNTERS"]

MRC = "mrc"
ECMP = "ecmp"
OBLIVIOUS = "oblivious"
TRANSPORTS = (MRC, ECMP, OBLIVIOUS)
TICK_PS = TICK_NS * 1000
RKEY_BASE = 0x100
VA_BASE = 1 << 40
SACK_BYTES = frame_length(Opcode.SACK, 0)
NACK_BYTES = frame_length(Opcode.NACK, 0)
PROBE_BYTES = frame_length(Opcode.PROBE, 0)
_DATA = frozenset((Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST,
                   Opcode.WRITE_ONLY))
_ACKREQ = frozenset((Opcode.WRITE_LAST, Opcode.WRITE_ONLY))
_PSN_HALF = PSN_MODULUS >> 1
_MASK64 = (1 << 64) - 1
_BLOCK_MASK = (PSN_MODULUS - 1) & ~63   # the aligned block of 64 PSNs (docs/protocol.md 2.1)
_OFFSET_MIN = -(1 << 15)           # the SACK's ack_psn_offset floor (models.rx_tracker)
_EV_PATH_BITS = 0xFFF              # EV[11:0]: plane and T1 index (docs/protocol.md 4.1)
_CREDITS = 1 << 16                 # WINDOW_ROOM.credit and SendQp.sends are modulo 2^16
_BYTE_CREDITS = 1 << 32            # WINDOW_ROOM.byte_credit and SendQp.bytes_sent: modulo 2^32
_FRAME_BYTES = {}                  # (opcode, payload bytes) -> frame bytes
_GOOD, _SKIP = SlotState.GOOD, SlotState.SKIP

COUNTERS = ("data_sent", "data_bytes_sent", "retransmitted", "retx_retired", "flushed",
            "sacks_sent", "nacks_sent", "probes_sent", "probe_answers", "sacks_received",
            "control_rerouted",
            "nacks_received",
            "placed", "duplicates", "trimmed_received", "ce_received", "out_of_window",
            "ev_skip", "ev_bad", "ev_marked", "ev_recovered", "control_dropped_port_down",
            "dropped_malformed", "dropped_unknown_qp", "qp_errors")


@dataclass(frozen=True)
class NicConfig:
    """Parameters of every model NIC (profile defaults unless noted).

    ``pmtu`` payload bytes per packet; ``slots`` A and ``backup`` B of the EV sets and
    ``ev_min_active`` the floor (docs/protocol.md 4.2, 4.4); ``w_max`` and ``mpr`` the windows (5);
    ``timeout_k`` (timeout = 2^k ticks of 1.024 us), ``retry_limit`` and ``probe_period`` (ticks)
    of the reliability block, whose probe list has ``probe_entries`` entries and whose
    work-request FIFO holds ``wr_depth`` per QP; ``port_fifo`` frames a plane port holds (profile
    choice of the model: 2); ``transport`` MRC spraying or the ECMP baseline; ``profile`` the
    rules of the NIC's golden models (2, or 1 for the behaviour of the RTL of today),
    ``sack_bytes`` the receivers' coalescing budget (profile 2, docs/protocol.md 5) and ``nscc``
    congestion control on every sender QP (profile 2, docs/protocol.md 5.1: :mod:`models.nscc`,
    its parameters scaled by :meth:`models.nscc.NsccConfig.scaled` from the QP's rate, P x link
    rate, and the unloaded RTT of the QP's own path, inside one T0 or through a T1,
    :func:`unloaded_rtt_ns`, unless ``nscc_base_rtt_ns`` gives one for every QP;
    ``nscc_target_ns`` the target queueing delay, default 3 of those RTTs; ``nscc_style``
    "htsim" for htsim's own choices, the cross-check's).
    """
    pmtu: int = 4096
    slots: int = 16
    backup: int = 8
    ev_min_active: int = 4
    w_max: int = 64
    mpr: int = 1024
    timeout_k: int = 6
    retry_limit: int = 7
    probe_period: int = 64
    probe_entries: int = 64
    wr_depth: int = 16
    port_fifo: int = 2
    transport: str = MRC
    profile: int = 2
    sack_bytes: int = SACK_BYTES_DEFAULT
    nscc: bool = False
    nscc_base_rtt_ns: float | None = None
    nscc_target_ns: float | None = None
    nscc_style: str = "project"

    def __post_init__(self):
        if self.profile not in (1, 2):
            raise ValueError(f"nic: profile must be 1 or 2, not {self.profile!r}")
        if not isinstance(self.nscc, bool):
            raise ValueError(f"nic: nscc must be true or false, not {self.nscc!r}")
        if self.nscc and self.profile != 2:
            raise ValueError("nic: nscc needs profile 2")
        if self.nscc_style not in NSCC_STYLES:
            raise ValueError(f"nic: nscc_style must be one of {NSCC_STYLES}, not "
                             f"{self.nscc_style!r}")
        for name in ("nscc_base_rtt_ns", "nscc_target_ns"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or
                                      not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"nic: {name} must be a positive number or null, not {value!r}")
        if self.sack_bytes not in tuple(1 << k for k in range(10, 17)):
            raise ValueError(f"nic: sack_bytes must be a power of two from 1024 to 65536, not "
                             f"{self.sack_bytes!r}")
        if self.pmtu not in (256, 512, 1024, 2048, 4096):
            raise ValueError(f"nic: pmtu must be a power of two from 256 to 4096, not {self.pmtu}")
        if self.transport not in TRANSPORTS:
            raise ValueError(f"nic: transport must be one of {TRANSPORTS}, not {self.transport!r}")
        for name, low, high in (("slots", 1, 256), ("backup", 0, 256), ("ev_min_active", 0, 4096),
                                ("w_max", 1, 1 << 15), ("mpr", 128, 1 << 14),
                                ("timeout_k", 0, 15), ("retry_limit", 1, 15),
                                ("probe_period", 1, 1 << 20), ("probe_entries", 1, 4096),
                                ("wr_depth", 1, 1 << 16), ("port_fifo", 1, 1024)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"nic: {name} must be an integer {low}..{high}, not {value!r}")
        if self.slots & (self.slots - 1) or self.mpr & (self.mpr - 1):
            raise ValueError("nic: slots and mpr must be powers of two")

    @property
    def timeout_us(self):
        return (1 << self.timeout_k) * TICK_NS / 1000

    def qp_config(self, share=1, topology=None, same_t0=False):
        """The reliability block's per-QP registers; ``share`` QPs carry one flow (the ECMP
        baseline: one per plane) and split its window ``w_max`` between them, so a flow has as
        many bytes in flight under either transport. With ``nscc``, the ``topology`` scales
        NSCC's parameters to the QP's rate (P x link rate / ``share``) and to the unloaded RTT
        of its path (``same_t0``: its peer under the same T0)."""
        cc = None
        if self.nscc:
            if topology is None:
                raise ValueError("nic: nscc needs the topology to scale its parameters")
            rtt = self.nscc_base_rtt_ns or unloaded_rtt_ns(topology, self.pmtu, same_t0)
            cc = NsccConfig.scaled(topology.planes * topology.link_gbps / share, rtt, self.pmtu,
                                   target_ns=self.nscc_target_ns, sack_bytes=self.sack_bytes,
                                   style=self.nscc_style)
        return QpConfig(w_max=max(1, self.w_max // share), mpr=self.mpr,
                        timeout_exp=self.timeout_k, retry_limit=self.retry_limit,
                        probe_period=self.probe_period, cc=cc)

    def timer_bits(self):
        """Timer width of the reliability block: every deadline (timeout, probe period) fits."""
        return max(10, self.timeout_k + 2, self.probe_period.bit_length() + 1)


def unloaded_rtt_ns(topology, pmtu, same_t0=False):
    """The unloaded round trip of ``topology``'s longest path (or of a path inside one T0 with
    ``same_t0``): a data packet of ``pmtu`` bytes out and its SACK back, over 4 links through a
    T1 when there are several T0s (2 inside one T0), each link its serialization (wire overhead
    included) and delay, each switch its latency."""
    links = 4 if topology.t0s > 1 and not same_t0 else 2
    data = frame_length(Opcode.WRITE_MIDDLE, pmtu) + topology.wire_overhead
    sack = frame_length(Opcode.SACK, 0) + topology.wire_overhead
    serialize = (data + sack) * 8 / topology.link_gbps
    return links * (serialize + 2 * topology.link_delay_ns) + \
        2 * (links - 1) * topology.switch_latency_ns


class Message:
    """One work request: ``length`` bytes from offset ``offset`` of the flow's buffer to the same
    offset of the receiver QP's region; its PSNs start at ``first_psn`` (set when it is cut)."""

    __slots__ = ("req_id", "length", "offset", "first_psn", "packets")

    def __init__(self, req_id, length, offset, pmtu):
        self.req_id = req_id
        self.length = length
        self.offset = offset
        self.packets = max(1, -(-length // pmtu))
        self.first_psn = None


class Flow:
    """The traffic of one (sender, receiver) pair: its QPs (one for MRC, one per plane for the
    ECMP baseline, as ``(sender QPN, receiver QPN)``), messages, and the measurements of
    metrics.md (times in ps). ``buffer`` holds the bytes sent in bytes mode."""

    def __init__(self, fid, src, dst, sizes, start_ps=0):
        self.fid = fid
        self.src = src
        self.dst = dst
        self.sizes = tuple(sizes)
        self.start = start_ps
        self.total_bytes = sum(self.sizes)
        self.qps = []
        self.buffer = None
        self.first_sent = None
        self.last_placed = None
        self.placed_bytes = 0
        self.completed = 0
        self.errors = 0
        # Per bin of the NIC's series (metrics.md, 2 us): payload bytes placed, data packets
        # sent (retransmissions included) and trimmed packets received.
        self.series = {}
        self.sent_series = {}
        self.trim_series = {}

    @property
    def messages(self):
        return len(self.sizes)

    @property
    def done(self):
        return self.completed + self.errors >= self.messages

    def goodput_gbps(self):
        """Payload bytes placed x 8 / (first packet sent to last byte placed), in Gb/s."""
        if self.first_sent is None or self.last_placed is None or \
                self.last_placed <= self.first_sent:
            return 0.0
        return self.placed_bytes * 8 / ((self.last_placed - self.first_sent) / 1000)


def ecmp_path(src, dst, sport, t1s, plane):
    """The T1 an ECMP switch of ``plane`` hashes a QP to: a hash of the inner addresses, the UDP
    ports and the plane, modulo the number of T1s. The hash is BLAKE2b, a uniform one: a CRC of
    these few varying bits (linear) reaches only some T1s, which would make the baseline look
    worse than ECMP with a good hash does."""
    key = nic_address(src).to_bytes(16, "big") + nic_address(dst).to_bytes(16, "big") + \
        sport.to_bytes(2, "big") + (4791).to_bytes(2, "big") + bytes([plane])
    return int.from_bytes(blake2b(key, digest_size=4).digest(), "big") % t1s


def ev_set_layout(t1s, slots, backup, offset=0):
    """The T1 index of every active slot and backup entry of one plane (docs/protocol.md 4.2;
    issue [feedback-v2-model] item 3): when the number of T1s ``t1s`` is a power of two dividing
    ``slots`` (A), slot s holds T1 ``s mod T`` and backup b T1 ``b mod T``, so every run of T
    consecutive rotation positions under one mask (slot r XOR mask) covers each T1 once; when
    A is a multiple of T otherwise, or larger than T, slot s holds T1 ``(offset + s) mod T``, as
    evenly as the counts allow (each T1 floor(A / T) or ceil(A / T) times), backups continuing
    the sequence; with fewer slots than T1s, the slots hold distinct T1s from ``offset`` on.
    Returns ``(slot T1s, backup T1s)``."""
    if t1s & (t1s - 1) == 0 and slots % t1s == 0:
        return [s % t1s for s in range(slots)], [b % t1s for b in range(backup)]
    seq = [(offset + i) % t1s for i in range(slots + backup)]
    return seq[:slots], seq[slots:]


def draw_ev_sets(rng, planes, t1s, slots, backup, same_t0):
    """A controller's EV sets for one QP (docs/protocol.md 4.2): per plane, ``slots`` EVs laid
    over the T1s by :func:`ev_set_layout` (the offset drawn per plane; with fewer slots than T1s
    their order shuffled), ``backup`` more for the pool, every EV with its own random salt;
    under one T0 every EV has j = 0 (the path is the plane). Also one non-zero LFSR seed per
    plane. Returns ``(evs, seeds, pools)`` for :meth:`models.spray.EvTable.configure_qp`.
    ``sim/rtl_controller.py`` draws the RTL fabric's sets with it too."""
    evs, pools, seeds = [], [], []
    for p in range(planes):
        offset = rng.randrange(t1s)
        if same_t0:
            active, spare = [0] * slots, [0] * backup
        else:
            active, spare = ev_set_layout(t1s, slots, backup, offset)
            if slots < t1s:
                rng.shuffle(active)
        salts = rng.sample(range(1, 1 << 20), slots + backup)
        plane_evs = [make_ev(p, j, salt) for j, salt in zip(active + spare, salts)]
        evs.append(plane_evs[:slots])
        pools.append(plane_evs[slots:])
        seeds.append(rng.randrange(1, 1 << 16))
    return evs, seeds, pools


class FastReliability(Reliability):
    """The reliability block (:class:`models.reliability.Reliability`) made fast for the fabric
    model, its outputs unchanged for either profile (tests/test_fabric.py drives both with the
    same inputs). It overrides only the steps of the block's subclass API and uses nothing else:

    - two more entry points for light mode, a SACK or NACK given as the parsed
      :class:`models.rx_tracker.Sack` or :class:`models.rx_tracker.Nack` instead of the
      FEEDBACK_RECORD bytes (each does what :meth:`Reliability.feedback` does after unpacking);
    - a SACK acknowledges its cumulative range, bitmap and trigger by arithmetic on the
      outstanding PSNs instead of visiting each of them;
    - the PSN timers sit on a wheel (tick -> the PSNs whose deadline was set to it), so a tick
      visits the PSNs due then, in the base block's order (QP order, then PSN order), instead
      of every outstanding PSN.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._wheel = {}            # tick -> [(qpn, psn)] whose deadline was set to that tick
        self._wait_cack = set()     # QPs that may hold a PSN in WAIT_CACK
        self._acked = {}            # qpn -> bit k - 1 set when outstanding PSN cack + k is acked

    def setup(self, qpn, start, enable=True, cfg=QpConfig()):
        super().setup(qpn, start, enable, cfg)
        self._acked.pop(qpn, None)

    def sack(self, qpn, sack):
        qp = self.active(qpn)
        if qp is None:
            self.counters["fb_dropped"] += 1
            return
        self.sack_input(qpn, qp, sack)
        if not qp.error:
            self.after_input(qpn, qp)

    def nack(self, qpn, nack):
        qp = self.active(qpn)
        if qp is None:
            self.counters["fb_dropped"] += 1
            return
        self.nack_input(qpn, qp, nack.reason, nack.psn, nack.ev)
        if not qp.error:
            self.after_input(qpn, qp)

    def _arm(self, qpn, psn, deadline):
        """Put ``psn`` of QP ``qpn`` on the wheel at ``deadline`` (its entry's; a PSN on the
        wheel at a tick whose deadline changed since costs one look then)."""
        due = self._wheel.get(deadline)
        if due is None:
            self._wheel[deadline] = [(qpn, psn)]
        else:
            due.append((qpn, psn))

    def send(self, rec):
        """:meth:`Reliability.send`, the PSN's new deadline put on the wheel."""
        if rec["flushed"]:
            super().send(rec)                   # sets no deadline
        else:
            self.sent(rec["qpn"], rec["psn"], rec["ev"], rec["req_id"], rec["last"], rec["rtx"],
                      rec.get("length", 0))

    def sent(self, qpn, psn, ev, req_id, last, rtx, length=0):
        """:meth:`send` of a SEND_RECORD with these fields and ``flushed`` = 0 (the block reads
        no other field of it)."""
        qp = self.active(qpn)
        if qp is None:
            self.counters["send_dropped"] += 1
            return
        if not rtx and self.profile == 2 and qp.cc is None and psn == qp.next_psn and \
                qp.in_flight < qp.window and (psn - qp.cack) % PSN_MODULUS <= qp.psn_range:
            # send_step's new PSN of profile 2, written out (the commonest input).
            self.counters["send"] += 1
            deadline = self.now + (1 << min(qp.cfg.timeout_exp, self.timer_bits - 1))
            in_flight = qp.in_flight + 1
            ackreq = qp.ackreq_psn is None and in_flight >= -(-qp.cfg.w_max // 2)
            cost = length if length > MIN_COST else MIN_COST
            qp.charged = (qp.charged + cost) % _BYTE_CREDITS
            qp.entries[psn] = PsnEntry(ev=ev, req_id=req_id, last=bool(last), deadline=deadline,
                                       counted=True, ackreq=ackreq, cost=cost,
                                       sent_at=self.clock)
            if ackreq:
                qp.ackreq_psn = psn
            qp.in_flight = in_flight
            qp.bytes_in_flight += cost
            qp.next_psn = (psn + 1) % PSN_MODULUS
            self._arm(qpn, psn, deadline)
            return
        entry = self.send_step(qpn, qp, psn, ev, req_id, last, rtx, length)
        if entry is not None:
            self._arm(qpn, psn, entry.deadline)

    def nack_step(self, qpn, qp, reason, psn, ev):
        taken = super().nack_step(qpn, qp, reason, psn, ev)
        entry = qp.entries.get(psn)
        if entry is not None:
            if entry.state == PsnState.WAIT_CACK:
                self._wait_cack.add(qpn)
            elif entry.state == PsnState.WAIT_TIMER and entry.deadline > self.now:
                self._arm(qpn, psn, entry.deadline)
        return taken

    def sack_step(self, qpn, qp, sack):
        cack_psn = sack.cack_psn
        if psn_diff(cack_psn, qp.next_psn) >= 0:
            self.counters["fb_bad"] += 1
            return False
        self.counters["sack"] += 1
        if sack.m == SackVerdict.SKIP_ONCE:
            self.ev_event(qpn, sack.entropy, EvEvent.SKIP)
        # Outstanding PSN k (1..n) is cack + k, bit k - 1 of the QP's acked mask (the entries'
        # ``acked`` flags). A SACK that passed the check above acknowledges cumulatively
        # exactly k <= psn_diff(cack_psn, cack): psn_diff(cack + k, cack_psn) could only wrap
        # for a cack_psn half the PSN space behind, which the check refuses.
        cack = qp.cack
        entries = qp.entries
        n = psn_diff(qp.next_psn, cack) - 1
        window = (1 << n) - 1
        front = max(0, min(n, psn_diff(cack_psn, cack)))
        acked = (1 << front) - 1
        bits = sack.sack_bitmap & _MASK64
        if bits:
            # Bitmap bit 63 - i is PSN base + i, which is k = first + i.
            bits = int(f"{bits:064b}"[::-1], 2)
            first = (cack_psn + sack.sack_offset - cack) % PSN_MODULUS
            if first + BITMAP_BITS <= PSN_MODULUS:
                bits = bits << first - 1 if first else bits >> 1
            else:
                bits >>= PSN_MODULUS - first + 1
            acked |= bits & window
        if not sack.pr:
            k = (cack_psn + sack.ack_psn_offset - cack) % PSN_MODULUS
            if 1 <= k <= n:
                acked |= 1 << k - 1
        mask = self._acked.get(qpn, 0)
        new = acked & ~mask
        if self.profile == 1:
            new &= ~((1 << front) - 1)                  # popped at once when below front
        while new:
            low = new & -new
            new ^= low
            psn = (cack + low.bit_length()) % PSN_MODULUS
            self.acknowledge(qp, psn, entries[psn])
        mask |= acked
        run = (~mask & (mask + 1)).bit_length() - 1          # trailing ones: cack moves so far
        passed = [entries.pop((cack + k) % PSN_MODULUS) for k in range(1, run + 1)]
        self._acked[qpn] = mask >> run
        if passed:
            qp.cack = (cack + run) % PSN_MODULUS
            if self.profile == 1:
                self.emit_limit(qpn, qp)
            self.complete_passed(qpn, qp, passed)
            if qpn in self._wait_cack:
                self._wait_cack.discard(qpn)
                for psn, entry in entries.items():      # in PSN order
                    if not entry.acked and entry.state == PsnState.WAIT_CACK:
                        self.request_retx(qpn, qp, psn, entry, RetxCause.CACK_MOVED)
        if sack.pr:
            self.answer_probe(qpn, sack)
        return True

    def tick(self):
        """One 1.024 us tick, as :meth:`Reliability.tick`, visiting only the PSNs due."""
        self.now += 1
        now = self.now
        if any(self.probes):
            self.probe_timeouts(now)
        due = self._wheel.pop(now, None)
        if due:
            by_qp = {}
            for qpn, psn in due:
                by_qp.setdefault(qpn, set()).add(psn)
            for qpn in sorted(by_qp):
                qp = self.qps[qpn]
                if qp is None or qp.error:
                    continue
                cack = qp.cack
                for psn in sorted(by_qp[qpn], key=lambda p: (p - cack) % PSN_MODULUS):
                    entry = qp.entries.get(psn)
                    if entry is not None and self.timer_step(qpn, qp, psn, entry, now):
                        break
                if not qp.error:
                    self.after_input(qpn, qp)
        if any(self.probes):
            self.probes_due(now)


class LightSack(namedtuple("LightSack", [f.name for f in dataclass_fields(Sack)])):
    """The fields of a :class:`models.rx_tracker.Sack`, in its order, in a named tuple (much
    cheaper to build than the frozen dataclass): the SACK :class:`FastRxTracker` gives and a
    light packet carries. :meth:`sack` gives the Sack."""

    __slots__ = ()

    def sack(self):
        return Sack(*self)


class FastRxTracker(RxTracker):
    """The receive tracker of one QP (:class:`models.rx_tracker.RxTracker`) made fast for the
    fabric model: its state held in mutable fields (:attr:`state` gives the
    :class:`models.rx_tracker.RxState`), the cumulative PSN moved and the SACK bitmap read from
    the receive bitmap with integer operations, plain fields in and ``(verdict, sack, nack)``
    out (:meth:`arrive_fields`, :meth:`probe_fields`, :meth:`tick_fields`; the SACK as a
    :class:`LightSack`). Every input gives
    the verdict, SACK, NACK and next state of :func:`models.rx_tracker.on_arrival`,
    :func:`~models.rx_tracker.on_probe` and :func:`~models.rx_tracker.on_tick`, for either
    profile (tests/test_fabric.py drives both with the same random inputs); a
    Write-with-Immediate, or any packet while completions wait, goes through those functions
    themselves. A SACK travels on its trigger's path (docs/protocol.md 4.5): the data packet's
    EV, the probe's, or for a timer SACK :attr:`last_ev`."""

    def __init__(self, cack_psn, mpr=MPR_DEFAULT, wimm_max=WIMM_MAX_DEFAULT, profile=2,
                 sack_bytes=SACK_BYTES_DEFAULT):
        super().__init__(cack_psn, mpr=mpr, wimm_max=wimm_max, profile=profile,
                         sack_bytes=sack_bytes)
        self.mpr = self.config.mpr
        self.v2 = self.config.profile == 2
        self.sack_bytes = self.config.sack_bytes
        self._ring = (1 << self.mpr) - 1
        self._words = self.mpr // BITMAP_BITS

    @property
    def state(self):
        return RxState(cack_psn=self.cack, bitmap=self.bitmap, ooo_count=self.ooo_count,
                       placed_bytes=self.placed_bytes, since_sack=self.since_sack,
                       uncovered=self.uncovered, ticks=self.ticks, last_psn=self.last_psn,
                       last_ev=self.last_ev, last_ce=self.last_ce, wimm_waiting=self.wimm_waiting,
                       error=self.error, ce_pending=self.ce_pending, ce_ev=self.ce_ev,
                       rep=self.rep, ackreq_psn=self.ackreq_psn)

    @state.setter
    def state(self, state):
        self.cack = state.cack_psn
        self.bitmap = state.bitmap
        self.ooo_count = state.ooo_count
        self.placed_bytes = state.placed_bytes
        self.since_sack = state.since_sack
        self.uncovered = state.uncovered
        self.ticks = state.ticks
        self.last_psn = state.last_psn
        self.last_ev = state.last_ev
        self.last_ce = state.last_ce
        self.wimm_waiting = state.wimm_waiting
        self.error = state.error
        self.ce_pending = state.ce_pending
        self.ce_ev = state.ce_ev
        self.rep = state.rep
        self.ackreq_psn = state.ackreq_psn

    @property
    def cack_psn(self):
        return self.cack

    # --- the RxTracker interface -----------------------------------------------------------------

    def arrive(self, arrival):
        if arrival.opcode in IMM_OPCODES or self.wimm_waiting:
            return self.step(on_arrival, arrival)
        return self._result(self.arrive_fields(
            arrival.psn, arrival.ev, arrival.ecn, arrival.dscp, arrival.ackreq, arrival.rtx,
            arrival.opcode, arrival.payload_length, arrival.access_ok), arrival.ev)

    def probe(self, probe):
        return self._result(self.probe_fields(probe.ev, probe.probe_id, probe.ecn, probe.dscp),
                            probe.ev)

    def tick(self):
        return self._result(self.tick_fields(), self.last_ev)

    @staticmethod
    def _result(answer, path_ev):
        verdict, sack, nack = answer
        return RxResult(verdict, placed=verdict == Verdict.PLACED,
                        sack=None if sack is None else sack.sack(), nack=nack,
                        path_ev=None if sack is None else path_ev)

    # --- the fast entry points -------------------------------------------------------------------

    def arrive_fields(self, psn, ev, ecn, dscp, ackreq, rtx, opcode, payload, access_ok):
        """One data packet: ``(verdict, SACK or None, Nack or None)``, the SACK a
        :class:`LightSack` (a :class:`models.rx_tracker.Sack` from the pure functions)."""
        if opcode in IMM_OPCODES or self.wimm_waiting:
            result = self.step(on_arrival, Arrival(
                psn=psn, ev=ev, ecn=ecn, dscp=dscp, ackreq=ackreq, rtx=rtx, opcode=opcode,
                payload_length=payload, access_ok=access_ok))
            return result.verdict, result.sack, result.nack
        counters = self.counters
        if self.error:
            counters[Verdict.QP_ERROR] += 1
            return Verdict.QP_ERROR, None, None
        cack = self.cack
        mpr = self.mpr
        ahead = (psn - cack + _PSN_HALF) % PSN_MODULUS - _PSN_HALF
        if ahead > mpr:
            counters[Verdict.OUT_OF_WINDOW] += 1
            return Verdict.OUT_OF_WINDOW, None, Nack(NackReason.PSN_OOR_WINDOW, psn, ev)
        ce = ecn == Ecn.CE
        if ahead <= 0 or self.bitmap >> psn % mpr & 1:
            counters[Verdict.DUPLICATE] += 1
            if self.v2:
                return Verdict.DUPLICATE, self._sack_v2(psn, ev, ahead <= 0, 0), None
            return Verdict.DUPLICATE, self._sack(psn, ev, ce), None
        if dscp == Dscp.TRIMMED or dscp == Dscp.TRIMMED_LASTHOP:
            reason = NackReason.TRIMMED if dscp == Dscp.TRIMMED else NackReason.TRIMMED_LASTHOP
            counters[Verdict.TRIMMED] += 1
            return Verdict.TRIMMED, None, Nack(reason, psn, ev)
        if not access_ok:
            counters[Verdict.ACCESS_ERROR] += 1
            return Verdict.ACCESS_ERROR, None, Nack(NackReason.UNEXP_EVENT, psn, ev)
        bitmap = self.bitmap | 1 << psn % mpr
        # cack_psn moves over the run of received PSNs after it (the ring read from its place).
        start = (cack + 1) % mpr
        run = 0
        if bitmap >> start & 1:
            ring = self._ring
            rotated = (bitmap >> start | bitmap << (mpr - start)) & ring
            run = (~rotated & (rotated + 1)).bit_length() - 1
            passed = (1 << run) - 1
            bitmap &= ~((passed << start | passed >> (mpr - start)) & ring)
            cack = self.cack = (cack + run) % PSN_MODULUS
        self.bitmap = bitmap
        out_of_order = ahead > 1
        self.ooo_count = (self.ooo_count + out_of_order) % OOO_MODULUS
        self.placed_bytes = (self.placed_bytes + payload) % PLACED_BYTES_MODULUS
        self.last_psn = psn
        self.last_ev = ev
        self.last_ce = ce
        counters[Verdict.PLACED] += 1
        if self.v2:
            count = self.since_sack + (payload if payload > COALESCE_UNIT else COALESCE_UNIT)
            self.since_sack = count
            if ce:
                self.ce_pending = True
                self.ce_ev = ev
            passed = False
            if ackreq:
                mark = self.ackreq_psn
                if mark is None or (psn - mark + _PSN_HALF) % PSN_MODULUS > _PSN_HALF:
                    self.ackreq_psn = psn
            mark = self.ackreq_psn
            if mark is not None and (cack - mark + _PSN_HALF) % PSN_MODULUS >= _PSN_HALF:
                self.ackreq_psn = None
                passed = True
            if rtx or ackreq or passed or count >= self.sack_bytes:
                return Verdict.PLACED, self._sack_v2(psn, ev, False, 0), None
            if not self.uncovered:
                self.uncovered = True
                self.ticks = 0
            return Verdict.PLACED, None, None
        count = self.since_sack + 1
        if out_of_order or ce or rtx or ackreq or run > 1 or count >= SACK_EVERY:
            return Verdict.PLACED, self._sack(psn, ev, ce), None
        if not self.uncovered:
            self.uncovered = True
            self.ticks = 0
        self.since_sack = count
        return Verdict.PLACED, None, None

    def probe_fields(self, ev, probe_id, ecn, dscp):
        """One reliability probe: ``(verdict, LightSack or None, None)``."""
        if self.error:
            self.counters[Verdict.QP_ERROR] += 1
            return Verdict.QP_ERROR, None, None
        skip = ecn == Ecn.CE or dscp == Dscp.TRIMMED or dscp == Dscp.TRIMMED_LASTHOP
        self.counters[Verdict.PROBE] += 1
        if self.v2:
            cack = self.cack
            base = (cack + 1) % PSN_MODULUS & _BLOCK_MASK
            return Verdict.PROBE, LightSack(
                cack, 0, (base - cack + _PSN_HALF) % PSN_MODULUS - _PSN_HALF,
                self._block_bits(base), self.mpr // MPR_UNIT,
                SackVerdict.SKIP_ONCE if skip else SackVerdict.NONE, 1, ev, probe_id,
                self.ooo_count, (self.placed_bytes >> PLACED_UNIT_SHIFT) % (1 << 24), 0), None
        sack = self._sack(self.cack, ev, skip, pr=1, probe_id=probe_id)
        return Verdict.PROBE, sack, None

    def tick_fields(self):
        """One 1.024 us tick: ``(verdict, LightSack or None, None)``."""
        self.counters[Verdict.TICK] += 1
        if self.error or not self.uncovered:
            return Verdict.TICK, None, None
        if self.ticks + 1 < COALESCE_TICKS:
            self.ticks += 1
            return Verdict.TICK, None, None
        if self.v2:
            return Verdict.TICK, self._sack_v2(self.last_psn, self.last_ev, False, 1), None
        return Verdict.TICK, self._sack(self.last_psn, self.last_ev, self.last_ce), None

    def _block_bits(self, base):
        """Profile 2: the SACK bitmap of the aligned block at ``base`` (bit 63 = base): PSNs at
        or below cack_psn set, the others from the receive ring (``base`` within the blocks
        from the one holding cack_psn + 1 to the one holding cack_psn + MPR)."""
        cack = self.cack
        c = (cack + 1) % BITMAP_BITS              # offset of cack_psn + 1 in its block
        low = (1 << c) - 1
        word = (base % self.mpr) // BITMAP_BITS
        bits = self.bitmap >> word * BITMAP_BITS & _MASK64
        ahead = (base - cack + _PSN_HALF) % PSN_MODULUS - _PSN_HALF
        if ahead <= 0:                            # the block holding cack_psn + 1
            bits = bits & ~low | low
        elif c and ahead > self.mpr - BITMAP_BITS:  # the last block, sharing the first's word
            bits &= low
        return int(f"{bits:064b}"[::-1], 2) if bits else 0

    def _sack_v2(self, trigger, ev, dup_behind, tm):
        """Profile 2: the SACK with ``pr`` = 0 for a trigger (as ``_sack_v2`` of the model):
        the rotation's block (docs/protocol.md 2.1), the pending CE verdict; the coalescing
        state is reset."""
        cack = self.cack
        mpr = self.mpr
        first = (cack + 1) % PSN_MODULUS & _BLOCK_MASK
        c = (cack + 1) % BITMAP_BITS
        blocks = self._words + (1 if c else 0)
        bitmap = self.bitmap
        words = self._words
        w0 = (first % mpr) // BITMAP_BITS
        rep_k = ((self.rep - first + _PSN_HALF) % PSN_MODULUS - _PSN_HALF) // BITMAP_BITS
        chosen = first_live = None
        if bitmap:
            low = (1 << c) - 1
            for k in range(blocks):
                word = bitmap >> ((w0 + k) % words) * BITMAP_BITS & _MASK64
                if word and c:
                    if k == 0:
                        word &= ~low
                    elif k == blocks - 1:
                        word &= low
                if word:
                    if first_live is None:
                        first_live = k
                    if k > rep_k:
                        chosen = k
                        break
        if chosen is None:
            chosen = first_live
        if chosen is not None:
            base = (first + chosen * BITMAP_BITS) % PSN_MODULUS
        elif 0 < (trigger - cack) % PSN_MODULUS < _PSN_HALF:
            base = trigger & _BLOCK_MASK
        else:
            base = first
        self.rep = base
        offset = 0 if dup_behind else (trigger - cack + _PSN_HALF) % PSN_MODULUS - _PSN_HALF
        if self.ce_pending:
            m, entropy = SackVerdict.SKIP_ONCE, self.ce_ev
            self.ce_pending = False
            self.ce_ev = 0
        else:
            m, entropy = SackVerdict.NONE, ev
        self.since_sack = 0
        self.uncovered = False
        self.ticks = 0
        return LightSack(cack, offset, (base - cack + _PSN_HALF) % PSN_MODULUS - _PSN_HALF,
                         self._block_bits(base), mpr // MPR_UNIT, m, 0, entropy, 0,
                         self.ooo_count, (self.placed_bytes >> PLACED_UNIT_SHIFT) % (1 << 24), tm)

    def _sack(self, trigger, ev, skip, pr=0, probe_id=0):
        """Profile 1: the SACK of the state for ``trigger`` (as ``_make_sack``); the state is
        then SACKed (the count of 4 restarts, the timer stops)."""
        cack = self.cack
        mpr = self.mpr
        offset = max((trigger - cack + _PSN_HALF) % PSN_MODULUS - _PSN_HALF, _OFFSET_MIN)
        base = sack_base(cack, trigger)
        sack_offset = (base - cack + _PSN_HALF) % PSN_MODULUS - _PSN_HALF
        if 0 < sack_offset < _PSN_HALF - BITMAP_BITS:
            # Bit i (LSB first) is PSN base + i: received when its ring bit is set and it is
            # inside the window (base + i - cack <= mpr); the SACK puts the base at bit 63.
            shift = base % mpr
            bitmap = self.bitmap
            bits = (bitmap >> shift | bitmap << (mpr - shift)) & _MASK64
            inside = mpr - sack_offset + 1
            if inside < BITMAP_BITS:
                bits &= (1 << max(inside, 0)) - 1
            bitmap = int(f"{bits:064b}"[::-1], 2)
        else:
            state, cfg = self.state, self.config
            bitmap = 0
            for i in range(BITMAP_BITS):
                if received(cfg, state, psn_add(base, i)):
                    bitmap |= 1 << (BITMAP_BITS - 1 - i)
        self.since_sack = 0
        self.uncovered = False
        self.ticks = 0
        return LightSack(cack, offset, sack_offset, bitmap, mpr // MPR_UNIT,
                         SackVerdict.SKIP_ONCE if skip else SackVerdict.NONE, pr, ev, probe_id,
                         self.ooo_count, (self.placed_bytes >> PLACED_UNIT_SHIFT) % (1 << 24), 0)


class _LivePlane:
    """The mutable copy of one :class:`models.spray.PlaneSet` that :class:`FastEvTable`
    chooses on."""

    __slots__ = ("plane", "evs", "states", "pool", "pointer", "lfsr")

    def __init__(self, ps):
        self.plane, self.evs, self.states = ps.plane, ps.evs, list(ps.states)
        self.pool, self.pointer, self.lfsr = ps.pool, ps.pointer, ps.lfsr

    def frozen(self):
        return PlaneSet(self.plane, self.evs, tuple(self.states), self.pool, self.pointer,
                        self.lfsr)


class _LiveQp:
    """The mutable copy of one :class:`models.spray.QpSet` (``source``: the QpSet it copies
    while no choice changed it)."""

    __slots__ = ("source", "planes", "plane_pointer")

    def __init__(self, qp):
        self.source = qp
        self.planes = [_LivePlane(ps) for ps in qp.planes]
        self.plane_pointer = qp.plane_pointer

    def frozen(self):
        return QpSet(tuple(lp.frozen() for lp in self.planes), self.plane_pointer)


class FastEvTable(EvTable):
    """The EV table (:class:`models.spray.EvTable`) with the choice of docs/protocol.md 4.3, and SKIP,
    made on a mutable copy of a QP's state, without building new states per packet
    (tests/test_fabric.py drives both with the same inputs and compares the states).

    :attr:`qps` stays the table of :class:`models.spray.QpSet`: reading it (as every
    :class:`~models.spray.EvTable` method does) first writes back the QPs changed by choices
    since; a QpSet written into it replaces the QP's copy. ``room`` is a bit mask."""

    def __init__(self, planes, num_t1, **params):
        self._live = {}             # qpn -> _LiveQp
        self._changed = set()       # QPs whose _LiveQp is ahead of their QpSet
        super().__init__(planes, num_t1, **params)
        self._up_mask = (1 << planes) - 1

    @property
    def qps(self):
        if self._changed:
            for qpn in self._changed:
                live = self._live[qpn]
                self._qps[qpn] = live.source = live.frozen()
            self._changed.clear()
        return self._qps

    @qps.setter
    def qps(self, value):
        self._qps = value
        self._live.clear()
        self._changed.clear()

    def _live_qp(self, qpn):
        """QP ``qpn``'s mutable copy (None when not configured)."""
        live = self._live.get(qpn)
        if qpn in self._changed:
            return live
        qp = self._qps.get(qpn)
        if qp is None:
            return None
        if live is None or live.source is not qp:
            live = self._live[qpn] = _LiveQp(qp)
        return live

    def set_plane_up(self, plane, up):
        super().set_plane_up(plane, up)
        self._up_mask = sum(1 << p for p, ok in enumerate(self.plane_up) if ok)

    def event(self, qpn, ev, kind):
        """:meth:`EvTable.event`; a SKIP (the commonest) changes the QP's copy in place when no
        slot waits for a backup EV (then the refill after it has nothing to do)."""
        if kind != EvEvent.SKIP:
            return super().event(qpn, ev, kind)
        live = self._live_qp(qpn)
        plane = ev_plane(ev)
        if live is None or plane >= len(live.planes) or ev not in live.planes[plane].evs:
            return ()
        lp = live.planes[plane]
        states = lp.states
        if any(st > _SKIP for st in states):
            return super().event(qpn, ev, kind)
        for slot, slot_ev in enumerate(lp.evs):
            if slot_ev == ev and states[slot] == _GOOD:
                states[slot] = _SKIP
                self._changed.add(qpn)
        return ()

    def choose(self, qpn, room, avoid_ev=None):
        """:meth:`EvTable.choose`: with an EV to avoid, profile 2 hides its path, then only
        the EV, then nothing (:func:`models.spray.avoidance_levels`); profile 1 only the EV."""
        live = self._live_qp(qpn)
        if live is None:
            self.qp(qpn)                # refused: not configured
        ok = room & self._up_mask
        if avoid_ev is None:
            return self._choose_live(qpn, live, ok, None, -1)
        if self.profile == 1:
            return self._choose_live(qpn, live, ok, avoid_ev, -1)
        return self._choose_live(qpn, live, ok, None, avoid_ev & _EV_PATH_BITS) or \
            self._choose_live(qpn, live, ok, avoid_ev, -1) or \
            self._choose_live(qpn, live, ok, None, -1)

    def _choose_live(self, qpn, live, ok, avoid_ev, avoid_path):
        """The choice with the slots holding ``avoid_ev``, or whose EV[11:0] (plane and T1)
        is ``avoid_path``, invisible; None when nothing is choosable (nothing changes)."""
        planes = live.planes
        n = len(planes)
        for k in range(n):
            p = (live.plane_pointer + k) % n
            if not ok >> p & 1:
                continue
            lp = planes[p]
            states, evs, pointer = lp.states, lp.evs, lp.pointer
            a = len(evs)
            mask = lp.lfsr & (a - 1)
            skips = []
            found = None
            for r in range(a):
                position = (pointer + r) % a
                slot = position ^ mask
                state = states[slot]
                if state > _SKIP:
                    continue
                ev = evs[slot]
                if ev == avoid_ev or ev & _EV_PATH_BITS == avoid_path:
                    continue
                if state == _GOOD:
                    found = position, slot
                    break
                skips.append((position, slot))
            if found is None:
                if not skips:
                    continue
                found = skips[0]
            position, slot = found
            for _, cleared in skips:
                states[cleared] = _GOOD
            lp.pointer = (position + 1) % a
            if lp.pointer <= pointer:
                lp.lfsr = lfsr_step(lp.lfsr)
            live.plane_pointer = (p + 1) % n
            self._changed.add(qpn)
            return Choice(p, slot, evs[slot], position)
        return None


OBLIVIOUS_EVS = 64                 # the EVs an oblivious QP cycles over (htsim's cross-check: 64)


class Oblivious:
    """The path choice of an oblivious QP from ``src`` to ``dst``: ``OBLIVIOUS_EVS`` EVs (a power
    of two), EV ``i`` on plane ``i mod P`` and the T1 an ECMP switch hashes it to
    (:func:`ecmp_path` of UDP source port ``0xC000 | i``; T1 0 inside one T0), as htsim's
    switches hash each EV; the indices cycle in order XORed with a mask redrawn from ``rng`` at
    each cycle's start."""

    def __init__(self, src, dst, planes, t1s, same_t0, rng, evs=OBLIVIOUS_EVS):
        self.planes = planes
        self.size = evs
        self.evs = [make_ev(i % planes, 0 if same_t0 else
                            ecmp_path(src, dst, 0xC000 | i, t1s, i % planes), i) for i in range(evs)]
        self.rng = rng
        self.index = 0
        self.mask = rng.randrange(evs)

    def choose(self, room):
        """The next EV whose plane has room in ``room`` (a mask), as a Choice, or None."""
        for _ in range(self.size):
            ev = self.evs[self.index ^ self.mask]
            self.index += 1
            if self.index == self.size:
                self.index = 0
                self.mask = self.rng.randrange(self.size)
            plane = ev_plane(ev)
            if room >> plane & 1:
                return Choice(plane, 0, ev, 0)
        return None


class SendQp:
    """Sender state of one QP kept by the transmit side (the reliability block holds the rest)."""

    def __init__(self, qpn, peer, peer_qpn, flow, start_psn, ecmp=None):
        self.qpn = qpn
        self.peer = peer
        self.peer_qpn = peer_qpn
        self.flow = flow
        self.next_psn = start_psn
        self.psn_limit = start_psn
        self.credit = 0                # profile 2: WINDOW_ROOM.credit (places granted)
        self.sends = 0                 # profile 2: data packets sent, modulo 2^16
        self.cc = False                # congestion control on (docs/protocol.md 5.1)
        self.byte_credit = 0           # with it: WINDOW_ROOM.byte_credit
        self.bytes_sent = 0            # with it: the cost of the data packets sent, modulo 2^32
        self.backlog = deque()         # messages not posted yet (the host's queue)
        self.posted = 0                # work requests posted and not completed
        self.messages = deque()        # posted, not yet fully cut into packets
        self.offset = 0                # into messages[0]
        self.by_psn = {}               # psn -> (message, offset, length, opcode) until retired
        self.by_req = {}
        self.retx = deque()            # (psn, avoid_ev)
        self.ecmp = ecmp               # (plane, ev) of an ECMP QP
        self.oblivious = None          # the path cycle of an oblivious QP
        self.error = False


class RecvQp:
    """Receiver state of one QP: the receive tracker and the memory region (VA ``base``,
    ``size`` bytes, R_Key ``rkey``)."""

    def __init__(self, qpn, peer, peer_qpn, flow, start_psn, mpr, size, bytes_mode, profile=2,
                 sack_bytes=SACK_BYTES_DEFAULT):
        self.qpn = qpn
        self.peer = peer
        self.peer_qpn = peer_qpn
        self.flow = flow
        self.tracker = FastRxTracker(psn_add(start_psn, -1), mpr=mpr, profile=profile,
                                     sack_bytes=sack_bytes)
        self.rkey = region_rkey(qpn)
        self.base = region_base(qpn)
        self.size = size
        self.memory = bytearray(size) if bytes_mode else None
        self.placed_bytes = 0


def region_base(qpn):
    """The VA of receiver QP ``qpn``'s memory region."""
    return VA_BASE * (qpn + 1)


def region_rkey(qpn):
    return RKEY_BASE + qpn


class NicPort:
    """One plane port: control frames first, then a FIFO of ``capacity`` data frames. The NIC's
    ``room`` mask has this port's bit set while it is up with room in its FIFO (kept by
    :meth:`push`, :meth:`pull` and :meth:`Nic.set_port`)."""

    def __init__(self, nic, plane, capacity):
        self.nic = nic
        self.plane = plane
        self.bit = 1 << plane
        self.capacity = capacity
        self.control = deque()
        self.data = deque()
        self.up = True
        self.wire = None

    def push(self, packet):
        """Queue a data packet (the port had room)."""
        self.data.append(packet)
        if len(self.data) >= self.capacity:
            self.nic.room &= ~self.bit

    def pull(self):
        if self.control:
            return self.control.popleft()
        if self.data:
            if self.up:
                self.nic.room |= self.bit
            return self.data.popleft()
        return None

    def sent(self):
        """The wire took a frame: the FIFO may have room for the scheduler."""
        if len(self.data) < self.capacity:
            self.nic.schedule()

    def waiting(self):
        return bool(self.control or self.data)


class Nic:
    """One host's model NIC (see the module docstring). ``network`` is a
    :class:`models.fabric_net.Network`; ``send_qps`` the number of sender QPs it will have;
    ``bytes_mode`` builds and parses real frames; ``bin_ps`` the bin of its goodput timeline,
    ``series_ps`` the bin of the goodput series of metrics.md (default 2 us)."""

    def __init__(self, host, network, config, send_qps=1, bytes_mode=False,
                 bin_ps=10 * PS_PER_US, series_ps=2 * PS_PER_US):
        self.host = host
        self.network = network
        self.topology = topo = network.topology
        self.loop = network.loop
        self.config = config
        self.bytes_mode = bytes_mode
        self.ecmp = config.transport == ECMP
        self.t0 = topo.t0_of(host)
        self.room = (1 << topo.planes) - 1      # ports up with room in their FIFO (NicPort)
        self.ports = [NicPort(self, p, config.port_fifo) for p in range(topo.planes)]
        network.attach(host, self, self.ports)
        for p, port in enumerate(self.ports):
            port.wire = network.host_wire(host, p)
        self.v2 = config.profile == 2
        self.table = FastEvTable(topo.planes, topo.t1s, slots=config.slots,
                                 backup=config.backup, ev_min_active=config.ev_min_active,
                                 profile=config.profile)
        # Profile 2: metadata for the whole PSN range of limit (a) (docs/protocol.md 10,
        # point 13); profile 1: for the PSN window.
        stamp_ps = STAMP_NS * 1000
        self.reliability = FastReliability(
            n_qps=max(1, send_qps), ring=config.mpr if self.v2 else min(config.w_max, config.mpr),
            probe_entries=config.probe_entries, wr_depth=config.wr_depth,
            timer_bits=config.timer_bits(), profile=config.profile,
            clock=lambda: self.loop.now // stamp_ps)
        # The block's output lists (emptied in place) with their handlers, in stream order.
        self._handlers = tuple(zip((self.reliability.out[s] for s in STREAMS),
                                   (self._on_retx, self._on_limit, self._on_retire,
                                    self._on_completion, self._on_ev, self._on_control)))
        self.send_qps = []
        self.recv_qps = []
        self.pointer = 0
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.retx_causes = {}
        self.ev_log = []               # (time, sender QPN, EV, kind)
        self.bin_ps = bin_ps
        self.timeline = {}             # bin -> payload bytes placed
        self.series_ps = series_ps
        self.series = {}               # series bin (metrics.md) -> payload bytes placed
        self.on_data = None            # hook (nic, packet) called for every data packet sent
        self._wake_pending = False
        self._scheduling = False
        self._carriers = {}            # peer -> {EV path: outer destination}

    # --- configuration ---------------------------------------------------------------------------

    def add_send_qp(self, peer, peer_qpn, flow, start_psn, rng, plane=0):
        """A sender QP towards ``peer``'s receiver QP ``peer_qpn``, its first PSN ``start_psn``;
        returns its QPN. MRC: its EV sets are drawn from ``rng``. ECMP: it uses NIC port
        ``plane`` and the T1 of :func:`ecmp_path`."""
        topo = self.topology
        cfg = self.config
        qpn = len(self.send_qps)
        if qpn >= self.reliability.n_qps:
            raise ValueError(f"host {self.host}: more sender QPs than the {self.reliability.n_qps} "
                             f"it was built for")
        ecmp = None
        if self.ecmp:
            sport = 0xC000 | qpn & 0x3FFF
            j = 0 if topo.same_t0(self.host, peer) else \
                ecmp_path(self.host, peer, sport, topo.t1s, plane)
            ecmp = (plane, make_ev(plane, j, sport << 4))
        elif cfg.transport == OBLIVIOUS:
            pass
        else:
            evs, seeds, pools = draw_ev_sets(rng, topo.planes, topo.t1s, cfg.slots, cfg.backup,
                                             topo.same_t0(self.host, peer))
            self.table.configure_qp(qpn, evs, seeds, pools)
        qp = SendQp(qpn, peer, peer_qpn, flow, start_psn, ecmp)
        qp.cc = cfg.nscc
        if cfg.transport == OBLIVIOUS:
            qp.oblivious = Oblivious(self.host, peer, topo.planes, topo.t1s,
                                     topo.same_t0(self.host, peer), rng)
        self.send_qps.append(qp)
        self.reliability.setup(qpn, start_psn,
                               cfg=cfg.qp_config(topo.planes if self.ecmp else 1, topo,
                                                 topo.same_t0(self.host, peer)))
        self._drain()
        return qpn

    def add_recv_qp(self, peer, peer_qpn, flow, start_psn, size):
        """A receiver QP for ``peer``'s sender QP ``peer_qpn``; returns its QPN."""
        qpn = len(self.recv_qps)
        cfg = self.config
        self.recv_qps.append(RecvQp(qpn, peer, peer_qpn, flow, start_psn, cfg.mpr, size,
                                    self.bytes_mode, cfg.profile, cfg.sack_bytes))
        return qpn

    def post(self, qpn, message):
        """The host queues one work request on sender QP ``qpn`` (posted when the QP has fewer
        than ``wr_depth`` pending)."""
        qp = self.send_qps[qpn]
        qp.backlog.append(message)
        self._post_backlog(qp)

    def _post_backlog(self, qp):
        while qp.backlog and qp.posted < self.config.wr_depth and not qp.error:
            message = qp.backlog.popleft()
            qp.posted += 1
            qp.messages.append(message)
            qp.by_req[message.req_id] = message
            self.reliability.work_request({"qpn": qp.qpn, "req_id": message.req_id})
            self._drain()
        self.wake()

    # --- transmit --------------------------------------------------------------------------------

    def wake(self):
        """Run the scheduler once the current event is over (a port has room, a QP has work)."""
        if not self._wake_pending:
            self._wake_pending = True
            self.loop.at(self.loop.now, self._schedule)

    def _schedule(self, _=None):
        self._wake_pending = False
        self.schedule()

    def schedule(self):
        """Send packets while a port has room and a QP has one ready (docs/protocol.md 4.3). A call made
        while it runs (a wire took a frame) returns at once: the running loop looks again."""
        if self._scheduling:
            return
        self._scheduling = True
        try:
            self._serve()
        finally:
            self._scheduling = False

    def _serve(self):
        """QPs round-robin (:func:`models.spray.serve_qp`, written out): a QP is eligible with a
        retransmission, or a new packet inside its window, for which a plane with room has a
        slot it may use. That last condition is learnt by asking the EV table for the choice
        (it changes nothing when it finds none): a QP it fails for is taken out of this round
        and the round-robin asked again from the same pointer."""
        qps = self.send_qps
        while qps:
            room = self.room
            if not room:
                return
            for qp in qps:
                # A retransmission whose work request completed meanwhile (a late copy was
                # acknowledged): nothing to resend, its metadata is gone.
                while qp.retx and qp.retx[0][0] not in qp.by_psn:
                    qp.retx.popleft()
                    self.counters["retx_retired"] += 1
            # serve_qp over the QPs, each eligible with a retransmission, or a new packet in
            # its window; a QP whose choice fails is left out (per kind) for this round.
            count = len(qps)
            no_retx = no_new = 0
            v2 = self.v2
            while True:
                pointer = self.pointer
                for k in range(count):
                    q = (pointer + k) % count
                    qp = qps[q]
                    if qp.error:
                        continue
                    # Profile 2, limit (b): every data packet needs window room (credit).
                    if v2 and not 0 < (qp.credit - qp.sends) % _CREDITS < _CREDITS >> 1:
                        continue
                    is_retx = bool(qp.retx) and not no_retx >> q & 1
                    if is_retx or (qp.messages and not no_new >> q & 1 and
                                   psn_diff(qp.psn_limit, qp.next_psn) > 0):
                        # With congestion control, the packet's cost must fit cwnd too.
                        if qp.cc and (qp.byte_credit - qp.bytes_sent - self._cost(qp, is_retx)) \
                                % _BYTE_CREDITS >= _BYTE_CREDITS >> 1:
                            continue
                        break
                else:
                    return
                self.pointer = (q + 1) % count
                choice = self._choose(qp, room, qp.retx[0][1] if is_retx else None)
                if choice is None:
                    if is_retx:
                        no_retx |= 1 << q
                    else:
                        no_new |= 1 << q
                    self.pointer = pointer
                    continue
                if is_retx:
                    self._send_data(qp, qp.retx.popleft()[0], choice, room, rtx=True)
                else:
                    self._send_data(qp, self._segment(qp), choice, room, rtx=False)
                break

    def _cost(self, qp, is_retx):
        """The cost in bytes (docs/protocol.md 5, limit (b)) of ``qp``'s next packet."""
        if is_retx:
            length = qp.by_psn[qp.retx[0][0]][2]
        else:
            length = min(self.config.pmtu, qp.messages[0].length - qp.offset)
        return packet_cost(length)

    def _segment(self, qp):
        """Cut the next new packet of ``qp``; returns its PSN (its metadata is kept by PSN)."""
        message = qp.messages[0]
        offset = qp.offset
        length = min(self.config.pmtu, message.length - offset)
        first = offset == 0
        last = offset + length >= message.length
        if first:
            message.first_psn = qp.next_psn
        opcode = Opcode.WRITE_ONLY if first and last else Opcode.WRITE_FIRST if first else \
            Opcode.WRITE_LAST if last else Opcode.WRITE_MIDDLE
        psn = qp.next_psn
        qp.by_psn[psn] = (message, offset, length, opcode)
        qp.next_psn = psn_add(psn, 1)
        if last:
            qp.messages.popleft()
            qp.offset = 0
        else:
            qp.offset = offset + length
        return psn

    def _choose(self, qp, room, avoid):
        """The plane and EV of ``qp``'s next packet, or None when it must wait. MRC: the EV
        table's choice (docs/protocol.md 4.3). ECMP: its one path, when its plane has room."""
        if qp.ecmp is not None:
            plane, ev = qp.ecmp
            return Choice(plane, 0, ev, 0) if room >> plane & 1 else None
        if qp.oblivious is not None:
            return qp.oblivious.choose(room)
        return self.table.choose(qp.qpn, room, avoid)

    def _send_data(self, qp, psn, choice, room, rtx):
        message, offset, length, opcode = qp.by_psn[psn]
        now = self.loop.now
        ackreq = opcode in _ACKREQ
        if self.v2:
            qp.sends = (qp.sends + 1) % _CREDITS
            cost = packet_cost(length)
            if qp.cc:
                qp.bytes_sent = (qp.bytes_sent + cost) % _BYTE_CREDITS
            if not ackreq:
                ackreq = self.reliability.ackreq_due(qp.qpn, cost)
        packet = self._data_packet(qp, choice, psn, message, offset, length, opcode, rtx,
                                   ackreq)
        packet.sent = now
        counters = self.counters
        counters["data_sent"] += 1
        counters["data_bytes_sent"] += length
        if rtx:
            counters["retransmitted"] += 1
        flow = qp.flow
        if flow.first_sent is None:
            flow.first_sent = now
        k = now // self.series_ps
        flow.sent_series[k] = flow.sent_series.get(k, 0) + 1
        if self.on_data is not None:
            self.on_data(self, packet)
        # The SEND_RECORD (its fields the block reads; plane, slot, offset, length, tick and
        # room_mask only inform the RTL's trace). A record not flushed makes no output record.
        self.reliability.sent(qp.qpn, psn, choice.ev, message.req_id,
                              int(offset + length >= message.length), int(rtx), length)
        port = self.ports[choice.plane]
        port.push(packet)
        port.wire.kick()

    def _carrier(self, ev, peer):
        """The carrier towards ``peer`` on ``ev``: a data packet's path, or the reverse path of
        a packet from ``peer`` on ``ev`` (docs/protocol.md 4.5 gives the same template), cached per path
        (plane and T1, ``EV[11:0]``: the salt does not change the carrier)."""
        paths = self._carriers.get(peer)
        if paths is None:
            paths = self._carriers[peer] = {}
        da = paths.get(ev & _EV_PATH_BITS)
        if da is None:
            da = paths[ev & _EV_PATH_BITS] = self.topology.carrier(ev, self.host, peer)
        return da

    def _data_packet(self, qp, choice, psn, message, offset, length, opcode, rtx, ackreq):
        ev = choice.ev
        da = self._carrier(ev, qp.peer)
        va = region_base(qp.peer_qpn) + message.offset + offset
        frame = None
        if self.bytes_mode:
            start = message.offset + offset
            hdr, payload = data_packet(
                self._addresses(choice.plane, qp.peer, da), opcode=opcode, ev=ev,
                dest_qpn=qp.peer_qpn, psn=psn, rqmsn=0, msn=message.req_id & 0xFFFF, va=va,
                rkey=region_rkey(qp.peer_qpn), dma_length=message.length,
                payload=qp.flow.buffer[start:start + length], rtx=int(rtx), ackreq=ackreq)
            frame = build_frame(hdr, payload)
        size = _FRAME_BYTES.get((opcode, length))
        if size is None:
            size = _FRAME_BYTES[opcode, length] = frame_length(opcode, length)
        return Packet(size, da, HOP_LIMIT_DEFAULT,            # fields in order (see Packet)
                      Dscp.TRIMMABLE_RETX if rtx else Dscp.TRIMMABLE, Ecn.ECT0, frame,
                      self.host, qp.peer, choice.plane, opcode, qp.peer_qpn, psn, ev, length,
                      int(ackreq), int(rtx), va)

    def _addresses(self, plane, peer, da):
        return Addresses(eth_dst=port_mac(plane, 0xFFFF), eth_src=port_mac(plane, self.host),
                         outer_src=plane_address(plane, self.host), outer_dst=da,
                         inner_src=nic_address(self.host), inner_dst=nic_address(peer))

    def _send_control(self, opcode, qpn, peer, ev, info):
        """A SACK, NACK or probe (``info``: its Sack, Nack or probe id) to host ``peer``'s QP
        ``qpn``, on the path of ``ev``: the reverse path of the packet it answers (4.5) or the
        EV under test. Profile 2 (docs/protocol.md 4.6): an answer whose plane is down here
        goes on the next plane that is up, in cyclic plane order, with the same j (its EV's
        plane field rewritten, docs/protocol.md 10, point 7); with none up, or for a probe
        (profile 1: anything), it is dropped and counted."""
        plane = ev & 0xF
        port = self.ports[plane]
        entropy = ev
        if not port.up:
            planes = len(self.ports)
            moved = None
            if self.v2 and opcode != Opcode.PROBE:
                moved = next((p % planes for p in range(plane + 1, plane + planes)
                              if self.ports[p % planes].up), None)
            if moved is None:
                self.counters["control_dropped_port_down"] += 1
                return
            self.counters["control_rerouted"] += 1
            plane, port = moved, self.ports[moved]
            ev = ev & ~0xF | moved
        da = self._carrier(ev, peer)
        frame = None
        if opcode == Opcode.SACK:
            size, dscp, ecn = SACK_BYTES, Dscp.CONTROL, Ecn.NOT_ECT
            if self.bytes_mode:
                hdr, _ = sack_packet(self._addresses(plane, peer, da), ev=ev, dest_qpn=qpn,
                                     cack_psn=info.cack_psn, mpr=info.mpr, m=info.m,
                                     ack_psn_offset=info.ack_psn_offset,
                                     sack_offset=info.sack_offset, sack_bitmap=info.sack_bitmap,
                                     pr=info.pr, probe_id=info.probe_id,
                                     ooo_count=info.ooo_count, placed_256=info.placed_256,
                                     entropy=info.entropy, tm=info.tm)
                frame = build_frame(hdr)
        elif opcode == Opcode.NACK:
            size, dscp, ecn = NACK_BYTES, Dscp.CONTROL, Ecn.NOT_ECT
            if self.bytes_mode:
                hdr, _ = nack_packet(self._addresses(plane, peer, da), ev=info.ev,
                                     dest_qpn=qpn, reason=info.reason, nack_psn=info.psn)
                frame = build_frame(hdr)
        else:
            size, dscp, ecn = PROBE_BYTES, Dscp.TRIMMABLE, Ecn.ECT0
            if self.bytes_mode:
                hdr, _ = probe_packet(self._addresses(plane, peer, da), ev=ev, dest_qpn=qpn,
                                      probe_id=info)
                frame = build_frame(hdr)
        port.control.append(Packet(size, da, HOP_LIMIT_DEFAULT, dscp, ecn, frame,  # in order
                                   self.host, peer, plane, opcode, qpn, 0, ev, 0, 0, 0, info,
                                   self.loop.now))
        port.wire.kick()

    # --- ports (4.6) -----------------------------------------------------------------------------

    def set_port(self, plane, up):
        """Bring the NIC's port on ``plane`` up or down (docs/protocol.md 4.6)."""
        port = self.ports[plane]
        port.up = bool(up)
        self.table.set_plane_up(plane, up)
        if up:
            if len(port.data) < port.capacity:
                self.room |= port.bit
        else:
            self.room &= ~port.bit
            self.counters["control_dropped_port_down"] += len(port.control)
            port.control.clear()
            flushed, port.data = port.data, deque()
            for packet in flushed:
                self.counters["flushed"] += 1
                qp = self._sender_of(packet)
                message, offset, length, _ = qp.by_psn[packet.psn]
                self.reliability.send({
                    "qpn": qp.qpn, "psn": packet.psn, "ev": packet.ev, "plane": plane,
                    "slot": 0, "req_id": message.req_id, "offset": offset, "length": length,
                    "tick": self.reliability.now, "room_mask": 0, "rtx": packet.rtx,
                    "flushed": 1, "last": int(offset + length >= message.length)})
                self._drain()
        self.wake()

    def _sender_of(self, packet):
        """The sender QP of a data packet this NIC built (found by its receiver and PSN)."""
        for qp in self.send_qps:
            if qp.peer == packet.dst and qp.peer_qpn == packet.qpn:
                return qp
        raise ValueError(f"host {self.host}: no sender QP for {packet}")

    # --- receive ---------------------------------------------------------------------------------

    def receive(self, packet, plane):
        """A packet delivered by the T0 of ``plane``."""
        if packet.frame is not None and not self._read_frame(packet):
            return
        opcode = packet.opcode
        if opcode in _DATA:
            self._receive_data(packet)
        elif opcode == Opcode.PROBE:
            self._receive_probe(packet)
        else:
            self._receive_feedback(packet)

    def _read_frame(self, packet):
        """Fill the transport fields of a bytes-mode packet from its frame (the shape checks of
        docs/protocol.md 5, then the ICRC of a frame not trimmed); False when the frame is dropped."""
        try:
            parsed = parse_frame(packet.frame, inner_dst=nic_address(self.host))
        except FrameError:
            self.counters["dropped_malformed"] += 1
            return False
        if not parsed.trimmed and not parsed.icrc_ok:
            self.counters["dropped_malformed"] += 1
            return False
        bth = parsed.bth
        packet.opcode = opcode = bth["opcode"]
        if opcode not in _DATA and opcode not in (Opcode.SACK, Opcode.NACK, Opcode.PROBE):
            self.counters["dropped_malformed"] += 1      # Write-with-Immediate is not modelled
            return False
        packet.qpn = bth["dest_qpn"]
        packet.psn = bth["psn"]
        packet.ackreq = bth["ackreq"]
        packet.rtx = bth["rtx"]
        packet.ev = parsed.ev
        packet.src = parsed.inner["src"] & 0xFFFFFFFF
        if opcode in _DATA:
            packet.payload = len(parsed.payload)
            packet.info = (parsed.reth["va"], parsed.reth["rkey"], parsed.payload)
        elif opcode == Opcode.PROBE:
            packet.info = parsed.peth["probe_id"]
        else:
            packet.info = parsed.ext
        return True

    def _receive_data(self, packet):
        qp = self.recv_qps[packet.qpn] if packet.qpn < len(self.recv_qps) else None
        if qp is None:
            self.counters["dropped_unknown_qp"] += 1
            return
        if packet.frame is None:                    # _access, light packets
            va, payload = packet.info, None
            access_ok = qp.base <= va and va + packet.payload <= qp.base + qp.size
        else:
            va, access_ok, payload = self._access(qp, packet)
        verdict, sack, nack = qp.tracker.arrive_fields(
            packet.psn, packet.ev, packet.ecn, packet.dscp, packet.ackreq, packet.rtx,
            packet.opcode, packet.payload, access_ok)
        counters = self.counters
        if packet.ecn == Ecn.CE:
            counters["ce_received"] += 1
        if verdict == Verdict.PLACED:
            counters["placed"] += 1
            qp.placed_bytes += packet.payload
            if qp.memory is not None:
                start = va - qp.base
                qp.memory[start:start + packet.payload] = payload
            flow = qp.flow
            flow.placed_bytes += packet.payload
            now = flow.last_placed = self.loop.now
            k = now // self.bin_ps
            self.timeline[k] = self.timeline.get(k, 0) + packet.payload
            k = now // self.series_ps
            self.series[k] = self.series.get(k, 0) + packet.payload
            flow.series[k] = flow.series.get(k, 0) + packet.payload
        elif verdict == Verdict.DUPLICATE:
            counters["duplicates"] += 1
        elif verdict == Verdict.TRIMMED:
            counters["trimmed_received"] += 1
            k = self.loop.now // self.series_ps
            qp.flow.trim_series[k] = qp.flow.trim_series.get(k, 0) + 1
        elif verdict == Verdict.OUT_OF_WINDOW:
            counters["out_of_window"] += 1
        if sack is not None:            # on the trigger's path (docs/protocol.md 4.5)
            counters["sacks_sent"] += 1
            self._send_control(Opcode.SACK, qp.peer_qpn, qp.peer, packet.ev, sack)
        if nack is not None:
            counters["nacks_sent"] += 1
            self._send_control(Opcode.NACK, qp.peer_qpn, qp.peer, nack.ev, nack)

    @staticmethod
    def _access(qp, packet):
        """(VA, the R_Key and bounds check, payload bytes) of a bytes-mode data packet (a light
        one carries its VA only, checked in place by the caller)."""
        va, rkey, payload = packet.info
        ok = rkey == qp.rkey and qp.base <= va and va + len(payload) <= qp.base + qp.size
        return va, ok, payload

    def _receive_probe(self, packet):
        qp = self.recv_qps[packet.qpn] if packet.qpn < len(self.recv_qps) else None
        if qp is None:
            self.counters["dropped_unknown_qp"] += 1
            return
        _, sack, _ = qp.tracker.probe_fields(packet.ev, packet.info, packet.ecn, packet.dscp)
        if sack is not None:
            self.counters["probe_answers"] += 1
            self._send_control(Opcode.SACK, qp.peer_qpn, qp.peer, packet.ev, sack)

    def _receive_feedback(self, packet):
        if packet.qpn >= len(self.send_qps):
            self.counters["dropped_unknown_qp"] += 1
            return
        rel = self.reliability
        if packet.opcode == Opcode.SACK:
            self.counters["sacks_received"] += 1
        else:
            self.counters["nacks_received"] += 1
        if packet.frame is not None:
            rel.feedback({"qpn": packet.qpn, "opcode": packet.opcode, "ecn": packet.ecn,
                          "ext": ext_to_int(packet.info)})
        elif packet.opcode == Opcode.SACK:
            rel.sack(packet.qpn, packet.info)
        else:
            rel.nack(packet.qpn, packet.info)
        self._drain()

    # --- ticks and the reliability block's outputs -----------------------------------------------

    def tick(self):
        """One 1.024 us tick: the receive trackers' coalescing timers and the reliability
        block's timers and probes."""
        for qp in self.recv_qps:
            if qp.tracker.uncovered:
                _, sack, _ = qp.tracker.tick_fields()
                if sack is not None:        # on the path of its trigger, the last accepted
                    self.counters["sacks_sent"] += 1
                    self._send_control(Opcode.SACK, qp.peer_qpn, qp.peer, qp.tracker.last_ev,
                                       sack)
        if self.send_qps:
            self.reliability.tick()
            self._drain()

    def _drain(self):
        """Apply the reliability block's output records, stream by stream, until none is left."""
        busy = True
        while busy:
            busy = False
            for pending, handler in self._handlers:
                if pending:
                    busy = True
                    records = pending[:]
                    pending.clear()
                    for record in records:
                        handler(record)

    def _on_retx(self, record):
        qp = self.send_qps[record["qpn"]]
        qp.retx.append((record["psn"], record["avoid_ev"]))
        cause = record["cause"]
        self.retx_causes[cause] = self.retx_causes.get(cause, 0) + 1
        self.wake()

    def _on_limit(self, record):
        """PSN_LIMIT (profile 1) or WINDOW_ROOM (profile 2: the PSN limit and the credit)."""
        qp = self.send_qps[record["qpn"]]
        qp.psn_limit = record["psn_limit"]
        credit = record.get("credit")
        if credit is not None:
            qp.credit = credit
            qp.byte_credit = record["byte_credit"]
        self.wake()

    def _on_retire(self, record):
        qp = self.send_qps[record["qpn"]]
        message = qp.by_req.pop(record["req_id"], None)
        if message is None or message.first_psn is None:
            return
        psn = message.first_psn
        for _ in range(message.packets):
            qp.by_psn.pop(psn, None)
            psn = psn_add(psn, 1)

    def _on_completion(self, record):
        qp = self.send_qps[record["qpn"]]
        qp.posted -= 1
        if record["status"] == CompletionStatus.OK:
            qp.flow.completed += 1
        else:
            qp.flow.errors += 1
            if not qp.error:
                qp.error = True
                self.counters["qp_errors"] += 1
                qp.flow.errors += len(qp.backlog)
                qp.backlog.clear()
        self._post_backlog(qp)

    def _on_ev(self, record):
        qpn, ev, kind = record["qpn"], record["ev"], record["kind"]
        self.ev_log.append((self.loop.now, qpn, ev, kind))
        if kind == EvEvent.SKIP:
            self.counters["ev_skip"] += 1
        elif kind == EvEvent.RECOVERED:
            self.counters["ev_recovered"] += 1
        qp = self.send_qps[qpn]
        marked = () if qp.ecmp is not None or qp.oblivious is not None else \
            self.table.event(qpn, ev, kind)
        if kind == EvEvent.BAD:
            self.counters["ev_bad"] += 1
            self.counters["ev_marked"] += len(marked)
            for answer in ev_marked_records(qpn, marked):
                self.reliability.marked(answer)
        self.wake()

    def _on_control(self, record):
        qp = self.send_qps[record["qpn"]]
        probe_id = PETH.unpack(int_to_ext(record["ext"], PETH.size))["probe_id"]
        self.counters["probes_sent"] += 1
        self._send_control(Opcode.PROBE, qp.peer_qpn, qp.peer, record["ev"], probe_id)
