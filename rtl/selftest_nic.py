# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""The FPGA self-test with a real NIC engine (issue 7, item 2): Write work requests from an
LFSR -> one NIC engine -> a trimming switch -> the same NIC -> host memory that checks every
placed byte (``fpga/README.md``)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect

from models.layouts import DATA_OPCODES
from models.packets import frame_length
from models.segmenter import QP_CONTEXT
from models.selftest import STATUS_WORDS
from models.selftest_nic import WrGenConfig, rkey
from models.spray import make_ev
from models.fabric_topology import nic_address, port_mac
from models.usid import DEFAULT_BLOCK, Role, encode
from rtl import reliability as rel_map
from rtl import rx_engine as rx_map
from rtl import spray_scheduler as spray_map
from rtl import tx_path as path_map
from rtl.nic_engine import ADDR_WIDTH as NIC_ADDR_WIDTH
from rtl.nic_engine import NicEngine, nic_addr
from rtl.pattern_memory import COUNTERS as MEM_COUNTERS
from rtl.pattern_memory import PatternMemory
from rtl.rx_front import ADDR_INNER_DST, ADDR_QP_ENABLE, region_reg
from rtl.rx_tracker import OFF_CACK, SETUP_ENABLE as TRACKER_ENABLE
from rtl.rx_tracker import qp_addr as tracker_qp_addr
from rtl.selftest_report import Reporter
from rtl.switch import Switch
from rtl.tx_engine import engine_addr
from rtl.un_stage import ADDR_OWN_USID, TABLE_BASE
from rtl.wr_generator import COUNTERS as WR_COUNTERS
from rtl.wr_generator import WrGenerator

__all__ = ["SelfTestNic", "NIC_DEFAULTS", "QP_DEFAULTS", "nic_setup", "switch_setup",
           "report_template", "REPORT_FIELDS", "WRITE", "WAIT"]

WRITE, WAIT = 0, 1          # set-up step kinds: write (addr, data); wait until rdata & data == 0
NIC_PORT = 0                # the switch port the NIC's plane 0 is cabled to
# The reduced NIC: one QP, one plane, small rings, queues and buffers.
NIC_DEFAULTS = dict(n_qps=1, n_planes=1, data_width=64, pmtu=1024, wrs_per_qp=4, slots=4,
                    backups=2, ev_min_active=2, max_outstanding=8, n_regions=1,
                    buffer_bytes=4096, header_slots=8, mpr=128, wimm_max=8, ring=32,
                    probe_entries=2, wr_depth=4, timer_bits=10)
QP_DEFAULTS = dict(w_max=32, timeout_exp=7, retry_limit=3, probe_period=16)
REPORT_FIELDS = ("wrs", "cpl", "bytes", "bad", "errors")
_MASK32 = 0xFFFF_FFFF


def _tx(block, addr):
    return nic_addr("tx", engine_addr(block, addr))


