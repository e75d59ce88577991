"""cffi builder for lobreplay._core (API mode, out of line).

setup.py names this file in ``cffi_modules``; ``python csrc/build_core.py``
builds in place for a quick local check. Paths are relative to the project
root, where pip runs the build.

Environment:
  LOBREPLAY_WERROR=1    add -Werror (CI sets it)
  LOBREPLAY_SANITIZE=1  build with AddressSanitizer + UndefinedBehaviorSanitizer
                        (load with LD_PRELOAD of libasan; see .ci/run)
"""
import os
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _rel(p: Path) -> str:
    return os.path.relpath(p, os.getcwd())


CFLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Wshadow", "-Wconversion", "-Wno-sign-conversion"]
LDFLAGS = []
if os.environ.get("LOBREPLAY_WERROR") == "1":
    CFLAGS.append("-Werror")
if os.environ.get("LOBREPLAY_SANITIZE") == "1":
    san = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-g"]
    CFLAGS += san
    LDFLAGS += san

ffibuilder = FFI()
ffibuilder.cdef((HERE / "lob_cdef.h").read_text())
ffibuilder.set_source(
    "lobreplay._core",
    '#include "lob.h"',
    sources=[_rel(HERE / "lob.c")],
    include_dirs=[_rel(HERE)],
    extra_compile_args=CFLAGS,
    extra_link_args=LDFLAGS,
)

if __name__ == "__main__":
    os.chdir(ROOT)
    ffibuilder.compile(tmpdir=str(ROOT), verbose=True)
