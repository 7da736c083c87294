# SPDX-License-Identifier: BSD-2-Clause
"""The switch's uN shift-and-forward stage (docs/protocol.md section 3).

Golden model: ``models/un_stage.py``; bench: ``tb/test_un_stage.py``.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Out

from models.layouts import ETH, ETHERTYPE_IPV6, IPV6, OUTER_OFFSET
from models.records import FrameUser
from models.un_stage import DST_BYTE, HOP_LIMIT_BYTE, MIN_FRAME, REASONS
from models.usid import DEFAULT_BLOCK, KEY_BITS

from .common.config import ConfigMap
from .common.headers import field
from .common.memory import BlockRam
from .common.ports import axis_members, check_width, config_members

__all__ = ["UnStage", "ADDR_OWN_BLOCK", "ADDR_OWN_USID", "ADDR_COUNTERS", "TABLE_BASE",
           "TABLE_STRIDE", "ENTRY_KEY_LO", "ENTRY_KEY_HI", "ENTRY_PORT", "ENTRY_VALID",
           "MAX_TABLE_DEPTH", "MAX_PORT_WIDTH", "scan_shape"]

# Configuration map (word addresses); see the UnStage docstring.
ADDR_OWN_BLOCK = 0x000
ADDR_OWN_USID = 0x001
ADDR_COUNTERS = {name: 0x010 + i for i, name in enumerate(REASONS)}
TABLE_BASE = 0x100
TABLE_STRIDE = 4
ENTRY_KEY_LO, ENTRY_KEY_HI, ENTRY_PORT, ENTRY_VALID = range(4)
MAX_TABLE_DEPTH = 1024
MAX_PORT_WIDTH = 16

_TAIL_BITS = 80             # DA[79:0]: the uSIDs after the active one
_SHIFT_FIRST = DST_BYTE + 4                 # first byte of DA[95:0] (byte 42)
_SHIFT_BYTES = 12                           # DA[95:0] is rewritten by a shift
_GROUP = 8                  # candidates merged per level of the priority tree
_KEY_FANOUT = 8             # comparators per copy of the lookup key
_SLICE_BITS = 8             # key bits per slice of the two-step compare
_MIN_SCAN_BEATS = 4         # the table is scanned over several cycles only from H = 4 beats up


def scan_shape(header_beats, table_depth):
    """``(rows, lanes, levels)`` of the route table's lookup: the table is held as ``rows`` rows
    of ``lanes`` entries (entry ``i`` in row ``i // lanes``, lane ``i % lanes``), one row compared
    per cycle, and the lanes' results merged by a priority tree of ``levels`` registered levels.

    A frame whose header is complete has at least H beats, so two lookups start at least H
    cycles apart and a lookup may take H cycles: with H >= 4 (W <= 128) the table is scanned in
    ``rows = min(H, table_depth)`` cycles from distributed RAM; below, in one row of registers
    (a register CAM)."""
    rows = min(header_beats, table_depth) if header_beats >= _MIN_SCAN_BEATS else 1
    lanes = -(-table_depth // rows)
    levels, n = 0, lanes
    while n > 1:
        n, levels = -(-n // _GROUP), levels + 1
    return rows, lanes, levels


class UnStage(wiring.Component):
    """uN shift-and-forward stage of one switch ingress (docs/protocol.md section 3).

    Every frame is checked, in this order (the first failure drops the frame, which is consumed
    without output and counted by its reason; see ``models/un_stage.py``): ``short`` (fewer than
    54 bytes, Ethernet + outer IPv6), ``not_ipv6`` (EtherType not 0x86DD or IP version not 6),
    ``hop_limit`` (outer Hop Limit 0 or 1), ``no_route`` (table miss). A frame that passes leaves
    with its outer destination shifted (DA[95:0] <- {DA[79:0], 16'h0}) when DA[127:80] is the
    switch's own block and uSID, its Hop Limit decremented, every other byte unchanged (the outer
    Payload Length is not checked here), and its egress port on ``m_axis_tdest``. The lookup key
    is DA[127:80] after the shift; of the valid table entries holding it, the lowest index wins.

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
    ``m_axis_tdata/tkeep/tlast/tvalid/tready/tuser/tdest``: forwarded frames out, from registers;
    ``tkeep``, ``tlast`` and ``tuser`` are the input's, beat for beat; ``tdest`` (the egress
    port) is constant over a frame.
    ``cfg_addr/cfg_wdata/cfg_we/cfg_rdata``: configuration port (``rtl/common/config.py``: reads
    have one cycle of latency, unmapped words read 0, counters clear when written).
    ``cfg_rdata`` is a 2:1 multiplexer (selected by a register) of a register and the
    table copy's block-RAM output (no output register: the one-cycle latency the switch and the
    drivers rely on).
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
    (docs/protocol.md section 3): a table write is registered once (decoded to the entry's row,
    lane and field) and takes effect for frames whose header completes at least three cycles
    after it (the own block and uSID: from the next cycle). Reset clears the valid bits (and, in
    a register CAM, the keys and ports); the block-RAM copy that the table's key and port words
    are read back from is not reset (zero after configuration), so after a reset in operation
    they read back their last written values.

    Structure and cost of the table
    -------------------------------
    The first 54 bytes take ``H = ceil(54 / (W/8))`` beats (7 at W=64, 4 at 128, 2 at 256, 1 at
    512). A frame whose header is complete has at least H beats, so lookups start at least H
    cycles apart, and the table is searched in ``R`` cycles, one row of ``L = ceil(depth / R)``
    entries per cycle (:func:`scan_shape`; entry i is lane ``i % L`` of row ``i // L``):

    * H >= 4 (W = 64, 128): ``R = min(H, table_depth)`` rows in distributed RAM, per lane one
      RAM per field (key[31:0], key[47:32], port; written at the lane's own registered row
      address, no read-modify-write), all read at one row per cycle through a registered read;
      the valid bits in registers (an R:1 multiplexer per lane). At W = 64 with 64 entries: 7
      rows of 10 lanes, 130 DPR16X4 and 10 comparators.
    * H < 4 (W = 256, 512): a register CAM, ``R = 1``: every key (48 bits), port and valid bit in
      registers (64 entries: 3,392 FF) and ``table_depth`` 48-bit comparators (about 32 LUT4
      each), all compared in one cycle.

    With more than one lane the compare takes two registered steps (8-bit slices against the
    registered lookup key, then their AND with the valid bit), one with a single lane. A
    priority tree of registered levels of 8 (``ceil(log8 L)`` levels) then gives the row's
    lowest hitting lane and its port; over the rows, the first row with a hit wins. Whether the
    own uSID is active is compared in the cycle of the beat that completes the header (its bytes
    taken from the input) and registered. A block-RAM copy of the table words (32 bits x 4 x
    depth: 2 DP16KD at 64 entries) serves the read-back. Measured (``fpga/results.md``), W = 64
    with 64 entries on the LFE5U-85F: 1,895 LUT4, 2,663 FF, 216 DPR16X4 (table 130, the beat FIFO
    38, the decision queue 48), 2 DP16KD.

    Latency and throughput
    ----------------------
    The decision is made ``D = 2 + compare steps + tree levels + R - 1`` cycles after the beat
    that completes the header (3 with one entry; 12 at W = 64, 9 at 128, 6 at 256 and 512 with 64
    entries). Beats wait in a FIFO of ``H + D + 4`` beats meanwhile (registered output: the beats
    are there long before their decision); the decision waits in a queue whose head, the frame at
    the FIFO's output, is a register loaded straight from the decision stage when the queue is
    empty. With the output ready and the input not idling inside the header, a frame's first beat
    leaves ``H + D + 1`` cycles after it entered (:attr:`latency`: 20 at W = 64, 14 at 128, 9 at
    256, 8 at 512, with 64 entries; H + 4 with one), and every later beat with the same latency:
    one beat per cycle, no bubbles between back-to-back frames. ``s_axis_tready`` is a register,
    high while the FIFO held at most ``H + D + 1`` beats in the cycle before; it holds no more
    than ``H + D`` while the output is ready, so ``s_axis_tready`` falls only under output
    backpressure. Dropped frames are consumed at one beat per cycle.
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
        self.scan_rows, self.scan_lanes, self.tree_levels = scan_shape(self.header_beats,
                                                                       table_depth)
        self.compare_stages = 2 if self.scan_lanes > 1 else 1
        # header registers -> key -> compare (row 0) -> tree levels -> last row -> decision
        self.decision_stages = (2 + self.compare_stages + self.tree_levels
                                + self.scan_rows - 1)
        self.fifo_depth = self.header_beats + self.decision_stages + 4
        self.latency = self.header_beats + self.decision_stages + 1
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
        depth, pw = self.table_depth, self.port_width
        rows, nl = self.scan_rows, self.scan_lanes

        # --- configuration: own block and uSID, counters (registers) -------------------------
        cfg = ConfigMap(m, self, "un")
        own_block = cfg.reg(ADDR_OWN_BLOCK, "own_block", 32, init=DEFAULT_BLOCK,
                            doc="own locator block, DA[127:96]")
        own_usid = cfg.reg(ADDR_OWN_USID, "own_usid", 16, doc="own uSID")

        # --- configuration: the route table ---------------------------------------------------
        # Table words are decoded here, not by ConfigMap.reg: the write is registered once
        # (decoded to row, lane and field), and reads come from a block-RAM copy of the words
        # (the valid bits from their registers).
        addr, wdata = self.cfg_addr, self.cfg_wdata
        index_bits = (depth - 1).bit_length()
        in_table = (addr >= TABLE_BASE) & (addr < TABLE_BASE + TABLE_STRIDE * depth)
        index = Signal(max(index_bits, 1))
        m.d.comb += index.eq((addr[2:] - TABLE_BASE // TABLE_STRIDE)[:max(index_bits, 1)])
        fld = addr[:2]
        copy_addr = Cat(fld, index[:index_bits])

        masks = {ENTRY_KEY_LO: 0xFFFFFFFF, ENTRY_KEY_HI: (1 << (KEY_BITS - 32)) - 1,
                 ENTRY_PORT: (1 << pw) - 1, ENTRY_VALID: 1}
        mask = Const(0, 32)
        for f, value in masks.items():
            mask = Mux(fld == f, value, mask)
        m.submodules.copy = copy = BlockRam(32, TABLE_STRIDE * depth, output_register=False)
        m.d.comb += [
            copy.w_addr.eq(copy_addr), copy.w_data.eq(wdata & mask),
            copy.w_en.eq(self.cfg_we & in_table),
            copy.r_addr.eq(copy_addr),
        ]

        # The registered write: the entry's row (one-hot), lane (one-hot), field (one-hot), data.
        tw_row = Signal(rows, name="tw_row")
        # each lane's write row: its own register, loaded only by writes to that lane (so the
        # address of a lane's RAM fans out to that lane's RAM alone)
        tw_lane_row = [Signal(range(rows), name=f"tw_row_of_lane{b}") for b in range(nl)]
        tw_lane = Signal(nl, name="tw_lane")
        tw_field = Signal(4, name="tw_field")
        tw_data = Signal(32, name="tw_data")
        tw_index = Signal(max(index_bits, 1), name="tw_index")
        tw_valid_we = Signal(name="tw_valid_we")    # a valid bit is written in this cycle
        m.d.sync += [tw_lane.eq(0), tw_data.eq(wdata), tw_index.eq(index),
                     tw_valid_we.eq(self.cfg_we & in_table & (fld == ENTRY_VALID))]
        with m.If(self.cfg_we & in_table):
            m.d.sync += tw_field.eq(1 << fld)
            if rows == 1:
                m.d.sync += [tw_row.eq(1), tw_lane.eq(1 << index[:index_bits])]
            else:
                with m.Switch(index):
                    for i in range(depth):
                        with m.Case(i):
                            m.d.sync += [tw_row.eq(1 << (i // nl)),
                                         tw_lane_row[i % nl].eq(i // nl),
                                         tw_lane.eq(1 << (i % nl))]

        keys, ports = [], []
        valids = [Signal(name=f"un_valid{i}") for i in range(depth)]
        for i in range(depth):
            r, ln = divmod(i, nl)
            with m.If(tw_row[r] & tw_lane[ln] & tw_field[ENTRY_VALID]):
                m.d.sync += valids[i].eq(tw_data[0])
        if rows == 1:
            # A register CAM: every entry's key and port in registers, all compared at once.
            for i in range(depth):
                key = Signal(KEY_BITS, name=f"un_key{i}")
                port = Signal(pw, name=f"un_port{i}")
                with m.If(tw_lane[i] & tw_field[ENTRY_KEY_LO]):
                    m.d.sync += key[:32].eq(tw_data)
                with m.If(tw_lane[i] & tw_field[ENTRY_KEY_HI]):
                    m.d.sync += key[32:].eq(tw_data[:KEY_BITS - 32])
                with m.If(tw_lane[i] & tw_field[ENTRY_PORT]):
                    m.d.sync += port.eq(tw_data[:pw])
                keys.append(key)
                ports.append(port)
        else:
            # Distributed RAM: per lane, the keys and ports of its `rows` entries (one RAM per
            # field), all lanes read at one row per cycle.
            read_ports = []
            for b in range(nl):
                lane_ports = []
                for name, width, f in (("key_lo", 32, ENTRY_KEY_LO),
                                       ("key_hi", KEY_BITS - 32, ENTRY_KEY_HI),
                                       ("port", pw, ENTRY_PORT)):
                    mem = Memory(shape=width, depth=rows, init=[])
                    m.submodules[f"{name}{b}"] = mem
                    wp = mem.write_port()
                    rp = mem.read_port(transparent_for=())
                    m.d.comb += [wp.addr.eq(tw_lane_row[b]), wp.data.eq(tw_data[:width]),
                                 wp.en.eq(tw_lane[b] & tw_field[f])]
                    lane_ports.append(rp)
                read_ports.append(lane_ports)
            # The entries' words for the register map (width, reset value): not read here.
            keys = [Signal(KEY_BITS, name=f"un_key{i}") for i in range(depth)]
            ports = [Signal(pw, name=f"un_port{i}") for i in range(depth)]

        for i in range(depth):
            base = TABLE_BASE + TABLE_STRIDE * i
            doc = f"table entry {i}: key (block << 16 | uSID)"
            cfg.external(base + ENTRY_KEY_LO, f"key{i}[31:0]", "rw", keys[i][:32], doc)
            cfg.external(base + ENTRY_KEY_HI, f"key{i}[47:32]", "rw", keys[i][32:], doc)
            cfg.external(base + ENTRY_PORT, f"port{i}", "rw", ports[i],
                         f"table entry {i}: egress port")
            cfg.external(base + ENTRY_VALID, f"valid{i}", "rw", valids[i],
                         f"table entry {i}: valid")

        # --- input: the beat FIFO and the header registers -----------------------------------
        beat_layout = data.StructLayout({"data": self.data_width, "keep": lanes, "last": 1,
                                         "user": FrameUser.WIDTH})
        # Registered read (the beats wait for their decision anyway: no latency lost).
        m.submodules.beats = beat_fifo = SyncFIFOBuffered(width=beat_layout.size,
                                                          depth=self.fifo_depth)
        # s_axis_tready is a register: high while the FIFO held at most depth - 3 beats in the
        # cycle before (so it has room for this cycle's beat).
        s_fire = Signal()
        ready = Signal(name="s_ready", init=1)
        m.d.sync += ready.eq(beat_fifo.level < self.fifo_depth - 2)
        m.d.comb += [
            beat_fifo.w_data.eq(Cat(self.s_axis.p.data, self.s_axis.p.keep, self.s_axis.p.last,
                                    self.s_axis.p.user)),
            beat_fifo.w_en.eq(self.s_axis.valid & ready),
            self.s_axis.ready.eq(ready),
            s_fire.eq(self.s_axis.valid & ready),
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

        # --- decision stage 1: checks and the lookup key (cycle C0: header complete) ----------
        ethertype = field(ETH, hdr, "ethertype")
        version = field(IPV6, hdr, "version", base=OUTER_OFFSET)
        hop_limit = field(IPV6, hdr, "hop_limit", base=OUTER_OFFSET)
        dst = field(IPV6, hdr, "dst", base=OUTER_OFFSET)          # DA[127:0], DA[0] at bit 0
        # Whether the own uSID is active is compared in the trigger cycle, on the header as it
        # stands then (the bytes of the trigger beat taken from the input), and registered.
        view = Cat(*[hdr[8 * j:8 * j + 8] if j // lanes < beats - 1 else
                     self.s_axis.p.data[8 * (j - (beats - 1) * lanes):][:8]
                     for j in range(MIN_FRAME)])
        view_dst = field(IPV6, view, "dst", base=OUTER_OFFSET)
        own_active = Signal(name="own_active")
        m.d.sync += own_active.eq(view_dst[128 - KEY_BITS:] == Cat(own_usid, own_block))
        key = Mux(own_active, Cat(dst[64:80], dst[96:128]), dst[80:128])

        s1_valid, s1_short, s1_not_ipv6, s1_hop_bad, s1_shift = (Signal(name=f"s1_{n}") for n in (
            "valid", "short", "not_ipv6", "hop_bad", "shift"))
        s1_hop_out = Signal(8)
        s1_tail = Signal(_TAIL_BITS)
        m.d.sync += [
            s1_valid.eq(t_valid),
            s1_short.eq(t_short),
            s1_not_ipv6.eq((ethertype != ETHERTYPE_IPV6) | (version != 6)),
            s1_hop_bad.eq(hop_limit <= 1),
            s1_shift.eq(own_active),
            s1_hop_out.eq(hop_limit - 1),
            s1_tail.eq(dst[:_TAIL_BITS]),
        ]

        # A lookup starts with every frame whose header is complete (C0) and reads row r at
        # C0 + r; lookups start at least H >= rows cycles apart, so they never overlap.
        start = t_valid & ~t_short
        n_copies = -(-nl // _KEY_FANOUT)
        lk_keys = [Signal(KEY_BITS, name=f"lk_key{c}") for c in range(n_copies)]
        with m.If(start):
            m.d.sync += [k.eq(key) for k in lk_keys]

        # --- the row read (C0 + r) and the compare (C1 + r) -----------------------------------
        row_first = Signal(name="row_first")        # row 0 is compared in this cycle
        m.d.sync += row_first.eq(start)
        if rows == 1:
            row_keys, row_ports, row_valids = keys, ports, valids
        else:
            # The row read: a counter, 0 when idle, so the read address comes from a register.
            rd_row = Signal(range(rows), name="rd_row")
            with m.If(start | (rd_row != 0)):
                m.d.sync += rd_row.eq(Mux(rd_row == rows - 1, 0, rd_row + 1))
            for lane_ports in read_ports:
                for rp in lane_ports:
                    m.d.comb += rp.addr.eq(rd_row)
            row_keys = [Cat(lo.data, hi.data) for lo, hi, _ in read_ports]
            row_ports = [port.data for _, _, port in read_ports]
            row_valids = []
            for b in range(nl):
                v = Signal(name=f"row_valid{b}")
                lane_valids = Cat(valids[r * nl + b] if r * nl + b < depth else Const(0, 1)
                                  for r in range(rows))
                m.d.sync += v.eq(lane_valids.bit_select(rd_row, 1))
                row_valids.append(v)

        # With more than one lane, the compare takes two registered steps: 8-bit slices of the
        # key (two LUT levels), then their AND with the valid bit.
        first = row_first
        if self.compare_stages == 2:
            slices = []
            for b in range(nl):
                eqs = Signal(KEY_BITS // _SLICE_BITS, name=f"slice_eq{b}")
                lk = lk_keys[b // _KEY_FANOUT]
                m.d.sync += eqs.eq(Cat(
                    row_keys[b][k:k + _SLICE_BITS] == lk[k:k + _SLICE_BITS]
                    for k in range(0, KEY_BITS, _SLICE_BITS)))
                v = Signal(name=f"slice_valid{b}")
                p = Signal(pw, name=f"slice_port{b}")
                m.d.sync += [v.eq(row_valids[b]), p.eq(row_ports[b])]
                slices.append((eqs, v, p))
            nxt = Signal(name="first_c")
            m.d.sync += nxt.eq(first)
            first = nxt
            matches = [(v & eqs.all(), p) for eqs, v, p in slices]
        else:
            matches = [(row_valids[b] & (row_keys[b] == lk_keys[b // _KEY_FANOUT]), row_ports[b])
                       for b in range(nl)]
        cands = []
        for b, (match, row_port) in enumerate(matches):
            hit = Signal(name=f"hit{b}")
            port = Signal(pw, name=f"hit_port{b}")
            m.d.sync += [hit.eq(match), port.eq(row_port)]
            cands.append((hit, port))
        nxt = Signal(name="first_l0")
        m.d.sync += nxt.eq(first)
        first = nxt

        # --- the priority tree: the lowest lane with a hit, in registered levels --------------
        for level in range(self.tree_levels):
            merged = []
            for g in range(0, len(cands), _GROUP):
                group = cands[g:g + _GROUP]
                hit = Signal(name=f"t{level + 1}_hit{g // _GROUP}")
                port = Signal(pw, name=f"t{level + 1}_port{g // _GROUP}")
                value = Const(0, pw)
                for h, p in reversed(group):
                    value = Mux(h, p, value)
                m.d.sync += [hit.eq(Cat(h for h, _ in group).any()), port.eq(value)]
                merged.append((hit, port))
            cands = merged
            nxt = Signal(name=f"first_l{level + 1}")
            m.d.sync += nxt.eq(first)
            first = nxt
        (row_hit, row_port), = cands

        # --- across rows: the first row with a hit ----------------------------------------------
        if rows == 1:
            d_hit, d_port = row_hit, row_port
        else:
            acc_hit = Signal(name="acc_hit")
            acc_port = Signal(pw, name="acc_port")
            d_hit = Signal(name="d_hit")
            d_port = Signal(pw, name="d_port")
            keep_acc = ~first & acc_hit
            m.d.comb += [d_hit.eq(keep_acc | row_hit), d_port.eq(Mux(keep_acc, acc_port, row_port))]
            m.d.sync += [acc_hit.eq(d_hit), acc_port.eq(d_port)]

        # --- the checks wait beside the lookup ------------------------------------------------
        checks = [s1_valid, s1_short, s1_not_ipv6, s1_hop_bad, s1_shift, s1_hop_out, s1_tail]
        for k in range(self.compare_stages - 1 + self.tree_levels + rows):
            nxt = [Signal.like(s, name=f"d{k + 1}_{s.name[3:]}") for s in checks]
            m.d.sync += [n.eq(s) for n, s in zip(nxt, checks)]
            checks = nxt
        d_valid, d_short, d_not_ipv6, d_hop_bad, d_shift, d_hop_out, d_tail = checks

        # --- decision: reason, counters, decision FIFO ----------------------------------------
        headed = ~d_short & ~d_not_ipv6
        events = {
            "forwarded": headed & ~d_hop_bad & d_hit,
            "short": d_short,
            "not_ipv6": ~d_short & d_not_ipv6,
            "hop_limit": headed & d_hop_bad,
            "no_route": headed & ~d_hop_bad & ~d_hit,
        }
        for name in REASONS:
            cfg.counter(ADDR_COUNTERS[name], name, d_valid & events[name],
                        doc=f"frames {'forwarded' if name == 'forwarded' else 'dropped ' + name}")
        if self.decision_port:
            reason = Const(0, self.dec_reason.shape())
            for index_, name in enumerate(REASONS):
                reason = Mux(events[name], index_, reason)
            m.d.comb += [
                self.dec_valid.eq(d_valid),
                self.dec_reason.eq(reason),
                self.dec_port.eq(d_port),
            ]

        decision_layout = data.StructLayout({"drop": 1, "shift": 1, "hop_out": 8,
                                             "tail": _TAIL_BITS, "port": pw})
        # The head decision (the frame at the beat FIFO's output) is a register, loaded from the
        # decision queue or, when that is empty, straight from the decision stage. The queue (a
        # RAM, its pointers and a registered non-empty flag; no full check) is never full when
        # written: every decision, pending or queued, belongs to a frame with at least one beat
        # still in the beat FIFO (a frame's last beat leaves with its decision).
        n_dec = self.fifo_depth
        queue = Memory(shape=decision_layout.size, depth=n_dec, init=[])
        m.submodules.decisions = queue
        q_w = queue.write_port()
        q_r = queue.read_port(domain="comb")
        q_wptr = Signal(range(n_dec), name="dq_wptr")
        q_rptr = Signal(range(n_dec), name="dq_rptr")
        q_count = Signal(range(n_dec + 1), name="dq_count")
        q_any = Signal(name="dq_any")                 # q_count != 0, as a register
        new_dec = Cat(~events["forwarded"], d_shift, d_hop_out, d_tail, d_port)
        beat = beat_layout(beat_fifo.r_data)
        dec = Signal(decision_layout, name="head")
        head_valid = Signal(name="head_valid")
        out_beat = Signal(range(beats + 1))
        out_free = ~self.m_axis.valid | self.m_axis.ready
        move = Signal()
        head_free = Signal()
        push = Signal()
        pop = Signal()
        m.d.comb += [
            move.eq(beat_fifo.r_rdy & head_valid & (dec.drop | out_free)),
            beat_fifo.r_en.eq(move),
            head_free.eq(~head_valid | (move & beat.last)),
            pop.eq(head_free & q_any),
            push.eq(d_valid & (q_any | ~head_free)),
            q_w.addr.eq(q_wptr), q_w.data.eq(new_dec), q_w.en.eq(push),
            q_r.addr.eq(q_rptr),
        ]
        with m.If(push):
            m.d.sync += q_wptr.eq(Mux(q_wptr == n_dec - 1, 0, q_wptr + 1))
        with m.If(pop):
            m.d.sync += q_rptr.eq(Mux(q_rptr == n_dec - 1, 0, q_rptr + 1))
        q_next = q_count + push - pop
        m.d.sync += [q_count.eq(q_next), q_any.eq(q_next != 0)]
        with m.If(head_free):      # the load enable depends on head_free alone (its fanout)
            m.d.sync += [dec.eq(Mux(q_any, q_r.data, new_dec)),
                         head_valid.eq(q_any | d_valid)]

        # --- output: pair beats with their frame's decision, rewrite, register ----------------
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

        # The payload registers load whenever the output is free (their enable is out_free
        # alone, one LUT: they have a large fanout); valid says whether a beat was loaded.
        with m.If(out_free):
            m.d.sync += [
                self.m_axis.valid.eq(move & ~dec.drop),
                self.m_axis.p.data.eq(Cat(*out_lanes)),
                self.m_axis.p.keep.eq(beat.keep),
                self.m_axis.p.last.eq(beat.last),
                self.m_axis.p.user.eq(beat.user),
                self.m_axis.p.dest.eq(dec.port),
            ]

        # --- configuration read-back (one cycle) ---------------------------------------------
        # Registers and counters through a registered multiplexer of their few words, the
        # valid bits through a registered one of the table's; the other table words from the
        # block-RAM copy, selected by a registered flag.
        small = Const(0, 32)
        for a, value in sorted(cfg.reads.items()):
            if a < TABLE_BASE:
                small = Mux(addr == a, value, small)
        valid_word = Const(0, 1)
        for i in range(depth):
            valid_word = Mux(index == i, valids[i], valid_word)
        # a valid bit being written in this cycle (one after its configuration write) reads as
        # written
        valid_word = Mux(tw_valid_we & (tw_index == index), tw_data[0], valid_word)
        small_q = Signal(32, name="rd_small")
        copy_q = Signal(name="rd_copy")
        m.d.sync += [
            small_q.eq(Mux(in_table & (fld == ENTRY_VALID), valid_word, small)),
            copy_q.eq(in_table & (fld != ENTRY_VALID)),
        ]
        m.d.comb += self.cfg_rdata.eq(Mux(copy_q, copy.r_data, small_q))
        return m
