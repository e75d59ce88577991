"""The cffi cdef of lobreplay._core, read from the C headers themselves.

Each public header marks the declarations cffi sees between two comments on lines
of their own::

    /* cdef-begin */
    ... typedefs, structs, enums, prototypes, #define NAME value ...
    /* cdef-end */

(a header may hold several such regions). cffi's cdef takes no #include, no #if
and no function bodies, and of a #define only a plain integer or "...". So the
extractor drops the comments, writes every ``#define NAME value`` as
``#define NAME ...`` (the compiler then takes the value from the header, so each
number is defined once, there), and refuses anything else it cannot pass on:
another preprocessor line, a function-like macro, a static or inline function, a
marker out of place. Outside the regions a header may hold only its scaffolding
(the include guard, #include lines, the extern "C" wrapper for C++, comments):
a declaration there would be missed, so that is refused too.

csrc/build_core.py calls :func:`cdef` at build time; tests/test_layout.py tests this
module and holds the generated cdef to the headers.
"""
from __future__ import annotations

import re
from pathlib import Path

BEGIN = "/* cdef-begin */"
END = "/* cdef-end */"

# A comment, or a string or character literal (kept, so that "/*" inside one is not a comment).
_TOKEN = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_DEFINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)(?:\s+(\S.*?))?\s*$")
_NOT_CDEF = re.compile(r"\b(static|inline|__inline__|__attribute__|_Static_assert|static_assert)\b")
# What a header may hold outside its regions.
_SCAFFOLD = re.compile(r'\s*(#\s*(ifndef|endif|include|ifdef\s+__cplusplus)\b.*|#\s*define\s+\w+\s*|'
                       r'extern\s+"C"\s*\{\s*|\}\s*)?$')


class CdefError(ValueError):
    """A header the extractor cannot turn into a cdef (the message names the file and line)."""


def strip_comments(text: str) -> str:
    """text without its comments; a block comment leaves its newlines, so lines keep their numbers."""
    def repl(m: re.Match) -> str:
        s = m.group(0)
        if s.startswith("/*"):
            return " " + "\n" * s.count("\n")
        return "" if s.startswith("//") else s
    return _TOKEN.sub(repl, text)


def regions(text: str, name: str = "<header>") -> list[tuple[int, list[str]]]:
    """The marked regions of a header: (line number of the first line after BEGIN, the lines
    up to END). Refuses a marker that is not alone on its line, nested or unclosed regions,
    and a header with no region."""
    out: list[tuple[int, list[str]]] = []
    start = None
    lines = text.split("\n")
    for i, line in enumerate(lines, 1):
        s = line.strip()
        has_begin, has_end = BEGIN in line, END in line
        if (has_begin or has_end) and s not in (BEGIN, END):
            raise CdefError(f"{name}:{i}: a cdef marker must stand alone on its line, got {s!r}")
        if s == BEGIN:
            if start is not None:
                raise CdefError(f"{name}:{i}: {BEGIN} inside the region opened at line {start - 1}")
            start = i + 1
        elif s == END:
            if start is None:
                raise CdefError(f"{name}:{i}: {END} without a {BEGIN} before it")
            out.append((start, lines[start - 1:i - 1]))
            start = None
    if start is not None:
        raise CdefError(f"{name}:{start - 1}: {BEGIN} is never closed by {END}")
    if not out:
        raise CdefError(f"{name}: no {BEGIN} ... {END} region")
    return out


def outside(text: str, name: str = "<header>") -> list[tuple[int, str]]:
    """The lines outside a header's regions that are not scaffolding (include guard,
    #include, the extern "C" wrapper, blanks, comments): (line number, text)."""
    inside = set()
    for first, lines in regions(text, name):
        inside.update(range(first - 1, first + len(lines) + 1))  # the markers too
    bare = strip_comments(text).split("\n")
    return [(i, line.strip()) for i, line in enumerate(bare, 1)
            if i not in inside and not _SCAFFOLD.fullmatch(line)]


def header_cdef(text: str, name: str = "<header>") -> str:
    """The cdef text of one header: its regions without comments, each #define's value as '...'."""
    bare = strip_comments(text).split("\n")
    out = []
    for first, lines in regions(text, name):
        for i in range(first, first + len(lines)):
            line = bare[i - 1]
            s = line.strip()
            if s.startswith("#"):
                m = _DEFINE.fullmatch(s)
                if m is None or "(" in s.split()[1] or (m.group(2) or "").endswith("\\"):
                    raise CdefError(f"{name}:{i}: cffi's cdef takes no {s!r}: only #define NAME value "
                                    f"inside {BEGIN} ... {END}")
                if m.group(2) is None:
                    raise CdefError(f"{name}:{i}: #define {m.group(1)} has no value")
                out.append(f"#define {m.group(1)} ...")
                continue
            bad = _NOT_CDEF.search(s)
            if bad:
                raise CdefError(f"{name}:{i}: cffi's cdef takes no {bad.group(1)} declaration ({s!r}); "
                                f"keep it outside {BEGIN} ... {END}")
            if line.strip():
                out.append(line.rstrip())
    return "\n".join(out) + "\n"


def cdef(headers: list[Path]) -> str:
    """The cdef of several headers, in order, each after a comment naming it. Refuses a header
    with a declaration outside its regions."""
    parts = []
    for path in headers:
        text = Path(path).read_text()
        stray = outside(text, path.name)
        if stray:
            i, s = stray[0]
            raise CdefError(f"{path.name}:{i}: {s!r} is outside every {BEGIN} ... {END} region, so cffi "
                            f"would not see it (only the include guard, #include and the extern \"C\" "
                            f"wrapper may be)")
        parts.append(f"/* {path.name} */\n" + header_cdef(text, path.name))
    return "\n".join(parts)
