# SPDX-License-Identifier: BSD-2-Clause
"""Records that pass between blocks, declared once, as data (docs/protocol.md section 8).

Each record is an ordered list of (name, width) fields. The RTL turns a record into an Amaranth
``StructLayout`` (``rtl/common/records.py``: first field at the least significant bit), the models
use dicts, and the benches pack and unpack the integers that travel on ``*_tdata`` with
:meth:`Record.pack` and :meth:`Record.unpack`. A field added here appears everywhere at once.

``ext`` fields hold extension headers exactly as on the wire (byte 0 of the header in bits 7..0 of
the field, AXI-Stream lane order), packed with the tables of :mod:`models.layouts`; see
:func:`ext_to_int` and :func:`int_to_ext`.

Nothing here imports cocotb, Amaranth or scapy.
"""

from .layouts import MAX_EXT_BYTES

__all__ = [
    "Record", "TX_HEADER", "TX_PACKET", "WORK_REQUEST", "SEND_RECORD", "RETX_REQUEST", "RETIRE", "PSN_LIMIT", "WINDOW_ROOM",
    "CONTROL_RECORD", "FEEDBACK_RECORD", "EV_EVENT", "EV_MARKED", "COMPLETION", "RX_META",
    "RX_EVENT", "RX_VERDICT", "RxVerdict", "PLACE_COMMAND",
    "SPRAY_REQUEST", "SPRAY_ANSWER", "PLANE_FRAME", "EvEvent", "RetxCause", "CompletionStatus", "FrameUser", "ext_to_int", "int_to_ext",
    "ALL_RECORDS", "QPN_WIDTH", "EXT_WIDTH",
]

QPN_WIDTH = 24
EXT_WIDTH = MAX_EXT_BYTES * 8   # 288 bits: the longest extension stack (SACK: SETH + CC_STATE)


class Record:
    """An ordered set of named unsigned fields; field 0 sits at bit 0 of the packed integer."""

    def __init__(self, name, fields, doc=""):
        self.name = name
        self.fields = tuple(fields)
        self.doc = doc
        self.offsets = {}
        offset = 0
        for fname, width in self.fields:
            if fname in self.offsets:
                raise ValueError(f"record {name}: duplicate field {fname}")
            if width <= 0:
                raise ValueError(f"record {name}: field {fname} has width {width}")
            self.offsets[fname] = offset
            offset += width
        self.width = offset
        self.widths = dict(self.fields)

    def __repr__(self):
        return f"Record({self.name}, {self.width} bits)"

    @property
    def names(self):
        return [n for n, _ in self.fields]

    def pack(self, values=None, **kw):
        """The integer of a record from field values (missing fields are 0)."""
        values = dict(values or {}, **kw)
        word = 0
        for name, v in values.items():
            if name not in self.widths:
                raise KeyError(f"record {self.name} has no field {name!r}")
            w = self.widths[name]
            v = int(v)
            if v < 0:
                v &= (1 << w) - 1
            if v >> w:
                raise ValueError(f"{self.name}.{name} = {v:#x} does not fit in {w} bits")
            word |= v << self.offsets[name]
        return word

    def unpack(self, word):
        """Field values of a packed record."""
        word = int(word)
        return {n: (word >> self.offsets[n]) & ((1 << w) - 1) for n, w in self.fields}

    def table(self):
        """Markdown rows (field, bits, width) for the docs."""
        return [(n, f"{self.offsets[n] + w - 1}:{self.offsets[n]}", w) for n, w in self.fields]


def ext_to_int(ext_bytes):
    """Extension-header bytes (wire order) as the integer of an ``ext`` field: byte 0 in bits 7..0."""
    if len(ext_bytes) > MAX_EXT_BYTES:
        raise ValueError(f"extension headers of {len(ext_bytes)} B exceed {MAX_EXT_BYTES} B")
    return int.from_bytes(bytes(ext_bytes), "little")


def int_to_ext(value, length):
    """The first ``length`` wire bytes held in an ``ext`` field."""
    return int(value).to_bytes(MAX_EXT_BYTES, "little")[:length]


# --- Frame-level and header records ----------------------------------------------------------------

