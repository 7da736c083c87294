# SPDX-License-Identifier: BSD-2-Clause
"""AXI4-Lite slave to configuration-port bridge (docs/protocol.md section 8: the NIC top bridges its
configuration ports to one AXI4-Lite slave; the switch top does the same).

Golden model: ``models/axil_config.py``; bench: ``tb/test_axil_config.py``. ``rtl/axil_top.py``
wraps any block that has a configuration port with this bridge at its Verilog boundary.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from models.axil_config import DECERR, FULL_STRB, OKAY, SLVERR

__all__ = ["AxilConfig", "axil_members", "check_bridge_params", "AXIL_ADDR_WIDTH_DEFAULT",
           "MAX_READ_LATENCY"]

AXIL_ADDR_WIDTH_DEFAULT = 32
MAX_READ_LATENCY = 8
PROT_WIDTH = 3
RESP_WIDTH = 2


def axil_members(prefix, addr_width):
    """Members of a 32-bit AXI4-Lite slave port named ``<prefix>_awaddr`` etc. (the names
    cocotbext-axi's ``AxiLiteBus.from_prefix`` expects)."""
    return {
        f"{prefix}_awaddr": In(addr_width),
        f"{prefix}_awprot": In(PROT_WIDTH),
        f"{prefix}_awvalid": In(1),
        f"{prefix}_awready": Out(1),
        f"{prefix}_wdata": In(32),
        f"{prefix}_wstrb": In(4),
        f"{prefix}_wvalid": In(1),
        f"{prefix}_wready": Out(1),
        f"{prefix}_bresp": Out(RESP_WIDTH),
        f"{prefix}_bvalid": Out(1),
        f"{prefix}_bready": In(1),
        f"{prefix}_araddr": In(addr_width),
        f"{prefix}_arprot": In(PROT_WIDTH),
        f"{prefix}_arvalid": In(1),
        f"{prefix}_arready": Out(1),
        f"{prefix}_rdata": Out(32),
        f"{prefix}_rresp": Out(RESP_WIDTH),
        f"{prefix}_rvalid": Out(1),
        f"{prefix}_rready": In(1),
    }


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_bridge_params(owner, addr_width, read_latency, axil_addr_width):
    """Raise ValueError (naming ``owner``) unless the bridge parameters are valid."""
    if not _is_int(addr_width) or not 1 <= addr_width <= 30:
        raise ValueError(f"{owner}: addr_width (word-address bits of the configuration port) "
                         f"must be an integer 1..30, not {addr_width!r}")
    if not _is_int(read_latency) or not 1 <= read_latency <= MAX_READ_LATENCY:
        raise ValueError(f"{owner}: read_latency must be an integer 1..{MAX_READ_LATENCY} "
                         f"cycles, not {read_latency!r}")
    if not _is_int(axil_addr_width) or not addr_width + 2 <= axil_addr_width <= 64:
        raise ValueError(f"{owner}: axil_addr_width must be an integer from addr_width + 2 "
                         f"({addr_width + 2}) to 64, not {axil_addr_width!r}")


class AxilConfig(wiring.Component):
    """An AXI4-Lite slave (32-bit data) driving one configuration port as its master.

    A host reaches configuration word ``a`` at byte address ``4 a``. One transaction is served at
    a time, in the order the bridge accepts them; :class:`models.axil_config.AxilConfigModel`
    gives every response.

    Parameters
    ----------
    addr_width : 1..30
        Word-address bits of the configuration port behind the bridge (``len(cfg_addr)``).
    read_latency : 1..8
        Cycles from ``m_cfg_addr`` to its ``m_cfg_rdata`` (1 for a block built with
        :class:`rtl.common.config.ConfigMap`; more where a top adds register stages).
    axil_addr_width : addr_width + 2 .. 64
        Bits of ``s_axil_awaddr``/``araddr`` (default 32, a host bus address).

    Ports
    -----
    ``s_axil_aw*``, ``s_axil_w*``, ``s_axil_b*``, ``s_axil_ar*``, ``s_axil_r*``
        The AXI4-Lite slave (:func:`axil_members`): byte addresses, 32-bit data, 4-bit strobes.
        ``awprot``/``arprot`` are accepted and ignored.
    ``m_cfg_addr`` (addr_width), ``m_cfg_wdata`` (32), ``m_cfg_we`` out; ``m_cfg_rdata`` (32) in
        The configuration port of the target (``rtl/common/config.py``), driven from registers.
    ``clk``, ``rst``
        The ``sync`` domain (synchronous active-high reset).

    Rules
    -----
    - Addresses: word = byte address bits ``addr_width + 1 .. 2``; bits 1..0 are ignored. An
      address with any bit set at or above ``addr_width + 2`` answers DECERR and reaches no
      register (``m_cfg_we`` stays low, ``m_cfg_addr`` unchanged; a read returns 0).
    - Writes: AW and W may come in either order or together; the bridge takes each beat as it
      comes (``awready`` stays low once AW is held, likewise ``wready``) and starts the write
      when it holds both. A write with ``wstrb`` != 0xF is not performed and answers SLVERR
      (maps hold whole words and counters clear on any write). DECERR is decided before SLVERR.
      Any other write pulses ``m_cfg_we`` for one cycle and answers OKAY.
    - Reads answer OKAY with the word, sampled ``read_latency`` cycles after ``m_cfg_addr``
      shows the address, and held in a register until RREADY.
    - One transaction at a time: nothing is accepted from the start of a transaction (its first
      AW, W or AR beat) until its B or R beat is taken. Arbitration alternates fairly: when a read
      (ARVALID) and a write (AWVALID or WVALID) wait together, the kind not served last goes
      first (a write first after reset); a write whose AW or W beat is already held always
      finishes before a read is accepted.
    - ``bvalid``, ``bresp``, ``rvalid``, ``rresp``, ``rdata`` and the ``m_cfg_*`` outputs are
      registers; the ready outputs are combinational from the valids and the bridge's state.

    Latency and throughput
    ----------------------
    Write: AW and W taken in cycle 0, ``m_cfg_we`` high and BVALID in cycle 1; with BREADY high
    the next write is taken in cycle 2: one write per 2 cycles. Read: AR taken in cycle 0,
    ``m_cfg_addr`` from cycle 1, ``m_cfg_rdata`` captured at the end of cycle ``1 +
    read_latency``, RVALID in cycle ``2 + read_latency``: one read per ``read_latency + 3``
    cycles (4 for a ConfigMap block). Responses with errors take the same time.
    """

    def __init__(self, addr_width=16, read_latency=1, axil_addr_width=AXIL_ADDR_WIDTH_DEFAULT):
        check_bridge_params("AxilConfig", addr_width, read_latency, axil_addr_width)
        self.addr_width = addr_width
        self.read_latency = read_latency
        self.axil_addr_width = axil_addr_width
        super().__init__({
            **axil_members("s_axil", axil_addr_width),
            "m_cfg_addr": Out(addr_width),
            "m_cfg_wdata": Out(32),
            "m_cfg_we": Out(1),
            "m_cfg_rdata": In(32),
        })

    def elaborate(self, platform):
        m = Module()
        A = self.addr_width
        aw_held = Signal()
        aw_addr = Signal(self.axil_addr_width)
        w_held = Signal()
        w_data = Signal(32)
        w_strb = Signal(4)
        last_write = Signal()           # the last transaction served was a write
        wait = Signal(range(self.read_latency + 1))

        # --- arbitration in IDLE -------------------------------------------------------------
        idle = Signal()
        write_started = aw_held | w_held
        write_req = self.s_axil_awvalid | self.s_axil_wvalid | write_started
        grant_write = Signal()
        grant_read = Signal()
        m.d.comb += [
            grant_write.eq(idle & write_req &
                           (write_started | ~self.s_axil_arvalid | ~last_write)),
            grant_read.eq(idle & self.s_axil_arvalid & ~grant_write),
            self.s_axil_awready.eq(grant_write & ~aw_held),
            self.s_axil_wready.eq(grant_write & ~w_held),
            self.s_axil_arready.eq(grant_read),
        ]
        aw_fire = self.s_axil_awvalid & self.s_axil_awready
        w_fire = self.s_axil_wvalid & self.s_axil_wready
        # The write as it stands this cycle: held beats, or the beats taken now.
        addr = Mux(aw_held, aw_addr, self.s_axil_awaddr)
        data = Mux(w_held, w_data, self.s_axil_wdata)
        strb = Mux(w_held, w_strb, self.s_axil_wstrb)
        w_in_range = addr[A + 2:] == 0
        r_in_range = self.s_axil_araddr[A + 2:] == 0

        m.d.sync += self.m_cfg_we.eq(0)         # high for exactly one cycle per write
        with m.FSM(name="axil"):
            with m.State("IDLE"):
                m.d.comb += idle.eq(1)
                with m.If(grant_write):
                    with m.If(aw_fire):
                        m.d.sync += [aw_held.eq(1), aw_addr.eq(self.s_axil_awaddr)]
                    with m.If(w_fire):
                        m.d.sync += [w_held.eq(1), w_data.eq(self.s_axil_wdata),
                                     w_strb.eq(self.s_axil_wstrb)]
                    with m.If((aw_held | aw_fire) & (w_held | w_fire)):
                        m.d.sync += [aw_held.eq(0), w_held.eq(0), last_write.eq(1),
                                     self.s_axil_bvalid.eq(1)]
                        with m.If(~w_in_range):
                            m.d.sync += self.s_axil_bresp.eq(DECERR)
                        with m.Elif(strb != FULL_STRB):
                            m.d.sync += self.s_axil_bresp.eq(SLVERR)
                        with m.Else():
                            m.d.sync += [self.s_axil_bresp.eq(OKAY),
                                         self.m_cfg_addr.eq(addr[2:A + 2]),
                                         self.m_cfg_wdata.eq(data),
                                         self.m_cfg_we.eq(1)]
                        m.next = "WRITE_RESP"
                with m.Elif(grant_read):
                    m.d.sync += [last_write.eq(0), wait.eq(self.read_latency),
                                 self.s_axil_rresp.eq(Mux(r_in_range, OKAY, DECERR))]
                    with m.If(r_in_range):
                        m.d.sync += self.m_cfg_addr.eq(self.s_axil_araddr[2:A + 2])
                    m.next = "READ_WAIT"
            with m.State("WRITE_RESP"):
                with m.If(self.s_axil_bready):
                    m.d.sync += self.s_axil_bvalid.eq(0)
                    m.next = "IDLE"
            with m.State("READ_WAIT"):
                with m.If(wait == 0):
                    m.d.sync += [
                        self.s_axil_rdata.eq(Mux(self.s_axil_rresp == OKAY, self.m_cfg_rdata, 0)),
                        self.s_axil_rvalid.eq(1),
                    ]
                    m.next = "READ_RESP"
                with m.Else():
                    m.d.sync += wait.eq(wait - 1)
            with m.State("READ_RESP"):
                with m.If(self.s_axil_rready):
                    m.d.sync += self.s_axil_rvalid.eq(0)
                    m.next = "IDLE"
        return m
