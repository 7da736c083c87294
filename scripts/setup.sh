#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Idempotent set-up of everything the project needs, on a fresh Debian 12 machine as root:
#  1. Debian packages, installed only when missing;
#  2. a virtual environment (.venv) holding the exact pins of pyproject.toml, reinstalled only when
#     that list changes.
# A second run prints "set-up: nothing to install" and touches nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}

missing=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_deb() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
have_cmd iverilog || missing+=(iverilog)
have_cmd g++ || missing+=(g++)
have_cmd make || missing+=(make)
have_cmd ccache || missing+=(ccache)           # Verilator builds share the compiled runtime
have_deb liblz4-dev || missing+=(liblz4-dev)
have_deb zlib1g-dev || missing+=(zlib1g-dev)
have_cmd dfu-suffix || missing+=(dfu-util)     # the OrangeCrab bitstream build (make fpga)
have_cmd tshark || missing+=(tshark)           # checks that the simulation's pcapng files open cleanly
# The venv module must work for the interpreter we use (Debian's python3 needs python3-venv).
"$PY" -c "import venv, ensurepip" >/dev/null 2>&1 || missing+=(python3-venv)

if [ ${#missing[@]} -gt 0 ]; then
    echo "set-up: installing Debian packages: ${missing[*]}"
    if [ "$(id -u)" != 0 ]; then
        echo "set-up: need root to install ${missing[*]} (or install them yourself)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "set-up: creating virtual environment $VENV"
    "$PY" -m venv "$VENV"
fi

# The pinned list, read from pyproject.toml (one source of truth).
req=$("$VENV/bin/python" - <<'PYEOF'
import tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["dev"]))
PYEOF
)
stamp="$VENV/.mrc-requirements"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$req" ]; then
    [ ${#missing[@]} -eq 0 ] && echo "set-up: nothing to install"
    exit 0
fi
echo "set-up: installing Python packages into $VENV"
printf '%s\n' "$req" > "$VENV/requirements.txt"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$VENV/requirements.txt"
"$VENV/bin/python" -m pip check
printf '%s' "$req" > "$stamp"
echo "set-up: done"
