"""Every record layout has one source. The numpy dtypes agree with the C structs field by
field, and with the documented record layouts (docs/core.md, docs/lobc.md); the cffi cdef is
generated from the headers (csrc/cdef.py) and the loaded core matches them; the ITCH lengths
and field offsets C uses are spec.py's. A header change cannot slip by."""
import numpy as np
import pytest

import lobreplay
from lobreplay.core import _coreapi

# The ABI as documented: (field, numpy type, offset). A change here is a format change.
DOCUMENTED = {
    "lob_event": (40, [("id", "<u8", 0), ("new_id", "<u8", 8), ("price", "<i8", 16), ("qty", "<i8", 24),
                       ("instrument", "<u4", 32), ("kind", "u1", 36), ("side", "u1", 37), ("tif", "u1", 38),
                       ("flags", "u1", 39)]),
    "lob_exec": (48, [("maker_id", "<u8", 0), ("taker_id", "<u8", 8), ("price", "<i8", 16), ("qty", "<i8", 24),
                      ("maker_remaining", "<i8", 32), ("event_index", "<u4", 40), ("instrument", "<u4", 44)]),
    "lob_result": (24, [("filled", "<i8", 0), ("resting", "<i8", 8), ("n_exec", "<u4", 16), ("status", "<i4", 20)]),
    "lob_desync": (64, [("order_id", "<u8", 0), ("found_id", "<u8", 8), ("expected_qty", "<i8", 16),
                        ("found_qty", "<i8", 24), ("expected_price", "<i8", 32), ("found_price", "<i8", 40),
                        ("event_index", "<u4", 48), ("instrument", "<u4", 52), ("cause", "<u4", 56),
                        ("reserved", "<u4", 60)]),
    "lob_bbo": (48, [("bid_price", "<i8", 0), ("bid_qty", "<i8", 8), ("ask_price", "<i8", 16), ("ask_qty", "<i8", 24),
                     ("bid_count", "<u4", 32), ("ask_count", "<u4", 36), ("instrument", "<u4", 40),
                     ("changed", "<u4", 44)]),
}
DTYPES = {"lob_event": lobreplay.EVENT_DTYPE, "lob_exec": lobreplay.EXEC_DTYPE,
          "lob_result": lobreplay.RESULT_DTYPE, "lob_bbo": lobreplay.BBO_DTYPE,
          "lob_desync": lobreplay.DESYNC_DTYPE}


@pytest.mark.parametrize("cname", sorted(DOCUMENTED))
def test_dtype_matches_c_struct(cname):
    ffi = _coreapi.ffi
    dt = DTYPES[cname]
    c_fields = ffi.typeof(cname).fields
    assert dt.itemsize == ffi.sizeof(cname)
    assert list(dt.names) == [name for name, _ in c_fields]
    for name, f in c_fields:
        np_type, offset = dt.fields[name]
        assert offset == f.offset == ffi.offsetof(cname, name), name
        assert np_type.itemsize == ffi.sizeof(f.type), name
        assert np_type.kind == ("u" if f.type.cname.startswith("uint") else "i"), name


@pytest.mark.parametrize("cname", sorted(DOCUMENTED))
def test_dtype_matches_documented_layout(cname):
    size, fields = DOCUMENTED[cname]
    dt = DTYPES[cname]
    assert dt.itemsize == size
    assert [(n, dt.fields[n][0].str if dt.fields[n][0].itemsize > 1 else dt.fields[n][0].str.lstrip("|"),
             dt.fields[n][1]) for n in dt.names] == fields


def test_a_numpy_record_reaches_c_intact():
    """Write every field through numpy, read it back through the C struct."""
    ffi = _coreapi.ffi
    ev = np.zeros(1, lobreplay.EVENT_DTYPE)
    ev[0] = (2**64 - 2, 7, -123456789012, 2**40, 4_000_000, 4, ord("S"), 3, 9)
    c = ffi.from_buffer("lob_event[]", ev)[0]
    assert (c.id, c.new_id, c.price, c.qty, c.instrument, c.kind, c.side, c.tif, c.flags) == \
        (2**64 - 2, 7, -123456789012, 2**40, 4_000_000, 4, ord("S"), 3, 9)


