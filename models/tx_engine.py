# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the NIC transmit engine (docs/protocol.md 1-5, 8): the block models composed.

    work requests -> segmenter (models/segmenter.py) -> TX_PACKET + payload
    TX_PACKET -> path building (models/tx_path.py) with the EV table's choice (models/spray.py)
    TX_HEADER + payload -> header inserter (models/header_inserter.py) -> frame
    frame + PLANE_FRAME -> plane splitter (models/plane_splitter.py) -> plane port, or flushed
    control records -> path building (reverse path of their EV) -> header inserter -> splitter

Which QP the segmenter serves next, the planes with room when a choice is made, the tick, and
when a plane goes down relative to the frames queued for it depend on timing. The engine reports
them (the ``send_record`` carries the QP, ``rtx``, the tick and the room mask a choice saw; its
spray requests and answers are traced; a flushed frame comes back as a ``send_record`` with
``flushed`` = 1), and the model takes them as inputs:

- :meth:`TxEngineModel.choose`: one spray request (QP, ``plane_ok``, EV to avoid) -> the answer
  the EV table gives, applied in the order of the engine's handshakes with
  :meth:`TxEngineModel.ev_event`;
- :meth:`TxEngineModel.transmit`: the next packet of a QP (new or retransmitted, as the segmenter
  served it) sent on a choice -> its send record and frame, expected on the choice's plane;
- :meth:`TxEngineModel.control`: a control record -> its frame, expected on its EV's plane;
- :meth:`TxEngineModel.check_plane`: the frames a plane port sent and the send records flushed
  from it -> equal to what the model expected there, minus the flushed ones: data frames in
  choice order, control frames in input order.

:meth:`TxEngineModel.run` serves every QP itself, with no backpressure and every plane ok (the
order an idle engine would send in), for tests of the choice's evenness.

Nothing here imports cocotb, Amaranth or scapy.
"""

from dataclasses import dataclass

from .header_inserter import HeaderInserterModel, OutFrame, Packet as InserterPacket
from .layouts import BTH_OFFSET, CONTROL_OPCODES
from .plane_splitter import default_core_width, default_fifo_depth
from .records import EvEvent
from .segmenter import SegmenterModel
from .spray import (DEFAULT_BACKUP, DEFAULT_EV_MIN_ACTIVE, DEFAULT_SLOTS, Choice, EvTable,
                    ev_marked_records, serve_qp)
from .tx_path import QpContext, TxPathModel

__all__ = ["TxEngineModel", "Expected", "frame_opcode"]


def frame_opcode(frame):
    """The BTH opcode of a frame's bytes (``None`` for a frame too short to hold it)."""
    return frame[BTH_OFFSET] if len(frame) > BTH_OFFSET else None


@dataclass(frozen=True)
class Expected:
    """A frame the model expects on a plane port: its send record (``None`` for a control frame)
    and its bytes and bad flag."""
    send: dict
    frame: OutFrame

    @property
    def control(self):
        return self.send is None


