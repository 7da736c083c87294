# SPDX-License-Identifier: BSD-2-Clause
"""Amaranth layouts of the records of :mod:`models.records` (first field at the LSB)."""

from amaranth.lib import data

from models import records as _records

__all__ = ["layout"] + [r.name.upper() for r in _records.ALL_RECORDS]


def layout(record):
    """The ``StructLayout`` of a :class:`models.records.Record`; bit-compatible with ``pack``."""
    return data.StructLayout({name: width for name, width in record.fields})


for _r in _records.ALL_RECORDS:
    globals()[_r.name.upper()] = layout(_r)