TX_HEADER = Record("tx_header", [
    ("eth_dst", 48), ("eth_src", 48),
    ("dscp", 6), ("ecn", 2), ("flow_label", 20), ("hop_limit", 8),
    ("outer_src", 128), ("outer_dst", 128),
    ("inner_src", 128), ("inner_dst", 128),
    ("udp_sport", 16),
    ("opcode", 8), ("dest_qpn", 24), ("ackreq", 1), ("rtx", 1), ("psn", 24),
    ("ext", EXT_WIDTH),
    ("length", 16),
], doc="""Everything the header inserter needs to build one frame of docs/protocol.md sections 1-2.
The inserter derives the rest: EtherType, IP versions, next headers, the three length fields,
the inner Traffic Class and Flow Label (copied from the outer), inner Hop Limit 64, UDP ports'
destination 4791 and checksum 0, BTH P_Key 0xFFFF, TVer 0, PadCnt from `length`, and the ICRC.
`ext` holds METH|RETH[|ImmDt], SETH|CC_STATE, NETH or PETH as on the wire (its length follows
from `opcode`). `length` is the payload length in bytes without pad; 0 means no payload beats.""")

WORK_REQUEST = Record("work_request", [
    ("qpn", QPN_WIDTH), ("local_addr", 64), ("remote_va", 64), ("rkey", 32), ("length", 32),
    ("has_imm", 1), ("imm", 32), ("req_id", 16),
], doc="A host's RDMA Write (with optional immediate) on one QP (docs/protocol.md section 8).")

SEND_RECORD = Record("send_record", [
    ("qpn", QPN_WIDTH), ("psn", 24), ("ev", 32), ("plane", 4), ("slot", 8), ("req_id", 16),
    ("offset", 32), ("length", 16), ("tick", 32), ("room_mask", 8), ("rtx", 1), ("flushed", 1),
    ("last", 1),
], doc="""One per data packet sent (or flushed from a downed plane, `flushed` = 1), from the
transmit engine to the reliability block: what went where, when, and the plane room mask the
choice saw (docs/protocol.md 4.3 and section 8); `last` = 1 on the last packet of its work request (AckReq).""")

TX_PACKET = Record("tx_packet", [
    ("qpn", QPN_WIDTH), ("psn", 24), ("opcode", 8), ("ackreq", 1), ("rtx", 1),
    ("rqmsn", 16), ("msn", 16), ("va", 64), ("rkey", 32), ("dma_length", 32), ("imm", 32),
    ("req_id", 16), ("offset", 32), ("length", 16), ("avoid_valid", 1), ("avoid_ev", 32),
    ("cause", 3),
], doc="""One data packet from the segmenter, ahead of its payload (`length` bytes, no pad; 0 means
no payload beats): the Write opcode of docs/protocol.md 1.4, AckReq on a message's last packet, the METH and
RETH fields of docs/protocol.md 1.5 (`va` = this packet's first byte, `dma_length` = the message length),
the immediate for the *_IMM opcodes, the work request it belongs to (`req_id`, `offset` of its first
byte in the message). A retransmission has `rtx` = 1, the EV to avoid and its `RetxCause`.""")

RETX_REQUEST = Record("retx_request", [
    ("qpn", QPN_WIDTH), ("psn", 24), ("avoid_ev", 32), ("cause", 3),
], doc="Rebuild and resend one PSN, never on `avoid_ev` (docs/protocol.md 4.3).")

RETIRE = Record("retire", [("qpn", QPN_WIDTH), ("req_id", 16)],
                doc="A work request fully acknowledged: the transmit engine may free it.")

PSN_LIMIT = Record("psn_limit", [("qpn", QPN_WIDTH), ("psn_limit", 24)],
                   doc="""Profile 1 (what the RTL implements today): new PSNs of the QP stop at
psn_limit (exclusive), the sender window edge.""")

WINDOW_ROOM = Record("window_room", [("qpn", QPN_WIDTH), ("psn_limit", 24), ("credit", 16),
                                      ("byte_credit", 32)],
                     doc="""Profile 2 (docs/protocol.md 5, sender limits (a) and (b)): the
window room of QP `qpn`. New PSNs stop at `psn_limit` (exclusive, limit (a): cack_psn + 1 + MPR,
or the next PSN once the QP is in error). `credit` counts, modulo 2^16, the window places the
reliability block has granted since set-up: W_max at set-up, plus one each time a PSN leaves
flight (taken as received, or its retransmission requested). The transmit side counts the data
packets it sends (new and retransmissions, modulo 2^16) and may send one more while that count
is below `credit` in serial order (limit (b)). With congestion control on (docs/protocol.md 5.1)
`byte_credit` bounds the bytes in flight by cwnd: the transmit side counts, modulo 2^32, the cost
of every data packet it sends (max(payload length, 1024) bytes) and may send one more while its
count plus that packet's cost is at most `byte_credit` in serial order; `byte_credit` is the
block's count of those bytes plus cwnd minus its bytes in flight (0, ignored, with congestion
control off). A record goes out at set-up and whenever a field changes.""")

