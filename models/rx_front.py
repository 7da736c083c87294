# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the NIC receive front: plane buffers, plane merge, parser and receive checks
(docs/protocol.md sections 1, 2, 5 and 8). RTL: ``rtl/rx_front.py`` (``rtl/rx_plane_buffer.py``,
``rtl/plane_merge.py``, ``rtl/rx_parser.py``); bench: ``tb/test_rx_front.py``.

Frames (Ethernet without FCS, as bytes) arrive on N plane ports and go through:

1. **Plane buffer** (:meth:`RxFrontModel.arrive`), per plane, in arrival order. Whether a frame
   found room depends on timing, so the caller gives the outcome the RTL reported on its trace
   (docs/protocol.md 8): :data:`STORED` (kept whole), :data:`NO_BUFFER` (the receive frame buffer had no
   room for the frame's body: only its headers were kept, so that the parser can NACK it),
   :data:`NO_ROOM` (not even a header slot was free: dropped, counted ``dropped_no_room``) or
   :data:`BAD` (``tuser[0]`` on its last beat: dropped, counted ``dropped_bad``). The model checks
   what it can: BAD exactly for frames flagged bad (unless NO_ROOM, which wins: the frame was never
   written), STORED for frames shorter than 20 bytes (no Payload Length to judge), and, when the
   caller gives the free words the RTL saw, the room rule itself (:func:`body_words_needed`);
   with ``header_slots`` configured, NO_ROOM is judged against the frames it holds (a frame
   kept only while a header slot can be free, NO_ROOM only while every slot can be in use:
   :meth:`RxFrontModel._check_slots`).
2. **Plane merge** (:meth:`RxFrontModel.merge`): whole frames leave the plane buffers in the order
   the RTL reports (round-robin in the RTL; an input here).
3. **Parser and checks** (:meth:`RxFrontModel.judge`), in the order of docs/protocol.md section 5, each
   failure dropped and counted under its reason (:data:`PARSER_COUNTERS`):

   - shape: :func:`models.packets.parse_frame` with the configured inner destination; its
     :data:`models.packets.FRAME_ERROR_REASONS` are the counter names (``short``, ``ethertype``,
     ``next_header``, ``length``, ``inner_dst``, ``udp_port``, ``tver``, ``pkey``, ``opcode``,
     ``trimmed_short``);
   - QP known: ``dest_qpn`` < ``n_qps`` and enabled (``qp_unknown``);
   - room in the receive frame buffer: a :data:`NO_BUFFER` data frame is answered by a NACK
     NO_PKT_BUFFER control record (``no_buffer_data``), a control frame is dropped
     (``no_buffer_control``);
   - ICRC, for frames that are not trimmed (``icrc``). "Trimmed" is a data frame whose outer DSCP
     is TRIMMED or TRIMMED_LASTHOP (docs/protocol.md 5); control frames are short, the switch keeps them
     whole, so their ICRC is always checked (a trimmed probe too);
   - memory region: ``access_ok`` = the R_Key names a valid region (the first, lowest index, whose
     ``rkey`` matches) and [VA, VA + payload length) lies inside [base, base + length) (an empty
     range needs base <= VA <= base + length). Not a drop: the receive tracker NACKs UNEXP_EVENT.

   A data frame that passes (``data``, or ``trimmed`` with no payload) gives one ``RX_META``
   record (:func:`rx_meta`) and, when untrimmed with a payload, the payload bytes without pad; a
   probe gives an ``RX_META`` record (``probe``); a SACK or NACK a ``FEEDBACK_RECORD`` (``sack``,
   ``nack``). ``access_denied`` counts the data frames passed on with ``access_ok`` = 0.

Configuration (as the RTL's configuration port sets it): the enabled QPs (a bit mask), the NIC's
own inner address, and ``n_regions`` memory regions (R_Key, base, length, valid). Out of reset
nothing is enabled: every frame fails ``inner_dst`` (unless the address is 0) or ``qp_unknown``.

Nothing here imports cocotb, Amaranth or scapy.
"""

from collections import deque
from dataclasses import dataclass

from .layouts import (DATA_OPCODES, INNER_OFFSET, IPV6, KNOWN_OPCODES, OUTER_OFFSET, Dscp,
                      NackReason, Opcode)
from .packets import FRAME_ERROR_REASONS, FrameError, frame_length, parse_frame
from .records import ext_to_int
from .rx_tracker import Nack

__all__ = [
    "STORED", "NO_BUFFER", "NO_ROOM", "BAD", "OUTCOMES", "PARSER_COUNTERS", "PLANE_COUNTERS",
    "HEADER_KEEP", "MAX_PLANES", "MAX_QPS", "MAX_REGIONS", "OFFER_DELAY", "MIN_FRAME",
    "core_width", "header_words", "body_words_needed", "max_frame_words", "header_slots_needed",
    "engine_header_slots", "Region", "access_ok", "rx_meta", "RxFrontConfig", "Judgement",
    "RxFrontModel",
]

# Plane-buffer outcomes, with the codes of the RTL's trace.
STORED, NO_BUFFER, NO_ROOM, BAD = 0, 1, 2, 3
OUTCOMES = ("stored", "no_buffer", "no_room", "bad")

PARSER_COUNTERS = FRAME_ERROR_REASONS + (
    "qp_unknown", "no_buffer_data", "no_buffer_control", "icrc",
    "data", "trimmed", "probe", "sack", "nack", "access_denied")
PLANE_COUNTERS = ("frames", "dropped_bad", "dropped_no_room", "no_buffer")

HEADER_KEEP = 138           # bytes a header slot keeps at least: headers through ImmDt
MAX_PLANES = 8
MAX_QPS = 64
MAX_REGIONS = 16
OFFER_DELAY = 4             # cycles from a frame's last beat to its offer to the merge (the
                            # RTL's ICRC_LATENCY + 1; rtl/rx_plane_buffer.py checks they agree)
MIN_FRAME = min(frame_length(op, 0) for op in KNOWN_OPCODES)    # 134 B: a probe; data frames 138 B
_PAYLOAD_LENGTH_BYTE = OUTER_OFFSET + IPV6["payload_length"].offset // 8     # 18
_TRIMMED_DSCPS = (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)


def core_width(n_planes, data_width):
    """C, the core's bits per cycle: N x W with N rounded up to a power of two."""
    return data_width << (n_planes - 1).bit_length()


def header_words(core_bits):
    """Words of C bits in a header slot: the first ``HEADER_KEEP`` bytes or more."""
    return -(-HEADER_KEEP // (core_bits // 8))


def body_words_needed(frame, core_bits):
    """Words of the body buffer a frame needs: the words of 54 + outer Payload Length bytes past
    the header slot's; 0 for a frame too short to hold the Payload Length (20 bytes)."""
    if len(frame) < _PAYLOAD_LENGTH_BYTE + 2:
        return 0
    word_bytes = core_bits // 8
    declared = INNER_OFFSET + int.from_bytes(frame[_PAYLOAD_LENGTH_BYTE:_PAYLOAD_LENGTH_BYTE + 2],
                                             "big")
    return max(0, -(-declared // word_bytes) - header_words(core_bits))


def max_frame_words(core_bits, pmtu=4096):
    """Words of C bits of the largest valid frame at ``pmtu`` (a Write Only with Immediate)."""
    largest = max(frame_length(op, pmtu if op in DATA_OPCODES else 0) for op in KNOWN_OPCODES)
    return -(-largest // (core_bits // 8))


def header_slots_needed(n_planes, data_width, pmtu=4096, stall_words=0):
    """The header slots a plane buffer needs so that valid frames never find them all in use
    while the merge keeps up (a power of two, 2..256): the bound behind the defaults of
    ``rtl/rx_front.py``, ``rtl/rx_engine.py`` and ``rtl/nic_engine.py``.

    A frame holds its slot from its first beat until the merge has read its header: its beats,
    :data:`OFFER_DELAY`, the wait for its grant, then its header words (``Hw``). The merge serves
    the planes round robin a whole frame at a time, one word of C bits a cycle; while it keeps
    up (the frames of all planes need at most one word a cycle, true for every frame size when
    N is not a power of two, for frames filling their last word otherwise: see
    ``rtl/rx_front.py``), a plane's oldest frame waits at most for one frame of each other plane
    (``(N - 1) x`` :func:`max_frame_words`) and for ``stall_words`` cycles in which the core's
    consumer stops it (0: every output ready). The frames of a plane start at least
    ``ceil(MIN_FRAME / (W / 8))`` cycles apart (one frame at a time on a port, none shorter than
    :data:`MIN_FRAME`), so at most ``ceil(hold / that) + 1`` frames hold a slot at once (the +1:
    the frame being received), ``hold`` = ``OFFER_DELAY + (N - 1) x max words + stall_words +
    Hw + 2`` (the grant's register and the slot's release). Frames shorter than
    :data:`MIN_FRAME` (malformed) or a consumer stopping longer can still exhaust the slots:
    docs/protocol.md section 5 says what happens then."""
    _check_int("n_planes", n_planes, 1, MAX_PLANES)
    _check_int("pmtu", pmtu, 1, 4096)
    _check_int("stall_words", stall_words, 0, 1 << 20)
    core = core_width(n_planes, data_width)
    hold = OFFER_DELAY + (n_planes - 1) * max_frame_words(core, pmtu) + stall_words + \
        header_words(core) + 2
    gap = -(-MIN_FRAME // (data_width // 8))
    frames = -(-hold // gap) + 1
    if frames > 256:
        raise ValueError(f"{n_planes} planes of {data_width} bits at pmtu {pmtu} with "
                         f"stall_words {stall_words} need {frames} header slots, more than 256")
    return 1 << max(1, (frames - 1).bit_length())


def engine_header_slots(n_planes, data_width, pmtu=4096):
    """The header slots of the receive engine's and the NIC's planes (their default):
    :func:`header_slots_needed` allowing the placement to stop the front for one largest
    frame's words (``stall_words`` = :func:`max_frame_words`), as its writes to host memory
    may. 64 at N = 2 or 8, W = 64, pmtu 4096; 16 at N = 1 or 2, W = 64, pmtu 1024 (the NIC
    benches', which lost frames with 8)."""
    _check_int("n_planes", n_planes, 1, MAX_PLANES)
    stall = max_frame_words(core_width(n_planes, data_width), pmtu)
    return header_slots_needed(n_planes, data_width, pmtu, stall_words=stall)


@dataclass(frozen=True)
class Region:
    """A registered memory region: R_Key -> [base, base + length)."""
    rkey: int
    base: int
    length: int
    valid: bool = True


def access_ok(regions, rkey, va, length):
    """The memory-region check: the first valid region whose R_Key is ``rkey`` holds
    [va, va + length). ``regions``: a sequence of :class:`Region` or None (an unused entry)."""
    for region in regions:
        if region is not None and region.valid and region.rkey == rkey:
            return region.base <= va and va + length <= region.base + region.length
    return False


def rx_meta(parsed, access):
    """The ``RX_META`` fields of a frame that passed the checks (a data frame or a probe)."""
    opcode = parsed.bth["opcode"]
    data = opcode in DATA_OPCODES
    trimmed = data and parsed.outer["dscp"] in _TRIMMED_DSCPS
    meth, reth, immdt = parsed.meth or {}, parsed.reth or {}, parsed.immdt or {}
    return {
        "opcode": opcode, "qpn": parsed.bth["dest_qpn"], "psn": parsed.bth["psn"],
        "ev": parsed.ev, "outer_src": parsed.outer["src"], "outer_dst": parsed.outer["dst"],
        "dscp": parsed.outer["dscp"], "ecn": parsed.outer["ecn"], "ackreq": parsed.bth["ackreq"],
        "rtx": parsed.bth["rtx"], "padcnt": parsed.bth["padcnt"],
        "rqmsn": meth.get("rqmsn", 0), "msn": meth.get("msn", 0), "va": reth.get("va", 0),
        "rkey": reth.get("rkey", 0), "dma_length": reth.get("dma_length", 0),
        "imm": immdt.get("imm", 0),
        "payload_length": len(parsed.payload) if data and not trimmed else 0,
        "ext": ext_to_int(parsed.ext), "trimmed": int(trimmed), "error": 0,
        "access_ok": int(bool(access)),
        "probe_id": parsed.peth["probe_id"] if opcode == Opcode.PROBE else 0,
    }


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer {low}..{high}, not {value!r}")


@dataclass(frozen=True)
class RxFrontConfig:
    """Parameters of the receive front (the RTL's): N planes of W bits, the QPs and regions;
    ``header_slots`` (the plane buffer's, or None) turns on the header-slot rule of
    :meth:`RxFrontModel.arrive`."""
    n_planes: int = 8
    data_width: int = 64
    n_qps: int = 4
    n_regions: int = 4
    header_slots: int | None = None     # the plane buffer's header slots (None: not judged)

    def __post_init__(self):
        _check_int("n_planes", self.n_planes, 1, MAX_PLANES)
        if self.data_width not in (64, 128, 256, 512):
            raise ValueError(f"data_width must be 64, 128, 256 or 512, not {self.data_width!r}")
        _check_int("n_qps", self.n_qps, 1, MAX_QPS)
        if self.n_qps & (self.n_qps - 1):
            raise ValueError(f"n_qps must be a power of two, not {self.n_qps}")
        _check_int("n_regions", self.n_regions, 1, MAX_REGIONS)
        if self.header_slots is not None:
            _check_int("header_slots", self.header_slots, 2, 256)

    @property
    def core_width(self):
        return core_width(self.n_planes, self.data_width)


@dataclass(frozen=True)
class Judgement:
    """What the parser did with one frame: the counter it went to and its outputs (None when
    it has none): ``meta`` (RX_META fields), ``payload`` (bytes, for ``m_axis``), ``feedback``
    (FEEDBACK_RECORD fields), ``control`` (CONTROL_RECORD fields: the NACK NO_PKT_BUFFER)."""
    reason: str
    meta: dict | None = None
    payload: bytes | None = None
    feedback: dict | None = None
    control: dict | None = None


class RxFrontModel:
    """The receive front (see the module docstring). Outputs accumulate in :attr:`metas`,
    :attr:`payloads`, :attr:`feedbacks` and :attr:`controls`, in the order the RTL emits them."""

    def __init__(self, config=None, **params):
        if config is not None and params:
            raise ValueError("give either an RxFrontConfig or parameters, not both")
        self.config = config if config is not None else RxFrontConfig(**params)
        cfg = self.config
        self.qp_enable = 0
        self.inner_dst = 0
        self.regions = [None] * cfg.n_regions
        self.stored = [deque() for _ in range(cfg.n_planes)]
        # Merges of each plane since its last arrival (the header-slot rule of arrive()).
        self.merged_since = [0] * cfg.n_planes
        self.counters = dict.fromkeys(PARSER_COUNTERS, 0)
        self.plane_counters = [dict.fromkeys(PLANE_COUNTERS, 0) for _ in range(cfg.n_planes)]
        self.metas, self.payloads, self.feedbacks, self.controls = [], [], [], []

    # --- configuration ---------------------------------------------------------------------

    def set_qp_enable(self, mask):
        """Enable QP q (local QPN q < n_qps) for every bit q set in ``mask``."""
        _check_int("QP enable mask", mask, 0, (1 << self.config.n_qps) - 1)
        self.qp_enable = mask

    def set_inner_dst(self, address):
        """The NIC's own inner IPv6 address (a 128-bit int)."""
        _check_int("inner destination", address, 0, (1 << 128) - 1)
        self.inner_dst = address

    def set_region(self, index, rkey, base, length, valid=True):
        """Memory region ``index``: R_Key ``rkey`` (32 bits) -> [base, base + length) (64-bit
        base and length)."""
        _check_int("region index", index, 0, self.config.n_regions - 1)
        _check_int("R_Key", rkey, 0, (1 << 32) - 1)
        _check_int("region base", base, 0, (1 << 64) - 1)
        _check_int("region length", length, 0, (1 << 64) - 1)
        self.regions[index] = Region(rkey, base, length, bool(valid))

    def qp_known(self, qpn):
        return qpn < self.config.n_qps and bool(self.qp_enable >> qpn & 1)

    # --- the three steps ---------------------------------------------------------------------

    def _check_plane(self, plane):
        _check_int("plane", plane, 0, self.config.n_planes - 1)

    def arrive(self, plane, frame, bad=False, outcome=STORED, free=None):
        """A frame ended on ``plane``; ``bad`` is its ``tuser[0]``, ``outcome`` the plane buffer's
        (as the RTL reported it) and ``free`` the body words the RTL saw free when it judged the
        room (None: not checked). Raises ValueError when the outcome contradicts the frame."""
        self._check_plane(plane)
        frame = bytes(frame)
        if outcome not in (STORED, NO_BUFFER, NO_ROOM, BAD):
            raise ValueError(f"unknown plane outcome {outcome!r}")
        counters = self.plane_counters[plane]
        counters["frames"] += 1
        self._check_slots(plane, outcome)
        self.merged_since[plane] = 0
        if outcome == NO_ROOM:
            counters["dropped_no_room"] += 1
            return outcome
        if bool(bad) != (outcome == BAD):
            raise ValueError(f"plane {plane}: outcome {OUTCOMES[outcome]} for a frame "
                             f"{'flagged' if bad else 'not flagged'} bad")
        if outcome == BAD:
            counters["dropped_bad"] += 1
            return outcome
        if free is not None:
            needed = body_words_needed(frame, self.config.core_width)
            if (outcome == NO_BUFFER) != (needed > free):
                raise ValueError(f"plane {plane}: outcome {OUTCOMES[outcome]} for a frame "
                                 f"needing {needed} body words with {free} free")
        elif outcome == NO_BUFFER and len(frame) < _PAYLOAD_LENGTH_BYTE + 2:
            raise ValueError(f"plane {plane}: a {len(frame)} B frame cannot lack room")
        if outcome == NO_BUFFER:
            counters["no_buffer"] += 1
        self.stored[plane].append((frame, outcome == NO_BUFFER))
        return outcome

    def _check_slots(self, plane, outcome):
        """The header-slot rule (``header_slots`` configured): a frame takes a slot at its first
        beat and frees it when the merge has read it out. A plane port carries one frame at a
        time, so at a frame's first beat the slots in use were the frames held now (not yet
        merged), the frames merged since the plane's last arrival (some of them during this
        frame) and at most one frame still being read. Hence a frame kept (STORED, NO_BUFFER)
        needs the frames held now to be below ``header_slots``, and NO_ROOM needs them, with
        the merges since the last arrival and the one being read, to reach it. A BAD frame had
        a slot too (NO_ROOM wins over BAD)."""
        slots = self.config.header_slots
        if slots is None:
            return
        held = len(self.stored[plane])
        if outcome != NO_ROOM and held >= slots:
            raise ValueError(f"plane {plane}: outcome {OUTCOMES[outcome]} with all {slots} "
                             f"header slots held by frames not yet merged")
        if outcome == NO_ROOM and held + self.merged_since[plane] + 1 < slots:
            raise ValueError(f"plane {plane}: outcome no_room with {held} frames held and "
                             f"{self.merged_since[plane]} merged since the last arrival, of "
                             f"{slots} header slots")

    def merge(self, plane):
        """The merge takes the oldest frame of ``plane`` into the core: judge it, record its
        outputs; returns the :class:`Judgement`."""
        self._check_plane(plane)
        if not self.stored[plane]:
            raise ValueError(f"the merge took a frame from plane {plane}, which holds none")
        frame, no_buffer = self.stored[plane].popleft()
        self.merged_since[plane] += 1
        result = self.judge(frame, no_buffer)
        self.counters[result.reason] += 1
        if result.meta is not None:
            self.metas.append(result.meta)
            if result.meta["opcode"] in DATA_OPCODES and not result.meta["access_ok"]:
                self.counters["access_denied"] += 1
        if result.payload is not None:
            self.payloads.append(result.payload)
        if result.feedback is not None:
            self.feedbacks.append(result.feedback)
        if result.control is not None:
            self.controls.append(result.control)
        return result

    def judge(self, frame, no_buffer=False):
        """The checks of docs/protocol.md section 5 on one frame (``no_buffer``: only its headers were
        kept); changes no state."""
        try:
            parsed = parse_frame(frame, inner_dst=self.inner_dst)
        except FrameError as exc:
            return Judgement(exc.reason)
        opcode = parsed.bth["opcode"]
        qpn = parsed.bth["dest_qpn"]
        if not self.qp_known(qpn):
            return Judgement("qp_unknown")
        data = opcode in DATA_OPCODES
        if no_buffer:
            if not data:
                return Judgement("no_buffer_control")
            nack = Nack(NackReason.NO_PKT_BUFFER, parsed.bth["psn"], parsed.ev)
            return Judgement("no_buffer_data", control=nack.control_record(qpn))
        trimmed = data and parsed.outer["dscp"] in _TRIMMED_DSCPS
        if not trimmed and not parsed.icrc_ok:
            return Judgement("icrc")
        if opcode in (Opcode.SACK, Opcode.NACK):
            feedback = {"qpn": qpn, "opcode": opcode, "ecn": parsed.outer["ecn"],
                        "ext": ext_to_int(parsed.ext)}
            return Judgement("sack" if opcode == Opcode.SACK else "nack", feedback=feedback)
        if opcode == Opcode.PROBE:
            return Judgement("probe", meta=rx_meta(parsed, False))
        length = 0 if trimmed else len(parsed.payload)
        access = access_ok(self.regions, parsed.reth["rkey"], parsed.reth["va"], length)
        meta = rx_meta(parsed, access)
        if trimmed:
            return Judgement("trimmed", meta=meta)
        return Judgement("data", meta=meta, payload=parsed.payload if parsed.payload else None)

    def empty(self):
        """No frame waits in a plane buffer."""
        return not any(self.stored)
