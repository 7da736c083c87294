# SPDX-License-Identifier: BSD-2-Clause
"""The verification library: everything the benches (``tb/``), the fabric flows (``sim/``), the
FPGA flow and ``make bench`` share on the host side, built on ``models`` and ``rtl`` only.

- :mod:`verif.runner`: Amaranth component -> Verilog -> Icarus or Verilator under cocotb;
- :mod:`verif.bench`: the cocotb side of every bench (clock, reset, record streams, pauses);
- :mod:`verif.driver`: the driver API (``Nic``, ``Switch``) over any register access;
- :mod:`verif.host_traffic`: one host's Writes, work requests and completions;
- :mod:`verif.scapy_check`: an independent reading of MRC frames by scapy.

Nothing here imports ``tb``, ``sim``, ``fpga`` or ``bench`` (``lint-imports`` checks it).
"""