CONTROL_RECORD = Record("control_record", [
    ("qpn", QPN_WIDTH), ("opcode", 8), ("ev", 32), ("ext", EXT_WIDTH),
], doc="""A SACK, NACK, probe answer (SACK with pr = 1) or probe to send on QP `qpn`, on the path
of `ev` (the reverse path of the packet answered, or the EV under test), docs/protocol.md 4.5.""")

FEEDBACK_RECORD = Record("feedback_record", [
    ("qpn", QPN_WIDTH), ("opcode", 8), ("ecn", 2), ("ext", EXT_WIDTH),
], doc="A SACK or NACK received for local QP `qpn`, for the sender's reliability block.")

EV_EVENT = Record("ev_event", [("qpn", QPN_WIDTH), ("ev", 32), ("kind", 3)],
                  doc="A state event for the slot(s) of (QP, EV), docs/protocol.md 4.4; kinds in EvEvent.")

EV_MARKED = Record("ev_marked", [("qpn", QPN_WIDTH), ("ev", 32), ("valid", 1), ("last", 1)],
                   doc="""Answer to a BAD event: one record per EV actually marked ASSUMED_BAD
(valid = 1), the last one with last = 1; a single record with valid = 0 when none was.""")

COMPLETION = Record("completion", [
    ("qpn", QPN_WIDTH), ("req_id", 16), ("msn", 16), ("status", 4), ("is_recv", 1),
    ("has_imm", 1), ("imm", 32),
], doc="A completed Write at the sender (is_recv = 0) or a received Write with Immediate.")

RX_META = Record("rx_meta", [
    ("opcode", 8), ("qpn", QPN_WIDTH), ("psn", 24), ("ev", 32),
    ("outer_src", 128), ("outer_dst", 128), ("dscp", 6), ("ecn", 2),
    ("ackreq", 1), ("rtx", 1), ("padcnt", 2),
    ("rqmsn", 16), ("msn", 16), ("va", 64), ("rkey", 32), ("dma_length", 32), ("imm", 32),
    ("payload_length", 16), ("ext", EXT_WIDTH), ("trimmed", 1), ("error", 4),
    ("access_ok", 1), ("probe_id", 16),
], doc="""The receive parser's metadata record, one per frame that passed the receive checks (a
data frame, trimmed or not, or a reliability probe; rtl/rx_parser.py), beside the payload:
header fields as received, `ev` = UDP source port << 16 | outer Flow Label[15:0], `ecn` and
`dscp` of the outer header, `payload_length` without pad (0 for trimmed frames and probes),
`ext` = the extension headers present (wire order), `trimmed` = a data frame with outer DSCP
TRIMMED or TRIMMED_LASTHOP (no payload, ICRC not checked), `access_ok` = the R_Key names a
memory region that holds [VA, VA + payload_length), `probe_id` = the PETH's for a probe;
`error` is 0 (frames that fail a check are not emitted).""")


class EvEvent:
    """`EV_EVENT.kind` values (docs/protocol.md 4.4)."""
    SKIP = 0
    BAD = 1
    RECOVERED = 2
    DENY = 3
    ALLOW = 4


class RetxCause:
    """`RETX_REQUEST.cause` values."""
    NACK_TRIMMED = 0
    NACK_OTHER = 1
    TIMEOUT = 2
    FLUSHED = 3
    CACK_MOVED = 4
    PATH_LOST = 5        # (v2) declared lost with its path at another PSN's timeout (4.4)


class CompletionStatus:
    OK = 0
    QP_ERROR = 1
    RETRY_EXCEEDED = 2
    WIMM_OVERFLOW = 3
    FLUSHED = 4          # (v2) completed by a QP reset (docs/protocol.md 5)


class FrameUser:
    """`tuser` bits of a frame stream (per frame, valid on every beat of the frame)."""
    BAD = 0          # bit 0 with tlast: the frame is bad, drop it (verilog-ethernet convention)
    WIDTH = 1


# --- Spray scheduler (rtl/spray_scheduler.py) ----------------------------------------------------

SPRAY_REQUEST = Record("spray_request", [
    ("qpn", QPN_WIDTH), ("plane_ok", 8), ("avoid_valid", 1), ("avoid_ev", 32),
], doc="""One packet's spray choice asked of the EV table (docs/protocol.md 4.3) for QP `qpn`: bit p of
`plane_ok` says plane p has room in its port FIFO (the scheduler ANDs its plane up mask);
`avoid_ev` (when `avoid_valid` = 1) is the EV a retransmission must not use.""")

