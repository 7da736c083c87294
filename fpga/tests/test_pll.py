# SPDX-License-Identifier: BSD-2-Clause
"""fpga.pll: the PLL divider searches give the settings of Trellis ecppll and IceStorm icepll
(checked against those tools) and stay within the PLLs' ranges."""

import pytest

from fpga.pll import ECP5_PFD, ECP5_VCO, ICE40_PFD, ICE40_VCO, ecp5_pll, ice40_pll


@pytest.mark.parametrize("f_in, f_out, expect", [
    (25, 125, dict(clki_div=1, clkfb_div=5, clkop_div=5, clkop_cphase=2)),     # ecppll -i 25 -o 125
    (25, 100, dict(clki_div=1, clkfb_div=4, clkop_div=6, clkop_cphase=2)),     # ecppll -i 25 -o 100
])
def test_ecp5_matches_ecppll(f_in, f_out, expect):
    s = ecp5_pll(f_in, f_out)
    assert {k: s[k] for k in expect} == expect
    assert s["f_out"] == f_out


@pytest.mark.parametrize("f_in, f_out", [(48, 125), (25, 50), (12, 100), (100, 133.3)])
def test_ecp5_settings_are_in_range(f_in, f_out):
    s = ecp5_pll(f_in, f_out)
    assert ECP5_PFD[0] <= f_in / s["clki_div"] <= ECP5_PFD[1]
    assert ECP5_VCO[0] <= s["f_vco"] <= ECP5_VCO[1]
    assert s["f_out"] == pytest.approx(f_in / s["clki_div"] * s["clkfb_div"])
    assert abs(s["f_out"] - f_out) / f_out < 0.01


def test_ice40_matches_icepll():
    # icepll -i 12 -o 30: DIVR 0, DIVF 79, DIVQ 5, FILTER_RANGE 1, 30 MHz exactly
    assert ice40_pll(12, 30) == dict(divr=0, divf=79, divq=5, filter_range=1, f_out=30.0,
                                     f_vco=960.0)


@pytest.mark.parametrize("f_out", [16, 24, 36, 48, 60])
def test_ice40_settings_are_in_range(f_out):
    s = ice40_pll(12, f_out)
    assert ICE40_PFD[0] <= 12 / (s["divr"] + 1) <= ICE40_PFD[1]
    assert ICE40_VCO[0] <= s["f_vco"] <= ICE40_VCO[1]
    assert s["f_out"] == pytest.approx(s["f_vco"] / (1 << s["divq"]))
    assert abs(s["f_out"] - f_out) / f_out < 0.02


def test_impossible_frequencies_are_refused():
    with pytest.raises(ValueError):
        ecp5_pll(25, 2000)
    with pytest.raises(ValueError):
        ice40_pll(12, 1)
