# SPDX-License-Identifier: BSD-2-Clause
"""Direct placement (NIC receive side): payload packets written to host memory through an AXI4
write master; golden model ``models/placement.py``."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, exact_log2

from models.placement import COUNTERS, INFO, burst_boundary
from rtl.common import records
from rtl.common.axi import axi4_write
from rtl.common.config import ConfigMap
from rtl.common.logic import wire
from rtl.common.ports import axis_members, check_width, config_members, record_members

__all__ = ["Placement", "axi_write_members", "AXI_ID_WIDTH", "AWCACHE", "AWPROT", "ADDR_WIDTH"]

ADDR_WIDTH = 5          # configuration port
AXI_ID_WIDTH = 1        # every burst uses ID 0 (in-order writes)
AWCACHE = 0b0011        # normal non-cacheable bufferable memory (host DMA)
AWPROT = 0b010          # unprivileged, non-secure, data
_BURST_INCR = 1
_MAX_LENGTH = (1 << 16) - 1     # PLACE_COMMAND.length is 16 bits


def axi_write_members(prefix, data_width, addr_width, id_width=AXI_ID_WIDTH):
    """``{prefix: Out(axi4_write(...))}``: an AXI4 write master (AW, W and B channels); at the
    Verilog top its signals are ``<prefix>_awaddr`` etc., as cocotbext-axi's
    ``AxiWriteBus.from_prefix`` expects."""
    return {prefix: Out(axi4_write(data_width, addr_width, id_width))}


def _rotate_lanes(m, value, amount, lane_bits, name):
    """``value`` rotated left by ``amount`` lanes of ``lane_bits`` bits (lane i -> lane i +
    amount), as log2 stages of 2:1 muxes."""
    current = value
    for b in range(len(amount)):
        current = wire(m, Mux(amount[b], current.rotate_left(lane_bits << b), current),
                       len(value), f"{name}_{b}")
    return current


def _prefix_and(m, bits, name):
    """Bit i = bits[0] & ... & bits[i] (log-depth)."""
    current = bits
    step = 1
    while step < len(bits):
        current = wire(m, Cat(*(current[i] & current[i - step] if i >= step else current[i]
                                for i in range(len(bits)))), len(bits), f"{name}_{step}")
        step *= 2
    return current


def _thermometer_from(m, index, n, name):
    """The ``n``-bit mask of lanes ``i >= index``."""
    return wire(m, Cat(*(index <= i for i in range(n))), n, name)


class Placement(wiring.Component):
    """Writes each placed payload packet to ``[va, va + length)`` of host memory through an AXI4
    write master, at one W beat per cycle; packets not placed are consumed and discarded.
    Exactly :class:`models.placement.PlacementModel` (bursts, beats, strobes, counters; bad input
    included).

    Parameters
    ----------
    data_width : int
        W, the width of the payload stream and of the AXI data bus: 64, 128, 256 or 512 (the NIC
        core width).
    addr_width : int
        The AXI address width, 12..64 (default 64); ``va`` is taken modulo 2^addr_width.
    queue_depth : int
        Packets whose bursts may be issued ahead of their data (2..64, default 4).

    Ports
    -----
    s_cmd_tdata/tvalid/tready
        :data:`models.records.PLACE_COMMAND` records, one per frame in frame order: ``va``,
        ``length`` (payload bytes without pad), ``place`` (1: write, 0: discard). ``length`` 0
        owns no payload beats; any other owns the next payload packet up to its ``tlast`` beat.
    s_axis_tdata/tkeep/tlast/tvalid/tready
        Payload bytes only, byte 0 in lane 0; ``tkeep`` ignored but on the last beat, where the
        packet ends at the first lane whose keep is 0.
    m_axi_aw*/w*/b*
        AXI4 write master (cocotbext-axi names): INCR bursts of full-width beats (``awsize`` =
        log2(W/8)) from the beat-aligned address below ``va``, split where a burst would cross
        ``min(4096, 256 W/8)`` bytes (so never 4 KB, never more than 256 beats); ``wstrb`` set
        exactly on the bytes of ``[va, va + length)`` that the packet holds. ``awid`` 0,
        ``awcache`` 0b0011, ``awprot`` 0b010, ``bready`` always 1.
    cfg_addr (5 bits), cfg_wdata, cfg_we, cfg_rdata
        Configuration port (:mod:`rtl.common.config`, read latency 1). Map:

        ====  ==============  ===================================================================
        0x00  commands        commands accepted
        0x01  placed          packets written (place = 1, length > 0)
        0x02  discarded       packets discarded (place = 0, length > 0)
        0x03  empty           commands with length 0
        0x04  placed_bytes    sum of the lengths of the packets written
        0x05  bursts          AW handshakes
        0x06  beats           W handshakes
        0x07  resp_okay       B responses OKAY or EXOKAY
        0x08  resp_error      B responses SLVERR or DECERR
        0x09  short_payload   placed packets with fewer bytes than ``length``
        0x0a  long_payload    placed packets with more bytes than ``length``
        0x10  data_width      W (read-only)
        0x11  outstanding     bursts issued and not yet answered on B (read-only)
        0x12  status          bit 0: busy (a command, a packet, a burst or a response pending)
        ====  ==============  ===================================================================

        Counters are 32 bits, wrap, and clear when written; a count shows one cycle after its
        event (registered events).
    clk, rst
        The ``sync`` domain (synchronous active-high reset).

    Bad input (defined answers): a short packet strobes only the bytes it holds (the bursts keep
    the command's lengths, later beats carry no strobe); a long packet never strobes a byte past
    ``length`` and its excess beats are discarded up to ``tlast``. No write ever leaves
    ``[va, va + length)`` and the next packet is never disturbed.

    Structure and timing: the command stage takes a command (at most one per cycle), computes the
    packet's beats and lanes, queues them for the data stage (``queue_depth`` entries) and, for
    a placed packet, issues its bursts on AW, one per cycle, from registers. Whether a burst is
    the packet's last is a register of its own (as are "beats left" and "an output beat left"
    of the data stage), loaded a cycle ahead from one short adder; a burst that is not the last
    ends at the block boundary, so the next address is the next block (an incrementer, no
    burst length in it).
    The data stage rotates each payload beat left by ``va % (W/8)`` lanes (log2(W/8) mux
    stages) and takes the lanes below that offset from the previous beat's rotation, so each
    output beat needs at most one new input beat: one W beat per cycle, and the next packet's
    first beat follows the last one without a gap (a packet costs ``ceil((va % (W/8) + length) /
    (W/8))`` beats; one more than its input beats when its bytes spill into a further beat). AW
    and W are registered outputs (the W payload register loads whenever it is free; only
    ``wvalid`` waits for a beat). ``s_cmd_tready`` depends on ``awready`` and ``s_axis_tready``
    on ``wready`` within the cycle (the block takes the next command in the cycle its previous
    packet's last burst is issued, and the payload beat in the cycle its W beat goes; the
    formal proof, ``verif/formal_placement.py``, states its invariants on this structure).
    The data stage's control terms (the products of its state registers that its advance and
    its load of the next queue entry read, the queue's "not empty") are registers of their own
    too, loaded from their next values, so that the load, which enables the whole stage, is two
    LUTs from flip-flops.
    Counter events are registered (:meth:`rtl.common.config.ConfigMap.counter`: a count shows
    one cycle after its event) and the read multiplexer is decoded. Latency: after a command's
    handshake at edge t (block idle), ``awvalid`` of its first burst rises at edge t + 1 and,
    with the payload waiting and the memory ready, its first W beat is valid from edge t + 2 and
    taken at edge t + 3 (the queue read takes one cycle, the data stage one more).
    """

    def __init__(self, data_width=64, addr_width=64, queue_depth=4):
        check_width("Placement", data_width)
        if isinstance(addr_width, bool) or not isinstance(addr_width, int) or \
                not 12 <= addr_width <= 64:
            raise ValueError(f"Placement: addr_width must be 12..64, not {addr_width!r}")
        if isinstance(queue_depth, bool) or not isinstance(queue_depth, int) or \
                not 2 <= queue_depth <= 64:
            raise ValueError(f"Placement: queue_depth must be 2..64, not {queue_depth!r}")
        self.data_width = data_width
        self.addr_width = addr_width
        self.queue_depth = queue_depth
        self.lanes = data_width // 8
        super().__init__({
            **config_members(ADDR_WIDTH),
            **record_members("s_cmd", records.PLACE_COMMAND, sink=True),
            **axis_members("s_axis", data_width, 0, sink=True),
            **axi_write_members("m_axi", data_width, addr_width),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.lanes
        lb = exact_log2(n)
        boundary_beats = burst_boundary(self.data_width) // n
        bb = exact_log2(boundary_beats)
        beat_bits = bits_for((n - 1 + _MAX_LENGTH + n - 1) // n)
        aw = self.addr_width
        cfg = ConfigMap(m, self)

        # ------------------------------------------------------------ command stage and AW
        cmd = self.s_cmd.p
        align = wire(m, cmd.va[:lb], lb, "c_align")
        in_beats = wire(m, (cmd.length + (n - 1)) >> lb, beat_bits, "c_in_beats")
        out_beats = wire(m, (align + cmd.length + (n - 1)) >> lb, beat_bits, "c_out_beats")
        last_out_lane = wire(m, (align + cmd.length - 1)[:lb], lb, "c_last_out_lane")
        last_in_lane = wire(m, (cmd.length - 1)[:lb], lb, "c_last_in_lane")
        boff = wire(m, cmd.va[lb:lb + bb], bb, "c_boff")
        has_payload = _kept(m, cmd.length != 0, "c_has_payload")

        # With the beat counts, their comparisons that the data stage loads as registers of
        # their own (out_beats != 0, out_beats == 1, in_beats == 1), so that none is made at
        # the queue's output.
        entry = Cat(cmd.place, align, last_out_lane, last_in_lane, in_beats, out_beats, boff,
                    out_beats != 0, out_beats == 1, in_beats == 1)
        queue = m.submodules.queue = SyncFIFO(width=len(entry), depth=self.queue_depth)

        g_addr = Signal(aw)          # next burst's address
        g_left = Signal(beat_bits)   # beats of the packet still to issue on AW
        aw_free = ~self.m_axi.awvalid | self.m_axi.awready
        g_room = wire(m, boundary_beats - g_addr[lb:lb + bb], bb + 1, "g_room")
        # g_busy = (g_left != 0) and g_last = (g_left <= g_room) are registers of their own,
        # loaded with g_left and g_addr, so that free, s_cmd_tready and the AW and g_addr
        # updates start from flip-flops (the proof, verif/formal_placement.py, states both).
        g_busy = Signal(name="g_busy")
        g_last = Signal(name="g_last")
        issue = wire(m, g_busy & aw_free, 1, "g_issue")
        g_off = g_addr[lb:lb + bb]

        def fits(beats, off, limit_log2, name):
            # beats + off <= 2**limit_log2, from one short adder (not a subtraction followed
            # by a comparison).
            k = limit_log2
            total = wire(m, beats[:k + 1] + off, k + 2, f"{name}_sum")
            return wire(m, (beats[k + 1:] == 0) & ~total[k + 1] &
                        (~total[k] | (total[:k] == 0)), 1, name)

        # The rest after a burst that ends at the boundary: g_left - g_room =
        # g_left + g_off - boundary_beats (one adder: g_off below bit bb, ones above).
        g_rest = wire(m, g_left + Cat(g_off, Const(-1, beat_bits - bb)), beat_bits, "g_rest")
        # free: the generator can take a command now (idle, or issuing the packet's last
        # burst). The updates below are written as explicit multiplexers on free, so that no
        # register waits for the command handshake on top of g_last.
        free = _kept(m, ~g_busy | (aw_free & g_last), "g_free")
        new_placed = wire(m, self.s_cmd.valid & queue.w_rdy & has_payload & cmd.place, 1,
                          "c_new_placed")
        take_cmd = wire(m, self.s_cmd.valid & self.s_cmd.ready, 1, "c_take")
        # The queue written (take_cmd & has_payload), flat: the command's terms in one LUT,
        # then one with free.
        cmd_ok = _kept(m, self.s_cmd.valid & has_payload & queue.w_rdy, "c_write_ok")
        q_write = _kept(m, cmd_ok & free, "q_write")
        m.d.comb += [
            self.s_cmd.ready.eq(queue.w_rdy & free),
            queue.w_data.eq(entry),
            queue.w_en.eq(q_write),
        ]
        with m.If(issue):
            m.d.sync += [
                self.m_axi.awvalid.eq(1), self.m_axi.awaddr.eq(g_addr),
                self.m_axi.awlen.eq(Mux(g_last, g_left - 1, g_room - 1)),
            ]
        with m.Elif(self.m_axi.awready):
            m.d.sync += self.m_axi.awvalid.eq(0)
        # g_left: a new placed command's beats when free (0 when none is taken), else the rest
        # after a burst that ends at the block boundary, else held.
        m.d.sync += g_left.eq(Mux(free, Mux(new_placed, out_beats, 0),
                                  Mux(aw_free, g_rest, g_left)))
        # Not free: busy, and after an issued burst that was not the last the rest is above 0.
        m.d.sync += g_busy.eq(~free | new_placed)
        # A new packet starts at its va's block offset; the rest after a burst that ends at the
        # boundary starts at the next block, and it fits that block when g_rest =
        # g_left + g_off - boundary_beats <= boundary_beats, i.e. g_left + g_off <= 2 blocks
        # (from the registers, not through g_rest's adder).
        # g_bursts counts the packet's bursts still to issue (ceil((g_left + g_off) / block)),
        # so that the next burst's g_last is g_bursts == 2, a compare of a register.
        g_bursts = Signal(beat_bits - bb + 1, name="g_bursts")
        bursts_new = wire(m, (out_beats + boff + (boundary_beats - 1)) >> bb, len(g_bursts),
                          "g_bursts_new")
        last_new = fits(out_beats, boff, bb, "g_last_new")
        m.d.sync += [
            g_last.eq(Mux(free, last_new, Mux(aw_free, g_bursts == 2, g_last))),
            g_bursts.eq(Mux(free, bursts_new, Mux(aw_free, g_bursts - 1, g_bursts))),
        ]
        # g_addr: the new command's beat-aligned va when idle or at the last burst (it matters
        # only when one is taken: g_left is 0 otherwise); after a burst that is not the
        # packet's last the next block (that burst ended at the block boundary), so no burst
        # length enters the update.
        with m.If(~g_busy | aw_free):
            m.d.sync += g_addr.eq(Mux(~g_busy | g_last, Cat(Const(0, lb), cmd.va[lb:aw]),
                                      Cat(Const(0, lb + bb), g_addr[lb + bb:aw] + 1)))
        m.d.comb += [
            self.m_axi.awid.eq(0), self.m_axi.awsize.eq(lb), self.m_axi.awburst.eq(_BURST_INCR),
            self.m_axi.awlock.eq(0), self.m_axi.awcache.eq(AWCACHE), self.m_axi.awprot.eq(AWPROT),
        ]

        # ------------------------------------------------------------ payload input
        tlast = self.s_axis.p.last
        p_valid = self.s_axis.valid
        p_data = self.s_axis.p.data
        keep_eff = wire(m, Mux(tlast, _prefix_and(m, self.s_axis.p.keep, "keep_prefix"),
                               (1 << n) - 1), n, "keep_eff")

        # ------------------------------------------------------------ data stage and W
        active = Signal()
        out_left = Signal(beat_bits)
        in_left = Signal(beat_bits)
        drain = Signal()             # discarding beats up to tlast
        d_align = Signal(lb)
        ge_mask = Signal(n)          # lanes taken from the current beat
        end_mask = Signal(n)         # lanes of the packet's last output beat
        d_last_in_lane = Signal(lb)
        d_boff = Signal(bb)
        rot_prev = Signal(self.data_width)
        rot_prev_keep = Signal(n)

        (q_place, q_align, q_last_out, q_last_in, q_in_beats, q_out_beats, q_boff,
         q_out_nz, q_out_one, q_in_one) = (
            queue.r_data[s] for s in _slices((1, lb, lb, lb, beat_bits, beat_bits, bb, 1, 1, 1)))

        rot_cur = _rotate_lanes(m, p_data, d_align, 8, "rot_data")
        rot_keep = _rotate_lanes(m, keep_eff, d_align, 1, "rot_keep")

        w_free = ~self.m_axi.wvalid | self.m_axi.wready
        # The stage's control reads copies of wvalid, one per term (each copy's next value
        # reads the copy itself, so that synthesis keeps them apart), so that no w_free of
        # theirs is a LUT of its own, nor the W register's enable.
        wvalid_c = [Signal(name=f"d_wvalid_copy{k}") for k in range(5)]
        w_free_c = [~c | self.m_axi.wready for c in wvalid_c]
        # out_nz = (out_left != 0) and out_one = (out_left == 1) are registers of their own,
        # loaded with out_left, as need_in and in_one are with in_left.
        out_nz = Signal(name="out_nz")
        out_one = Signal(name="out_one")
        # need_in = (in_left != 0) and in_one = (in_left == 1) are registers of their own,
        # loaded with in_left (no comparison on the stage's control paths).
        need_in = Signal()
        in_one = Signal()
        # The products of the stage's registers that go and load need are registers of their
        # own too, loaded from their next values below (the proof states each): d_emit =
        # active & out_nz, d_fin_drain = active & ~out_nz & drain, and with fin = active &
        # out_one & ~drain (the packet's last output beat next) d_fin_a = fin & ~need_in,
        # d_fin_b = fin & need_in & ~in_one, d_fin_c = fin & need_in & in_one; q_nz = the
        # queue is not empty (its level != 0, SyncFIFO's r_rdy), and ld_idle, ld_a, ld_b,
        # ld_c, ld_drain = q_nz & ~active, & d_fin_a, & d_fin_b, & d_fin_c, & d_fin_drain. So
        # load, which enables the whole data stage, is two LUTs from flip-flops and go one
        # (kept wires: synthesis maps the structure as written).
        d_emit = Signal(name="d_emit")
        fin_drain = Signal(name="d_fin_drain")
        fin_a, fin_b, fin_c = (Signal(name=f"d_fin_{x}") for x in "abc")
        q_nz = Signal(name="q_nz")
        ld_idle, ld_a, ld_b, ld_c, ld_drain = (
            Signal(name=f"ld_{x}") for x in ("idle", "a", "b", "c", "drain"))
        emitting = wire(m, d_emit, 1, "d_emitting")
        go = _kept(m, emitting & w_free_c[0] & (~need_in | p_valid), "d_go")
        consume = wire(m, go & need_in, 1, "d_consume")
        draining = wire(m, fin_drain, 1, "d_draining")
        last_out = wire(m, out_one, 1, "d_last_out")
        becomes_long = consume & in_one & ~tlast
        drain_next = drain | becomes_long
        # done = (go & last_out & ~drain_next) | (draining & p_valid & tlast), and load =
        # (~active | done) & q_nz, as products of the registers above.
        done = wire(m, (w_free_c[4] & (fin_a | (p_valid & (fin_b | (tlast & fin_c))))) |
                    (fin_drain & p_valid & tlast), 1, "d_done")
        load_k1 = _kept(m, ld_idle | (w_free_c[1] & ld_a), "d_load_k1")
        load_k2 = _kept(m, w_free_c[2] & p_valid & ld_b, "d_load_k2")
        load_k3 = _kept(m, (w_free_c[3] & ld_c) | ld_drain, "d_load_k3")
        load = _kept(m, load_k1 | load_k2 | (p_valid & tlast & load_k3), "d_load")
        m.d.comb += [
            self.s_axis.ready.eq((emitting & w_free & need_in) | draining),
            queue.r_en.eq(load),
        ]

        # Under go, a beat is consumed exactly when one is needed (consume = go & need_in).
        cur_keep = Mux(need_in, rot_keep, 0)
        strobe = (ge_mask & cur_keep) | (~ge_mask & rot_prev_keep)
        data = Cat(*(Mux(ge_mask[i], rot_cur[8 * i:8 * i + 8], rot_prev[8 * i:8 * i + 8])
                     for i in range(n)))
        short = consume & tlast & (~in_one | ~keep_eff.bit_select(d_last_in_lane, 1))
        over_in_beat = (d_last_in_lane != n - 1) & keep_eff.bit_select(d_last_in_lane + 1, 1)
        long_payload = becomes_long | (consume & tlast & in_one & over_in_beat)
        q_ge_mask = _thermometer_from(m, q_align, n, "q_ge_mask")
        q_end_mask = wire(m, Cat(*(i <= q_last_out for i in range(n))), n, "q_end_mask")

        # The W register: payload loaded whenever it is free (a beat not taken by the memory
        # is held; when free and no beat goes, wvalid falls and the payload is unused), so
        # only wvalid waits for go.
        with m.If(w_free):
            m.d.sync += [
                self.m_axi.wvalid.eq(go), self.m_axi.wdata.eq(data),
                self.m_axi.wstrb.eq(strobe & Mux(last_out, end_mask, (1 << n) - 1)),
                self.m_axi.wlast.eq(last_out | (d_boff == boundary_beats - 1)),
            ]
        with m.If(go):
            m.d.sync += [
                d_boff.eq(d_boff + 1), out_left.eq(out_left - 1), drain.eq(drain_next),
                out_nz.eq(~out_one), out_one.eq(out_left == 2),
            ]
            with m.If(need_in):
                m.d.sync += [in_left.eq(Mux(tlast, 0, in_left - 1)), rot_prev.eq(rot_cur),
                             rot_prev_keep.eq(rot_keep), need_in.eq(~tlast & ~in_one),
                             in_one.eq(~tlast & (in_left == 2))]
            with m.Else():
                m.d.sync += rot_prev_keep.eq(0)
        with m.If(load):
            m.d.sync += [
                active.eq(1), d_align.eq(q_align),
                ge_mask.eq(q_ge_mask), end_mask.eq(q_end_mask),
                d_last_in_lane.eq(q_last_in), d_boff.eq(q_boff),
                out_left.eq(Mux(q_place, q_out_beats, 0)), in_left.eq(Mux(q_place, q_in_beats, 0)),
                out_nz.eq(q_place & q_out_nz), out_one.eq(q_place & q_out_one),
                drain.eq(~q_place), rot_prev_keep.eq(0),
                need_in.eq(q_place), in_one.eq(q_place & q_in_one),
            ]
        with m.Elif(done):
            m.d.sync += active.eq(0)
        # The next values of the product registers: on load from the queue's entry, on go
        # from the beat (go implies active & out_nz & w_free, and done under go implies out_one,
        # which out_left == 2 excludes), else held (done without go only ends a drain).
        out_eq2 = wire(m, out_left == 2, 1, "d_out_eq2")
        in_eq2 = wire(m, in_left == 2, 1, "d_in_eq2")
        q_one = q_place & q_out_one
        fin_go = _kept(m, out_eq2 & ~drain, "d_fin_go")
        fin_bc_go = _kept(m, fin_go & need_in & ~tlast & ~in_one, "d_fin_bc_go")
        # Each product register's next value is Mux(load, from the entry, from the registers
        # and the beat), and its copy with q_nz (q_nz' = q_write | q_nz, but on a read of the
        # last entry q_write alone) the same Mux, so that load selects in the last LUT.
        q_stay = _kept(m, q_nz & (queue.level != 1), "q_stay")
        nexts = {
            "emit": (q_place & q_out_nz, Mux(go, ~out_one, d_emit)),
            "drain": (~q_place, Mux(
                go, _kept(m, out_one & (drain | (need_in & in_one & ~tlast)), "d_fin_drain_go"),
                fin_drain & ~(p_valid & tlast))),
            "a": (0, Mux(go, fin_go & (~need_in | tlast), fin_a)),
            "b": (q_one & ~q_in_one, Mux(go, fin_bc_go & ~in_eq2, fin_b)),
            "c": (q_one & q_in_one, Mux(go, fin_bc_go & in_eq2, fin_c)),
            "idle": (0, ~active | done),
        }
        regs = {"emit": (d_emit, None), "drain": (fin_drain, ld_drain), "a": (fin_a, ld_a),
                "b": (fin_b, ld_b), "c": (fin_c, ld_c), "idle": (None, ld_idle)}
        for key, (from_entry, held) in nexts.items():
            from_entry = _kept(m, from_entry, f"d_{key}_load")
            held = _kept(m, held, f"d_{key}_held")
            reg, with_q = regs[key]
            if reg is not None:
                m.d.sync += reg.eq(Mux(load, from_entry, held))
            if with_q is not None:
                m.d.sync += with_q.eq(Mux(load, from_entry & (q_write | q_stay),
                                          held & (q_write | q_nz)))
        m.d.sync += q_nz.eq(q_write | Mux(load, q_stay, q_nz))
        m.d.sync += [c.eq(Mux(f, go, c)) for c, f in zip(wvalid_c, w_free_c)]

        # ------------------------------------------------------------ B and counters
        m.d.comb += self.m_axi.bready.eq(1)
        aw_fire = self.m_axi.awvalid & self.m_axi.awready
        b_fire = self.m_axi.bvalid & self.m_axi.bready
        outstanding = Signal(32)
        m.d.sync += outstanding.eq(outstanding + aw_fire - b_fire)

        placing = take_cmd & has_payload & cmd.place
        events = {
            "commands": take_cmd,
            "placed": placing,
            "discarded": take_cmd & has_payload & ~cmd.place,
            "empty": take_cmd & ~has_payload,
            "placed_bytes": cmd.length,     # gated by placing below
            "bursts": aw_fire,
            "beats": self.m_axi.wvalid & self.m_axi.wready,
            "resp_okay": b_fire & ~self.m_axi.bresp[1],
            "resp_error": b_fire & self.m_axi.bresp[1],
            "short_payload": short,
            "long_payload": long_payload,
        }
        for name, addr in COUNTERS.items():
            cfg.counter(addr, name, events[name], doc=name, registered=True,
                        gate=placing if name == "placed_bytes" else None)
        busy = active | g_busy | queue.r_rdy | self.m_axi.awvalid | \
            self.m_axi.wvalid | (outstanding != 0)
        cfg.ro(INFO["data_width"], "data_width", Const(self.data_width, 32), doc="W")
        cfg.ro(INFO["outstanding"], "outstanding", outstanding, doc="bursts not answered")
        cfg.ro(INFO["status"], "status", busy, doc="bit 0: busy")
        cfg.finish(decoded=True)
        return m


def _kept(m, value, name):
    """A one-bit :func:`rtl.common.logic.wire` that synthesis keeps."""
    return wire(m, value, 1, name, keep=True)


def _slices(widths):
    """Consecutive slices of the given widths, from bit 0."""
    out, start = [], 0
    for w in widths:
        out.append(slice(start, start + w))
        start += w
    return out
