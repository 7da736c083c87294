# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the plane splitter (NIC transmit; docs/protocol.md 4.6 and 8).

The splitter takes the NIC core's frame stream (C bits per beat) with one
:data:`models.records.PLANE_FRAME` record per frame, in frame order, and sends each frame out of
its plane's port (W bits per beat) through that plane's FIFO. A plane that goes down (docs/protocol.md 4.6)
leaves the rotation at once: the frame it is sending finishes, and every frame queued for it is
flushed; a flushed data frame gives its send record back with ``flushed`` = 1 (so the reliability
block retransmits it at once on another plane), a flushed control frame is only counted.

The model is driven by events, in the order the RTL meets them in one cycle:

1. :meth:`PlaneSplitterModel.set_up`: the plane's up state of the cycle (the configuration's up
   mask and not the ``plane_down`` input). Going down flushes every frame queued for the plane,
   in queue order;
2. :meth:`PlaneSplitterModel.present`: a frame starts on a plane port (its first beat is
   presented: from then on it is in flight and always finishes). Only a plane that is up starts a
   frame, and it is always the oldest queued one;
3. :meth:`PlaneSplitterModel.arrive`: a frame's last beat came in from the core: it is paired
   with the oldest record given to :meth:`PlaneSplitterModel.route` and queued on its plane, or
   flushed at once when that plane is down.

Which frames a plane sends and which it flushes depends on when it goes down (timing); the bench
reports the cycles of these events from the RTL's ports, and the model decides the rest: which
frame goes where, its beats at W bits, the flushed records and the counters.

Defined answers to bad input (counted, see :data:`COUNTERS`): a record whose ``plane`` is not below
N discards its frame (``bad_plane``); a frame whose length is not the record's ``frame_bytes`` is
discarded (``bad_length``), its reserved room given back; so is a frame whose last beat is
empty (``tkeep[0]`` = 0 on ``tlast``, outside the stream convention: its beats outnumber the
words its bytes need). ``tuser[0]`` (a frame flagged bad
upstream) travels with the frame to its port's last beat.

Sizes (shared with the RTL): the FIFO of a plane holds ``fifo_depth`` core words (C bits each; a
frame takes ``ceil(bytes / (C/8))`` whole words), the largest frame is the longest Write with
``max_payload`` bytes (:func:`max_frame_bytes`), and a plane reports room when a largest frame
still fits beside everything queued or reserved for it.

