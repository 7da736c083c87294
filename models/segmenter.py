# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the segmenter with payload fetch (NIC transmit; docs/protocol.md 1.4, 1.5, 4.3, 5, 8).

Work requests (:data:`models.records.WORK_REQUEST`, RDMA Writes with an optional immediate) come in
per QP; each is cut into PMTU packets, described by one :data:`models.records.TX_PACKET` record
each and followed by its payload, read from host memory. The engine holds every work request
until a RETIRE frees it, so any PSN sent can be rebuilt on a RETX_REQUEST, payload fetched again.

Packets of a work request of ``length`` bytes (docs/protocol.md 1.4, 1.5):

- ``max(1, ceil(length / pmtu))`` packets (a 0-byte Write is one WRITE_ONLY(_IMM) packet of
  length 0), with consecutive 24-bit PSNs per QP, counted from the QP's configured start PSN;
- opcodes FIRST, MIDDLE, LAST, ONLY; LAST and ONLY become LAST_IMM and ONLY_IMM when the request
  has an immediate; ``ackreq`` = 1 on the last packet; ``imm`` is the immediate in the two *_IMM
  opcodes and 0 in every other packet;
- METH: ``msn`` counts the QP's messages from 0; ``rqmsn`` counts its Write-with-Immediate
  messages from 0 (the first such message carries 0) and is 0 in the packets of plain Writes, as
  in ``vectors/packets.json`` (every plain Write there carries RQMSN 0, the Writes with Immediate a
  count); both wrap modulo 2^16 and repeat in every packet of the message;
- RETH: ``va`` = remote VA + packet index x PMTU, ``dma_length`` = the message length; ``offset``
  = packet index x PMTU (the first byte of the packet in the message); ``length`` = the packet's
  payload bytes (PMTU except in the last packet);
- payload: ``length`` bytes from host memory at local address + offset.

Sending (docs/protocol.md 4.3, 5): QPs with a packet ready are served round-robin (:func:`models.spray.
serve_qp`); inside a QP retransmissions go first, in the order they were requested. A new packet is
ready when the QP holds an unsent packet and its PSN is below the QP's PSN limit (serial
arithmetic, :func:`psn_before`); a QP's limit starts equal to its start PSN (closed) until a
PSN_LIMIT record arrives. A retransmission has ``rtx`` = 1, ``avoid_valid`` = 1, the request's
``avoid_ev`` and ``cause``, and the same fields and payload as the first copy; the PSN limit does
not hold it back.

Which QP is served when depends on timing (when inputs arrive, backpressure). The model therefore
takes the order of service from outside: :meth:`SegmenterModel.packet` builds the next packet of a
given QP, new or retransmitted; within a QP that sequence is fixed by the inputs. The RTL bench
compares per QP, taking the QP and the ``rtx`` flag of each packet from the RTL's output;
:meth:`SegmenterModel.run` serves the QPs itself in round-robin order (for model tests).

Defined answers to bad input (each dropped one is counted; the RTL counts alike):

- a work request for a QP that is not below ``n_qps`` or not enabled: dropped (``wr_drop_qp``);
- a work request of an invalid shape (``wr_drop_shape``): ``length`` above 2^31 bytes (the
  InfiniBand largest message), or a local or remote buffer that wraps past 2^64;
- a work request that finds its QP's table full (``wrs_per_qp`` held), or whose packets would take
  the PSNs of the QP's held requests beyond 2^23 (half the PSN space, the reach of serial
  arithmetic), waits: the hardware backpressures ``s_wr``; nothing is dropped;
- a RETX_REQUEST for a QP not below ``n_qps`` or not enabled, or for a PSN that no held request has
  sent (retired, never sent): dropped (``retx_drop``);
- a RETIRE for a QP not below ``n_qps`` or not enabled, or whose ``req_id`` is not that of the QP's
  oldest held request, or whose oldest request still has unsent packets: dropped
  (``retire_drop``). Retires come in the order of the QP's requests (a Write completes when
  cack_psn covers its last PSN, docs/protocol.md 5). A retire waits while its QP has a retransmission
  waiting, so that retransmission is still built from the request;