def test_enums_take_their_values_from_c():
    lib = _coreapi.lib
    assert [int(k) for k in lobreplay.Kind] == [lib.LOB_NEW, lib.LOB_CANCEL, lib.LOB_REDUCE, lib.LOB_REPLACE,
                                                 lib.LOB_EXEC, lib.LOB_STATE]
    assert [int(f) for f in lobreplay.Flag] == [lib.LOB_F_FEED, lib.LOB_F_PRICE, lib.LOB_F_NOCHECK,
                                                 lib.LOB_F_NOTIONAL, lib.LOB_F_STP_CANCEL_RESTING,
                                                 lib.LOB_F_STP_CANCEL_INCOMING]
    assert lobreplay.Flag.STP_CANCEL_BOTH == lib.LOB_F_STP_CANCEL_BOTH == \
        lib.LOB_F_STP_CANCEL_RESTING | lib.LOB_F_STP_CANCEL_INCOMING
    assert [int(c) for c in lobreplay.Cause] == [lib.LOB_D_FILL_ORDER, lib.LOB_D_QTY, lib.LOB_D_CROSSED,
                                                  lib.LOB_D_EXEC_PRICE]
    assert (int(lobreplay.Side.BUY), int(lobreplay.Side.SELL)) == (ord("B"), ord("S"))
    assert [int(t) for t in lobreplay.TIF] == [lib.LOB_GTC, lib.LOB_IOC, lib.LOB_FOK, lib.LOB_MARKET]
    assert lobreplay.Status.OK == 0
    names = {s.name for s in lobreplay.Status}
    assert names == {"OK", "EUNKNOWN_ID", "EDUP_ID", "EBAND", "EFULL", "EQTY", "EPRICE", "EKIND",
                     "EINSTRUMENT", "EEXECFULL", "EARG", "ENOMEM", "ECORRUPT", "EFRAME"}
    # every status has its own text
    texts = {_coreapi.strerror(s) for s in lobreplay.Status}
    assert len(texts) == len(lobreplay.Status)


def test_the_core_loaded_is_the_one_asked_for():
    """`make asan` swaps in the sanitizer build with LOBREPLAY_CORE; prove the swap happened."""
    import os
    wanted = os.environ.get("LOBREPLAY_CORE")
    loaded = os.path.realpath(_coreapi._core.__file__)
    if wanted:
        assert loaded == os.path.realpath(wanted)
    else:
        assert os.path.dirname(loaded) == os.path.dirname(os.path.realpath(lobreplay.__file__))