Nothing here imports cocotb, Amaranth or scapy.
"""

from collections import deque

from .header_inserter import OutFrame, frame_beats
from .layouts import DATA_OPCODES, KNOWN_OPCODES
from .packets import PMTU_MAX, frame_length
from .records import SEND_RECORD

__all__ = [
    "PlaneSplitterModel", "COUNTERS", "PLANE_COUNTERS", "PLANE_COUNTER_BASE", "PLANE_COUNTER_STRIDE",
    "MAX_PLANES", "WIDTHS", "max_frame_bytes", "min_frame_bytes", "frame_words",
    "default_core_width", "default_fifo_depth", "route_depth",
]

MAX_PLANES = 8
WIDTHS = (64, 128, 256, 512)

# Counters (word addresses of the RTL configuration map; 32 bits, clear on write).
COUNTERS = {
    "frames_in": 0x10,          # frames queued on a plane (or flushed at once, plane down)
    "bad_plane": 0x11,          # frames discarded: their record's plane is not below N
    "bad_length": 0x12,         # frames discarded: length not the record's frame_bytes
}
PLANE_COUNTER_BASE = 0x20
PLANE_COUNTER_STRIDE = 4
PLANE_COUNTERS = {              # at PLANE_COUNTER_BASE + PLANE_COUNTER_STRIDE * plane + offset
    "frames_out": 0,            # frames sent on the port (counted on their last beat)
    "flushed_data": 1,          # data frames flushed (a send record with flushed = 1 each)
    "flushed_control": 2,       # control frames flushed
}


def max_frame_bytes(max_payload):
    """The longest frame: a Write with ImmDt and ``max_payload`` bytes, or a SACK if longer."""
    return max(frame_length(op, max_payload if op in DATA_OPCODES else 0)
               for op in KNOWN_OPCODES)


def min_frame_bytes():
    """The shortest frame (a probe, 134 B)."""
    return min(frame_length(op, 0) for op in KNOWN_OPCODES)


def frame_words(nbytes, core_width):
    """Core words (C bits each) that a frame of ``nbytes`` takes in a plane FIFO."""
    lanes = core_width // 8
    return -(-nbytes // lanes)


def default_core_width(n_planes, data_width):
    """The core width of N planes of W bits: N x W, rounded up to a width the core supports."""
    for width in WIDTHS:
        if width >= n_planes * data_width:
            return width
    raise ValueError(f"{n_planes} planes of {data_width} bits need a core wider than "
                     f"{WIDTHS[-1]} bits")


def default_fifo_depth(core_width, max_payload):
    """Core words per plane FIFO: a power of two holding two largest frames."""
    need = 2 * frame_words(max_frame_bytes(max_payload), core_width)
    return 1 << (need - 1).bit_length()


def route_depth(fifo_depth, core_width):
    """Frames a plane FIFO can hold (of the shortest), a power of two: the depth of its record
    memory."""
    most = -(-fifo_depth // frame_words(min_frame_bytes(), core_width))
    return 1 << (most - 1).bit_length()


def _check_params(n_planes, data_width, core_width, max_payload, fifo_depth):
    if not isinstance(n_planes, int) or not 1 <= n_planes <= MAX_PLANES:
        raise ValueError(f"n_planes must be 1..{MAX_PLANES}, not {n_planes!r}")
    if data_width not in WIDTHS:
        raise ValueError(f"data_width must be one of {WIDTHS}, not {data_width!r}")
    if core_width not in WIDTHS or core_width % data_width:
        raise ValueError(f"core_width must be one of {WIDTHS} and a multiple of data_width "
                         f"{data_width}, not {core_width!r}")
    if not isinstance(max_payload, int) or not 1 <= max_payload <= PMTU_MAX:
        raise ValueError(f"max_payload must be 1..{PMTU_MAX}, not {max_payload!r}")
    words = frame_words(max_frame_bytes(max_payload), core_width)
    if (not isinstance(fifo_depth, int) or fifo_depth < words or fifo_depth & (fifo_depth - 1)
            or fifo_depth > 1 << 16):
        raise ValueError(f"fifo_depth must be a power of two from {words} (a largest frame) to "
                         f"65536 core words, not {fifo_depth!r}")


class PlaneSplitterModel:
    """One NIC's plane splitter: routing, FIFOs, flushes and counters (event-driven, see the module
    docstring).

    Parameters: ``n_planes`` N (1..8), ``data_width`` W of a plane port, ``core_width`` C (a
    multiple of W; default :func:`default_core_width`), ``max_payload`` (1..4096, default 4096),
    ``fifo_depth`` (core words per plane, a power of two; default :func:`default_fifo_depth`).
    Every plane starts up.
    """

    def __init__(self, n_planes=8, data_width=64, core_width=None, max_payload=PMTU_MAX,
                 fifo_depth=None):
        core_width = default_core_width(n_planes, data_width) if core_width is None else core_width
        if fifo_depth is None and core_width in WIDTHS and isinstance(max_payload, int) and \
                1 <= max_payload <= PMTU_MAX:
            fifo_depth = default_fifo_depth(core_width, max_payload)
        _check_params(n_planes, data_width, core_width, max_payload, fifo_depth)
        self.n_planes = n_planes
        self.data_width = data_width
        self.core_width = core_width
        self.max_payload = max_payload
        self.fifo_depth = fifo_depth
        self.max_words = frame_words(max_frame_bytes(max_payload), core_width)
        self.routes = deque()
        self.queues = [deque() for _ in range(n_planes)]
        self.up = [True] * n_planes
        self.flushed = [[] for _ in range(n_planes)]
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.plane_counters = [dict.fromkeys(PLANE_COUNTERS, 0) for _ in range(n_planes)]

    def route(self, record):
        """A :data:`PLANE_FRAME` record (dict) accepted: it waits for its frame."""
        self.routes.append(dict(record))

    def set_up(self, plane, up):
        """The plane's up state from this cycle on; going down flushes its queue."""
        self.up[plane] = bool(up)
        if not up:
            while self.queues[plane]:
                self._flush(plane, self.queues[plane].popleft()[0])

    def arrive(self, data, bad=False, empty_last=False):
        """The next frame (bytes, flagged ``bad`` upstream; ``empty_last``: its last beat kept
        no byte) came in whole. Returns what happened to it: ``"queued"``, ``"flushed"`` (its
        plane is down), ``"bad_plane"`` or ``"bad_length"``."""
        if not self.routes:
            raise ValueError("a frame arrived with no plane frame record waiting")
        record = self.routes.popleft()
        plane = record["plane"]
        if plane >= self.n_planes:
            self.counters["bad_plane"] += 1
            return "bad_plane"
        if len(data) != record["frame_bytes"] or empty_last:
            self.counters["bad_length"] += 1
            return "bad_length"
        self.counters["frames_in"] += 1
        if not self.up[plane]:
            self._flush(plane, record)
            return "flushed"
        self.queues[plane].append((record, OutFrame(bytes(data), bool(bad))))
        return "queued"

    def present(self, plane):
        """A frame starts on ``plane``'s port: the oldest queued one (an :class:`OutFrame`)."""
        if not self.up[plane]:
            raise ValueError(f"plane {plane} is down: it starts no frame")
        if not self.queues[plane]:
            raise ValueError(f"plane {plane} has no frame queued")
        _, frame = self.queues[plane].popleft()
        self.plane_counters[plane]["frames_out"] += 1
        return frame

    def queued(self, plane):
        return len(self.queues[plane])

    def beats(self, frame):
        """The beats of a frame on a plane port: ``(data, keep, last, user)`` at W bits."""
        return frame_beats(frame, self.data_width)

    def _flush(self, plane, record):
        if record["data"]:
            self.flushed[plane].append({**SEND_RECORD.unpack(record["send"]), "flushed": 1})
            self.plane_counters[plane]["flushed_data"] += 1
        else:
            self.plane_counters[plane]["flushed_control"] += 1

