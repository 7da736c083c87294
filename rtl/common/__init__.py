# SPDX-License-Identifier: BSD-2-Clause
"""Hardware pieces every block shares (docs/protocol.md section 8): record layouts, header packing from
the layout tables of ``models/layouts.py``, AXI-Stream boundary naming, the configuration port,
and CRC matrices. None of these is a Component; each block lives in its own file in ``rtl/``."""