SPRAY_ANSWER = Record("spray_answer", [
    ("qpn", QPN_WIDTH), ("found", 1), ("plane", 4), ("slot", 8), ("ev", 32), ("position", 8),
], doc="""The answer to one `spray_request`, in request order: `found` = 1 with the plane, the
slot, its EV and the rotation position it was found at (models/spray.py `Choice`), or `found` = 0
and every other field but `qpn` 0 when nothing is choosable (the packet waits) or the QP is not
configured.""")

# --- Path building and plane splitter (rtl/tx_path.py, rtl/plane_splitter.py) -------------------

PLANE_FRAME = Record("plane_frame", [
    ("plane", 4), ("frame_bytes", 16), ("data", 1), ("send", SEND_RECORD.width),
], doc="""One per frame, from path building to the plane splitter, in frame order: the frame's
`plane` (its EV's plane), its length in bytes (ICRC included), and for a data frame (`data` = 1)
its `send_record` (packed), sent again with `flushed` = 1 if the plane goes down before the frame
leaves (docs/protocol.md 4.6); for a control frame `send` holds only `qpn`, `ev` and `plane`.""")

# --- Receive tracker (rtl/rx_tracker.py) ----------------------------------------------------------

RX_EVENT = Record("rx_event", [
    ("qpn", QPN_WIDTH), ("opcode", 8), ("psn", 24), ("ev", 32), ("dscp", 6), ("ecn", 2),
    ("ackreq", 1), ("rtx", 1), ("msn", 16), ("imm", 32), ("payload_length", 16),
    ("access_ok", 1), ("probe_id", 16),
], doc="""One input of the receive tracker for local QP `qpn`: a data packet that passed the
shape, QP, buffer and ICRC checks (a data `opcode`; fields as in `rx_meta`, `ackreq` = the last
packet of a message, `msn` and `imm` for Write-with-Immediate completions, `access_ok` = the R_Key
and bounds check passed), or a reliability probe (`opcode` PROBE, with `ev`, `dscp`, `ecn` and the
PETH's `probe_id`; the other fields are ignored). Any other opcode is dropped and counted.""")

RX_VERDICT = Record("rx_verdict", [
    ("qpn", QPN_WIDTH), ("psn", 24), ("verdict", 4), ("placed", 1), ("ticks", 2),
], doc="""The receive tracker's answer to one `rx_event`, in input order: `verdict` (an
`RxVerdict` code; `placed` = 1 exactly when it is PLACED: the placement stage writes the payload)
and `ticks`, the 1.024 us ticks the tracker applied since the previous verdict, saturated at 3 (two
ticks in a row already stop every coalescing timer), so a model applies the same ticks before this
event. Codes: PLACED 0, DUPLICATE 1, OUT_OF_WINDOW 2, TRIMMED 3, ACCESS_ERROR 4, WIMM_OVERFLOW 5,
QP_ERROR 6, PROBE 7 (a probe answered), DROPPED 8 (QP unknown or not enabled, or an opcode that
is neither data nor PROBE).""")


class RxVerdict:
    """`RX_VERDICT.verdict` values (the verdicts of models/rx_tracker.py, plus DROPPED)."""
    PLACED = 0
    DUPLICATE = 1
    OUT_OF_WINDOW = 2
    TRIMMED = 3
    ACCESS_ERROR = 4
    WIMM_OVERFLOW = 5
    QP_ERROR = 6
    PROBE = 7
    DROPPED = 8


# --- Direct placement (rtl/placement.py) -----------------------------------------------------------

PLACE_COMMAND = Record("place_command", [("va", 64), ("length", 16), ("place", 1)],
                       doc="""One per frame given to the placement stage, in frame order: the
payload's first byte goes to `va` (RETH), `length` payload bytes without pad; `place` = 1 writes
them (the receive tracker's `placed`), 0 consumes and discards them. A command with `length` 0
owns no payload beats.""")


ALL_RECORDS = (TX_HEADER, TX_PACKET, WORK_REQUEST, SEND_RECORD, RETX_REQUEST, RETIRE, PSN_LIMIT,
               WINDOW_ROOM,
               CONTROL_RECORD, FEEDBACK_RECORD, EV_EVENT, EV_MARKED, COMPLETION, RX_META,
               SPRAY_REQUEST, SPRAY_ANSWER, PLANE_FRAME, RX_EVENT, RX_VERDICT, PLACE_COMMAND)
