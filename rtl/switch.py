# SPDX-License-Identifier: BSD-2-Clause
"""The trimming switch: K ingress ports, an input arbiter into a core of at least K x W bits per
cycle, the uN stage and route table, per-egress admission, trimming, ECN and two queues in block
RAM, counters behind one configuration port (docs/protocol.md sections 3, 6, 7 and 8).

Golden model: ``models/switch.py``; bench: ``tb/test_switch.py``.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import Out, connect, flipped
from amaranth.utils import ceil_log2

from models.records import FrameUser
from models.switch import (EGRESS_COUNTERS, INGRESS_COUNTERS, MAX_FRAME_DEFAULT, SwitchConfig,
                           port_width)
from models.switch_queue import (DATA_LIMIT_DEFAULT, KMAX_DEFAULT, KMIN_DEFAULT,
                                 TRIM_SIZE_DEFAULT)
from models.un_stage import REASONS

from .common.config import ConfigMap
from .common.ports import axis_members, check_width, config_members
from .switch_arbiter import SwitchArbiter
from .switch_egress import HEAD_BYTES, THRESHOLD_BITS, SwitchEgressPort
from .switch_ingress import SwitchIngress
from .un_stage import UnStage

__all__ = ["Switch", "core_width", "trace_layout", "decode_trace", "PORT_BASE", "PORT_STRIDE",
           "REG_CTRL", "REG_LFSR", "REG_KMIN", "REG_KMAX", "REG_Q_DATA", "REG_Q_CONTROL",
           "EGRESS_COUNTER_BASE", "INGRESS_COUNTER_BASE", "INFO_BASE", "INFO", "CTRL_UP",
           "CTRL_FABRIC", "port_reg", "egress_counter", "ingress_counter", "INGRESS_BYTES_DEFAULT"]

# Configuration map (word addresses); see the Switch docstring.
PORT_BASE = 0x8000
PORT_STRIDE = 0x40
REG_CTRL, REG_LFSR, REG_KMIN, REG_KMAX, REG_Q_DATA, REG_Q_CONTROL = range(6)
CTRL_UP, CTRL_FABRIC = 0, 1                     # bits of REG_CTRL
EGRESS_COUNTER_BASE = 0x10
INGRESS_COUNTER_BASE = 0x20
INFO_BASE = 0xF000
INFO = ("ports", "data_width", "core_width", "trim_size", "data_limit", "control_limit",
        "max_frame")
INGRESS_BYTES_DEFAULT = 16384
_ATTRIBUTION_DEPTH = 16     # frames between the arbiter and the uN stage's decision, at most


def port_reg(port, reg):
    """Word address of per-port register ``reg`` (``REG_*``) of ``port``."""
    return PORT_BASE + PORT_STRIDE * port + reg


def egress_counter(port, name):
    """Word address of egress counter ``name`` (``models.switch.EGRESS_COUNTERS``) of ``port``."""
    return PORT_BASE + PORT_STRIDE * port + EGRESS_COUNTER_BASE + EGRESS_COUNTERS.index(name)


def ingress_counter(port, name):
    """Word address of ingress counter ``name`` (``models.switch.INGRESS_COUNTERS``) of ``port``."""
    return PORT_BASE + PORT_STRIDE * port + INGRESS_COUNTER_BASE + INGRESS_COUNTERS.index(name)


def core_width(ports, data_width):
    """C: K x W rounded up to a power of two, at least 256 (the admission reads bytes 14..19 of a
    frame's first core word)."""
    return max(256, 1 << ceil_log2(ports * data_width))


def trace_layout(ports):
    """The ``decision_trace`` output: what the switch decided on timing, sampled every cycle."""
    pw = port_width(ports)
    return data.StructLayout({
        "arrive": ports,        # bit i: a frame ended on ingress i
        "overflow": ports,      # bit i: ... and it was dropped, its ingress FIFO being full
        "grant": 1,             # the arbiter took a frame of ingress grant_port into the core
        "grant_port": pw,
        "admit": 1,             # a frame was decided at egress admit_port
        "admit_port": pw,
        "dequeue": ports,       # bit i: egress i dequeued a frame
    })


def decode_trace(value, ports):
    """The fields of an integer ``decision_trace`` value, as a dict of ints."""
    out = {}
    offset = 0
    for name, member in trace_layout(ports):
        width = member.width
        out[name] = value >> offset & ((1 << width) - 1)
        offset += width
    return out


class Switch(wiring.Component):
    """The trimming switch of docs/protocol.md section 7: K ports of W bits.

    Data path: ingress port i (:class:`rtl.switch_ingress.SwitchIngress`) packs its link's beats
    into core words of C bits and stores whole frames (frames that overflow its FIFO, flagged bad,
    shorter than 54 bytes, longer than ``max_frame`` or whose length is not 54 + outer Payload
    Length are dropped and counted at that ingress). The arbiter
    (:class:`rtl.switch_arbiter.SwitchArbiter`) merges whole frames round-robin into one core stream
    of C bits per cycle, ``C = max(256, K x W rounded up to a power of two)`` (at most 512: K x W
    <= 512). The uN stage (:class:`rtl.un_stage.UnStage`, one route table) checks, shifts and routes
    each frame; its drops are charged to the frame's ingress port. Every egress port
    (:class:`rtl.switch_egress.SwitchEgressPort`) sees the core stream and admits its own frames:
    classification, admission by the outer Payload Length, trimming, ECN, data and control queues
    in block RAM, dequeue with the anti-starvation rule, port down. Golden model:
    :class:`models.switch.SwitchModel`.

    Parameters
    ----------
    ports : 2..8
        K (default 4).
    data_width : 64, 128, 256 or 512
        W, bits per beat of every port (K x W at most 512).
    fabric_facing : tuple of K bools
        Port roles out of reset (default all fabric-facing); also configurable.
    data_limit, control_limit : int
        Queue byte limits (default 32768 and 2 x data_limit; below 2^20). They size the block RAM.
    trim_size : int
        Bytes kept of a trimmed frame (default 256, at least 134).
    kmin, kmax : int
        ECN thresholds out of reset (default 8192 and 24576 bytes; configurable per port).
    lfsr_seeds : tuple of K ints
        LFSR values out of reset (default 0xACE1 each; configurable per port).
    table_depth : int
        Entries of the uN route table (default 64).
    max_frame : int
        The longest frame accepted, bytes (default 4352; the largest MRC frame is 4238 B).
    ingress_bytes : int
        Bytes of each ingress FIFO, rounded up to a power of two of core words (default 16384,
        about four of the largest frames); at least ``max_frame``. Store and forward with
        round-robin service needs room for a frame waiting its turn and the next one arriving:
        below about 2 x ``max_frame``, K - 1 ports at full rate with the largest frames can
        overflow.

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset.
    ``s<i>_axis_tdata/tkeep/tlast/tvalid/tuser``, i < K: ingress i. No ``tready``: an ingress
    never backpressures its link (docs/protocol.md 7); ``tuser[0]`` on a last beat flags the frame bad.
    ``m<i>_axis_tdata/tkeep/tlast/tvalid/tready``: egress i.
    ``cfg_addr/cfg_wdata/cfg_we/cfg_rdata``: the configuration port (``rtl/common/config.py``:
    read latency one cycle, unmapped words read 0, counters 32-bit, cleared when written).
    ``decision_trace``: the decisions that depend on timing (:func:`trace_layout`), for the
    golden model (docs/protocol.md 8): frame ends and overflow drops per ingress, the arbiter's grants, the
    admissions and the dequeues per egress. It has no handshake: sample it every cycle.

    Configuration map (word addresses; p = port number, r = p's base ``0x8000 + 0x40 p``)
    ------------------------------------------------------------------------------------
    ====================  ====  ==============================================================
    0x0000 - 0x7fff       uN    the uN stage's own map (``rtl/un_stage.py``): own block 0x000,
                                own uSID 0x001, its counters 0x010-0x014, route table from
                                0x100 (4 words per entry; the port field is the egress port)
    r + 0x00              rw    bit 0: port up (reset 1); bit 1: fabric-facing (reset: parameter)
    r + 0x01              rw    the port's LFSR: a write loads bits 15..0 (0 is ignored), a
                                read returns the current state (reset: the seed parameter)
    r + 0x02, r + 0x03    rw    Kmin, Kmax in bytes (20 bits; reset: the parameters)
    r + 0x04, r + 0x05    ro    bytes in the data queue, in the control queue
    r + 0x10 - 0x14       cnt   egress p: forwarded, trimmed, ecn_marked, dropped_full,
                                dropped_port_down
    r + 0x20 - 0x23       cnt   ingress p: dropped_no_route, dropped_hop_limit,
                                dropped_malformed, dropped_overflow
    0xf000 - 0xf006       ro    K, W, C, trim_size, data_limit, control_limit, max_frame
    ====================  ====  ==============================================================

    A configuration write applies in its own cycle (the admission and the dequeue of that cycle
    see the new value); bringing a port down flushes its queues in that cycle. A Kmin at or above
    Kmax marks exactly the frames that find q >= Kmax. Counters count when the decision is made:
    ``forwarded`` at the dequeue, ``dropped_port_down`` also the frames flushed.
    ``dropped_malformed`` counts the ingress checks and the uN stage's ``not_ipv6`` and
    ``short``; ``dropped_no_route`` also frames routed to a port >= K.

    Latency and throughput
    ----------------------
    Every ingress takes one beat per cycle, always. The core carries C >= K x W bits per cycle;
    a frame of b beats takes ceil(b / (C / W)) core cycles (frames start at a core word), so
    K - 1 ports at full rate are always absorbed (frames of 54 bytes or more), and all K ports at
    full rate get ``min(1, b / (K x ceil(b / (C / W))))`` of their rate (0.90 for 138-byte frames
    at K = 4, W = 64; 0.986 for 1638-byte ones): beyond the ingress FIFOs, the excess is dropped
    and counted as overflow. Each egress sends one beat per cycle with no bubble between queued
    frames. Store and forward at the ingress: on an idle switch, a frame's first beat leaves
    ``6 + UnStage.latency`` cycles after its last beat entered (15 at C = 256 with the
    64-entry route table: ``H + 13``, H = ceil(54 / (C/8)) = 2): 2 for the ingress descriptor
    FIFO, 1 to read, the uN stage's latency (9 there: H + 4 and the table scan), 1 to write the
    first word, 2 for the egress descriptor FIFO; ``make bench`` reports it for every size.
    """

    def __init__(self, ports=4, data_width=64, fabric_facing=None, data_limit=DATA_LIMIT_DEFAULT,
                 control_limit=None, trim_size=TRIM_SIZE_DEFAULT, kmin=KMIN_DEFAULT,
                 kmax=KMAX_DEFAULT, lfsr_seeds=None, table_depth=64, max_frame=MAX_FRAME_DEFAULT,
                 ingress_bytes=INGRESS_BYTES_DEFAULT):
        check_width("Switch", data_width)
        try:
            self.config = SwitchConfig(
                ports=ports, fabric_facing=fabric_facing, data_limit=data_limit,
                control_limit=control_limit, trim_size=trim_size, kmin=kmin, kmax=kmax,
                lfsr_seeds=lfsr_seeds, table_depth=table_depth, max_frame=max_frame)
        except ValueError as exc:
            raise ValueError(f"Switch: {exc}") from None
        cfg = self.config
        self.ports = ports
        self.data_width = data_width
        self.core_width = core_width(ports, data_width)
        if self.core_width > 512:
            raise ValueError(f"Switch: K x W = {ports * data_width} bits; the core (the uN "
                             f"stage) carries at most 512")
        self.control_limit = cfg.port_config(0).control_limit
        for name, value in (("data_limit", data_limit), ("control_limit", self.control_limit),
                            ("kmin", kmin), ("kmax", kmax)):
            if value >= 1 << THRESHOLD_BITS:
                raise ValueError(f"Switch: {name} must be below 2^{THRESHOLD_BITS}, not {value}")
        if not 1 <= table_depth <= 1024:
            raise ValueError(f"Switch: table_depth must be 1..1024, not {table_depth!r}")
        word_bytes = self.core_width // 8
        if isinstance(ingress_bytes, bool) or not isinstance(ingress_bytes, int) or \
                ingress_bytes < max_frame:
            raise ValueError(f"Switch: ingress_bytes must be an integer >= max_frame "
                             f"({max_frame}), not {ingress_bytes!r}")
        self.ingress_words = 1 << ceil_log2(-(-ingress_bytes // word_bytes))
        self.port_width = port_width(ports)
        members = dict(config_members())
        for p in range(ports):
            link = axis_members(f"s{p}_axis", data_width, FrameUser.WIDTH, sink=True,
                                always_ready=True)
            members.update(link)
            members.update(axis_members(f"m{p}_axis", data_width, 0, sink=False))
        members["decision_trace"] = Out(trace_layout(ports))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfgp = self.config
        K, W, C = self.ports, self.data_width, self.core_width

        # --- ingress ports and the arbiter ----------------------------------------------------
        ingress = []
        for p in range(K):
            block = SwitchIngress(data_width=W, core_width=C, depth_words=self.ingress_words,
                                  max_frame=cfgp.max_frame)
            m.submodules[f"ingress{p}"] = block
            ingress.append(block)
            connect(m, flipped(getattr(self, f"s{p}_axis")), block.s_axis)
        m.submodules.arbiter = arbiter = SwitchArbiter(ports=K, core_width=C,
                                                       bytes_width=ingress[0].bytes_width)
        for p, block in enumerate(ingress):
            m.d.comb += [
                arbiter.f_valid[p].eq(block.f_valid),
                arbiter.f_bytes[p].eq(block.f_bytes),
                block.f_take.eq(arbiter.f_take[p]),
                block.rd_en.eq(arbiter.rd_en[p]),
                arbiter.rd_data[p].eq(block.rd_data),
            ]

        # --- the uN stage on the core stream ---------------------------------------------------
        m.submodules.un = un = UnStage(data_width=C, table_depth=cfgp.table_depth,
                                       port_width=self.port_width, decision_port=True)
        m.d.comb += [
            un.s_axis.p.data.eq(arbiter.m_axis.p.data),
            un.s_axis.p.keep.eq(arbiter.m_axis.p.keep),
            un.s_axis.p.last.eq(arbiter.m_axis.p.last),
            un.s_axis.valid.eq(arbiter.m_axis.valid),
            un.s_axis.p.user.eq(0),
            arbiter.m_axis.ready.eq(un.s_axis.ready),
            un.m_axis.ready.eq(1),             # the egress ports never backpressure
            un.cfg_addr.eq(self.cfg_addr),      # the stage's addresses are all below 0x8000
            un.cfg_wdata.eq(self.cfg_wdata),
            un.cfg_we.eq(self.cfg_we),
        ]

        # Which ingress each decision belongs to: the grants, in order.
        m.submodules.attribution = attribution = SyncFIFO(width=self.port_width,
                                                          depth=_ATTRIBUTION_DEPTH)
        m.d.comb += [
            attribution.w_en.eq(arbiter.grant),
            attribution.w_data.eq(arbiter.grant_port),
            attribution.r_en.eq(un.dec_valid),
        ]
        source = attribution.r_data
        reason = un.dec_reason

        # --- the core stream after the stage: s0 (decisions), s1 (writes) ------------------------
        mid = Signal()               # inside a frame on s0
        with m.If(un.m_axis.valid):
            m.d.sync += mid.eq(~un.m_axis.p.last)
        s1_valid = Signal()
        s1_data = Signal(C)
        s1_last = Signal()
        m.d.sync += [s1_valid.eq(un.m_axis.valid), s1_data.eq(un.m_axis.p.data),
                     s1_last.eq(un.m_axis.p.last)]

        # --- configuration ---------------------------------------------------------------------
        rdata = Signal(32)
        cfg = ConfigMap(m, SimpleNamespace(cfg_addr=self.cfg_addr, cfg_wdata=self.cfg_wdata,
                                           cfg_we=self.cfg_we, cfg_rdata=rdata), "sw")
        m.d.comb += self.cfg_rdata.eq(rdata | un.cfg_rdata)

        def now(addr, register):
            """A register's value as it applies in this cycle (a write applies at once)."""
            return Mux(cfg.write_strobe(addr), self.cfg_wdata[:len(register)], register)

        egress = []
        for p in range(K):
            ctrl = cfg.reg(port_reg(p, REG_CTRL), f"ctrl{p}", 2,
                           init=1 << CTRL_UP | int(cfgp.fabric_facing[p]) << CTRL_FABRIC,
                           doc=f"port {p}: bit 0 up, bit 1 fabric-facing")
            kmin = cfg.reg(port_reg(p, REG_KMIN), f"kmin{p}", THRESHOLD_BITS, init=cfgp.kmin,
                           doc=f"port {p}: ECN Kmin (bytes)")
            kmax = cfg.reg(port_reg(p, REG_KMAX), f"kmax{p}", THRESHOLD_BITS, init=cfgp.kmax,
                           doc=f"port {p}: ECN Kmax (bytes)")
            block = SwitchEgressPort(
                port=p, data_width=W, core_width=C, data_limit=cfgp.data_limit,
                control_limit=self.control_limit, trim_size=cfgp.trim_size,
                max_frame=cfgp.max_frame, lfsr_seed=cfgp.lfsr_seeds[p],
                control_burst=cfgp.control_burst, port_width=self.port_width)
            m.submodules[f"egress{p}"] = block
            egress.append(block)
            ctrl_now = now(port_reg(p, REG_CTRL), ctrl)
            m.d.comb += [
                block.c_valid.eq(un.m_axis.valid),
                block.c_first.eq(~mid),
                block.c_dest.eq(un.m_axis.p.dest),
                block.c_head.eq(un.m_axis.p.data[:HEAD_BYTES * 8]),
                block.w_valid.eq(s1_valid),
                block.w_data.eq(s1_data),
                block.w_last.eq(s1_last),
                block.up.eq(ctrl_now[CTRL_UP]),
                block.fabric_facing.eq(ctrl_now[CTRL_FABRIC]),
                block.kmin.eq(now(port_reg(p, REG_KMIN), kmin)),
                block.kmax.eq(now(port_reg(p, REG_KMAX), kmax)),
                block.seed_we.eq(cfg.write_strobe(port_reg(p, REG_LFSR))),
                block.seed.eq(self.cfg_wdata[:16]),
            ]
            cfg.ro(port_reg(p, REG_LFSR), f"lfsr{p}", block.lfsr,
                   doc=f"port {p}: LFSR state; a non-zero write loads it")
            cfg.ro(port_reg(p, REG_Q_DATA), f"q_data{p}", block.q_data,
                   doc=f"port {p}: bytes in the data queue")
            cfg.ro(port_reg(p, REG_Q_CONTROL), f"q_control{p}", block.q_control,
                   doc=f"port {p}: bytes in the control queue")
            events = {"forwarded": block.dequeue, "trimmed": block.ev_trimmed,
                      "ecn_marked": block.ev_marked, "dropped_full": block.ev_full,
                      "dropped_port_down": block.ev_down}
            for name in EGRESS_COUNTERS:
                cfg.counter(egress_counter(p, name), f"{name}{p}", events[name],
                            doc=f"egress {p}: {name.replace('_', ' ')}")

            connect(m, block.m_axis, flipped(getattr(self, f"m{p}_axis")))

        # --- per-ingress counters ----------------------------------------------------------------
        decided = [un.dec_valid & (source == p) for p in range(K)]
        is_reason = {name: reason == i for i, name in enumerate(REASONS)}
        no_port = is_reason["forwarded"] & (un.dec_port >= K)
        for p, block in enumerate(ingress):
            events = {
                "dropped_no_route": decided[p] & (is_reason["no_route"] | no_port),
                "dropped_hop_limit": decided[p] & is_reason["hop_limit"],
                "dropped_malformed": block.ev_malformed +
                (decided[p] & (is_reason["short"] | is_reason["not_ipv6"])),
                "dropped_overflow": block.ev_overflow,
            }
            for name in INGRESS_COUNTERS:
                cfg.counter(ingress_counter(p, name), f"in_{name}{p}", events[name],
                            doc=f"ingress {p}: {name.replace('_', ' ')}")

        info = {"ports": K, "data_width": W, "core_width": C, "trim_size": cfgp.trim_size,
                "data_limit": cfgp.data_limit, "control_limit": self.control_limit,
                "max_frame": cfgp.max_frame}
        for i, name in enumerate(INFO):
            cfg.ro(INFO_BASE + i, name, info[name], doc=name)
        cfg.finish()

        # --- trace -------------------------------------------------------------------------------
        admit_port = Signal(self.port_width)
        for p, block in enumerate(egress):
            with m.If(block.admit):
                m.d.comb += admit_port.eq(p)
        m.d.comb += [
            self.decision_trace.arrive.eq(Cat(b.ev_end for b in ingress)),
            self.decision_trace.overflow.eq(Cat(b.ev_overflow for b in ingress)),
            self.decision_trace.grant.eq(arbiter.grant),
            self.decision_trace.grant_port.eq(arbiter.grant_port),
            self.decision_trace.admit.eq(Cat(b.admit for b in egress).any()),
            self.decision_trace.admit_port.eq(admit_port),
            self.decision_trace.dequeue.eq(Cat(b.dequeue for b in egress)),
        ]
        return m
