#!/usr/bin/env bash
# Build and run the core benchmark on the seed workload, then the Python paths
# on the same recorded stream.  Everything is built under benchmarks/build/.
#
#   bash benchmarks/run_core.sh [bench_core options...]
#
# Environment: CC (gcc), CXX (g++), PY (python3; must import lobreplay, e.g.
# .venv/bin/python after `make dev`), PIN (a CPU list for taskset, e.g. PIN=1;
# default: not pinned), SKIP_PYTHON=1 and SKIP_VARIANT=1 to skip those parts.
# Exits non-zero if any check fails (results differ, allocations, rejects).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/benchmarks/build"
CC=${CC:-gcc}
CXX=${CXX:-g++}
PY=${PY:-python3}
# A relative PY (e.g. .venv/bin/python from the Makefile) is relative to the caller's directory.
case "$PY" in
    /*) ;;
    */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;;
esac
mkdir -p "$B"
cd "$ROOT"

RUN=()
if [ -n "${PIN:-}" ]; then RUN=(taskset -c "$PIN"); fi

echo "== machine =="
lscpu | grep 'Model name' || true
echo "CPUs: $(nproc)"
"$CC" --version | head -1
"$CXX" --version | head -1
echo "kernel: $(uname -r)${PIN:+, pinned to CPU $PIN}"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other work on this machine disturbs the figures)"
echo "core source: sha256 $(sha256sum csrc/core/lob.c | cut -c1-16) csrc/core/lob.c, $(sha256sum csrc/core/lob.h | cut -c1-16) csrc/core/lob.h"

echo "== build =="
set -x
"$CC" -O2 -std=c11 -c csrc/core/lob.c -o "$B/lob.o"
"$CXX" -O2 -std=c++17 -Icsrc/core benchmarks/bench_core.cpp "$B/lob.o" -o "$B/bench_core"
{ set +x; } 2>/dev/null

echo "== core: seed workload, one instrument =="
"${RUN[@]}" "$B/bench_core" --dump "$B/seed_stream.bin" "$@"

if [ -z "${SKIP_VARIANT:-}" ]; then
    echo "== core: variant, 8 instruments (same mix, ~10,000 resting in total) =="
    "${RUN[@]}" "$B/bench_core" --instruments 8 --reps 3 --no-single
fi

if [ -z "${SKIP_PYTHON:-}" ]; then
    echo "== Python paths on the same stream =="
    # (checked from / : `python -c` would see the current directory, a script does not)
    if ! (cd / && "$PY" -c 'import lobreplay') 2>/dev/null; then
        export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
        if ! (cd / && "$PY" -c 'import lobreplay') 2>/dev/null; then
            echo "run_core.sh: '$PY' cannot import lobreplay (run 'make dev' and set PY=.venv/bin/python," \
                 "or SKIP_PYTHON=1)" >&2
            exit 1
        fi
    fi
    "${RUN[@]}" "$PY" benchmarks/bench_python.py "$B/seed_stream.bin"
fi