def nic_setup(params, wrgen, start_psn, qp=QP_DEFAULTS, host=0):
    """The set-up steps ``(kind, address, data)`` of a NIC of parameters ``params`` (those of
    :class:`rtl.nic_engine.NicEngine`, every one given) for the loop: every QP q sends to QP q
    of the same host (``host``) through one T0 (the switch), its EVs on plane 0 (the path is the
    plane under one T0); the peer's memory region q is the check window of ``wrgen`` (a
    :class:`models.selftest_nic.WrGenConfig`) with R_Key :func:`models.selftest_nic.rkey` (q);
    start PSN ``start_psn`` on both sides; reliability parameters ``qp`` (``w_max``,
    ``timeout_exp``, ``retry_limit``, ``probe_period``; MPR the NIC's). The same blocks and
    order as the NIC bench (``tb/test_nic_engine.py``), its polls of the scheduler's status as
    WAIT steps."""
    steps = []

    def write(addr, data):
        steps.append((WRITE, addr, data & _MASK32))

    def table_write(addr, data):
        steps.append((WAIT, _tx("spray", spray_map.ADDR_STATUS), spray_map.STATUS_CMD_PENDING))
        write(_tx("spray", addr), data)

    n_qps, n_planes = params["n_qps"], params["n_planes"]
    write(_tx("tx_path", path_map.ADDR_OWN_HOST), host)
    write(_tx("tx_path", path_map.ADDR_OWN_T0), 0)
    for plane in range(n_planes):
        mac = port_mac(plane, host)
        for word, value in enumerate((mac, mac >> 32, mac, mac >> 32)):
            write(_tx("tx_path", path_map.port_addr(plane, word)), value)
    write(_tx("spray", spray_map.ADDR_EV_MIN_ACTIVE), params["ev_min_active"])
    write(_tx("spray", spray_map.ADDR_NUM_T1), 1)
    slots, backups = params["slots"], params["backups"]
    for q in range(n_qps):
        write(_tx("segmenter", QP_CONTEXT + q), 1 << 31 | start_psn)
        for off, value in ((path_map.OFF_PEER_QPN, q), (path_map.OFF_PEER_HOST, host),
                           (path_map.OFF_PEER_PATH, 0)):
            write(_tx("tx_path", path_map.qp_addr(q, off)), value)
        for plane in range(n_planes):
            for s in range(slots):
                table_write(spray_map.table_addr(q, plane, spray_map.OFF_SLOT_EV + s),
                            make_ev(plane, 0, 1 + 64 * q + s))
            for i in range(backups):
                table_write(spray_map.table_addr(q, plane, spray_map.OFF_POOL_EV + i),
                            make_ev(plane, 0, 1 + 64 * q + slots + i))
            table_write(spray_map.table_addr(q, plane, spray_map.OFF_LFSR), 0x1D + q + plane)
    enable = (1 << n_qps) - 1
    write(_tx("tx_path", path_map.ADDR_QP_ENABLE), enable)
    steps.append((WAIT, _tx("spray", spray_map.ADDR_STATUS), _MASK32))
    write(_tx("spray", spray_map.ADDR_QP_ENABLE), enable)
    write(nic_addr("rx", rx_map.FRONT_BASE + ADDR_QP_ENABLE), enable)
    inner = nic_address(host)
    for i in range(4):
        write(nic_addr("rx", rx_map.FRONT_BASE + ADDR_INNER_DST + i), inner >> 32 * i)
    for q in range(n_qps):
        for name, value in (("rkey", rkey(q)), ("base_lo", wrgen.remote_base),
                            ("base_hi", wrgen.remote_base >> 32), ("length_lo", wrgen.span),
                            ("length_hi", wrgen.span >> 32), ("valid", 1)):
            write(nic_addr("rx", rx_map.FRONT_BASE + region_reg(q, name)), value)
        write(nic_addr("rx", rx_map.TRACKER_BASE + tracker_qp_addr(q, OFF_CACK)),
              start_psn | TRACKER_ENABLE)
    for q in range(n_qps):
        for off, value in ((rel_map.OFF_W_MAX, qp["w_max"]), (rel_map.OFF_MPR, params["mpr"]),
                           (rel_map.OFF_K, qp["timeout_exp"]),
                           (rel_map.OFF_RETRY, qp["retry_limit"]),
                           (rel_map.OFF_PERIOD, qp["probe_period"])):
            write(nic_addr("reliability", rel_map.qp_addr(q, off)), value)
        write(nic_addr("reliability", rel_map.qp_addr(q, rel_map.OFF_SETUP)),
              start_psn | rel_map.SETUP_ENABLE)
    return steps


def switch_setup(host=0):
    """The switch's set-up writes ``(address, data)``: its own uSID T0(0, 0) and one route,
    HOST(0, host port) -> the NIC's port (key low, key high, port, valid)."""
    key = DEFAULT_BLOCK << 16 | encode(0, Role.HOST, host)
    return [(ADDR_OWN_USID, encode(0, Role.T0, 0)),
            (TABLE_BASE, key & _MASK32), (TABLE_BASE + 1, key >> 32),
            (TABLE_BASE + 2, NIC_PORT), (TABLE_BASE + 3, 1)]


