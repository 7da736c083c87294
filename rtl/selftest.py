# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""The portable FPGA self-test core: frames made from an LFSR, sent through the trimming switch
and looped back, compared with the same frames made again (``fpga/README.md``)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out, connect
from amaranth.utils import bits_for

from models.selftest import STATUS_WORDS, SelfTestConfig, report_line, switch_writes
from rtl.header_inserter import HeaderInserter
from rtl.selftest_check import FrameChecker
from rtl.selftest_gen import FrameSource
from rtl.selftest_report import Reporter
from rtl.switch import Switch
from rtl.un_stage import ADDR_OWN_USID, TABLE_BASE, TABLE_STRIDE

__all__ = ["SelfTest", "COUNTERS", "report_template"]

COUNTERS = ("sent", "ok", "bad", "lost")
_TAG_DEPTH = 4          # frames inside the header inserter at most (records taken, not yet out)
_SLICE_DEPTH = 2        # beats of the FIFOs in front of the checker


def report_template(config, window):
    """The UART line of the core, ``{name}`` standing for a counter and ``{status}`` for the
    status word (:func:`models.selftest.report_line` gives it filled in)."""
    return report_line(config, window, *(f"{{{name}}}" for name in COUNTERS), status="{status}")


class SelfTest(wiring.Component):
    """Loopback self-test: a frame source, one header inserter, the trimming switch (or a FIFO),
    a checker, counters and a UART report.

    One :class:`rtl.header_inserter.HeaderInserter` makes two kinds of frames, in the order the
    source is asked for them (:class:`rtl.selftest_gen.FrameSource`; a small FIFO of tags says
    which is which at its output): *send* frames go into the loop, *check* frames (the same
    frame i again, with the outer destination and Hop Limit it has after the loop) go to the
    checker (:class:`rtl.selftest_check.FrameChecker`), which compares them with what comes back.
    At most ``window`` send frames are unresolved at once; a check frame is asked for when no send
    may be. So the loop carries about half the header inserter's rate, with ``window`` frames in
    flight.

    The loop (``ports`` >= 2): a :class:`rtl.switch.Switch` of ``ports`` ports, all host-facing
    (no ECN marking), queues sized for ``window`` frames. Send frames enter ingress 0; egress 1
    is wired back to ingress 1 (other ports beyond 1 are wired back too and stay idle); egress
    0 goes to the checker. Out of reset the core writes the switch's own uSID and two route
    entries (:func:`models.selftest.switch_writes`), so each frame crosses the switch ``passes``
    times (ingress 0 -> egress 1 -> ingress 1 ... -> egress 0). Without a switch (``ports`` = 0)
    the loop is a FIFO in block RAM holding ``window`` frames.

    Parameters
    ----------
    data_width, ports, passes, max_payload, seed
        See :class:`models.selftest.SelfTestConfig` (frames and loop).
    window : int
        Send frames in flight at most (1..64).
    clk_hz : int
        The clock frequency (for the UART).
    baud : int
        UART bit rate (default 115200).
    report_period : int or None
        Cycles between two report lines (default: ``clk_hz``, one per second).
    timeout : int
        Cycles the checker waits for a frame before counting it lost (default 2^16).
    inject_byte : int or None
        The byte of a frame that an injection flips bit 0 of (2..129: every frame is at least
        130 bytes, and bytes 0 and 1 carry the sequence number the checker pairs frames by);
        None: lane 0 of the frame's last beat (in the ICRC or the payload, so the
        frame still crosses the switch and comes back different). Byte 12 (EtherType) makes the
        switch drop it, so it comes back lost.

    Ports
    -----
    ``enable`` in: send new frames while high (frames in flight are checked either way).
    ``inject`` in: a one-cycle pulse corrupts the next send frame (one bit, ``inject_byte``).
    ``frames_sent``, ``frames_ok``, ``frames_bad``, ``frames_lost`` out: 32-bit counters (wrap):
    frames sent into the loop; frames back equal to the expected ones; frames back different
    (and received frames matching no expected one); expected frames that never came back (see
    :class:`rtl.selftest_check.FrameChecker`).
    ``passed`` out: at least one frame checked and no error; ``failed`` out: an error seen.
    ``ready`` out: the switch set-up is written and frames flow.
    ``uart_tx`` out: the report line (:func:`report_template`; 8N1, idles high).
    ``tap_tx_tdata/tkeep/tlast/tvalid/tready``: the send frames entering the loop (a monitor, for
    benches; unconnected on boards). ``tap_rx_*``: the frames the checker takes from the loop.
    ``clk``, ``rst``: the sync domain.

    Latency and throughput: the switch set-up takes 9 cycles after reset, then frames flow. The
    header inserter alternates send and check frames, so the loop carries about half its rate:
    0.49 beats per cycle into the loop measured without a switch, 0.43 through a switch of two
    ports with 3 crossings per frame (``tb/test_selftest.py``; payloads 0..256 B). A frame is
    checked as it comes back, at one beat per cycle.
    """

    def __init__(self, data_width=64, ports=2, passes=2, max_payload=1024,
                 seed=SelfTestConfig.seed, window=4, clk_hz=125_000_000, baud=115_200,
                 report_period=None, timeout=1 << 16, inject_byte=None):
        try:
            self.config = SelfTestConfig(data_width=data_width, ports=ports, passes=passes,
                                         max_payload=max_payload, seed=seed)
        except ValueError as exc:
            raise ValueError(f"SelfTest: {exc}") from None
        if not isinstance(window, int) or not 1 <= window <= 64:
            raise ValueError(f"SelfTest: window must be 1..64, not {window!r}")
        if inject_byte is not None and (not isinstance(inject_byte, int) or
                                        not 2 <= inject_byte < 130):
            raise ValueError(f"SelfTest: inject_byte must be None or 2..129, not {inject_byte!r}")
        self.window = window
        self.inject_byte = inject_byte
        self.clk_hz = clk_hz
        self.timeout = timeout
        cfg = self.config
        lanes = data_width // 8
        self.max_frame = max(138, cfg.max_frame)
        self.frame_beats = -(-cfg.max_frame // lanes)
        self.inserter = HeaderInserter(data_width=data_width, max_payload=max_payload)
        self.source = FrameSource(cfg)
        self.checker = FrameChecker(data_width=data_width, window=window, timeout=timeout)
        self.reporter = Reporter(report_template(cfg, window), COUNTERS, STATUS_WORDS, clk_hz,
                                 baud, clk_hz if report_period is None else report_period)
        if ports:
            limit = window * self.max_frame
            self.switch = Switch(ports=ports, data_width=data_width,
                                 fabric_facing=(False,) * ports, data_limit=limit,
                                 control_limit=256, trim_size=256, table_depth=2,
                                 max_frame=self.max_frame, ingress_bytes=2 * self.max_frame)
            self.writes = switch_writes(cfg, TABLE_BASE, TABLE_STRIDE, ADDR_OWN_USID)
        else:
            self.switch = None
            self.writes = []
        tap = {"tdata": Out(data_width), "tkeep": Out(lanes), "tlast": Out(1), "tvalid": Out(1),
               "tready": Out(1)}
        super().__init__({
            "enable": In(1), "inject": In(1),
            **{f"frames_{name}": Out(32) for name in COUNTERS},
            "passed": Out(1), "failed": Out(1), "ready": Out(1), "uart_tx": Out(1, init=1),
            **{f"tap_tx_{k}": v for k, v in tap.items()},
            **{f"tap_rx_{k}": v for k, v in tap.items()},
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        W, B = cfg.data_width, cfg.data_width // 8
        m.submodules.source = src = self.source
        m.submodules.inserter = hi = self.inserter
        m.submodules.checker = chk = self.checker
        m.submodules.reporter = rep = self.reporter

        # --- switch set-up out of reset ------------------------------------------------------
        started = Signal(init=not self.writes)
        if self.writes:
            step = Signal(range(len(self.writes) + 1))
            sw = self.switch
            m.submodules.switch = sw
            with m.If(~started):
                m.d.comb += sw.cfg_we.eq(1)
                with m.Switch(step):
                    for index, (addr, data) in enumerate(self.writes):
                        with m.Case(index):
                            m.d.comb += [sw.cfg_addr.eq(addr), sw.cfg_wdata.eq(data)]
                m.d.sync += step.eq(step + 1)
                with m.If(step == len(self.writes) - 1):
                    m.d.sync += started.eq(1)
        m.d.comb += self.ready.eq(started)

        # --- which frame next: send (window permitting) or check -------------------------------
        # Two small counters (no wide arithmetic on this path): send frames not yet resolved,
        # and send frames whose check frame is not yet asked for.
        in_flight = Signal(range(self.window + 1))
        unchecked = Signal(range(self.window + 1))
        m.submodules.tags = tags = SyncFIFO(width=1, depth=_TAG_DEPTH)
        may_send = self.enable & (in_flight != self.window)
        may_check = unchecked != 0
        m.d.comb += [
            src.req_valid.eq(started & tags.w_rdy & (may_send | may_check)),
            src.req_check.eq(~may_send),
            tags.w_en.eq(src.req_valid & src.req_ready),
            tags.w_data.eq(src.req_check),
        ]
        issue_send = src.req_valid & src.req_ready & ~src.req_check
        issue_check = src.req_valid & src.req_ready & src.req_check
        resolve = chk.res_ok | chk.res_bad | chk.res_lost
        m.d.sync += [in_flight.eq(in_flight + issue_send - resolve),
                     unchecked.eq(unchecked + issue_send - issue_check)]

        # --- source -> header inserter ----------------------------------------------------------
        connect(m, src.m_hdr, hi.s_hdr)
        connect(m, src.m_axis, hi.s_axis)

        # --- header inserter -> loop (send) or checker (check) ----------------------------------
        is_check = tags.r_data[0]
        out_fire = hi.m_axis.valid & hi.m_axis.ready
        m.d.comb += tags.r_en.eq(out_fire & hi.m_axis.p.last)
        link_ready = Signal()
        send_valid = hi.m_axis.valid & ~is_check
        # Check frames reach the checker through a two-beat FIFO (registered handshake: the
        # header inserter's ready does not wait for the checker's comparison).
        m.submodules.exp_slice = exp_slice = SyncFIFO(width=W + B + 1, depth=_SLICE_DEPTH)
        m.d.comb += [
            exp_slice.w_data.eq(Cat(hi.m_axis.p.data, hi.m_axis.p.keep, hi.m_axis.p.last)),
            exp_slice.w_en.eq(hi.m_axis.valid & is_check),
            hi.m_axis.ready.eq(Mux(is_check, exp_slice.w_rdy, link_ready)),
            chk.exp.p.data.eq(exp_slice.r_data[:W]), chk.exp.p.keep.eq(exp_slice.r_data[W:W + B]),
            chk.exp.p.last.eq(exp_slice.r_data[W + B]), chk.exp.valid.eq(exp_slice.r_rdy),
            exp_slice.r_en.eq(chk.exp.ready),
        ]

        # The injected error: armed by a pulse, applied to the next send frame from its first
        # beat to its last.
        armed = Signal()
        corrupting = Signal()
        beat = Signal(range(self.frame_beats + 1))
        first_beat = Signal(init=1)
        send_fire = send_valid & link_ready
        with m.If(self.inject):
            m.d.sync += armed.eq(1)
        with m.If(send_fire):
            m.d.sync += [beat.eq(Mux(hi.m_axis.p.last, 0, beat + 1)),
                         first_beat.eq(hi.m_axis.p.last)]
            with m.If(first_beat & armed):
                m.d.sync += [armed.eq(self.inject), corrupting.eq(~hi.m_axis.p.last)]
            with m.Elif(hi.m_axis.p.last):
                m.d.sync += corrupting.eq(0)
        hit = Signal()
        this_frame = Mux(first_beat, armed, corrupting)
        if self.inject_byte is None:
            m.d.comb += hit.eq(this_frame & hi.m_axis.p.last)
            flip = Const(1, W)
        else:
            m.d.comb += hit.eq(this_frame & (beat == self.inject_byte // B))
            flip = Const(1 << 8 * (self.inject_byte % B), W)
        tx_data = Signal(W)
        m.d.comb += tx_data.eq(hi.m_axis.p.data ^ Mux(hit, flip, 0))

        rx = {}
        if self.switch is not None:
            sw = self.switch
            m.d.comb += [
                link_ready.eq(1),
                sw.s0_axis.p.data.eq(tx_data), sw.s0_axis.p.keep.eq(hi.m_axis.p.keep),
                sw.s0_axis.p.last.eq(hi.m_axis.p.last), sw.s0_axis.valid.eq(send_valid),
                sw.s0_axis.p.user.eq(0),
            ]
            for p in range(1, cfg.ports):
                # Egress p loops back into ingress p (an ingress never backpressures).
                ingress, egress = getattr(sw, f"s{p}_axis"), getattr(sw, f"m{p}_axis")
                m.d.comb += [ingress.p.data.eq(egress.p.data), ingress.p.keep.eq(egress.p.keep),
                             ingress.p.last.eq(egress.p.last), ingress.valid.eq(egress.valid),
                             ingress.p.user.eq(0), egress.ready.eq(1)]
            # Egress 0 reaches the checker through a two-beat FIFO, like the check frames.
            m.submodules.rx_slice = rx_slice = SyncFIFO(width=W + B + 1, depth=_SLICE_DEPTH)
            m.d.comb += [
                rx_slice.w_data.eq(Cat(sw.m0_axis.p.data, sw.m0_axis.p.keep, sw.m0_axis.p.last)),
                rx_slice.w_en.eq(sw.m0_axis.valid),
                sw.m0_axis.ready.eq(rx_slice.w_rdy),
            ]
            rx = {"tdata": rx_slice.r_data[:W], "tkeep": rx_slice.r_data[W:W + B],
                  "tlast": rx_slice.r_data[W + B], "tvalid": rx_slice.r_rdy,
                  "tready": rx_slice.r_en}
        else:
            depth = 1 << bits_for(self.window * self.frame_beats)
            m.submodules.link = link = SyncFIFOBuffered(width=W + B + 1, depth=depth)
            m.d.comb += [
                link_ready.eq(link.w_rdy),
                link.w_en.eq(send_valid),
                link.w_data.eq(Cat(tx_data, hi.m_axis.p.keep, hi.m_axis.p.last)),
            ]
            rx = {"tdata": link.r_data[:W], "tkeep": link.r_data[W:W + B],
                  "tlast": link.r_data[W + B], "tvalid": link.r_rdy, "tready": link.r_en}
        m.d.comb += [
            chk.rx.p.data.eq(rx["tdata"]), chk.rx.p.keep.eq(rx["tkeep"]),
            chk.rx.p.last.eq(rx["tlast"]), chk.rx.valid.eq(rx["tvalid"]),
            rx["tready"].eq(chk.rx.ready),
        ]

        # --- counters, status, report, taps ----------------------------------------------------
        counts = {name: getattr(self, f"frames_{name}") for name in COUNTERS}
        with m.If(send_fire & hi.m_axis.p.last):
            m.d.sync += counts["sent"].eq(counts["sent"] + 1)
        for name in ("ok", "lost"):
            with m.If(getattr(chk, f"res_{name}")):
                m.d.sync += counts[name].eq(counts[name] + 1)
        with m.If(chk.res_bad | chk.res_extra):
            m.d.sync += counts["bad"].eq(counts["bad"] + 1)
        failed = Signal()
        with m.If(chk.res_bad | chk.res_lost | chk.res_extra):
            m.d.sync += failed.eq(1)
        checked = Signal()
        with m.If(chk.res_ok):
            m.d.sync += checked.eq(1)
        m.d.comb += [self.failed.eq(failed), self.passed.eq(checked & ~failed)]
        m.d.comb += [getattr(rep, f"v_{name}").eq(counts[name]) for name in COUNTERS]
        m.d.comb += [rep.status.eq(Mux(failed, 2, Mux(checked, 1, 0))),
                     self.uart_tx.eq(rep.tx)]
        m.d.comb += [
            self.tap_tx_tdata.eq(tx_data), self.tap_tx_tkeep.eq(hi.m_axis.p.keep),
            self.tap_tx_tlast.eq(hi.m_axis.p.last), self.tap_tx_tvalid.eq(send_valid),
            self.tap_tx_tready.eq(link_ready),
            self.tap_rx_tdata.eq(chk.rx.p.data), self.tap_rx_tkeep.eq(chk.rx.p.keep),
            self.tap_rx_tlast.eq(chk.rx.p.last), self.tap_rx_tvalid.eq(chk.rx.valid),
            self.tap_rx_tready.eq(chk.rx.ready),
        ]
        return m
