"""cffi builder for lobreplay._core (API mode, out of line).

setup.py names this file in ``cffi_modules`` (pip runs it from the project
root, so source paths are relative to it). ``python csrc/build_core.py [OUTDIR]``
builds the module in place, or under OUTDIR/lobreplay/, for quick checks and
for the sanitizer build.

Environment:
  LOBREPLAY_WERROR=1    add -Werror (CI sets it)
  LOBREPLAY_SANITIZE=1  build with AddressSanitizer + UndefinedBehaviorSanitizer
                        (load it with LD_PRELOAD of libasan; see the Makefile's asan target)
"""
import os
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def make_builder(absolute: bool = False) -> FFI:
    def path(p: Path) -> str:
        return str(p) if absolute else os.path.relpath(p, os.getcwd())

    cflags = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Wshadow", "-Wconversion", "-Wno-sign-conversion"]
    ldflags = []
    if os.environ.get("LOBREPLAY_WERROR") == "1":
        cflags.append("-Werror")
    if os.environ.get("LOBREPLAY_SANITIZE") == "1":
        san = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-g"]
        cflags += san
        ldflags += san
    ffi = FFI()
    ffi.cdef((HERE / "lob_cdef.h").read_text())
    ffi.set_source(
        "lobreplay._core",
        '#include "lob.h"\n#include "itch.h"\n#include "itch_synth.h"\n#include "l2.h"\n#include "bnjson.h"\n#include "bnsync.h"',
        sources=[path(HERE / "lob.c"), path(HERE / "itch.c"), path(HERE / "itch_synth.c"), path(HERE / "l2.c"),
                 path(HERE / "bnjson.c"), path(HERE / "bnsync.c")],
        include_dirs=[path(HERE)],
        libraries=["m"],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
    )
    return ffi


ffibuilder = make_builder()

if __name__ == "__main__":
    import sys

    out = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT
    print(make_builder(absolute=True).compile(tmpdir=str(out), verbose=False))