- a PSN_LIMIT for a QP not below ``n_qps`` or not enabled: dropped (``limit_drop``); any other
  limit is taken as is (one behind the QP's next PSN simply stops it);
- a payload word that host memory answers with an error (AXI RRESP not OKAY): its bytes are taken
  as zeros, and the packet is flagged bad (``tuser[0]`` on its last beat, which the header
  inserter turns into a frame flagged bad); each such word read is counted (``read_errors``).

Writing a QP's context word (enable, start PSN) resets the QP: its held requests and waiting
retransmissions are dropped, next PSN and limit = start PSN, MSN and RQMSN counters 0.

Nothing here imports cocotb, Amaranth or scapy.
"""

from collections import deque
from dataclasses import dataclass

from .layouts import IMM_OPCODES, Opcode
from .packets import PSN_MODULUS
from .records import RETIRE, RETX_REQUEST, PSN_LIMIT, TX_PACKET, WORK_REQUEST
from .spray import serve_qp

__all__ = [
    "SegmenterModel", "HostMemory", "WorkRequest", "Packet", "COUNTERS", "INFO", "QP_CONTEXT",
    "QP_STATUS", "QP_STATUS_WORDS", "MAX_LENGTH", "MAX_PSN_SPAN", "PMTUS", "psn_before",
    "packet_count", "opcode_of",
]

MAX_LENGTH = 1 << 31          # the largest message (InfiniBand's 2^31 bytes)
MAX_PSN_SPAN = 1 << 23        # PSNs the held requests of one QP may cover
PMTUS = (256, 512, 1024, 2048, 4096)
_ADDR_MODULUS = 1 << 64

# The configuration map (word addresses); the RTL docstring has the full table.
COUNTERS = {
    "wr_in": 0x00,             # work requests accepted
    "wr_drop_qp": 0x01,        # work requests dropped: QP unknown or not enabled
    "wr_drop_shape": 0x02,     # work requests dropped: length or address range invalid
    "retx_in": 0x03,           # retransmit requests accepted
    "retx_drop": 0x04,         # retransmit requests dropped
    "retire_in": 0x05,         # retires that freed a request
    "retire_drop": 0x06,       # retires dropped
    "limit_in": 0x07,          # PSN limits taken
    "limit_drop": 0x08,        # PSN limits dropped: QP unknown or not enabled
    "packets": 0x09,           # TX_PACKET records emitted
    "rtx_packets": 0x0A,       # of which retransmissions
    "payload_bytes": 0x0B,     # payload bytes emitted on m_axis
    "bad_packets": 0x0C,       # payload packets flagged bad (tuser[0] on the last beat)
    "read_errors": 0x0D,       # payload words read with an error response
}
INFO = {"data_width": 0x10, "n_qps": 0x11, "wrs_per_qp": 0x12, "pmtu": 0x13}
QP_CONTEXT = 0x100            # + q: bit 31 enable, bits 23..0 start PSN (write: resets the QP)
QP_STATUS = 0x400             # + 4q + word
QP_STATUS_WORDS = {"next_psn": 0, "psn_limit": 1, "oldest_psn": 2, "counts": 3}


def psn_before(a, b):
    """True when PSN ``a`` comes before PSN ``b`` in 24-bit serial arithmetic."""
    diff = (b - a) % PSN_MODULUS
    return 0 < diff < PSN_MODULUS // 2


def packet_count(length, pmtu):
    """Packets of a message of ``length`` bytes (a 0-byte message is one packet)."""
    return max(1, -(-length // pmtu))


def opcode_of(first, last, has_imm):
    """The Write opcode of a packet (docs/protocol.md 1.4)."""
    if first and last:
        return Opcode.WRITE_ONLY_IMM if has_imm else Opcode.WRITE_ONLY
    if first:
        return Opcode.WRITE_FIRST
    if last:
        return Opcode.WRITE_LAST_IMM if has_imm else Opcode.WRITE_LAST
    return Opcode.WRITE_MIDDLE


class HostMemory:
    """Host memory as the bench's AXI slave serves it: ``size`` bytes (a power of two), addresses
    taken modulo ``size`` (as cocotbext-axi's ``AxiRam`` does), read in aligned words of
    ``word_bytes``; a word listed in ``poisoned`` (word addresses, i.e. byte address //
    ``word_bytes`` modulo ``size // word_bytes``) is answered with an error and zero bytes."""

    def __init__(self, size, word_bytes, data=None, poisoned=()):
        if size <= 0 or size & (size - 1):
            raise ValueError(f"memory size must be a power of two, not {size!r}")
        if word_bytes not in (8, 16, 32, 64) or size % word_bytes:
            raise ValueError(f"word size must be 8, 16, 32 or 64 bytes, not {word_bytes!r}")
        self.size = size
        self.word_bytes = word_bytes
        self.data = bytearray(size) if data is None else bytearray(data)
        if len(self.data) != size:
            raise ValueError("initial data must have exactly `size` bytes")
        self.poisoned = {w % (size // word_bytes) for w in poisoned}

    def read(self, addr, length):
        """``(bytes, error words)`` of ``length`` bytes at ``addr``: the words covering them are
        read once each, every poisoned one counting as an error and reading zeros."""
        if length == 0:
            return b"", 0
        wb, words = self.word_bytes, self.size // self.word_bytes
        first, last = addr // wb, (addr + length - 1) // wb
        out = bytearray()
        errors = 0
        for word in range(first, last + 1):
            w = word % words
            if w in self.poisoned:
                errors += 1
                out += bytes(wb)
            else:
                out += self.data[w * wb:(w + 1) * wb]
        start = addr - first * wb
        return bytes(out[start:start + length]), errors


@dataclass
class WorkRequest:
    """A held work request: the WORK_REQUEST fields and what the engine assigned to it."""
    qpn: int
    local_addr: int
    remote_va: int
    rkey: int
    length: int
    has_imm: int
    imm: int
    req_id: int
    msn: int
    rqmsn: int
    first_psn: int
    packets: int

    def holds(self, psn):
        return (psn - self.first_psn) % PSN_MODULUS < self.packets


@dataclass(frozen=True)
class Packet:
    """One packet: its TX_PACKET record (dict), payload bytes and whether it is flagged bad."""
    record: dict
    payload: bytes
    bad: bool


class _Qp:
    def __init__(self, enabled, start_psn):
        self.enabled = enabled
        self.start_psn = start_psn
        self.next_psn = start_psn        # next new PSN
        self.alloc_psn = start_psn       # first PSN of the next request accepted
        self.limit = start_psn
        self.held = deque()              # WorkRequest, oldest first
        self.retx = deque()              # (WorkRequest, psn, avoid_ev, cause)
        self.msn = 0
        self.rqmsn = 0

    def oldest_psn(self):
        return self.held[0].first_psn if self.held else self.next_psn

    def sent(self, psn):
        """True when ``psn`` belongs to a held request and was sent."""
        base = self.oldest_psn()
        return (psn - base) % PSN_MODULUS < (self.next_psn - base) % PSN_MODULUS

    def unsent(self, wr):
        """True when held request ``wr`` still has packets to send."""
        base = self.oldest_psn()
        return (self.next_psn - base) % PSN_MODULUS < \
            (wr.first_psn - base) % PSN_MODULUS + wr.packets

    def new_ready(self):
        return self.enabled and self.next_psn != self.alloc_psn and \
            psn_before(self.next_psn, self.limit)


class SegmenterModel:
    """The segmenter's packets and counters.

    ``n_qps`` (QP q is ``qpn`` q), ``wrs_per_qp`` (requests held per QP) and ``pmtu`` (256..4096,
    a power of two) as in the RTL; ``memory`` is the :class:`HostMemory` payloads are read from.
    A full table only makes the hardware's input wait, so the model holds any number of requests
    (``wrs_per_qp`` is kept for callers). Every QP starts disabled; :meth:`configure_qp` is the
    QP context write.
    """

    def __init__(self, memory, n_qps=16, wrs_per_qp=8, pmtu=4096):
        if pmtu not in PMTUS:
            raise ValueError(f"pmtu must be one of {PMTUS}, not {pmtu!r}")
        if not isinstance(n_qps, int) or n_qps < 1:
            raise ValueError(f"n_qps must be >= 1, not {n_qps!r}")
        if not isinstance(wrs_per_qp, int) or wrs_per_qp < 1:
            raise ValueError(f"wrs_per_qp must be >= 1, not {wrs_per_qp!r}")
        self.memory = memory
        self.n_qps = n_qps
        self.wrs_per_qp = wrs_per_qp
        self.pmtu = pmtu
        self.qps = [_Qp(False, 0) for _ in range(n_qps)]
        self.pointer = 0
        self.counters = dict.fromkeys(COUNTERS, 0)

    # --- inputs ----------------------------------------------------------------------------

    def configure_qp(self, q, enabled, start_psn):
        """The QP context write: (re)start QP ``q``, dropping whatever it held."""
        if not 0 <= q < self.n_qps:
            raise ValueError(f"QP {q} is not below n_qps = {self.n_qps}")
        self.qps[q] = _Qp(bool(enabled), start_psn % PSN_MODULUS)

    def _qp(self, qpn):
        if qpn < self.n_qps and self.qps[qpn].enabled:
            return self.qps[qpn]
        return None

    def work_request(self, rec):
        """A WORK_REQUEST (dict). Returns True when it is accepted."""
        rec = {**dict.fromkeys(WORK_REQUEST.names, 0), **rec}
        qp = self._qp(rec["qpn"])
        if qp is None:
            self.counters["wr_drop_qp"] += 1
            return False
        length = rec["length"]
        if length > MAX_LENGTH or rec["local_addr"] + length > _ADDR_MODULUS or \
                rec["remote_va"] + length > _ADDR_MODULUS:
            self.counters["wr_drop_shape"] += 1
            return False
        packets = packet_count(length, self.pmtu)
        has_imm = rec["has_imm"]
        qp.held.append(WorkRequest(
            qpn=rec["qpn"], local_addr=rec["local_addr"], remote_va=rec["remote_va"],
            rkey=rec["rkey"], length=length, has_imm=has_imm, imm=rec["imm"],
            req_id=rec["req_id"], msn=qp.msn, rqmsn=qp.rqmsn if has_imm else 0,
            first_psn=qp.alloc_psn, packets=packets))
        qp.alloc_psn = (qp.alloc_psn + packets) % PSN_MODULUS
        qp.msn = (qp.msn + 1) % (1 << 16)
        if has_imm:
            qp.rqmsn = (qp.rqmsn + 1) % (1 << 16)
        self.counters["wr_in"] += 1
        return True

    def retx_request(self, rec):
        """A RETX_REQUEST (dict). Returns True when it is accepted (a retransmission waits)."""
        rec = {**dict.fromkeys(RETX_REQUEST.names, 0), **rec}
        qp = self._qp(rec["qpn"])
        psn = rec["psn"]
        if qp is None or not qp.sent(psn):
            self.counters["retx_drop"] += 1
            return False
        wr = next(w for w in qp.held if w.holds(psn))
        qp.retx.append((wr, psn, rec["avoid_ev"], rec["cause"]))
        self.counters["retx_in"] += 1
        return True

    def retire(self, rec):
        """A RETIRE (dict). Returns True when it freed the QP's oldest request."""
        rec = {**dict.fromkeys(RETIRE.names, 0), **rec}
        qp = self._qp(rec["qpn"])
        if qp is None or not qp.held or qp.held[0].req_id != rec["req_id"] or \
                qp.unsent(qp.held[0]):
            self.counters["retire_drop"] += 1
            return False
        qp.held.popleft()
        self.counters["retire_in"] += 1
        return True

    def psn_limit(self, rec):
        """A PSN_LIMIT (dict). Returns True when it is taken."""
        rec = {**dict.fromkeys(PSN_LIMIT.names, 0), **rec}
        qp = self._qp(rec["qpn"])
        if qp is None:
            self.counters["limit_drop"] += 1
            return False
        qp.limit = rec["psn_limit"]
        self.counters["limit_in"] += 1
        return True

    # --- packets ---------------------------------------------------------------------------

    def ready(self, q):
        """``(retransmission waiting, new packet ready)`` of QP ``q``."""
        qp = self.qps[q]
        return bool(qp.retx), qp.new_ready()

    def packet(self, q, rtx):
        """The next packet of QP ``q``: its oldest waiting retransmission (``rtx``) or its next new
        packet. Raises ValueError when QP ``q`` has no such packet to send (none waiting, or the
        next new PSN is not below the limit)."""
        qp = self.qps[q]
        if rtx:
            if not qp.retx:
                raise ValueError(f"QP {q} has no retransmission waiting")
            wr, psn, avoid_ev, cause = qp.retx.popleft()
        else:
            if not qp.new_ready():
                raise ValueError(f"QP {q} has no new packet to send (next PSN {qp.next_psn:#x}, "
                                 f"limit {qp.limit:#x}, end {qp.alloc_psn:#x})")
            psn = qp.next_psn
            wr = next(w for w in qp.held if w.holds(psn))
            avoid_ev = cause = 0
            qp.next_psn = (psn + 1) % PSN_MODULUS
        return self._build(q, wr, psn, rtx, avoid_ev, cause)

    def _build(self, q, wr, psn, rtx, avoid_ev, cause):
        index = (psn - wr.first_psn) % PSN_MODULUS
        offset = index * self.pmtu
        last = wr.length - offset <= self.pmtu
        length = wr.length - offset if last else self.pmtu
        opcode = opcode_of(index == 0, last, wr.has_imm)
        record = {
            "qpn": q, "psn": psn, "opcode": opcode, "ackreq": int(last), "rtx": int(rtx),
            "rqmsn": wr.rqmsn, "msn": wr.msn, "va": wr.remote_va + offset, "rkey": wr.rkey,
            "dma_length": wr.length, "imm": wr.imm if opcode in IMM_OPCODES else 0,
            "req_id": wr.req_id, "offset": offset, "length": length,
            "avoid_valid": int(rtx), "avoid_ev": avoid_ev if rtx else 0,
            "cause": cause if rtx else 0,
        }
        TX_PACKET.pack(record)      # every field fits
        payload, errors = self.memory.read(wr.local_addr + offset, length)
        c = self.counters
        c["packets"] += 1
        c["rtx_packets"] += int(bool(rtx))
        c["payload_bytes"] += length
        c["read_errors"] += errors
        c["bad_packets"] += int(errors > 0)
        return Packet(record, payload, errors > 0)

    def run(self, limit=None):
        """Serve the QPs round-robin until no packet is ready (or ``limit`` packets): the order an
        engine with no backpressure and every input already applied would send. Returns the
        packets in sending order."""
        out = []
        while limit is None or len(out) < limit:
            flags = [self.ready(q) for q in range(self.n_qps)]
            serve, self.pointer = serve_qp(self.pointer, [r for r, _ in flags],
                                           [n for _, n in flags], [True] * self.n_qps)
            if serve is None:
                break
            out.append(self.packet(serve.qp, serve.retx))
        return out

    # --- state read back -------------------------------------------------------------------

    def status(self, q):
        """The QP status words of the configuration map: next PSN, PSN limit, the first PSN of
        the oldest held request (the next PSN when none is held), and ``counts``: bits 7..0 the
        requests held, 15..8 those with unsent packets, bit 16 a retransmission waiting."""
        qp = self.qps[q]
        unsent = sum(1 for w in qp.held if qp.unsent(w))
        return {"next_psn": qp.next_psn, "psn_limit": qp.limit, "oldest_psn": qp.oldest_psn(),
                "counts": len(qp.held) | unsent << 8 | int(bool(qp.retx)) << 16}