def test_public_names_resolve_and_numpy_loads_on_first_use():
    """Every name in __all__ resolves; `import lobreplay` (and the command
    line's module) load no numpy, so the command line sets its environment
    first (OPENBLAS_NUM_THREADS: lobreplay calls no BLAS)."""
    import subprocess
    import sys
    for name in lobreplay.__all__:
        assert getattr(lobreplay, name) is not None, name
    with pytest.raises(AttributeError, match="no_such_name"):
        lobreplay.no_such_name  # noqa: B018
    code = ("import sys, lobreplay, lobreplay.cli.main; assert 'numpy' not in sys.modules, 'numpy loaded'; "
            "import os; os.environ.pop('OPENBLAS_NUM_THREADS', None); "
            "sys.argv = ['lobreplay', 'demo', '--events', '2000', '--repeat', '1']; "
            "rc = lobreplay.cli.main.main(); assert rc == 0, rc; "
            "assert os.environ['OPENBLAS_NUM_THREADS'] == '1'; assert 'numpy' in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


# ---- every record layout from one source (issue 27) ----
#
# The cffi cdef is read from the headers at build time (csrc/cdef.py, called by csrc/build_core.py);
# the numpy dtypes are built from the C structs (_coreapi.struct_dtype), the .lobc record's too;
# the ITCH lengths and field offsets that C reads are held to lobreplay/itch/spec.py here.

import importlib.util  # noqa: E402
import inspect  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CSRC = ROOT / "csrc"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def cdef_mod():
    return _load(CSRC / "cdef.py", "lobreplay_test_cdef")


@pytest.fixture(scope="module")
def build_core():
    return _load(CSRC / "build_core.py", "lobreplay_test_build_core")


HEADER = '''/* a header */
#ifndef X_H
#define X_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cdef-begin */
#define X_ONE 1u               /* a number: "..." in the cdef */
#define X_BIG (1u << 22)
enum { X_BUY = 'B', X_SLASH = '/' };   /* a character literal, and one that looks like a comment's start */
typedef struct x_rec {
    int64_t price;   /* "/* in a comment */
    uint8_t side;
    uint8_t reserved[7];
} x_rec;
/* cdef-end */

/* a comment between regions, and a blank line */

/* cdef-begin */
int x_apply(const x_rec *r, size_t n);  // a line comment
/* cdef-end */

#ifdef __cplusplus
}
#endif

#endif /* X_H */
'''


def test_cdef_extractor_takes_the_marked_declarations(cdef_mod, tmp_path):
    text = cdef_mod.header_cdef(HEADER, "x.h")
    assert text.split("\n") == [
        "#define X_ONE ...", "#define X_BIG ...", "enum { X_BUY = 'B', X_SLASH = '/' };",
        "typedef struct x_rec {", "    int64_t price;", "    uint8_t side;", "    uint8_t reserved[7];", "} x_rec;",
        "int x_apply(const x_rec *r, size_t n);", ""]
    assert cdef_mod.outside(HEADER, "x.h") == []
    (tmp_path / "x.h").write_text(HEADER)
    full = cdef_mod.cdef([tmp_path / "x.h"])
    assert full.startswith("/* x.h */\n") and full.endswith(text)
    from cffi import FFI
    ffi = FFI()
    ffi.cdef(full)  # cffi takes it
    assert [name for name, _ in ffi.typeof("x_rec").fields] == ["price", "side", "reserved"]
    assert ffi.sizeof("x_rec") == 16


def _in_region(line: str) -> str:
    return HEADER.replace("/* cdef-end */\n\n/* a comment", line + "\n/* cdef-end */\n\n/* a comment", 1)


@pytest.mark.parametrize("text, message", [
    (_in_region("#if X_ONE"), r"x\.h:20: cffi's cdef takes no '#if X_ONE'"),
    (_in_region('#include "lob.h"'), r"x\.h:20: cffi's cdef takes no '#include \"lob.h\"'"),
    (_in_region("#define X_MAX(a, b) ((a) > (b) ? (a) : (b))"), r"x\.h:20: cffi's cdef takes no '#define X_MAX"),
    (_in_region("#define X_EMPTY"), r"x\.h:20: #define X_EMPTY has no value"),
    (_in_region("static inline int x_one(void) { return 1; }"), r"x\.h:20: cffi's cdef takes no static"),
    (_in_region("inline int x_two(void);"), r"x\.h:20: cffi's cdef takes no inline"),
    (HEADER.replace("int x_apply", "/* cdef-begin */\nint x_apply"), r"x\.h:2\d: /\* cdef-begin \*/ inside"),
    (HEADER.replace("/* cdef-end */\n\n#ifdef", "\n#ifdef"), r"x\.h:24: /\* cdef-begin \*/ is never closed"),
    (HEADER.replace("/* cdef-begin */\nint", "int"), r"x\.h:25: /\* cdef-end \*/ without"),
    (HEADER.replace("/* cdef-begin */\n#define X_ONE", "/* cdef-begin */ #define X_ONE"),
     r"x\.h:11: a cdef marker must stand alone"),
    (HEADER.replace("/* cdef-begin */", "").replace("/* cdef-end */", ""), r"x\.h: no /\* cdef-begin"),
    (HEADER.replace("/* a comment between", "int x_forgotten(void);\n/* a comment between"),
     r"x\.h:22: 'int x_forgotten\(void\);' is outside every"),
    (HEADER.replace('#include <stdint.h>', '#include <stdint.h>\n#define X_LIMIT 8'),
     r"x\.h:6: '#define X_LIMIT 8' is outside every"),
])
def test_cdef_extractor_refuses_what_cffi_cannot_take_or_would_miss(cdef_mod, tmp_path, text, message):
    (tmp_path / "x.h").write_text(text)
    with pytest.raises(cdef_mod.CdefError, match=message):
        cdef_mod.cdef([tmp_path / "x.h"])


def test_the_cdef_is_read_from_the_headers(cdef_mod, build_core):
    """No hand copy is left; each public header's declarations are all inside its regions; and the
    loaded core was built from the headers as they are now: the same functions, numbers and struct
    layouts as a fresh parse of them (cffi checked each struct against the compiler at build)."""
    from cffi import FFI
    assert not (CSRC / "lob_cdef.h").exists()
    for h in build_core.HEADERS:
        assert cdef_mod.outside((CSRC / h).read_text(), h) == [], h
    fresh = FFI()
    fresh.cdef(build_core.cdef_text())
    decl = fresh._parser._declarations
    functions = {k.split()[1] for k in decl if k.startswith("function ")}
    macros = {k.split()[1] for k in decl if k.startswith("macro ")}
    numbers = set(fresh._parser._int_constants)
    lib, ffi = _coreapi.lib, _coreapi.ffi
    assert set(dir(lib)) == functions | macros | numbers
    assert {"lob_session_apply", "lob_itch_events", "lob_l2_feed", "lob_bn_sync_lines", "lob_synth_fill"} <= functions
    assert {"LOB_SYNTH_MIN_CAP", "LOB_L2_MAX_MESSAGE"} <= macros and {"LOB_BN_VALUES_MAX", "LOB_BUY"} <= numbers
    for name, value in fresh._parser._int_constants.items():
        assert getattr(lib, name) == value, name
    structs = fresh.list_types()[1]
    assert set(structs) == set(ffi.list_types()[1])
    for s in structs:
        if fresh.typeof(f"struct {s}").fields is None:
            continue  # opaque (lob_book, lob_session, ...)
        assert fresh.sizeof(s) == ffi.sizeof(s), s
        assert [(n, f.offset, f.type.cname.replace("struct ", "")) for n, f in fresh.typeof(s).fields] == \
            [(n, f.offset, f.type.cname.replace("struct ", "")) for n, f in ffi.typeof(s).fields], s


def _doc_record_table(text: str) -> list[tuple[int, int, str, str]]:
    """The rows (offset, size, field, type) of docs/lobc.md's "Record" table."""
    part = text.split("## Record (64 bytes)", 1)[1].split("\n\n", 2)[1]
    rows = []
    for line in part.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((int(cells[0]), int(cells[1]), cells[2].strip("`"), re.match(r"u?int\d+", cells[3]).group(0)))
    return rows


def test_lobc_record_dtype_is_the_c_struct_and_the_documented_layout():
    """lobc.RECORD_DTYPE is the dtype built from lob_l2_record (no second definition), and it
    is the layout docs/lobc.md gives, in its table and in its numpy line."""
    from lobreplay.l2 import lobc
    assert lobc.RECORD_DTYPE is _coreapi.L2_RECORD_DTYPE
    ffi = _coreapi.ffi
    dt = lobc.RECORD_DTYPE
    assert dt.itemsize == ffi.sizeof("lob_l2_record") == lobc.UNIT
    assert list(dt.names) == [n for n, _ in ffi.typeof("lob_l2_record").fields]
    doc = (ROOT / "docs" / "lobc.md").read_text()
    table = _doc_record_table(doc)
    assert [(off, size, name) for off, size, name, _ in table] == \
        [(dt.fields[n][1], dt.fields[n][0].itemsize, n) for n in dt.names]
    for off, size, name, ctype in table:
        assert ctype == ("u" if dt.fields[name][0].kind == "u" else "") + f"int{8 * size}", name
    m = re.search(r"numpy: `(np\.dtype\(\[.*?\]\))`, itemsize (\d+)", doc, re.S)
    assert np.dtype(eval(m.group(1).replace("\n", ""), {"np": np})) == dt and int(m.group(2)) == dt.itemsize


def test_lobc_writer_packs_every_field_of_the_c_record(tmp_path):
    """LobcWriter.add packs a record with a struct built from RECORD_DTYPE: a record whose every
    field has its own value comes back from the file as numpy wrote it, and add() names every field."""
    from lobreplay.l2 import lobc
    dt = lobc.RECORD_DTYPE
    r = np.zeros(1, dt)
    for i, name in enumerate(dt.names):
        r[name] = (0x0102030405060708 * (i + 1)) % (1 << (8 * dt.fields[name][0].itemsize - 1))
    r["kind"], r["side"], r["symbol"] = lobc.TICKER_ASK, ord("S"), 1
    assert lobc._REC.pack(*[r[n][0].item() for n in lobc._REC_ORDER]) == r.tobytes()
    assert set(dt.names) <= set(inspect.signature(lobc.LobcWriter.add).parameters)
    with lobc.LobcWriter(tmp_path / "x.lobc", venue="binance", market="spot", symbols=["a", "b"]) as w:
        w.add(**{n: r[n][0].item() for n in dt.names})
    assert lobc.read(tmp_path / "x.lobc").records.tobytes() == r.tobytes()


def test_lobc_kinds_and_sides_are_the_c_replays():
    """The record kinds lobc writes are the ones csrc/feeds/l2.h reads (LOB_L2_<name>), name for name."""
    from lobreplay.l2 import lobc
    lib = _coreapi.lib
    c_kinds = {getattr(lib, n): n[len("LOB_L2_"):] for n in dir(lib)
               if n.startswith("LOB_L2_") and not n.startswith(("LOB_L2_SEQ_", "LOB_L2_MAX_"))}
    assert c_kinds == lobc.KIND_NAMES
    for k, name in lobc.KIND_NAMES.items():
        assert getattr(lobc, name) == k, name
    assert (lobc.SIDE_BID, lobc.SIDE_ASK) == (lib.LOB_BUY, lib.LOB_SELL)


def test_itch_lengths_in_c_are_spec_py_s():
    """Every one of the 256 type bytes: C's length (0: not a type) is spec.py's, and the
    test suite's own reference decoder's (tests/itch_ref.py)."""
    import itch_ref
    from lobreplay.itch import spec
    c = {chr(t): _coreapi.itch_length(t) for t in range(256) if _coreapi.itch_length(t)}
    assert c == spec.LENGTHS == itch_ref.LENGTHS
    for t, lay in spec.LAYOUTS.items():
        assert lay.length == 11 + sum(spec.field_size(k) for _, k in lay.fields), t


# The fields C reads (csrc/feeds/itch.h, LOB_ITCH_AT_*): each for the message types it is read from, as
# (type, spec.py's field name).
ITCH_OFFSETS = {
    "LOCATE": [(t, "stock_locate") for t in "AFECXDUHh"],
    "TIMESTAMP": [(t, "timestamp") for t in "AFECXDUHh"],
    "REF": [(t, "order_ref") for t in "AFECXDU"],
    "A_SIDE": [("A", "side"), ("F", "side")], "A_SHARES": [("A", "shares"), ("F", "shares")],
    "A_PRICE": [("A", "price"), ("F", "price")],
    "E_SHARES": [("E", "executed_shares"), ("C", "executed_shares")],
    "C_PRINTABLE": [("C", "printable")], "C_PRICE": [("C", "execution_price")],
    "X_SHARES": [("X", "cancelled_shares")],
    "U_NEW": [("U", "new_order_ref")], "U_SHARES": [("U", "shares")], "U_PRICE": [("U", "price")],
    "H_STATE": [("H", "trading_state")], "h_MARKET": [("h", "market_code")], "h_ACTION": [("h", "halt_action")],
}


def test_itch_offsets_in_c_are_spec_py_s():
    from lobreplay.itch import spec
    lib = _coreapi.lib
    assert {n[len("LOB_ITCH_AT_"):] for n in dir(lib) if n.startswith("LOB_ITCH_AT_")} == set(ITCH_OFFSETS)
    for name, uses in ITCH_OFFSETS.items():
        for t, field in uses:
            assert getattr(lib, "LOB_ITCH_AT_" + name) == spec.LAYOUTS[t].offsets()[field], (name, t, field)


ITCH_NOTES = ROOT.parent / "shared" / "docs" / "itch-format.md"


@pytest.mark.skipif(not ITCH_NOTES.exists(), reason="the project's ITCH notes are not beside this checkout")
def test_itch_lengths_are_the_itch_notes():
    """The ITCH notes give each length twice (a layout's heading, and the length table): both
    are C's and spec.py's."""
    from lobreplay.itch import spec
    text = ITCH_NOTES.read_text()
    headings = {m.group(1): int(m.group(2)) for m in re.finditer(r"^### (\S) — .*?\((\d+)\)", text, re.M)}
    table = text.split("### Length table", 1)[1].split("```")[1]
    listed = {t: int(n) for t, n in re.findall(r"(\S) (\d+)", table)}
    c = {chr(t): _coreapi.itch_length(t) for t in range(256) if _coreapi.itch_length(t)}
    assert headings == listed == spec.LENGTHS == c
