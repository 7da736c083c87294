# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.tx_engine.TxEngine (the whole NIC transmit engine) against
models.tx_engine.TxEngineModel.

``engine_random``: host memory is cocotbext-axi's ``AxiRamRead`` (random contents). Every block is
configured through the engine's one configuration port (segmenter QP contexts, path building's NIC
words, MACs and peer contexts, the EV table's slots, backup pools and seeds). A driver then sends
seeded random traffic: work requests (0 bytes to 3 PMTU, with and without immediate) on three QPs,
PSN limits opening each QP's window step by step (a QP closed for a while), retransmit requests
(of PSNs delivered, as a NACK would ask, and of every data frame flushed from a plane that went
down), retires of requests whose packets were all delivered, control records (SACK, NACK, probes,
a few bad ones), EV state events of every kind (SKIP, BAD with its EV_MARKED answer, DENY and
later ALLOW, RECOVERED of marked EVs) and planes going down and up mid-stream (configuration mask
and ``plane_down``). Every plane port sees random backpressure (stuck for stretches), and so do
the send record and EV_MARKED outputs.

The model is driven by what the engine reports (docs/protocol.md 8): the spray trace (each request's
``plane_ok`` and EV to avoid, interleaved with the EV events in handshake order) and the send
records (the QP and ``rtx`` the segmenter served, the tick). Checked: every spray answer equals the
model's; every send record equals the model's (packet fields, EV, plane, slot, room mask); every
frame on every plane port equals the model's byte for byte (per plane: data frames in choice order,
control frames in input order, the flushed ones reported as send records with ``flushed`` = 1 or
counted), and scapy reads it; every EV_MARKED record. Asserted on every choice and frame: never a
DENIED or ASSUMED_BAD slot, never a plane that is down (no frame starts on a down plane either),
never a new PSN beyond the QP's PSN limit, never the avoided EV on a retransmission. At the end,
the counters of the segmenter, path building, header inserter and splitter, and every stream
empty.

``perf``: every port ready, nothing but work requests on four QPs (every slot GOOD): payload bytes
per cycle of the engine for each payload size up to the PMTU, cycles per EV decision with
zero-byte Writes, the latency from a work request to its first frame on a port, and the evenness
of the choice (each plane's share and each slot's use within one packet of even per QP).
"""

import logging
from collections import defaultdict, deque

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from models import header_inserter as hi_map
from models import segmenter as seg_map
from models import tx_path as path_model_map
from models.layouts import CONTROL_OPCODES, DATA_OPCODES, Opcode
from models.packets import PSN_MODULUS, frame_length, parse_frame
from models.plane_splitter import PLANE_COUNTERS, default_core_width
from models.records import (CONTROL_RECORD, EV_EVENT, EV_MARKED, PSN_LIMIT, RETIRE, RETX_REQUEST,
                            SEND_RECORD, SPRAY_ANSWER, SPRAY_REQUEST, WORK_REQUEST, EvEvent,
                            RetxCause)
from models.segmenter import HostMemory, psn_before
from models.spray import SlotState, make_ev
from models.tx_engine import TxEngineModel, frame_opcode
from models.tx_path import QpContext
from rtl import plane_splitter as split_map
from rtl import spray_scheduler as spray_map
from rtl import tx_path as path_map
from rtl.tx_engine import TxEngine, engine_addr
from verif.driver import table_write

CONFIG = dict(n_qps=4, wrs_per_qp=4, pmtu=256, slots=4, backups=2, ev_min_active=2,
              max_outstanding=8)
QPS = (0, 1, 2)                 # QP 3 stays disabled
WORK_REQUESTS = 90
CONTROLS = 60
MEMORY_SIZE = 1 << 16
OWN_HOST, OWN_T0 = 0x0A000005, 3
NUM_T1 = 8
PERF_CONFIG = dict(n_qps=4, wrs_per_qp=8, pmtu=4096, slots=16, backups=8, ev_min_active=4,
                   max_outstanding=16)
PERF_SIZES = (0, 64, 256, 1500, 4096)
PERF_WRS = 96
MASK32 = 0xFFFF_FFFF


def contexts():
    """Peer contexts: QP 1's peer under the own T0 (a two-uSID path), the others across T1s."""
    return {q: QpContext(peer_qpn=0x100 + q, peer_host=0xB000 + q,
                         peer_t0=OWN_T0 if q == 1 else 10 + q, peer_port=4 + q) for q in QPS}


def macs(n_planes):
    return [(0x0200_0005_0000 | p, 0x02FF_0000_0000 | p << 8) for p in range(n_planes)]


