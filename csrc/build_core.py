"""cffi builder for lobreplay._core (API mode, out of line).

setup.py names this file in ``cffi_modules`` (pip runs it from the project
root, so source paths are relative to it). ``python csrc/build_core.py [OUTDIR]``
builds the module in place, or under OUTDIR/lobreplay/, for quick checks and
for the sanitizer build.

The cdef is not written by hand: csrc/cdef.py reads it from the headers' marked
regions at every build, so a struct, enum, number or prototype is written once,
in its header.

Environment:
  LOBREPLAY_WERROR=1    add -Werror (CI sets it)
  LOBREPLAY_SANITIZE=1  build with AddressSanitizer + UndefinedBehaviorSanitizer
                        (load it with LD_PRELOAD of libasan; see the Makefile's asan target)
"""
import importlib.util
import os
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# The headers whose marked declarations (/* cdef-begin */ ... /* cdef-end */) are the cdef, in
# the order the module's source includes them (csrc/cdef.py reads them; there is no copy).
# csrc/core: the matching core; csrc/feeds: the venues' decoders and replays in C; csrc/tools: the
# ITCH day generator. Each public header's cdef region is what cffi sees.
HEADERS = ["core/lob.h", "feeds/itch.h", "tools/itch_synth.h", "feeds/l2.h", "feeds/bnjson.h", "feeds/bnsync.h"]
SOURCES = ["core/lob.c", "feeds/itch.c", "tools/itch_synth.c", "feeds/l2.c", "feeds/bnjson.c", "feeds/bnsync.c"]
INCLUDE_DIRS = ["core", "feeds", "tools"]


def _load_cdef_module():
    """csrc/cdef.py, by its path (cffi runs this file with exec, not as a module of a package)."""
    spec = importlib.util.spec_from_file_location("lobreplay_build_cdef", HERE / "cdef.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cdef_text() -> str:
    """The cdef, generated from the headers."""
    return _load_cdef_module().cdef([HERE / h for h in HEADERS])


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
    ffi.cdef(cdef_text())
    ffi.set_source(
        "lobreplay._core",
        "".join(f'#include "{Path(h).name}"\n' for h in HEADERS),
        sources=[path(HERE / c) for c in SOURCES],
        include_dirs=[path(HERE / d) for d in INCLUDE_DIRS],
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
