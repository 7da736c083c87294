# SPDX-License-Identifier: BSD-2-Clause
"""PLL settings for the board tops: the divider search of Project Trellis ``ecppll`` (ECP5
EHXPLLL, feedback from CLKOP) and of IceStorm ``icepll`` (iCE40 SB_PLL40, simple feedback), and
the Amaranth instances.

Frequencies in MHz. Each search returns the settings with the smallest output error, and among
equal errors the VCO closest to the middle of its range (ECP5) or the first found (iCE40); it
raises ValueError when the best is more than 2 % off.
"""

from amaranth.hdl import ClockSignal, Const, Instance

__all__ = ["ecp5_pll", "ice40_pll", "ecp5_pll_instance", "ice40_pll_instance"]

ECP5_PFD = (3.125, 400.0)
ECP5_VCO = (400.0, 800.0)
ICE40_PFD = (10.0, 133.0)
ICE40_VCO = (533.0, 1066.0)
TOLERANCE = 0.02            # the largest output error accepted, relative


def ecp5_pll(f_in, f_out):
    """EHXPLLL dividers ``{"clki_div", "clkfb_div", "clkop_div", "clkop_cphase", "f_out",
    "f_vco"}`` for ``f_in`` -> about ``f_out``."""
    best = None
    middle = sum(ECP5_VCO) / 2
    for clki_div in range(1, 129):
        f_pfd = f_in / clki_div
        if not ECP5_PFD[0] <= f_pfd <= ECP5_PFD[1]:
            continue
        for clkfb_div in range(1, 81):
            out = f_pfd * clkfb_div
            for clkop_div in range(1, 129):
                vco = out * clkop_div
                if not ECP5_VCO[0] <= vco <= ECP5_VCO[1]:
                    continue
                key = (round(abs(out - f_out), 9), abs(vco - middle))
                if best is None or key < best[0]:
                    best = (key, clki_div, clkfb_div, clkop_div, out, vco)
    if best is None or best[0][0] > TOLERANCE * f_out:
        raise ValueError(f"no ECP5 PLL setting makes {f_out} MHz from {f_in} MHz")
    _, clki_div, clkfb_div, clkop_div, out, vco = best
    return {"clki_div": clki_div, "clkfb_div": clkfb_div, "clkop_div": clkop_div,
            "clkop_cphase": (clkop_div - 1) // 2, "f_out": out, "f_vco": vco}


def _ice40_filter(f_pfd):
    for limit, value in ((17, 1), (26, 2), (44, 3), (66, 4), (101, 5)):
        if f_pfd < limit:
            return value
    return 6


def ice40_pll(f_in, f_out):
    """SB_PLL40 settings ``{"divr", "divf", "divq", "filter_range", "f_out", "f_vco"}`` for
    ``f_in`` -> about ``f_out`` (simple feedback)."""
    best = None
    for divr in range(16):
        f_pfd = f_in / (divr + 1)
        if not ICE40_PFD[0] <= f_pfd <= ICE40_PFD[1]:
            continue
        for divf in range(128):
            vco = f_pfd * (divf + 1)
            if not ICE40_VCO[0] <= vco <= ICE40_VCO[1]:
                continue
            for divq in range(1, 7):
                out = vco / (1 << divq)
                error = round(abs(out - f_out), 9)
                if best is None or error < best[0]:
                    best = (error, divr, divf, divq, out, vco, f_pfd)
    if best is None or best[0] > TOLERANCE * f_out:
        raise ValueError(f"no iCE40 PLL setting makes {f_out} MHz from {f_in} MHz")
    _, divr, divf, divq, out, vco, f_pfd = best
    return {"divr": divr, "divf": divf, "divq": divq, "filter_range": _ice40_filter(f_pfd),
            "f_out": out, "f_vco": vco}


def ecp5_pll_instance(f_in, f_out, clk_in, lock):
    """An EHXPLLL driving ``ClockSignal("sync")`` from ``clk_in``; ``lock`` gets LOCK. Returns
    ``(instance, settings)``."""
    s = ecp5_pll(f_in, f_out)
    clk_out = ClockSignal("sync")
    inst = Instance(
        "EHXPLLL",
        a_FREQUENCY_PIN_CLKI=f"{f_in:g}", a_FREQUENCY_PIN_CLKOP=f"{s['f_out']:g}",
        a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
        a_MFG_GMCREF_SEL="2",
        p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
        p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
        p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
        p_CLKI_DIV=s["clki_div"], p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=s["clkop_div"],
        p_CLKOP_CPHASE=s["clkop_cphase"], p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
        p_CLKFB_DIV=s["clkfb_div"],
        i_RST=Const(0), i_STDBY=Const(0), i_CLKI=clk_in, o_CLKOP=clk_out, i_CLKFB=clk_out,
        i_PHASESEL0=Const(0), i_PHASESEL1=Const(0), i_PHASEDIR=Const(1), i_PHASESTEP=Const(1),
        i_PHASELOADREG=Const(1), i_PLLWAKESYNC=Const(0), i_ENCLKOP=Const(0), o_LOCK=lock)
    return inst, s


def ice40_pll_instance(f_in, f_out, pad, lock):
    """An SB_PLL40_PAD driving ``ClockSignal("sync")`` from the clock pin ``pad`` (a raw
    ``dir="-"`` pin); ``lock`` gets LOCK. Returns ``(instance, settings)``."""
    s = ice40_pll(f_in, f_out)
    inst = Instance(
        "SB_PLL40_PAD",
        p_FEEDBACK_PATH="SIMPLE", p_DIVR=s["divr"], p_DIVF=s["divf"], p_DIVQ=s["divq"],
        p_FILTER_RANGE=s["filter_range"],
        i_PACKAGEPIN=pad, i_RESETB=Const(1), i_BYPASS=Const(0),
        o_PLLOUTGLOBAL=ClockSignal("sync"), o_LOCK=lock)
    return inst, s
