# SPDX-License-Identifier: BSD-2-Clause
"""The switch's uN shift-and-forward stage (docs/protocol.md section 3).

Golden model: ``models/un_stage.py``; bench: ``tb/test_un_stage.py``.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import Out

from models.layouts import ETH, ETHERTYPE_IPV6, IPV6, OUTER_OFFSET
from models.records import FrameUser
from models.un_stage import DST_BYTE, HOP_LIMIT_BYTE, MIN_FRAME, REASONS
from models.usid import DEFAULT_BLOCK, KEY_BITS

from .common.config import ConfigMap
from .common.headers import field
from .common.ports import axis_members, check_width, config_members

__all__ = ["UnStage", "ADDR_OWN_BLOCK", "ADDR_OWN_USID", "ADDR_COUNTERS", "TABLE_BASE",
           "TABLE_STRIDE", "ENTRY_KEY_LO", "ENTRY_KEY_HI", "ENTRY_PORT", "ENTRY_VALID",
           "MAX_TABLE_DEPTH", "MAX_PORT_WIDTH"]

# Configuration map (word addresses); see the UnStage docstring.
ADDR_OWN_BLOCK = 0x000
ADDR_OWN_USID = 0x001
ADDR_COUNTERS = {name: 0x010 + i for i, name in enumerate(REASONS)}
TABLE_BASE = 0x100
TABLE_STRIDE = 4
ENTRY_KEY_LO, ENTRY_KEY_HI, ENTRY_PORT, ENTRY_VALID = range(4)
MAX_TABLE_DEPTH = 1024
MAX_PORT_WIDTH = 16

_DECISION_STAGES = 3        # header registers -> key -> match vector -> decision FIFO
_FIFO_MARGIN = 5            # data FIFO depth beyond the header beats (decision latency + read)
_TAIL_BITS = 80             # DA[79:0]: the uSIDs after the active one
_SHIFT_FIRST = DST_BYTE + 4                 # first byte of DA[95:0] (byte 42)
_SHIFT_BYTES = 12                           # DA[95:0] is rewritten by a shift


class UnStage(wiring.Component):
    """uN shift-and-forward stage of one switch ingress (docs/protocol.md section 3).

    Every frame is checked, in this order (the first failure drops the frame, which is consumed
    without output and counted by its reason; see ``models/un_stage.py``): ``short`` (fewer than
    54 bytes, Ethernet + outer IPv6), ``not_ipv6`` (EtherType not 0x86DD or IP version not 6),
    ``hop_limit`` (outer Hop Limit 0 or 1), ``no_route`` (table miss). A frame that passes leaves
    with its outer destination shifted (DA[95:0] <- {DA[79:0], 16'h0}) when DA[127:80] is the
    switch's own block and uSID, its Hop Limit decremented, every other byte unchanged (the outer
    Payload Length is not checked here), and its egress port on ``m_axis_tdest``. The lookup key
    is DA[127:80] after the shift; the exact-match table is held in registers and searched in
    parallel, the lowest matching valid entry winning (priority encoder).

    Parameters
    ----------
    data_width : 64, 128, 256 or 512
        Bits per beat (W) of both frame streams.
    table_depth : 1..1024
        Entries of the exact-match table (default 64).
    port_width : 1..16
        Bits of an egress port number (``m_axis_tdest``), default 4.
    decision_port : bool
        Add the ``dec_*`` outputs (default False: the ports are exactly the ones below without
        them).

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset.
    ``s_axis_tdata/tkeep/tlast/tvalid/tready/tuser``: frames in (AXI-Stream, tkeep contiguous from
    lane 0 on the last beat, all ones on the others).
    ``m_axis_tdata/tkeep/tlast/tvalid/tready/tuser/tdest``: forwarded frames out; ``tkeep``,
    ``tlast`` and ``tuser`` are the input's, beat for beat; ``tdest`` (the egress port) is constant
    over a frame.
    ``cfg_addr/cfg_wdata/cfg_we/cfg_rdata``: configuration port (``rtl/common/config.py``: reads
    have one cycle of latency, unmapped words read 0, counters clear when written).
    ``dec_valid/dec_reason/dec_port`` (only with ``decision_port=True``): one pulse per frame, in
    frame order, in the cycle its decision is counted: ``dec_reason`` is its index in
    ``models.un_stage.REASONS`` (0 = forwarded) and ``dec_port`` its egress port (valid when
    forwarded). A block that merges several inputs into the stage uses it to charge each drop to
    the input it came from (the switch's per-ingress counters).

    Configuration map (word addresses)
    ----------------------------------
    ========================  ====  =============================================================
    0x000                     rw    own locator block, DA[127:96] (reset ``0xfd000200``)
    0x001                     rw    own uSID, bits 15..0 (reset 0x0000: never active)
    0x010                     cnt   frames forwarded
    0x011                     cnt   frames dropped ``short``
    0x012                     cnt   frames dropped ``not_ipv6``
    0x013                     cnt   frames dropped ``hop_limit``
    0x014                     cnt   frames dropped ``no_route``
    0x100 + 4 i + 0           rw    table entry i: key[31:0] (key = block << 16 | uSID)
    0x100 + 4 i + 1           rw    table entry i: key[47:32]
    0x100 + 4 i + 2           rw    table entry i: egress port, bits port_width-1..0
    0x100 + 4 i + 3           rw    table entry i: valid, bit 0 (reset 0)
    ========================  ====  =============================================================

    Counters count a frame when its decision is made (before its output). The table is static
    (docs/protocol.md section 3): a write takes effect for frames whose header completes at least three
    cycles after it.

    Latency and throughput
    ----------------------
    The first 54 bytes take ``H = ceil(54 / (W/8))`` beats (7 at W=64, 4 at 128, 2 at 256, 1 at
    512). Beats wait in a FIFO of ``H + 5`` beats while the decision is made in three register
    stages after the beat that completes the header. With the output ready and the input not
    idling inside the header, a frame's first beat leaves ``H + 4`` cycles after it entered, and
    every later beat with the same latency: one beat per cycle, no bubbles between back-to-back
    frames. The FIFO never holds more than ``H + 3`` beats while the output is ready, so
    ``s_axis_tready`` falls only under output backpressure. Dropped frames are consumed at one
    beat per cycle.
    """

    def __init__(self, data_width=64, table_depth=64, port_width=4, decision_port=False):
        check_width("UnStage", data_width)
        if not isinstance(table_depth, int) or not 1 <= table_depth <= MAX_TABLE_DEPTH:
            raise ValueError(f"UnStage: table_depth must be 1..{MAX_TABLE_DEPTH}, "
                             f"not {table_depth!r}")
        if not isinstance(port_width, int) or not 1 <= port_width <= MAX_PORT_WIDTH:
            raise ValueError(f"UnStage: port_width must be 1..{MAX_PORT_WIDTH}, "
                             f"not {port_width!r}")
        self.data_width = data_width
        self.table_depth = table_depth
        self.port_width = port_width
        self.lanes = data_width // 8
        self.header_beats = -(-MIN_FRAME // self.lanes)
        self.fifo_depth = self.header_beats + _FIFO_MARGIN
        self.latency = self.header_beats + _DECISION_STAGES + 1
        self.decision_port = bool(decision_port)
        decision = {
            "dec_valid": Out(1), "dec_reason": Out(range(len(REASONS))),
            "dec_port": Out(port_width),
        } if self.decision_port else {}
        super().__init__({
            **config_members(),
            **axis_members("s_axis", data_width, FrameUser.WIDTH, sink=True),
            **axis_members("m_axis", data_width, FrameUser.WIDTH, sink=False,
                           dest_width=port_width),
            **decision,
        })

    def elaborate(self, platform):
        m = Module()
        lanes, beats = self.lanes, self.header_beats

        # --- configuration -----------------------------------------------------------------
        cfg = ConfigMap(m, self, "un")
        own_block = cfg.reg(ADDR_OWN_BLOCK, "own_block", 32, init=DEFAULT_BLOCK,
                            doc="own locator block, DA[127:96]")
        own_usid = cfg.reg(ADDR_OWN_USID, "own_usid", 16, doc="own uSID")
        keys, ports, valids = [], [], []
        for i in range(self.table_depth):
            base = TABLE_BASE + TABLE_STRIDE * i
            keys.append(cfg.wide_reg(base + ENTRY_KEY_LO, f"key{i}", KEY_BITS,
                                     doc=f"table entry {i}: key (block << 16 | uSID)"))
            ports.append(cfg.reg(base + ENTRY_PORT, f"port{i}", self.port_width,
                                 doc=f"table entry {i}: egress port"))
            valids.append(cfg.reg(base + ENTRY_VALID, f"valid{i}", 1,
                                  doc=f"table entry {i}: valid"))

        # --- input: the beat FIFO and the header registers -----------------------------------
        beat_layout = data.StructLayout({"data": self.data_width, "keep": lanes, "last": 1,
                                         "user": FrameUser.WIDTH})
        m.submodules.beats = beat_fifo = SyncFIFO(width=beat_layout.size, depth=self.fifo_depth)
        s_fire = Signal()
        m.d.comb += [
            beat_fifo.w_data.eq(Cat(self.s_axis.p.data, self.s_axis.p.keep, self.s_axis.p.last,
                                    self.s_axis.p.user)),
            beat_fifo.w_en.eq(self.s_axis.valid),
            self.s_axis.ready.eq(beat_fifo.w_rdy),
            s_fire.eq(self.s_axis.valid & beat_fifo.w_rdy),
        ]

        in_beat = Signal(range(beats + 1))          # beat index in the frame, saturating at H
        with m.If(s_fire):
            with m.If(self.s_axis.p.last):
                m.d.sync += in_beat.eq(0)
            with m.Elif(in_beat != beats):
                m.d.sync += in_beat.eq(in_beat + 1)

        hdr = Signal(MIN_FRAME * 8)                 # the first 54 bytes, lane order
        for k in range(beats):
            lo, hi = k * lanes, min(MIN_FRAME, (k + 1) * lanes)
            with m.If(s_fire & (in_beat == k)):
                m.d.sync += hdr[lo * 8:hi * 8].eq(self.s_axis.p.data[:(hi - lo) * 8])

        # One trigger per frame: the beat holding byte 53, or an earlier last beat.
        last_lane = MIN_FRAME - 1 - (beats - 1) * lanes
        early_end = self.s_axis.p.last & (in_beat < beats - 1)
        trigger = s_fire & ((in_beat == beats - 1) | early_end)
        t_valid = Signal()
        t_short = Signal()
        m.d.sync += [
            t_valid.eq(trigger),
            t_short.eq(early_end | (self.s_axis.p.last & ~self.s_axis.p.keep[last_lane])),
        ]

        # --- decision stage 1: checks and the lookup key --------------------------------------
        ethertype = field(ETH, hdr, "ethertype")
        version = field(IPV6, hdr, "version", base=OUTER_OFFSET)
        hop_limit = field(IPV6, hdr, "hop_limit", base=OUTER_OFFSET)
        dst = field(IPV6, hdr, "dst", base=OUTER_OFFSET)          # DA[127:0], DA[0] at bit 0
        own_active = dst[128 - KEY_BITS:] == Cat(own_usid, own_block)

        s1_valid, s1_short, s1_not_ipv6, s1_hop_bad, s1_shift = (Signal(name=f"s1_{n}") for n in (
            "valid", "short", "not_ipv6", "hop_bad", "shift"))
        s1_hop_out = Signal(8)
        s1_tail = Signal(_TAIL_BITS)
        s1_key = Signal(KEY_BITS)
        m.d.sync += [
            s1_valid.eq(t_valid),
            s1_short.eq(t_short),
            s1_not_ipv6.eq((ethertype != ETHERTYPE_IPV6) | (version != 6)),
            s1_hop_bad.eq(hop_limit <= 1),
            s1_shift.eq(own_active),
            s1_hop_out.eq(hop_limit - 1),
            s1_tail.eq(dst[:_TAIL_BITS]),
            s1_key.eq(Mux(own_active, Cat(dst[64:80], dst[96:128]), dst[80:128])),
        ]

        # --- decision stage 2: parallel exact match -------------------------------------------
        s2_valid, s2_short, s2_not_ipv6, s2_hop_bad, s2_shift = (Signal(name=f"s2_{n}") for n in (
            "valid", "short", "not_ipv6", "hop_bad", "shift"))
        s2_hop_out = Signal(8)
        s2_tail = Signal(_TAIL_BITS)
        s2_match = Signal(self.table_depth)
        m.d.sync += [
            s2_valid.eq(s1_valid),
            s2_short.eq(s1_short),
            s2_not_ipv6.eq(s1_not_ipv6),
            s2_hop_bad.eq(s1_hop_bad),
            s2_shift.eq(s1_shift),
            s2_hop_out.eq(s1_hop_out),
            s2_tail.eq(s1_tail),
            s2_match.eq(Cat(valids[i] & (keys[i] == s1_key) for i in range(self.table_depth))),
        ]

        # --- decision stage 3: priority encoder, reason, counters, decision FIFO -------------
        lowest = Signal(self.table_depth)           # one-hot: the lowest matching entry
        m.d.comb += lowest.eq(s2_match & (~s2_match + 1))
        port = Signal(self.port_width)
        port_terms = [Mux(lowest[i], ports[i], 0) for i in range(self.table_depth)]
        port_value = port_terms[0]
        for term in port_terms[1:]:
            port_value = port_value | term
        m.d.comb += port.eq(port_value)

        headed = ~s2_short & ~s2_not_ipv6
        events = {
            "forwarded": headed & ~s2_hop_bad & s2_match.any(),
            "short": s2_short,
            "not_ipv6": ~s2_short & s2_not_ipv6,
            "hop_limit": headed & s2_hop_bad,
            "no_route": headed & ~s2_hop_bad & ~s2_match.any(),
        }
        for name in REASONS:
            cfg.counter(ADDR_COUNTERS[name], name, s2_valid & events[name],
                        doc=f"frames {'forwarded' if name == 'forwarded' else 'dropped ' + name}")
        if self.decision_port:
            reason = Const(0, self.dec_reason.shape())
            for index, name in enumerate(REASONS):
                reason = Mux(events[name], index, reason)
            m.d.comb += [
                self.dec_valid.eq(s2_valid),
                self.dec_reason.eq(reason),
                self.dec_port.eq(port),
            ]

        decision_layout = data.StructLayout({"drop": 1, "shift": 1, "hop_out": 8,
                                             "tail": _TAIL_BITS, "port": self.port_width})
        # Never full when written: every decision, pending or queued, belongs to a frame with at
        # least one beat still in the beat FIFO (a frame's last beat leaves with its decision).
        m.submodules.decisions = dec_fifo = SyncFIFO(width=decision_layout.size,
                                                     depth=self.fifo_depth)
        m.d.comb += [
            dec_fifo.w_en.eq(s2_valid),
            dec_fifo.w_data.eq(Cat(~events["forwarded"], s2_shift, s2_hop_out, s2_tail, port)),
        ]

        # --- output: pair beats with their frame's decision, rewrite, register ----------------
        beat = beat_layout(beat_fifo.r_data)
        dec = decision_layout(dec_fifo.r_data)
        out_beat = Signal(range(beats + 1))
        out_free = ~self.m_axis.valid | self.m_axis.ready
        move = Signal()
        m.d.comb += [
            move.eq(beat_fifo.r_rdy & dec_fifo.r_rdy & (dec.drop | out_free)),
            beat_fifo.r_en.eq(move),
            dec_fifo.r_en.eq(move & beat.last),
        ]
        with m.If(move):
            with m.If(beat.last):
                m.d.sync += out_beat.eq(0)
            with m.Elif(out_beat != beats):
                m.d.sync += out_beat.eq(out_beat + 1)

        out_lanes = [beat.data[8 * j:8 * j + 8] for j in range(lanes)]
        new_tail = Cat(Const(0, 16), dec.tail)                    # the shifted DA[95:0]
        rewrites = [(HOP_LIMIT_BYTE, dec.hop_out, Const(1))]
        for i in range(_SHIFT_BYTES):
            msb = 96 - 8 * i
            rewrites.append((_SHIFT_FIRST + i, new_tail[msb - 8:msb], dec.shift))
        for byte, value, enable in rewrites:
            k, j = divmod(byte, lanes)
            out_lanes[j] = Mux((out_beat == k) & enable, value, out_lanes[j])

        with m.If(move & ~dec.drop):
            m.d.sync += [
                self.m_axis.valid.eq(1),
                self.m_axis.p.data.eq(Cat(*out_lanes)),
                self.m_axis.p.keep.eq(beat.keep),
                self.m_axis.p.last.eq(beat.last),
                self.m_axis.p.user.eq(beat.user),
                self.m_axis.p.dest.eq(dec.port),
            ]
        with m.Elif(self.m_axis.ready):
            m.d.sync += self.m_axis.valid.eq(0)

        cfg.finish()
        return m
