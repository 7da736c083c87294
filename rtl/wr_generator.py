# SPDX-License-Identifier: BSD-2-Clause
"""The NIC self-test's work-request generator: Write work requests from a xorshift64 sequence,
a bounded number outstanding, completions counted and checked; golden model
``models/selftest_nic.py``."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from models.records import CompletionStatus
from models.selftest import xorshift64 as xorshift64_int
from models.selftest_nic import RKEY_BASE, WrGenConfig
from rtl.common import records
from rtl.common.ports import record_members
from rtl.selftest_gen import xorshift64

__all__ = ["WrGenerator", "COUNTERS"]

COUNTERS = ("wrs_sent", "bytes_sent", "cpl_ok", "cpl_error", "cpl_recv", "order_errors")


class WrGenerator(wiring.Component):
    """Makes the work requests of :func:`models.selftest_nic.work_requests`, in order, while
    ``enable`` is high and fewer than ``window`` are outstanding (sent, their sender-side
    completion not yet back), and checks the completions.

    A sender-side completion (``is_recv`` = 0) must carry status OK and the next ``req_id`` of
    its QP (requests of a QP complete in order); a wrong ``req_id`` or a QPN beyond ``n_qps``
    counts ``order_errors``, a status other than OK ``cpl_error`` (either way the request is
    no longer outstanding). Receive-side completions (Write with Immediate at the receiver) are
    counted. When requests are outstanding and no sender-side completion comes for ``timeout``
    cycles, ``stalled`` rises and stays high.

    Parameters
    ----------
    config : :class:`models.selftest_nic.WrGenConfig`
        QPs, lengths, windows, seed.
    window : int
        Requests outstanding at most (1..1024).
    timeout : int
        Cycles without a completion before ``stalled`` (at least 2; default 2^20).

    Ports
    -----
    ``enable`` in: make new requests while high.
    ``m_wr_tdata/tvalid/tready``: :data:`models.records.WORK_REQUEST` out.
    ``s_cpl_tdata/tvalid/tready``: :data:`models.records.COMPLETION` in (``tready`` always 1).
    ``wrs_sent``, ``bytes_sent`` (their lengths), ``cpl_ok``, ``cpl_error``, ``cpl_recv``,
    ``order_errors`` out: 32-bit wrapping counters (:data:`COUNTERS`).
    ``outstanding`` out: requests outstanding (the one waiting on ``m_wr`` included).
    ``stalled`` out: see above.
    ``clk``, ``rst``: the sync domain.

    Latency and throughput: a request is valid the cycle after the state stepped (every record
    field is a register), one request per cycle while the window allows.
    """

    def __init__(self, config=WrGenConfig(), window=4, timeout=1 << 20):
        if not isinstance(config, WrGenConfig):
            raise ValueError(f"WrGenerator: config must be a WrGenConfig, not {config!r}")
        if not isinstance(window, int) or not 1 <= window <= 1024:
            raise ValueError(f"WrGenerator: window must be 1..1024, not {window!r}")
        if not isinstance(timeout, int) or timeout < 2:
            raise ValueError(f"WrGenerator: timeout must be an integer >= 2, not {timeout!r}")
        self.config, self.window, self.timeout = config, window, timeout
        super().__init__({
            "enable": In(1),
            **record_members("m_wr", records.WORK_REQUEST, sink=False),
            **record_members("s_cpl", records.COMPLETION, sink=True),
            **{name: Out(32) for name in COUNTERS},
            "outstanding": Out(range(window + 1)),
            "stalled": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        counts = {name: getattr(self, name) for name in COUNTERS}
        r = Signal(64, init=xorshift64_int(cfg.seed))
        qp_bits = exact_log2(cfg.n_qps)
        win_bits = exact_log2(cfg.window)
        len_bits = cfg.max_length.bit_length()
        issued = Array(Signal(16, name=f"issued_q{q}") for q in range(cfg.n_qps))
        completed = Array(Signal(16, name=f"completed_q{q}") for q in range(cfg.n_qps))

        # --- the next request, from R ----------------------------------------------------------
        qpn = r[56:56 + qp_bits] if qp_bits else Const(0, 1)
        raw = r[:len_bits]
        folded = Signal(len_bits)
        m.d.comb += folded.eq(Mux(raw > cfg.max_length, raw - cfg.max_length, raw))
        mode = r[24:27]
        length = Mux(mode == 0, 0, Mux(mode == 1, cfg.max_length, folded))
        offset = r[32:32 + win_bits]
        wr = self.m_wr.p
        valid = Signal()
        fire = valid & self.m_wr.ready
        room = self.outstanding != self.window
        load = self.enable & room & (~valid | fire)
        m.d.comb += self.m_wr.valid.eq(valid)
        with m.If(load):
            m.d.sync += [
                valid.eq(1), r.eq(xorshift64(r)),
                wr.qpn.eq(qpn),
                wr.local_addr.eq(Cat(offset, Const(cfg.local_base >> win_bits, 64 - win_bits))),
                wr.remote_va.eq(Cat(offset, Const(cfg.remote_base >> win_bits, 64 - win_bits))),
                wr.rkey.eq(RKEY_BASE | qpn), wr.length.eq(length),
                wr.has_imm.eq(r[62] & r[63]), wr.imm.eq(r[8:40]),
                wr.req_id.eq(issued[qpn]),
                issued[qpn].eq(issued[qpn] + 1),
            ]
        with m.Elif(fire):
            m.d.sync += valid.eq(0)
        with m.If(fire):
            m.d.sync += [counts["wrs_sent"].eq(counts["wrs_sent"] + 1),
                         counts["bytes_sent"].eq(counts["bytes_sent"] + wr.length)]

        # --- completions -----------------------------------------------------------------------
        cpl = self.s_cpl.p
        m.d.comb += self.s_cpl.ready.eq(1)
        cpl_fire = self.s_cpl.valid
        sender = cpl_fire & ~cpl.is_recv
        known = cpl.qpn < cfg.n_qps
        cpl_q = cpl.qpn[:qp_bits] if qp_bits else Const(0, 1)
        with m.If(cpl_fire & cpl.is_recv):
            m.d.sync += counts["cpl_recv"].eq(counts["cpl_recv"] + 1)
        with m.If(sender):
            with m.If(cpl.status == CompletionStatus.OK):
                m.d.sync += counts["cpl_ok"].eq(counts["cpl_ok"] + 1)
            with m.Else():
                m.d.sync += counts["cpl_error"].eq(counts["cpl_error"] + 1)
            with m.If(known):
                m.d.sync += completed[cpl_q].eq(cpl.req_id + 1)
            with m.If(~known | (cpl.req_id != completed[cpl_q])):
                m.d.sync += counts["order_errors"].eq(counts["order_errors"] + 1)
        retire = sender & (self.outstanding != 0)     # a stray completion retires nothing
        m.d.sync += self.outstanding.eq(self.outstanding + load - retire)

        # --- watchdog --------------------------------------------------------------------------
        quiet = Signal(range(self.timeout))
        with m.If(sender | (self.outstanding == 0)):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet == self.timeout - 1):
            m.d.sync += self.stalled.eq(1)
        with m.Else():
            m.d.sync += quiet.eq(quiet + 1)
        return m
