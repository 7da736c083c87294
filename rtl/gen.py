# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""``make verilog``: Verilog of every top block with its default parameters, plus a filelist.

    python -m rtl.gen --out build/verilog [NAME ...]
    python -m rtl.gen --list

Each entry of :data:`TOPS` becomes ``<out>/<name>.v`` with top module ``<name>``, and
``<out>/files.f`` lists the files written (absolute paths, one per line; Icarus ``-c``, Verilator
``-f``). A block joins with one line in :data:`TOPS`. Each entry imports its module only when it is
built, so one missing or failing block is reported (with the reason) without stopping the others;
the exit code is non-zero if any entry failed.
"""

import argparse
import importlib
import sys
import traceback
from pathlib import Path

from amaranth.back import verilog

from rtl.common.flat_top import FlatTop, has_streams

__all__ = ["TOPS", "top", "generate", "main", "write_verilog", "verilog_top", "LICENCE_NOTICE"]

FILELIST = "files.f"

# The head of every generated Verilog file (the project's licence, LICENSE at the repository root).
LICENCE_NOTICE = """\
// SPDX-License-Identifier: BSD-2-Clause
// Generated from the MRC hardware project (Amaranth); licensed under the BSD 2-Clause License,
// see LICENSE in the project's repository. Do not edit: regenerate with `make verilog`.
"""


def verilog_top(component):
    """``component`` as its Verilog top: wrapped in :class:`rtl.common.flat_top.FlatTop` when it
    has stream ports, so they carry AXI-Stream names (``s_axis_tdata``, ``m_hdr_tvalid``, ...)."""
    return FlatTop(component) if has_streams(component) else component


def write_verilog(component, toplevel, path, platform=None):
    """Convert ``component`` (through :func:`verilog_top`) to Verilog with top module
    ``toplevel`` into ``path`` (folders are made), headed by :data:`LICENCE_NOTICE`; returns the
    file path.

    ``platform`` reaches every ``elaborate``: None (the default) for simulation, or a
    :class:`rtl.common.target.Target` naming the FPGA family the Verilog is for (a part with a
    family-specific form, :class:`rtl.common.memory.BlockRam`, builds it; every other block
    gives the same Verilog either way)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = verilog.convert(verilog_top(component), name=toplevel, platform=platform,
                           emit_src=False)
    path.write_text(LICENCE_NOTICE + text)
    return path


def top(module, cls, **params):
    """A factory that imports ``module`` and builds ``cls(**params)`` when called."""
    def factory():
        return getattr(importlib.import_module(module), cls)(**params)
    factory.description = f"{module}.{cls}({', '.join(f'{k}={v!r}' for k, v in params.items())})"
    return factory


# name (also the Verilog top module and file name) -> factory of the component.
TOPS = {
    "tick_generator": top("rtl.tick_generator", "TickGenerator", clk_hz=250_000_000),
    "header_inserter": top("rtl.header_inserter", "HeaderInserter", data_width=64),
    "un_stage": top("rtl.un_stage", "UnStage", data_width=64),
    "switch": top("rtl.switch", "Switch", ports=4, data_width=64),
    "spray_scheduler": top("rtl.spray_scheduler", "SprayScheduler", n_qps=4, n_planes=4,
                           slots=4, backups=4),
    "rx_tracker": top("rtl.rx_tracker", "RxTracker", n_qps=4, mpr=1024, wimm_max=16),
    "tx_path": top("rtl.tx_path", "TxPath"),
    "plane_splitter": top("rtl.plane_splitter", "PlaneSplitter"),
    "tx_engine": top("rtl.tx_engine", "TxEngine", n_qps=4),
    "segmenter": top("rtl.segmenter", "Segmenter", data_width=64),
    "reliability": top("rtl.reliability", "Reliability", n_qps=4, ring=64, probe_entries=8,
                       wr_depth=16, timer_bits=10),
    "placement": top("rtl.placement", "Placement", data_width=64),
    "rx_front": top("rtl.rx_front", "RxFront", n_planes=8, data_width=64),
    "rx_engine": top("rtl.rx_engine", "RxEngine", n_planes=8, data_width=64),
    "selftest": top("rtl.selftest", "SelfTest", data_width=64, ports=2, passes=3),
    "axil_config": top("rtl.axil_config", "AxilConfig", addr_width=16, read_latency=1),
    "nic_engine": top("rtl.nic_engine", "NicEngine", n_qps=4, n_planes=2, data_width=64),
    "pattern_memory": top("rtl.pattern_memory", "PatternMemory", data_width=64),
    "wr_generator": top("rtl.wr_generator", "WrGenerator"),
    "selftest_nic": top("rtl.selftest_nic", "SelfTestNic"),
    "link": top("rtl.link", "Link", data_width=64),
}


def generate(out, names=None, tops=None):
    """Write the Verilog of ``names`` (default: all of ``tops``) and the filelist into ``out``.

    Returns ``(written paths, {name: error text})``.
    """
    tops = TOPS if tops is None else tops
    names = list(tops) if names is None else names
    out = Path(out)
    written, errors = [], {}
    for name in names:
        try:
            path = write_verilog(tops[name](), name, out / f"{name}.v")
        except Exception as exc:   # report the entry, go on with the others
            errors[name] = "".join(traceback.format_exception_only(exc)).strip()
            continue
        written.append(path.resolve())
    out.mkdir(parents=True, exist_ok=True)
    (out / FILELIST).write_text("".join(f"{p}\n" for p in written))
    return written, errors


def main(argv=None, tops=None):
    tops = TOPS if tops is None else tops
    parser = argparse.ArgumentParser(prog="python -m rtl.gen", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="build/verilog", help="output folder")
    parser.add_argument("--list", action="store_true", help="list the entries and exit")
    parser.add_argument("names", nargs="*", metavar="NAME", help="entries to build (default all)")
    args = parser.parse_args(argv)
    if args.list:
        for name, factory in tops.items():
            print(f"{name:20} {factory.description}")
        return 0
    unknown = [n for n in args.names if n not in tops]
    if unknown:
        parser.error(f"unknown entries {unknown}; known: {list(tops)}")
    written, errors = generate(args.out, args.names or None, tops)
    for path in written:
        print(f"wrote {path}")
    for name, error in errors.items():
        print(f"FAILED {name} ({tops[name].description}): {error}", file=sys.stderr)
    print(f"{len(written)} of {len(written) + len(errors)} tops written; filelist "
          f"{Path(args.out) / FILELIST}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
