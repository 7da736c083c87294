# SPDX-License-Identifier: BSD-2-Clause
"""Which FPGA family a block is elaborated for (docs/protocol.md section 8: state in block RAM).

Most blocks are written once and inferred by Yosys on every family. A few parts need the
family's own primitive, because inference misses a feature that timing needs: the ECP5 DP16KD's
output register (:class:`rtl.common.memory.BlockRam`). Such a part asks :func:`family` about the
``platform`` its ``elaborate`` receives:

- an Amaranth vendor platform (the board builds of ``fpga/boards.py``): its ``family``
  attribute (``"ecp5"`` for the ECP5 boards);
- a :class:`Target`, the stand-in :func:`rtl.gen.write_verilog` passes when Verilog is written
  for one family (``fpga/report.py``: ``Target("ecp5")`` for the ECP5 rows);
- ``None`` (simulation: the benches, ``make verilog``): no family, the inferred version that
  Icarus, Verilator and Amaranth's simulator all run.

A :class:`Target` has no ``get_memory`` method, so ``amaranth.lib.memory.Memory`` elaborates as
it does without a platform: a block that does not ask for the family gets the same Verilog
whatever the target.
"""

__all__ = ["Target", "FAMILIES", "family"]

FAMILIES = ("ecp5", "ice40", "gowin")


class Target:
    """The ``platform`` of a Verilog conversion for FPGA family ``family`` (one of
    :data:`FAMILIES`)."""

    def __init__(self, family):
        if family not in FAMILIES:
            raise ValueError(f"Target: family must be one of {FAMILIES}, not {family!r}")
        self.family = family

    def __repr__(self):
        return f"Target({self.family!r})"


def family(platform):
    """The lower-case FPGA family of ``platform`` (``"ecp5"``, ...), or None (simulation, or a
    platform that names none)."""
    name = getattr(platform, "family", None)
    return name.lower() if isinstance(name, str) else None
