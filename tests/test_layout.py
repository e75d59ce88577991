"""The numpy dtypes agree with the C structs field by field, and with the
documented record layout (docs/core.md), so a header change cannot slip by."""
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
