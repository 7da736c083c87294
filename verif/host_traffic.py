# SPDX-License-Identifier: BSD-2-Clause
"""One host's traffic in the NIC benches (``tb/test_nic_engine.py``, ``sim/rtl_controller.py``):
its memory, random Writes per QP, posting them as work requests, taking the completions."""

import logging
from collections import deque

from models.fabric_nic import region_base, region_rkey
from models.records import COMPLETION, WORK_REQUEST
from verif.driver import REGION_BYTES

__all__ = ["HostTraffic", "MEMORY_SIZE", "SEND_BASE"]

MEMORY_SIZE = 1 << 48             # sparse: the regions lie at 2^40 (q + 1)
SEND_BASE = 0x1000_0000           # each host's send buffers


class HostTraffic:
    """The host of the NIC whose ports are ``<prefix>_...``: ``ram`` (cocotbext-axi ``AxiRam``
    on ``<prefix>_m_axi``), ``wr`` (work requests in), ``cpl`` (completions out, random
    backpressure), one start PSN per QP of ``qps``; ``name`` starts its assertion messages.

    Writes go from the send buffers at :data:`SEND_BASE` to the peer's region of the QP
    (:func:`models.fabric_nic.region_base`); ``pending`` holds the posted ones per QP, ``backlog``
    those not posted yet, ``done`` the completed ones with their status, ``recv_cpls`` the
    Write-with-Immediate completions of this host's receive side."""

    def __init__(self, dut, rng, p, prefix, qps, name):
        from cocotbext.axi import AxiBus, AxiRam

        from verif.bench import RecordSink, RecordSource, random_pause

        self.rng, self.p, self.qps, self.name = rng, p, list(qps), name
        # The memory's clock: ``mem_clk`` where the NIC's AXI4 master crosses into its own
        # domain (rtl/nic_cdc.py), else the core clock.
        clk, rst = (dut.mem_clk, dut.mem_rst) if hasattr(dut, "mem_clk") else (dut.clk, dut.rst)
        self.ram = AxiRam(AxiBus.from_prefix(dut, f"{prefix}_m_axi"), clk, rst,
                          size=MEMORY_SIZE)
        for side in (self.ram.write_if, self.ram.read_if):
            side.log.setLevel(logging.WARNING)
        self.wr = RecordSource(dut, f"{prefix}_s_wr")
        self.cpl = RecordSink(dut, f"{prefix}_m_cpl", random_pause(rng, 0.2))
        self.start_psns = {q: rng.choice((0, (1 << 24) - 3, rng.getrandbits(24)))
                           for q in self.qps}
        self.send_offset = 0
        self.region_used = {q: 0 for q in self.qps}
        self.pending = {q: deque() for q in self.qps}
        self.backlog = {q: deque() for q in self.qps}
        self.done = []
        self.req_ids = {q: 0 for q in self.qps}
        self.recv_cpls = []

    def add_messages(self, count, sizes, qps=None):
        """``count`` random Writes per QP of ``qps`` (default: every QP) into the backlog
        (lengths from ``sizes(pmtu)``, immediates on about 30%), their payload written to this
        host's memory."""
        rng = self.rng
        for q in self.qps if qps is None else qps:
            for _ in range(count):
                length = rng.choice(sizes(self.p["pmtu"]))
                local = SEND_BASE + self.send_offset
                self.send_offset += length + rng.randrange(0, 64)
                data = rng.randbytes(length)
                self.ram.write(local, data)
                remote = region_base(q) + self.region_used[q]
                self.region_used[q] += length + rng.randrange(0, 64)
                assert self.region_used[q] <= REGION_BYTES
                imm = rng.random() < 0.3
                self.backlog[q].append(dict(qpn=q, local_addr=local, remote_va=remote,
                                            rkey=region_rkey(q), length=length,
                                            has_imm=int(imm), imm=rng.getrandbits(32),
                                            data=data))

    def post(self):
        """Post backlog messages while a QP holds fewer than ``wrs_per_qp``."""
        for q in self.qps:
            while self.backlog[q] and len(self.pending[q]) < self.p["wrs_per_qp"]:
                msg = self.backlog[q].popleft()
                msg["req_id"] = self.req_ids[q]
                self.req_ids[q] = (self.req_ids[q] + 1) & 0xFFFF
                self.pending[q].append(msg)
                self.wr.send(WORK_REQUEST.pack(**{k: v for k, v in msg.items() if k != "data"}))

    def completions(self, cycle):
        """Take the completions out: sender side in request order per QP."""
        while self.cpl.queue:
            rec = COMPLETION.unpack(self.cpl.queue.popleft())
            if rec["is_recv"]:
                self.recv_cpls.append(rec)
                continue
            q = rec["qpn"]
            assert self.pending[q], f"{self.name}: completion with nothing pending: {rec}"
            msg = self.pending[q].popleft()
            assert rec["req_id"] == msg["req_id"], f"{self.name}: completion {rec}, {msg}"
            msg["cycle"] = cycle
            self.done.append((msg, rec["status"]))

    def idle(self):
        return not any(self.backlog.values()) and not any(self.pending.values())