def ev_sets(rng, n_planes, slots, backups):
    """Slot EVs (two slots per path, so a timeout marks two) and backup pools, per plane."""
    evs, pools = [], []
    for p in range(n_planes):
        paths = [rng.randrange(NUM_T1) for _ in range(max(1, slots // 2))]
        evs.append([make_ev(p, paths[s % len(paths)], rng.getrandbits(20)) for s in range(slots)])
        pools.append([make_ev(p, rng.randrange(NUM_T1), rng.getrandbits(20))
                      for _ in range(backups)])
    return evs, pools


async def configure(cfg, model, rng, p):
    """Every block through the one configuration port; the model alike."""
    n_planes = p["n_planes"]
    start_psns = {q: rng.choice((0, PSN_MODULUS - 5, rng.getrandbits(24))) for q in QPS}
    await cfg.write(engine_addr("tx_path", path_map.ADDR_OWN_HOST), OWN_HOST)
    await cfg.write(engine_addr("tx_path", path_map.ADDR_OWN_T0), OWN_T0)
    for plane, (src, dst) in enumerate(macs(n_planes)):
        for word, value in enumerate((src & MASK32, src >> 32, dst & MASK32, dst >> 32)):
            await cfg.write(engine_addr("tx_path", path_map.port_addr(plane, word)), value)
    model.set_nic(OWN_HOST, OWN_T0, macs(n_planes))
    await cfg.write(engine_addr("spray", spray_map.ADDR_EV_MIN_ACTIVE), p["ev_min_active"])
    await cfg.write(engine_addr("spray", spray_map.ADDR_NUM_T1), NUM_T1)
    for q, ctx in contexts().items():
        await cfg.write(engine_addr("segmenter", seg_map.QP_CONTEXT + q), 1 << 31 | start_psns[q])
        await cfg.write(engine_addr("tx_path", path_map.qp_addr(q, path_map.OFF_PEER_QPN)),
                        ctx.peer_qpn)
        await cfg.write(engine_addr("tx_path", path_map.qp_addr(q, path_map.OFF_PEER_HOST)),
                        ctx.peer_host)
        await cfg.write(engine_addr("tx_path", path_map.qp_addr(q, path_map.OFF_PEER_PATH)),
                        ctx.peer_t0 | ctx.peer_port << 16)
        evs, pools = ev_sets(rng, n_planes, p["slots"], p["backups"])
        seeds = [rng.randrange(1, 1 << 16) for _ in range(n_planes)]
        for plane in range(n_planes):
            for s, ev in enumerate(evs[plane]):
                await table_write(cfg, spray_map.table_addr(q, plane, spray_map.OFF_SLOT_EV + s),
                                  ev)
            for i, ev in enumerate(pools[plane]):
                await table_write(cfg, spray_map.table_addr(q, plane, spray_map.OFF_POOL_EV + i),
                                  ev)
            await table_write(cfg, spray_map.table_addr(q, plane, spray_map.OFF_LFSR),
                              seeds[plane])
        model.configure_qp(q, start_psn=start_psns[q], context=ctx, evs=evs, seeds=seeds,
                           pools=pools)
    enable = sum(1 << q for q in QPS)
    await cfg.write(engine_addr("tx_path", path_map.ADDR_QP_ENABLE), enable)
    while await cfg.read(engine_addr("spray", spray_map.ADDR_STATUS)):
        pass
    await cfg.write(engine_addr("spray", spray_map.ADDR_QP_ENABLE), enable)
    return start_psns


def make_memory(dut, rng, lanes):
    from cocotbext.axi import AxiRamRead, AxiReadBus

    ram = AxiRamRead(AxiReadBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=MEMORY_SIZE)
    ram.log.setLevel(logging.ERROR)
    contents = rng.randbytes(MEMORY_SIZE)
    ram.write(0, contents)
    return ram, HostMemory(MEMORY_SIZE, lanes, contents)


def stuck_pause(rng):
    """Backpressure in stretches: mostly light, sometimes heavy, sometimes stuck."""
    while True:
        kind = rng.random()
        prob = 0.05 if kind < 0.55 else 0.5 if kind < 0.9 else 1.0
        for _ in range(rng.randint(20, 300)):
            yield rng.random() < prob


def make_ports(dut, n_planes, rng=None):
    from cocotbext.axi import AxiStreamBus, AxiStreamSink

    sinks = [AxiStreamSink(AxiStreamBus.from_prefix(dut, f"m_axis{p}"), dut.clk, dut.rst)
             for p in range(n_planes)]
    for sink in sinks:
        sink.log.setLevel(logging.WARNING)
        if rng is not None:
            sink.set_pause_generator(stuck_pause(rng))
    return sinks


class Psn:
    """The bench's view of one PSN: copies sent, copies delivered or flushed, retransmissions
    asked and not yet sent, and the EV of its latest copy."""

    def __init__(self):
        self.sent = 0
        self.done = 0
        self.retx = 0
        self.delivered = False
        self.ev = None

    def settled(self):
        return self.sent and self.sent == self.done and not self.retx


class Bench:
    """Sources, sinks, the model and the bookkeeping of the random run."""

    def __init__(self, dut, rng, p):
        from verif.bench import ConfigDriver, RecordSink, RecordSource, frames, random_pause

        self.dut = dut
        self.rng = rng
        self.p = p
        self.n_planes = p["n_planes"]
        self.cfg = ConfigDriver(dut)
        idle = rng.uniform(0.0, 0.3)

        def pause(prob):
            return random_pause(rng, prob) if prob else None

        self.wr = RecordSource(dut, "s_wr", pause(idle))
        self.retx = RecordSource(dut, "s_retx", pause(idle))
        self.retire = RecordSource(dut, "s_retire", pause(idle))
        self.limit = RecordSource(dut, "s_limit", pause(idle))
        self.ctrl = RecordSource(dut, "s_ctrl", pause(0.5))
        self.ev = RecordSource(dut, "s_ev", pause(0.3))
        self.send = RecordSink(dut, "m_send", pause(rng.uniform(0.0, 0.4)))
        self.marked = RecordSink(dut, "m_marked", pause(0.3))
        lanes = default_core_width(self.n_planes, p["data_width"]) // 8
        self.ram, memory = make_memory(dut, rng, lanes)
        self.model = TxEngineModel(memory, n_qps=p["n_qps"], n_planes=self.n_planes,
                                   data_width=p["data_width"], pmtu=p["pmtu"],
                                   wrs_per_qp=p["wrs_per_qp"], slots=p["slots"],
                                   backups=p["backups"], ev_min_active=p["ev_min_active"],
                                   num_t1=NUM_T1)
        self.sinks = make_ports(dut, self.n_planes, rng)
        self.frames = [[] for _ in range(self.n_planes)]
        self.flushed = [[] for _ in range(self.n_planes)]
        self.psns = defaultdict(Psn)              # (qpn, psn) -> Psn
        self.wrs = {q: deque() for q in QPS}      # requests not retired: (req_id, first, packets)
        self.req_ids = {q: 0 for q in QPS}
        self.limits = {}                          # the latest limit the engine took, per QP
        self.limit_queued = {}
        self.peer = {ctx.peer_qpn: q for q, ctx in contexts().items()}
        self.expected_marked = []
        self.denied = []                          # (qpn, ev) denied, to allow later
        self.marked_evs = []                      # (qpn, ev) marked, to recover later
        self.flush_retx = deque()                 # (qpn, psn, ev) flushed, to retransmit
        self.work_requests = frames(WORK_REQUESTS)
        self.cycle = 0
        self.records_done = 0
        self.moves = 0

    # --- inputs, applied to the model when queued -------------------------------------------

    def send_wr(self, q, length):
        rec = {**dict.fromkeys(WORK_REQUEST.names, 0), "qpn": q,
               "local_addr": self.rng.randrange(MEMORY_SIZE - length - 1),
               "remote_va": self.rng.getrandbits(48), "rkey": self.rng.getrandbits(32),
               "length": length, "has_imm": int(self.rng.random() < 0.3),
               "imm": self.rng.getrandbits(32), "req_id": self.req_ids[q]}
        self.req_ids[q] = (self.req_ids[q] + 1) & 0xFFFF
        assert self.model.work_request(rec)
        wr = self.model.segmenter.qps[q].held[-1]
        self.wrs[q].append((rec["req_id"], wr.first_psn, wr.packets))
        self.wr.send(WORK_REQUEST.pack(rec))

    def send_limit(self, q, limit):
        assert self.model.psn_limit({"qpn": q, "psn_limit": limit})
        self.limit_queued[q] = limit
        self.limit.send(PSN_LIMIT.pack(qpn=q, psn_limit=limit))

    def send_retx(self, q, psn, avoid, cause):
        rec = dict(qpn=q, psn=psn, avoid_ev=avoid, cause=cause)
        assert self.model.retx_request(rec), rec
        self.psns[(q, psn)].retx += 1
        self.retx.send(RETX_REQUEST.pack(rec))

    def send_retire(self, q):
        req_id, first, packets = self.wrs[q].popleft()
        assert self.model.retire({"qpn": q, "req_id": req_id})
        self.retire.send(RETIRE.pack(qpn=q, req_id=req_id))

    def send_control(self):
        rng = self.rng
        rec = {name: rng.getrandbits(width) for name, width in CONTROL_RECORD.fields}
        rec.update(qpn=rng.choice(QPS), opcode=rng.choice(CONTROL_OPCODES),
                   ev=rng.getrandbits(32) & ~0xF | rng.randrange(self.n_planes))
        kind = rng.random()
        if kind < 0.05:
            rec["opcode"] = rng.choice(DATA_OPCODES)
        elif kind < 0.08:
            rec["qpn"] = 3
        self.model.control(rec)
        self.ctrl.send(CONTROL_RECORD.pack(rec))

    def send_event(self):
        """An EV event the model applies when the engine takes it (see Monitor)."""
        rng = self.rng
        q = rng.choice(QPS)
        qp = self.model.table.qp(q)
        plane = rng.randrange(self.n_planes)
        ev = rng.choice(qp.planes[plane].evs)
        kind = rng.random()
        if kind < 0.45:
            rec = dict(qpn=q, ev=ev, kind=EvEvent.SKIP)
        elif kind < 0.6:
            rec = dict(qpn=q, ev=ev, kind=EvEvent.BAD)
        elif kind < 0.72 and qp.choosable_count() > 2 * self.n_planes:
            rec = dict(qpn=q, ev=ev, kind=EvEvent.DENY)
            self.denied.append((q, ev))
        elif kind < 0.82 and self.denied:
            q, ev = self.denied.pop(0)
            rec = dict(qpn=q, ev=ev, kind=EvEvent.ALLOW)
        elif kind < 0.92 and self.marked_evs:
            q, ev = self.marked_evs.pop(0)
            rec = dict(qpn=q, ev=ev, kind=EvEvent.RECOVERED)
        else:
            rec = dict(qpn=rng.choice((q, 3)), ev=rng.getrandbits(32), kind=rng.randrange(8))
        self.ev.send(EV_EVENT.pack(rec))

    def sources_empty(self):
        return all(s.empty() for s in (self.wr, self.retx, self.retire, self.limit, self.ctrl,
                                       self.ev))


class Monitor:
    """Cycle by cycle: the spray trace and EV events into the model in handshake order, the
    limits taken, and no frame starting on a plane that is down."""

    def __init__(self, bench):
        self.bench = bench
        self.answers = deque()          # (model answer, request) per request, in order
        self.found = deque()            # (answer, request, request cycle, answer cycle)
        self.not_found = 0
        self.requests = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        bench = self.bench
        dut, model = bench.dut, bench.model
        n = bench.n_planes
        ports = [(getattr(dut, f"m_axis{p}_tvalid"), getattr(dut, f"m_axis{p}_tready"),
                  getattr(dut, f"m_axis{p}_tlast")) for p in range(n)]
        first = [True] * n
        # A request's plane_ok is the splitter's when the request was first presented, at most a
        # few cycles before its handshake: it names planes up in one of the last cycles.
        recent_up = deque(maxlen=16)
        while True:
            await RisingEdge(dut.clk)
            bench.cycle += 1
            up = int(dut.plane_up.value)
            recent_up.append(up)
            tick = int(dut.tick_count.value)
            for p, (valid, ready, last) in enumerate(ports):
                if int(valid.value):
                    if first[p]:
                        assert up >> p & 1, f"plane {p} starts a frame while down"
                        first[p] = False
                    if int(ready.value) and int(last.value):
                        first[p] = True
            if int(dut.s_limit_tvalid.value) and int(dut.s_limit_tready.value):
                rec = PSN_LIMIT.unpack(int(dut.s_limit_tdata.value))
                bench.limits[rec["qpn"]] = rec["psn_limit"]
            if int(dut.trace_ans_tvalid.value):
                got = SPRAY_ANSWER.unpack(int(dut.trace_ans_tdata.value))
                want, req, req_cycle = self.answers.popleft()
                assert got == want, f"spray answer {got}, model {want} (request {req})"
                if got["found"]:
                    self.found.append((got, req, req_cycle, tick))
                else:
                    self.not_found += 1
                bench.moves += 1
            if int(dut.s_ev_tvalid.value) and int(dut.s_ev_tready.value):
                rec = EV_EVENT.unpack(int(dut.s_ev_tdata.value))
                marked = model.ev_event(rec) if rec["kind"] <= EvEvent.ALLOW else []
                bench.expected_marked += marked
                bench.marked_evs += [(m["qpn"], m["ev"]) for m in marked if m["valid"]]
            if int(dut.trace_req_tvalid.value):
                req = SPRAY_REQUEST.unpack(int(dut.trace_req_tdata.value))
                were_up = 0
                for mask in recent_up:
                    were_up |= mask
                assert req["plane_ok"] and not req["plane_ok"] & ~were_up, \
                    f"request plane_ok {req['plane_ok']:#x} with planes up {up:#x}"
                avoid = req["avoid_ev"] if req["avoid_valid"] else None
                qp = model.table.qp(req["qpn"])
                want = model.choose(req["qpn"], req["plane_ok"], avoid)
                if want["found"]:
                    state = qp.planes[want["plane"]].states[want["slot"]]
                    assert state in (SlotState.GOOD, SlotState.SKIP), \
                        f"choice of a {state.name} slot"
                    assert want["ev"] != avoid, "the avoided EV chosen"
                    assert req["plane_ok"] >> want["plane"] & 1
                self.answers.append((want, req, tick))
                self.requests += 1


async def check_send_records(bench, monitor):
    """Each send record against the model: data records with the next found answer and the
    segmenter's next packet of the QP; flushed records kept per plane."""
    from verif.scapy_check import check_frame

    model = bench.model
    while True:
        while not bench.send.queue:
            await RisingEdge(bench.dut.clk)
        rec = SEND_RECORD.unpack(bench.send.queue.popleft())
        bench.records_done += 1
        bench.moves += 1
        key = (rec["qpn"], rec["psn"])
        if rec["flushed"]:
            bench.flushed[rec["plane"]].append(rec)
            bench.psns[key].done += 1
            bench.psns[key].delivered = False
            bench.flush_retx.append((rec["qpn"], rec["psn"], rec["ev"]))
            continue
        while not monitor.found:
            await RisingEdge(bench.dut.clk)
        answer, req, req_tick, ans_tick = monitor.found.popleft()
        assert (rec["qpn"], rec["ev"], rec["plane"], rec["slot"], rec["room_mask"]) == \
            (answer["qpn"], answer["ev"], answer["plane"], answer["slot"], req["plane_ok"]), \
            f"send record {rec} for answer {answer}"
        assert req_tick <= rec["tick"] <= ans_tick, f"tick {rec['tick']} outside the choice"
        packet = model.next_packet(rec["qpn"], rec["rtx"])
        pkt = packet.record
        if rec["rtx"]:
            assert pkt["avoid_valid"] and rec["ev"] != pkt["avoid_ev"], \
                "a retransmission on the EV it must avoid"
            bench.psns[key].retx -= 1
        else:
            limit = bench.limits.get(rec["qpn"])
            assert limit is not None and psn_before(rec["psn"], limit), \
                f"PSN {rec['psn']:#x} of QP {rec['qpn']} beyond its limit {limit}"
        want, frame = model.transmit(packet, answer, rec["tick"], rec["room_mask"])
        assert rec == want, f"send record {rec}\nmodel {want}"
        if not frame.bad:
            check_frame(frame.data)
        bench.psns[key].sent += 1


async def collect_frames(bench, plane):
    """Frames of one plane port; a data frame marks its PSN delivered."""
    sink = bench.sinks[plane]
    while True:
        got = await sink.recv()
        data = bytes(got.tdata)
        bench.frames[plane].append(data)
        bench.moves += 1
        if frame_opcode(data) in DATA_OPCODES:
            parsed = parse_frame(data)
            key = (bench.peer[parsed.bth["dest_qpn"]], parsed.bth["psn"])
            state = bench.psns[key]
            state.done += 1
            state.delivered = True
            state.ev = parsed.udp["sport"] << 16 | parsed.outer["flow_label"]


async def drive(bench, stop_traffic):
    """The random traffic of the run, then a drain phase where everything is allowed and
    recovered, every plane up, every window open, until every packet is delivered."""
    rng, dut, n = bench.rng, bench.dut, bench.n_planes
    full = (1 << n) - 1
    wrs_left = bench.work_requests
    controls_left = CONTROLS
    events_left = 40
    limit_step = {q: 0 for q in QPS}
    next_plane_change = rng.randint(100, 600)
    plane_mask = full

    def start_psn(q):
        return bench.model.segmenter.qps[q].start_psn

    for q in QPS:
        bench.limit_queued[q] = start_psn(q)
    while True:
        await ClockCycles(dut.clk, rng.randint(1, 12))
        busy = len(bench.wr.queue) + len(bench.retx.queue) > 6
        if wrs_left and not busy and rng.random() < 0.5:
            q = rng.choice(QPS)
            if len(bench.wrs[q]) < bench.p["wrs_per_qp"]:     # a full QP would block s_wr
                pmtu = bench.p["pmtu"]
                bench.send_wr(q, rng.choice((0, rng.randint(1, 64), rng.randint(1, pmtu),
                                             rng.randint(pmtu, 3 * pmtu))))
                wrs_left -= 1
        for q in QPS:
            if rng.random() < 0.08 and not (q == 2 and wrs_left > bench.work_requests // 2):
                limit_step[q] += rng.randint(1, 6)
                bench.send_limit(q, (start_psn(q) + limit_step[q]) % PSN_MODULUS)
        if controls_left and rng.random() < 0.1:
            bench.send_control()
            controls_left -= 1
        if events_left and rng.random() < 0.05 and bench.ev.empty():
            bench.send_event()
            events_left -= 1
        while bench.flush_retx:
            q, psn, ev = bench.flush_retx.popleft()
            bench.send_retx(q, psn, ev, RetxCause.FLUSHED)
        if rng.random() < 0.05:
            delivered = [k for k, s in bench.psns.items() if s.settled() and s.delivered and
                         any((k[1] - first) % PSN_MODULUS < packets
                             for _, first, packets in bench.wrs[k[0]])]
            if delivered:
                q, psn = rng.choice(delivered)
                bench.send_retx(q, psn, bench.psns[(q, psn)].ev,
                                rng.choice((RetxCause.NACK_TRIMMED, RetxCause.TIMEOUT)))
        for q in QPS:
            if bench.wrs[q] and rng.random() < 0.3:
                _, first, packets = bench.wrs[q][0]
                if all(bench.psns[(q, (first + k) % PSN_MODULUS)].settled() and
                       bench.psns[(q, (first + k) % PSN_MODULUS)].delivered
                       for k in range(packets)) and bench.retire.empty():
                    bench.send_retire(q)
        if bench.cycle >= next_plane_change and not stop_traffic():
            next_plane_change = bench.cycle + rng.randint(100, 600)
            if rng.random() < 0.5:
                plane_mask = full if rng.random() < 0.4 else full & ~(1 << rng.randrange(n))
                await bench.cfg.write(engine_addr("plane_splitter",
                                                  split_map.ADDR_PLANE_UP), plane_mask)
            else:
                dut.plane_down.value = 0 if rng.random() < 0.4 else 1 << rng.randrange(n)
        if not wrs_left and not controls_left and not events_left:
            break
    # Drain: planes up, windows open, denied EVs allowed, marked ones recovered.
    dut.plane_down.value = 0
    await bench.cfg.write(engine_addr("plane_splitter", split_map.ADDR_PLANE_UP), full)
    for q in QPS:
        bench.send_limit(q, bench.model.segmenter.qps[q].alloc_psn)
    while True:
        while bench.denied or bench.marked_evs:
            if bench.denied:
                q, ev = bench.denied.pop(0)
                bench.ev.send(EV_EVENT.pack(qpn=q, ev=ev, kind=EvEvent.ALLOW))
            if bench.marked_evs:
                q, ev = bench.marked_evs.pop(0)
                bench.ev.send(EV_EVENT.pack(qpn=q, ev=ev, kind=EvEvent.RECOVERED))
        while bench.flush_retx:
            q, psn, ev = bench.flush_retx.popleft()
            bench.send_retx(q, psn, ev, RetxCause.FLUSHED)
        for q in QPS:
            while bench.wrs[q]:
                _, first, packets = bench.wrs[q][0]
                if not all(bench.psns[(q, (first + k) % PSN_MODULUS)].settled() and
                           bench.psns[(q, (first + k) % PSN_MODULUS)].delivered
                           for k in range(packets)):
                    break
                bench.send_retire(q)
        if not any(bench.wrs.values()) and bench.sources_empty() and not bench.flush_retx:
            return
        await ClockCycles(dut.clk, 20)


@cocotb.test()
async def engine_random(dut):
    from verif.bench import make_rng, params, start, write_result

    p = params()
    rng = make_rng(dut)
    bench = Bench(dut, rng, p)
    dut.plane_down.value = 0
    dut.tick_count.value = 0

    async def ticks():
        cycle = 0
        while True:
            await RisingEdge(dut.clk)
            cycle += 1
            dut.tick_count.value = (cycle // 8) & MASK32

    await start(dut)
    cocotb.start_soon(ticks())
    await configure(bench.cfg, bench.model, rng, p)
    monitor = Monitor(bench)
    cocotb.start_soon(check_send_records(bench, monitor))
    for plane in range(bench.n_planes):
        cocotb.start_soon(collect_frames(bench, plane))
    done = [False]
    driver = cocotb.start_soon(drive(bench, lambda: done[0]))
    for cycle in range(2_000_000):
        await RisingEdge(dut.clk)
        if driver.done():
            break
        if cycle % 5000 == 0:
            dut._log.info("cycle %d: %d send records, %d frames, %d requests (%d nothing), "
                          "requests held %s, sources empty %s", cycle, bench.records_done,
                          sum(len(f) for f in bench.frames), monitor.requests,
                          monitor.not_found, {q: len(w) for q, w in bench.wrs.items()},
                          bench.sources_empty())
    assert driver.done(), "the run did not finish"
    await driver
    # Quiet: nothing moves for a while.
    quiet, last = 0, None
    while quiet < 300:
        await RisingEdge(dut.clk)
        state = (bench.moves, len(bench.marked.queue))
        quiet = quiet + 1 if state == last else 0
        last = state

    model = bench.model
    assert not monitor.answers and not monitor.found and not bench.send.queue
    for plane in range(bench.n_planes):
        flushed_controls = await bench.cfg.read(engine_addr(
            "plane_splitter", split_map.plane_counter_addr(plane, "flushed_control")))
        frames = [f for f in bench.frames[plane]]
        model.check_plane(plane, [hi_map.OutFrame(f, False) for f in frames],
                          bench.flushed[plane], flushed_controls)
        for name in PLANE_COUNTERS:
            value = await bench.cfg.read(engine_addr("plane_splitter",
                                                     split_map.plane_counter_addr(plane, name)))
            want = {"frames_out": len(frames), "flushed_data": len(bench.flushed[plane]),
                    "flushed_control": flushed_controls}[name]
            assert value == want, f"plane {plane} counter {name}: {value}, expected {want}"
    got_marked = [EV_MARKED.unpack(w) for w in bench.marked.queue]
    assert got_marked == bench.expected_marked, "EV_MARKED records differ from the model's"
    for name, addr in seg_map.COUNTERS.items():
        value = await bench.cfg.read(engine_addr("segmenter", addr))
        assert value == model.segmenter.counters[name] & MASK32, f"segmenter counter {name}"
    for name, addr in path_model_map.COUNTERS.items():
        value = await bench.cfg.read(engine_addr("tx_path", addr))
        assert value == model.path.counters[name] & MASK32, \
            f"path counter {name}: {value}, model {model.path.counters[name]}"
    for name, addr in hi_map.COUNTERS.items():
        value = await bench.cfg.read(engine_addr("header_inserter", addr))
        assert value == model.inserter.counters[name] & MASK32, f"inserter counter {name}"
    assert bench.sources_empty() and all(s.empty() for s in bench.sinks)
    sent = sum(len(f) for f in bench.frames)
    dut._log.info("%d frames on %d planes, %d send records (%d flushed), %d spray requests "
                  "(%d found nothing), %d EV_MARKED", sent, bench.n_planes, bench.records_done,
                  sum(len(f) for f in bench.flushed), monitor.requests, monitor.not_found,
                  len(got_marked))
    write_result(dut, "tx_engine", sent)


@cocotb.test()
async def perf(dut):
    """Every port ready, one-packet work requests only (retired as they are sent), every slot
    GOOD: payload bytes per cycle, cycles per decision, latency and the evenness of the choice."""
    from verif.bench import (ConfigDriver, RecordSink, RecordSource, make_rng, params, start,
                                 write_perf)

    p = params()
    n, width = p["n_planes"], p["data_width"]
    rng = make_rng(dut)
    cfg = ConfigDriver(dut)
    wr = RecordSource(dut, "s_wr")
    limit = RecordSource(dut, "s_limit")
    retire = RecordSource(dut, "s_retire")
    sends = RecordSink(dut, "m_send")
    RecordSink(dut, "m_marked")
    core = default_core_width(n, width)
    _, memory = make_memory(dut, rng, core // 8)
    sinks = make_ports(dut, n)
    dut.plane_down.value = 0
    dut.tick_count.value = 0
    await start(dut)
    model = TxEngineModel(memory, n_qps=p["n_qps"], n_planes=n, data_width=width,
                          pmtu=p["pmtu"], wrs_per_qp=p["wrs_per_qp"], slots=p["slots"],
                          backups=p["backups"], ev_min_active=p["ev_min_active"], num_t1=NUM_T1)
    await configure(cfg, model, rng, p)
    for q in QPS:
        limit.send(PSN_LIMIT.pack(qpn=q, psn_limit=(model.segmenter.qps[q].start_psn +
                                                    (1 << 22)) % PSN_MODULUS))
    cycle = [0]
    log = {"wr": [], "out": [], "req": []}
    ports = [(getattr(dut, f"m_axis{k}_tvalid"), getattr(dut, f"m_axis{k}_tready"))
             for k in range(n)]

    async def count():
        while True:
            await RisingEdge(dut.clk)
            cycle[0] += 1
            if int(dut.s_wr_tvalid.value) and int(dut.s_wr_tready.value):
                log["wr"].append(cycle[0])
            if any(int(v.value) and int(r.value) for v, r in ports):
                log["out"].append(cycle[0])
            if int(dut.trace_req_tvalid.value):
                log["req"].append(cycle[0])

    cocotb.start_soon(count())
    records = []

    async def retire_done():
        """Each request retired once its (only) packet's send record is out."""
        while True:
            while not sends.queue:
                await RisingEdge(dut.clk)
            rec = SEND_RECORD.unpack(sends.queue.popleft())
            records.append(rec)
            retire.send(RETIRE.pack(qpn=rec["qpn"], req_id=rec["req_id"]))

    cocotb.start_soon(retire_done())
    rows = []
    req_ids = {q: 0 for q in QPS}
    for size in (s for s in PERF_SIZES if s <= p["pmtu"]):
        for key in log:
            log[key].clear()
        records.clear()
        packets = PERF_WRS
        for k in range(packets):
            q = QPS[k % len(QPS)]
            wr.send(WORK_REQUEST.pack(qpn=q, local_addr=rng.randrange(0, MEMORY_SIZE // 2, 64),
                                      remote_va=0x1000, rkey=1, length=size,
                                      req_id=req_ids[q]))
            req_ids[q] = (req_ids[q] + 1) & 0xFFFF
        while sum(sink.count() for sink in sinks) < packets or len(records) < packets:
            await RisingEdge(dut.clk)
        for sink in sinks:
            sink.clear()
        # Steady state: from the first beat out to the last, and decisions after the first few.
        span = log["out"][-1] - log["out"][0] + 1
        gaps = [b - a for a, b in zip(log["req"][4:], log["req"][5:])]
        even = []
        for q in QPS:
            mine = [r for r in records if r["qpn"] == q]
            shares = [sum(r["plane"] == pl for r in mine) for pl in range(n)]
            uses = [[sum(r["plane"] == pl and r["slot"] == s for r in mine)
                     for s in range(p["slots"])] for pl in range(n)]
            even.append((max(shares) - min(shares), max(max(u) - min(u) for u in uses)))
        # Back to back, one frame per decision: the steady state is the decision period, which
        # must be the frame's beats on the core (the core's full width), or 3 cycles at least.
        period = sum(gaps) / len(gaps)
        beats = -(-frame_length(Opcode.WRITE_ONLY, size) // (core // 8))
        rows.append(dict(
            payload=size, frames=packets, cycles_per_frame=round(period, 2),
            bytes_per_cycle=round(size / period, 3),
            efficiency=round(size / period / (core // 8), 4), frame_beats=beats,
            run_bytes_per_cycle=round(size * packets / span, 3),
            cycles_per_decision=round(period, 2),
            min_decision_gap=min(gaps), latency=log["out"][0] - log["wr"][0],
            room_always=all(r["room_mask"] == (1 << n) - 1 for r in records),
            uneven_planes=max(e[0] for e in even), uneven_slots=max(e[1] for e in even)))
        dut._log.info("perf %s", rows[-1])
        assert rows[-1]["min_decision_gap"] >= 3
        assert period == max(3, beats), f"{period} cycles per frame, the core needs {beats}"
        if rows[-1]["room_always"]:
            assert rows[-1]["uneven_planes"] <= 1 and rows[-1]["uneven_slots"] <= 1, rows[-1]
        while not retire.empty():
            await RisingEdge(dut.clk)
        await ClockCycles(dut.clk, 50)
    write_perf(dut, "tx_engine", width, rows)


# --- pytest ---------------------------------------------------------------------------------------

def build(n_planes, width, config):
    return TxEngine(n_qps=config["n_qps"], n_planes=n_planes, data_width=width,
                    pmtu=config["pmtu"], wrs_per_qp=config["wrs_per_qp"], slots=config["slots"],
                    backups=config["backups"], ev_min_active=config["ev_min_active"],
                    max_outstanding=config["max_outstanding"])


def run(sim, n_planes, width, testcase, tag, config=CONFIG):
    from verif.runner import run_bench

    run_bench(build(n_planes, width, config), name=f"tx_engine-{tag}-p{n_planes}-w{width}",
              toplevel="tx_engine", test_module="tb.test_tx_engine", sim=sim,
              params=dict(config, n_planes=n_planes, data_width=width), testcase=testcase)


@pytest.mark.sim
@pytest.mark.parametrize("sim,n_planes,width", [("icarus", 2, 64), ("verilator", 4, 64)])
def test_tx_engine(sim, n_planes, width):
    run(sim, n_planes, width, "engine_random", "random")


@pytest.mark.sim
def test_tx_engine_perf():
    run("verilator", 2, 64, "perf", "perf", PERF_CONFIG)


@pytest.mark.sim
@pytest.mark.full
def test_tx_engine_perf_full():
    """The default sizes: N = 8 planes of 64 bits, a 512-bit core (``make bench`` too)."""
    run("verilator", 8, 64, "perf", "perf", PERF_CONFIG)


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("sim,n_planes,width", [
    (sim, n, w) for sim in ("icarus", "verilator")
    for n, w in ((1, 64), (2, 64), (3, 64), (4, 64), (8, 64), (2, 128), (1, 512))
    # test_tx_engine's runs (same bench name, so the same seed: a repeat; audit #19)
    if (sim, n, w) not in (("icarus", 2, 64), ("verilator", 4, 64))])
def test_tx_engine_full(sim, n_planes, width):
    run(sim, n_planes, width, "engine_random", "random")