def report_template(p, wrgen, window):
    """The UART line of a NIC of parameters ``p``: the configuration built, then ``{field}``
    for each of :data:`REPORT_FIELDS` and ``{status}``."""
    config = (f"MRC NIC selftest W={p['data_width']} planes={p['n_planes']} qps={p['n_qps']} "
              f"pmtu={p['pmtu']} mpr={p['mpr']} ring={p['ring']} slots={p['slots']} "
              f"window={window} len<={wrgen.max_length}")
    values = " ".join(f"{name}={{{name}}}" for name in REPORT_FIELDS)
    return f"{config} {values} {{status}}\r\n"


class SelfTestNic(wiring.Component):
    """Loopback self-test of one NIC engine: :class:`rtl.wr_generator.WrGenerator` ->
    :class:`rtl.nic_engine.NicEngine` -> plane 0 -> :class:`rtl.switch.Switch` (K = 2, port 0
    the NIC's, port 1 idle) -> back into the same NIC, whose AXI4 master reaches
    :class:`rtl.pattern_memory.PatternMemory` (payload read from the pattern, every placed byte
    checked against it). QP q sends to QP q of the same host, so the NIC is both sender and
    receiver (half the area of two NICs); its SACKs come back the same way.

    Out of reset a sequencer writes the switch (:func:`switch_setup`) and then the NIC
    (:func:`nic_setup`, waiting on the scheduler's status where the NIC bench waits) from a ROM
    computed at elaboration; ``ready`` rises when done, and the generator runs while ``enable``
    is high.

    Parameters
    ----------
    nic : dict
        :class:`rtl.nic_engine.NicEngine` parameters over :data:`NIC_DEFAULTS` (``n_planes``
        must stay 1).
    wrgen : :class:`models.selftest_nic.WrGenConfig`
        The work requests (``n_qps`` must be the NIC's); default: lengths up to 2 PMTU + 100,
        a 16 KB window.
    window : int
        Work requests outstanding at most (default 4).
    qp : dict
        Reliability parameters over :data:`QP_DEFAULTS`.
    start_psn : int
        The first PSN of every QP (default 0xFFFFF0: the PSN wraps after 16 packets).
    clk_hz : int
        The clock (tick generator and UART; default 250 MHz).
    tick_hz : int or None
        The clock the NIC's tick generator is told (default ``clk_hz``; a bench gives a low
        value to make ticks, so timeouts, short).
    baud, report_period : int
        UART bit rate; cycles between report lines (default ``clk_hz``: one per second).
    timeout : int
        Cycles without a completion before the generator reports ``stalled`` (default 2^22).

    Ports
    -----
    ``enable`` in: send work requests while high.
    ``inject`` in: a one-cycle pulse makes the pattern memory return one payload beat wrong
    (bit 0 of every byte): the NIC sends it, places it, and the memory counts bad bytes.
    ``wr_<name>`` out: the generator's counters (:data:`rtl.wr_generator.COUNTERS`);
    ``mem_<name>`` out: the memory's (:data:`rtl.pattern_memory.COUNTERS`); ``outstanding``,
    ``stalled``: the generator's.
    ``errors`` out (32): bad bytes + completion errors + order errors + writes outside the
    window + WLAST errors (saturating sum of the counters, recomputed each cycle).
    ``ready``: the set-up is written; ``passed``: a completion came and no error so far;
    ``failed``: an error counted or the generator stalled (sticky).
    ``uart_tx``: the report line (:func:`report_template`, 8N1, idles high).
    ``clk``, ``rst``: the sync domain.

    Latency and throughput: the set-up takes about 4 cycles per ROM step (a few hundred cycles).
    The loop runs at the NIC's rate (one W-bit beat per cycle on the plane, limited by
    ``window`` outstanding requests and the NIC's ``wrs_per_qp``).
    """

    def __init__(self, nic=None, wrgen=None, window=4, qp=None, start_psn=0xFFFFF0,
                 clk_hz=250_000_000, tick_hz=None, baud=115_200, report_period=None,
                 timeout=1 << 22):
        params = dict(NIC_DEFAULTS, **(nic or {}))
        if params["n_planes"] != 1:
            raise ValueError(f"SelfTestNic: n_planes must be 1 (one switch), not "
                             f"{params['n_planes']!r}")
        if not isinstance(start_psn, int) or not 0 <= start_psn < 1 << 24:
            raise ValueError(f"SelfTestNic: start_psn must be a 24-bit PSN, not {start_psn!r}")
        if wrgen is None:
            wrgen = WrGenConfig(n_qps=params["n_qps"], max_length=2 * params["pmtu"] + 100,
                                window=1 << 14)
        if not isinstance(wrgen, WrGenConfig) or wrgen.n_qps != params["n_qps"]:
            raise ValueError(f"SelfTestNic: wrgen must be a WrGenConfig with the NIC's n_qps "
                             f"({params['n_qps']}), not {wrgen!r}")
        self.qp = dict(QP_DEFAULTS, **(qp or {}))
        try:
            self.nic = NicEngine(clk_hz=tick_hz or clk_hz, **params)
            self.generator = WrGenerator(wrgen, window=window, timeout=timeout)
        except ValueError as exc:
            raise ValueError(f"SelfTestNic: {exc}") from None
        self.params = params
        self.wrgen, self.window, self.start_psn = wrgen, window, start_psn
        self.memory = PatternMemory(self.nic.core_width, wrgen.pattern_window)
        self.max_frame = max(frame_length(op, params["pmtu"]) for op in DATA_OPCODES)
        self.switch = Switch(ports=2, data_width=params["data_width"],
                             fabric_facing=(False, False), data_limit=4 * self.max_frame,
                             control_limit=512, trim_size=256, table_depth=2,
                             max_frame=self.max_frame, ingress_bytes=2 * self.max_frame)
        # (to the NIC, kind, address, data)
        self.steps = [(0, WRITE, addr, data) for addr, data in switch_setup()] + \
            [(1, kind, addr, data) for kind, addr, data in nic_setup(
                params, wrgen, start_psn, self.qp)]
        self.template = report_template(params, wrgen, window)
        self.reporter = Reporter(self.template, REPORT_FIELDS, STATUS_WORDS, clk_hz, baud,
                                 clk_hz if report_period is None else report_period)
        super().__init__({
            "enable": In(1), "inject": In(1),
            **{f"wr_{name}": Out(32) for name in WR_COUNTERS},
            **{f"mem_{name}": Out(32) for name in MEM_COUNTERS},
            "outstanding": Out(range(window + 1)), "stalled": Out(1), "errors": Out(32),
            "ready": Out(1), "passed": Out(1), "failed": Out(1), "uart_tx": Out(1, init=1),
        })

    def _sequencer(self, m, nic, sw):
        """The set-up ROM played into the switch's and the NIC's configuration ports."""
        steps = self.steps
        step = Signal(range(len(steps) + 1))
        polled = Signal()
        target = Signal()
        kind = Signal()
        addr = Signal(NIC_ADDR_WIDTH)
        data = Signal(32)
        with m.Switch(step):
            for index, entry in enumerate(steps):
                with m.Case(index):
                    m.d.comb += [target.eq(entry[0]), kind.eq(entry[1]), addr.eq(entry[2]),
                                 data.eq(entry[3])]
        busy = ~self.ready
        advance = Signal()
        m.d.comb += [
            nic.cfg_addr.eq(addr), nic.cfg_wdata.eq(data),
            sw.cfg_addr.eq(addr), sw.cfg_wdata.eq(data),
            nic.cfg_we.eq(busy & target & (kind == WRITE)),
            sw.cfg_we.eq(busy & ~target),
            advance.eq(busy & ((kind == WRITE) | (polled & ((nic.cfg_rdata & data) == 0)))),
        ]
        with m.If(busy & (kind == WAIT)):
            m.d.sync += polled.eq(~advance)
        with m.If(advance):
            m.d.sync += step.eq(step + 1)
            with m.If(step == len(steps) - 1):
                m.d.sync += self.ready.eq(1)

    def elaborate(self, platform):
        m = Module()
        m.submodules.nic = nic = self.nic
        m.submodules.generator = gen = self.generator
        m.submodules.memory = mem = self.memory
        m.submodules.switch = sw = self.switch
        m.submodules.reporter = rep = self.reporter
        self._sequencer(m, nic, sw)

        # --- host side: work requests, completions, memory -------------------------------------
        m.d.comb += [
            gen.enable.eq(self.enable & self.ready),
            nic.s_ev.valid.eq(0), nic.plane_down.eq(0),
            mem.inject.eq(self.inject),
        ]
        connect(m, gen.m_wr, nic.s_wr)
        connect(m, nic.m_cpl, gen.s_cpl)
        connect(m, nic.m_axi, mem.s_axi)

        # --- the loop: NIC plane 0 <-> switch port 0; port 1 idle ------------------------------
        m.d.comb += [
            sw.s0_axis.p.data.eq(nic.m_axis0.p.data), sw.s0_axis.p.keep.eq(nic.m_axis0.p.keep),
            sw.s0_axis.p.last.eq(nic.m_axis0.p.last), sw.s0_axis.valid.eq(nic.m_axis0.valid),
            sw.s0_axis.p.user.eq(nic.m_axis0.p.user), nic.m_axis0.ready.eq(1),
            nic.s0_axis.p.data.eq(sw.m0_axis.p.data), nic.s0_axis.p.keep.eq(sw.m0_axis.p.keep),
            nic.s0_axis.p.last.eq(sw.m0_axis.p.last),
            nic.s0_axis.valid.eq(sw.m0_axis.valid), nic.s0_axis.p.user.eq(0),
            sw.m0_axis.ready.eq(1),
            sw.s1_axis.valid.eq(0), sw.m1_axis.ready.eq(1),
        ]

        # --- counters, status, report ----------------------------------------------------------
        m.d.comb += [getattr(self, f"wr_{name}").eq(getattr(gen, name)) for name in WR_COUNTERS]
        m.d.comb += [getattr(self, f"mem_{name}").eq(getattr(mem, name))
                     for name in MEM_COUNTERS]
        m.d.comb += [self.outstanding.eq(gen.outstanding), self.stalled.eq(gen.stalled)]
        error_terms = [mem.bad_bytes, gen.cpl_error, gen.order_errors, mem.outside_beats,
                       mem.last_errors]
        total = Signal(32 + 3)
        m.d.comb += total.eq(sum(error_terms))
        m.d.sync += self.errors.eq(Mux(total[32:].any(), _MASK32, total[:32]))
        failed = Signal()
        with m.If((self.errors != 0) | gen.stalled):
            m.d.sync += failed.eq(1)
        m.d.comb += [self.failed.eq(failed),
                     self.passed.eq((gen.cpl_ok != 0) & ~failed)]
        fields = dict(wrs=gen.wrs_sent, cpl=gen.cpl_ok, bytes=mem.good_bytes,
                      bad=mem.bad_bytes, errors=self.errors)
        m.d.comb += [getattr(rep, f"v_{name}").eq(fields[name]) for name in REPORT_FIELDS]
        m.d.comb += [rep.status.eq(Mux(failed, 2, Mux(self.passed, 1, 0))),
                     self.uart_tx.eq(rep.tx)]
        return m
