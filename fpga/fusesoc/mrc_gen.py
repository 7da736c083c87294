#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""FuseSoC generator of the MRC cores: Verilog of one top of ``rtl/gen.py`` for given parameters.

FuseSoC (``generators:`` in ``mrc_nic_engine.core`` and ``mrc_switch.core``) runs it as
``python3 mrc_gen.py <input.yml>`` in a fresh folder; the input holds the ``generate`` section's
``parameters``:

    top: nic_engine          # a key of rtl/regmap.py / rtl/gen.py TOPS with a class here
    params: {n_qps: 4, n_planes: 2, data_width: 64}   # the component's parameters
    axil: false              # true: the top with an AXI4-Lite slave (rtl/axil_top.py)

It writes ``<top>.v`` (top module ``<top>``, through ``rtl.gen.write_verilog``, the same
conversion as ``make verilog``) and ``<vlnv name>.core`` listing it, which FuseSoC reads back.
The Python that runs it needs the project's packages (Amaranth): run FuseSoC in the project's
tool environment (``source scripts/env.sh``; ``make fusesoc``).
"""

import importlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")

import yaml  # noqa: E402

CLASSES = {"nic_engine": ("rtl.nic_engine", "NicEngine"), "switch": ("rtl.switch", "Switch"),
           "link": ("rtl.link", "Link")}


def main(argv):
    with open(argv[1]) as f:
        config = yaml.safe_load(f)
    params = config.get("parameters") or {}
    top = params["top"]
    module, cls = CLASSES[top]
    component = getattr(importlib.import_module(module), cls)(**(params.get("params") or {}))
    if params.get("axil"):
        from rtl.axil_top import AxilTop
        component = AxilTop(component)
    from rtl.gen import write_verilog
    write_verilog(component, top, Path.cwd() / f"{top}.v")
    vlnv = config["vlnv"]
    name = vlnv.split(":")[2] if vlnv.count(":") >= 2 else top
    core = {
        "name": vlnv,
        "filesets": {"rtl": {"files": [f"{top}.v"], "file_type": "verilogSource"}},
        "targets": {"default": {"filesets": ["rtl"], "toplevel": top}},
    }
    Path(f"{name}.core").write_text("CAPI=2:\n" + yaml.safe_dump(core, sort_keys=False))
    print(f"mrc_gen: wrote {top}.v ({params.get('params')}) and {name}.core")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