class TxEngineModel:
    """The transmit engine of one NIC (the block models composed; see the module docstring).

    Parameters as the RTL top's: ``n_qps``, ``n_planes`` N, ``data_width`` W of a plane port
    (the core is :func:`models.plane_splitter.default_core_width`), ``pmtu``, ``wrs_per_qp``,
    ``slots`` A, ``backups`` B, ``ev_min_active``, ``num_t1``; ``memory`` is the host memory
    (:class:`models.segmenter.HostMemory`).
    """

    def __init__(self, memory, n_qps=16, n_planes=8, data_width=64, pmtu=4096, wrs_per_qp=8,
                 slots=DEFAULT_SLOTS, backups=DEFAULT_BACKUP, ev_min_active=DEFAULT_EV_MIN_ACTIVE,
                 num_t1=256, profile=1):
        self.n_planes = n_planes
        self.data_width = data_width
        self.core_width = default_core_width(n_planes, data_width)
        self.fifo_depth = default_fifo_depth(self.core_width, pmtu)
        self.segmenter = SegmenterModel(memory, n_qps, wrs_per_qp, pmtu)
        self.path = TxPathModel(n_qps, n_planes, pmtu)
        # The RTL transmit engine of today is profile 1 as a whole (its segmenter takes PSN
        # limits and serves retransmissions without window room); ``profile`` selects only the
        # EV table's choice (models/spray.py) until [feedback-v2-rtl] moves the rest.
        self.table = EvTable(n_planes, num_t1, slots, backups, ev_min_active, profile=profile)
        self.inserter = HeaderInserterModel(self.core_width, pmtu)
        self.expected = [[] for _ in range(n_planes)]

    # Configuration -------------------------------------------------------------------------------

    def set_nic(self, own_host, own_t0, macs):
        """The NIC's host id, T0 index and per plane (source MAC, next hop MAC)."""
        self.path.set_nic(own_host, own_t0)
        for plane, (src, dst) in enumerate(macs):
            self.path.set_port(plane, src, dst)

    def configure_qp(self, qpn, *, start_psn, context, evs, seeds, pools=None):
        """Enable QP ``qpn`` everywhere: segmenter (start PSN), path building (peer
        :class:`QpContext`) and EV table (slot EVs, LFSR seeds and backup pools per plane)."""
        if not isinstance(context, QpContext):
            raise ValueError("context must be a models.tx_path.QpContext")
        self.segmenter.configure_qp(qpn, True, start_psn)
        self.path.set_qp(qpn, context)
        self.table.configure_qp(qpn, evs, seeds, pools)

    # Inputs --------------------------------------------------------------------------------------

    def work_request(self, rec):
        return self.segmenter.work_request(rec)

    def retx_request(self, rec):
        return self.segmenter.retx_request(rec)

    def retire(self, rec):
        return self.segmenter.retire(rec)

    def psn_limit(self, rec):
        return self.segmenter.psn_limit(rec)

    def ev_event(self, rec):
        """One EV_EVENT (dict): the EV_MARKED records it is answered with (BAD only)."""
        marked = self.table.event(rec["qpn"], rec["ev"], rec["kind"])
        if rec["kind"] == EvEvent.BAD:
            return ev_marked_records(rec["qpn"], marked)
        return []

    # Decisions -----------------------------------------------------------------------------------

    def choose(self, qpn, plane_ok, avoid_ev=None):
        """One spray request: the SPRAY_ANSWER fields (dict) the EV table gives."""
        if qpn not in self.table.qps:
            return {"qpn": qpn, "found": 0, "plane": 0, "slot": 0, "ev": 0, "position": 0}
        choice = self.table.choose(qpn, plane_ok, avoid_ev)
        if choice is None:
            self.path.retry()
            return {"qpn": qpn, "found": 0, "plane": 0, "slot": 0, "ev": 0, "position": 0}
        return {"qpn": qpn, "found": 1, **choice._asdict()}

    def next_packet(self, qpn, rtx):
        """The segmenter's next packet of ``qpn`` (a retransmission when ``rtx``)."""
        return self.segmenter.packet(qpn, rtx)

    def transmit(self, packet, answer, tick, room_mask):
        """Send ``packet`` (from :meth:`next_packet`) on the spray ``answer`` (dict, found):
        ``(send record, OutFrame)``; the frame is expected on the answer's plane."""
        pkt = packet.record
        if self.path.packet(pkt) is not None:
            raise ValueError(f"the segmenter built a bad packet: {pkt}")
        choice = Choice(answer["plane"], answer["slot"], answer["ev"], answer["position"])
        result = self.path.data(pkt, choice, tick, room_mask)
        frame = self.inserter.push(result.header, InserterPacket(packet.payload, packet.bad)
                                   if pkt["length"] else None)
        self.expected[choice.plane].append(Expected(result.send, frame))
        return result.send, frame

    def control(self, rec):
        """One CONTROL_RECORD (dict): its frame, expected on its EV's plane, or ``None`` when
        path building drops it."""
        result = self.path.control(rec)
        if result is None:
            return None
        frame = self.inserter.push(result.header)
        self.expected[result.plane_frame["plane"]].append(Expected(None, frame))
        return frame

    def check_plane(self, plane, frames, flushed, flushed_controls):
        """Check what plane ``plane`` did with the frames expected there: ``frames`` (OutFrames
        sent on its port, in order) and ``flushed`` (its send records with ``flushed`` = 1, in
        order); ``flushed_controls`` control frames were flushed. The data frames sent must be the
        expected ones in choice order, each either sent or flushed once; the control frames sent
        the expected ones in input order, the others flushed (how data and control frames
        interleave on a port depends on timing). Raises AssertionError otherwise."""
        data = [e for e in self.expected[plane] if not e.control]
        controls = [e.frame for e in self.expected[plane] if e.control]
        sent_data = [f for f in frames if frame_opcode(f.data) not in CONTROL_OPCODES]
        sent_controls = [f for f in frames if frame_opcode(f.data) in CONTROL_OPCODES]
        dropped = [dict(r, flushed=0) for r in flushed]
        for index, exp in enumerate(data):
            if sent_data and sent_data[0] == exp.frame:
                sent_data.pop(0)
            elif dropped and dropped[0] == exp.send:
                dropped.pop(0)
            else:
                raise AssertionError(f"plane {plane}: expected data frame {index} ({exp.send}) "
                                     f"neither sent next nor flushed next")
        assert not sent_data, \
            f"plane {plane}: {len(sent_data)} data frames sent that the model did not expect"
        assert not dropped, \
            f"plane {plane}: {len(dropped)} flushed records the model did not expect"
        missing = 0
        for frame in controls:
            if sent_controls and sent_controls[0] == frame:
                sent_controls.pop(0)
            else:
                missing += 1
        assert not sent_controls, \
            f"plane {plane}: {len(sent_controls)} control frames sent that the model did not expect"
        assert missing == flushed_controls, \
            f"plane {plane}: {missing} control frames missing, {flushed_controls} flushed"

    # A whole run, no backpressure ----------------------------------------------------------------

    def run(self, limit=None):
        """Serve every QP round-robin with every plane ok (no backpressure), as an idle engine
        sends: the ``(send record, OutFrame)`` of each packet in order. A packet whose choice
        finds nothing ends the run."""
        out = []
        ok = (1 << self.n_planes) - 1
        seg = self.segmenter
        while limit is None or len(out) < limit:
            flags = [seg.ready(q) for q in range(seg.n_qps)]
            serve, pointer = serve_qp(seg.pointer, [r for r, _ in flags], [n for _, n in flags],
                                      [True] * seg.n_qps)
            if serve is None:
                break
            seg.pointer = pointer
            packet = seg.packet(serve.qp, serve.retx)
            avoid = packet.record["avoid_ev"] if packet.record["avoid_valid"] else None
            answer = self.choose(serve.qp, ok, avoid)
            if not answer["found"]:
                break
            out.append(self.transmit(packet, answer, 0, ok))
        return out

