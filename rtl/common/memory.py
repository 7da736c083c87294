# SPDX-License-Identifier: BSD-2-Clause
"""A simple-dual-port block RAM: Amaranth's inferred memory for the simulators, iCE40 and Gowin,
explicit DP16KD primitives with their output register on ECP5 (docs/protocol.md section 8:
state lives in block RAM)."""

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .target import family

__all__ = ["BlockRam", "DP16KD_CONFIGS", "dp16kd_tiling", "dp16kd_initvals"]

# The DP16KD aspect ratios one port can take: (data width, depth, address bits below the word
# address). The word address sits in the top bits of the 14-bit ADx bus, as Yosys's own mapping
# (share/lattice/brams_map_16kd.v) puts it; in the 18-bit mode ADx0 and ADx1 are the byte enables.
DP16KD_CONFIGS = ((18, 1024, 4), (9, 2048, 3), (4, 4096, 2), (2, 8192, 1), (1, 16384, 0))

TARGETS = ("generic", "ecp5")


def dp16kd_tiling(width, depth):
    """``(config, columns, rows)``: the :data:`DP16KD_CONFIGS` entry and the grid of DP16KD that
    hold ``depth`` words of ``width`` bits in the fewest blocks (then the fewest rows: a row
    beyond the first costs a read multiplexer)."""
    best = None
    for cfg in DP16KD_CONFIGS:
        cw, cd, _ = cfg
        cols, rows = -(-width // cw), -(-depth // cd)
        key = (cols * rows, rows)
        if best is None or key < best[0]:
            best = (key, cfg, cols, rows)
    return best[1:]


def dp16kd_initvals(words, config):
    """The nonzero ``INITVAL_00`` .. ``INITVAL_3F`` parameters (name -> 320-bit int) of one DP16KD
    in aspect ``config`` holding ``words`` (local address order).

    The layout is Yosys's (``init_slice`` in share/lattice/brams_map_16kd.v and memory_libmap's
    placement, read back from Yosys 0.70 netlists of inferred memories): the array is 1024 rows
    of 18 bits, row ``r`` in bits ``20 (r % 16) ..`` of ``INITVAL_{r // 16}``; in the 18- and
    9-bit modes word ``a`` bit ``j`` is bit ``a w + j`` of the rows read as one string; in the 4-,
    2- and 1-bit modes the words fill the 16 data bits of each row in order, skipping bits 8 and
    17 (the parity bits).
    """
    cw, _, _ = config
    vals = {}
    for a, word in enumerate(words):
        for j in range(cw):
            if not (word >> j) & 1:
                continue
            if cw >= 9:
                row, pos = divmod(a * cw + j, 18)
            else:
                row, p = divmod(a * cw + j, 16)
                pos = p if p < 8 else p + 1
            name = f"INITVAL_{row // 16:02X}"
            vals[name] = vals.get(name, 0) | 1 << (20 * (row % 16) + pos)
    return vals


class BlockRam(wiring.Component):
    """A synchronous simple-dual-port memory: one write port, one read port, one clock.

    Parameters
    ----------
    width : int, at least 1
        Bits per word.
    depth : int, at least 2
        Words; addresses ``0 .. depth - 1`` (a larger address must not be used).
    init : sequence of int, optional
        The first words' contents after configuration (the rest are zero). Reset does not
        change the contents.
    output_register : bool (default True)
        Read latency 2 with an output register after the array (on ECP5 the DP16KD's own,
        ``REGMODE_B = "OUTREG"``), or 1 without it.
    target : None, ``"generic"`` or ``"ecp5"``
        How the array is built. ``None`` (default): from the ``platform`` given to
        ``elaborate`` (:func:`rtl.common.target.family`): DP16KD on ECP5, else ``generic``.
        ``"generic"``: ``amaranth.lib.memory.Memory``, which Amaranth's simulator, Icarus and
        Verilator run and Yosys infers on iCE40 and Gowin (and on ECP5, without the output
        register: measured 138-146 MHz in a forwarding loop against 328 MHz with it). ``"ecp5"``:
        DP16KD instances tiled by :func:`dp16kd_tiling` (``columns x rows`` blocks; a deeper
        memory takes the extra rows' outputs through a multiplexer selected by the registered
        read address).

    Ports
    -----
    w_addr, w_data, w_en : In
        Write ``w_data`` at ``w_addr`` at the clock edge of a cycle with ``w_en`` high.
    r_addr, r_en : In
        A cycle with ``r_en`` high reads ``r_addr``; ``r_en`` (init 1) advances the whole read
        pipeline: while it is low nothing moves and ``r_data`` holds.
    r_data : Out(width)
        The word read: with latency 1, from the cycle after the read; with latency 2, from the
        cycle after the next ``r_en`` cycle (with ``r_en`` always high: two cycles after the
        read). It is not reset (zero after configuration).

    Read during write
    -----------------
    Write-first, on both variants: a read of the address written in the same cycle returns the
    word being written. A read sees every write of earlier cycles and none of later ones (a
    word waiting in the read pipeline while ``r_en`` is low is not updated). The DP16KD itself
    gives an undefined word when its two ports meet at one address in one cycle (Yosys's
    library, share/lattice/brams_16kd.txt, declares no cross-port transparency and adds logic
    for it), so the ECP5 variant compares the addresses, registers the write data beside the read
    and selects it after the block's output: the same cycle behaviour as the generic variant,
    whose read port is transparent to the write port. Cost on ECP5: ``width x latency`` FFs, an
    address comparator and a 2:1 multiplexer on ``r_data``.

    Latency and throughput
    ----------------------
    One write and one read every cycle; read latency ``self.latency`` (1 or 2) as above.
    Blocks on ECP5: ``self.dp16kd_count``; LUT4: the bypass above, plus the row multiplexer
    when there is more than one row.
    """

    def __init__(self, width, depth, *, init=(), output_register=True, target=None):
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"BlockRam: width must be an integer of at least 1, not {width!r}")
        if not isinstance(depth, int) or depth < 2:
            raise ValueError(f"BlockRam: depth must be an integer of at least 2, not {depth!r}")
        init = list(init)
        if len(init) > depth:
            raise ValueError(f"BlockRam: init has {len(init)} words, more than depth {depth}")
        for i, word in enumerate(init):
            if not isinstance(word, int) or not 0 <= word < 1 << width:
                raise ValueError(f"BlockRam: init word {i} ({word!r}) is not a {width}-bit "
                                 f"unsigned integer")
        if not isinstance(output_register, bool):
            raise ValueError(f"BlockRam: output_register must be True or False, not "
                             f"{output_register!r}")
        if target is not None and target not in TARGETS:
            raise ValueError(f"BlockRam: target must be None or one of {TARGETS}, not "
                             f"{target!r}")
        self.width, self.depth, self.init = width, depth, init
        self.output_register, self.target = output_register, target
        self.latency = 2 if output_register else 1
        self.addr_width = (depth - 1).bit_length()
        self.tiling = dp16kd_tiling(width, depth)
        config, cols, rows = self.tiling
        self.dp16kd_count = cols * rows
        super().__init__({
            "w_addr": In(self.addr_width), "w_data": In(width), "w_en": In(1),
            "r_addr": In(self.addr_width), "r_en": In(1, init=1), "r_data": Out(width),
        })

    def variant(self, platform):
        """``"ecp5"`` or ``"generic"``: what :meth:`elaborate` builds for ``platform``."""
        if self.target is not None:
            return self.target
        return "ecp5" if family(platform) == "ecp5" else "generic"

    def elaborate(self, platform):
        if self.variant(platform) == "ecp5":
            return self._elaborate_ecp5()
        m = Module()
        m.submodules.mem = mem = Memory(shape=self.width, depth=self.depth, init=self.init)
        wp = mem.write_port()
        rp = mem.read_port(transparent_for=(wp,))
        m.d.comb += [wp.addr.eq(self.w_addr), wp.data.eq(self.w_data), wp.en.eq(self.w_en),
                     rp.addr.eq(self.r_addr), rp.en.eq(self.r_en)]
        if self.output_register:
            q = Signal(self.width, reset_less=True)
            with m.If(self.r_en):
                m.d.sync += q.eq(rp.data)
            m.d.comb += self.r_data.eq(q)
        else:
            m.d.comb += self.r_data.eq(rp.data)
        return m

    def _elaborate_ecp5(self):
        m = Module()
        (cw, cd, low), cols, rows = self.tiling
        word_bits = 14 - low
        local = min(word_bits, self.addr_width)
        row_bits = self.addr_width - local

        def ad_pins(prefix, addr, byte_enable):
            pins = {}
            for k in range(14):
                if k >= low and k - low < local:
                    pins[f"i_{prefix}{k}"] = addr[k - low]
                elif low == 4 and k < 2:
                    pins[f"i_{prefix}{k}"] = byte_enable
                else:
                    pins[f"i_{prefix}{k}"] = Const(0, 1)
            return pins

        outs = []
        for r in range(rows):
            we = self.w_en
            if row_bits:
                we = self.w_en & (self.w_addr[local:] == r)
            row_out = []
            for c in range(cols):
                dout = Signal(18, name=f"dout_r{r}_c{c}")
                params = {"p_DATA_WIDTH_A": cw, "p_DATA_WIDTH_B": cw,
                          "p_REGMODE_A": "NOREG",
                          "p_REGMODE_B": "OUTREG" if self.output_register else "NOREG",
                          "p_RESETMODE": "SYNC", "p_ASYNC_RESET_RELEASE": "SYNC",
                          "p_CSDECODE_A": "0b000", "p_CSDECODE_B": "0b000",
                          "p_WRITEMODE_A": "NORMAL", "p_WRITEMODE_B": "NORMAL",
                          "p_GSR": "DISABLED"}
                words = [(w >> (c * cw)) & ((1 << cw) - 1)
                         for w in self.init[r * cd:(r + 1) * cd]]
                for name, value in dp16kd_initvals(words, (cw, cd, low)).items():
                    params[f"p_{name}"] = Const(value, 320)
                pins = {"i_CLKA": ClockSignal(), "i_CEA": Const(1, 1), "i_OCEA": Const(1, 1),
                        "i_WEA": we, "i_RSTA": Const(0, 1),
                        "i_CLKB": ClockSignal(), "i_CEB": self.r_en, "i_OCEB": self.r_en,
                        "i_WEB": Const(0, 1), "i_RSTB": Const(0, 1)}
                for k in range(3):
                    pins[f"i_CSA{k}"] = Const(0, 1)
                    pins[f"i_CSB{k}"] = Const(0, 1)
                pins.update(ad_pins("ADA", self.w_addr, Const(1, 1)))
                pins.update(ad_pins("ADB", self.r_addr, Const(0, 1)))
                for k in range(18):
                    bit = c * cw + k
                    pins[f"i_DIA{k}"] = self.w_data[bit] if k < cw and bit < self.width \
                        else Const(0, 1)
                    pins[f"i_DIB{k}"] = Const(0, 1)
                    pins[f"o_DOB{k}"] = dout[k]
                m.submodules[f"ram_r{r}_c{c}"] = Instance("DP16KD", **params, **pins)
                row_out.append(dout[:cw])
            outs.append(Signal(self.width, name=f"row{r}"))
            m.d.comb += outs[-1].eq(Cat(*row_out)[:self.width])

        # The read pipeline beside the blocks: the write-first bypass and the row select, moved
        # by r_en as the DP16KD's CEB (array read) and OCEB (output register) move its data.
        hit = self.w_en & (self.w_addr == self.r_addr)
        data, sel = self.w_data, self.r_addr[local:] if row_bits else None
        for stage in range(self.latency):
            hit_q = Signal(name=f"hit{stage + 1}", reset_less=True)
            data_q = Signal(self.width, name=f"bypass{stage + 1}", reset_less=True)
            with m.If(self.r_en):
                m.d.sync += [hit_q.eq(hit), data_q.eq(data)]
            hit, data = hit_q, data_q
            if sel is not None:
                sel_q = Signal(row_bits, name=f"row_sel{stage + 1}", reset_less=True)
                with m.If(self.r_en):
                    m.d.sync += sel_q.eq(sel)
                sel = sel_q
        if rows == 1:
            ram = outs[0]
        else:
            ram = Signal(self.width, name="ram_data")
            with m.Switch(sel):
                for r, out in enumerate(outs):
                    with m.Case(r):
                        m.d.comb += ram.eq(out)
        m.d.comb += self.r_data.eq(Mux(hit, data, ram))
        return m

