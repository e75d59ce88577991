"""lobreplay.core.arrow builds the same Arrow arrays as pyarrow.array (which imports pandas),
and reads numeric columns back like to_numpy, from the buffers."""
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lobreplay.core import arrow as _arrow

NUMERIC = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64"]


def _elements(dtype: str):
    """NaN is never equal to itself: floats without it (a replay writes none)."""
    return st.floats(allow_nan=False, width=int(dtype[5:])) if dtype.startswith("float") else None


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(NUMERIC + ["bool"]), data=st.data())
def test_numpy_columns_match_pyarrow(dtype, data):
    values = data.draw(hnp.arrays(np.dtype(dtype), st.integers(0, 40), elements=_elements(dtype)))
    got = _arrow.array(values)
    assert got.equals(pa.array(values)), (got, values)


@settings(max_examples=60, deadline=None)
@given(values=hnp.arrays(np.int64, st.integers(0, 30), elements=st.integers(0, 60000)),
       target=st.sampled_from(["int64", "uint16", "uint32", "int32", "float64"]))
def test_a_column_converted_to_the_schemas_type(values, target):
    typ = pa.type_for_alias(target)
    assert _arrow.array(values, typ).equals(pa.array(values, type=typ))


def test_timestamps_with_and_without_a_zone():
    ns = np.array([0, 1, 1_577_700_000_123_456_789], np.int64)
    for typ in (pa.timestamp("ns"), pa.timestamp("ns", tz="UTC")):
        assert _arrow.array(ns, typ).equals(pa.array(ns, type=pa.timestamp("ns")).cast(typ))
        assert _arrow.array(ns.astype("datetime64[ns]"), typ).equals(pa.array(ns, type=pa.timestamp("ns")).cast(typ))


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.binary(max_size=6).map(lambda b: b.replace(b"\x00", b"") or b"A"), max_size=20))
def test_fixed_width_bytes_as_binary_and_string(items):
    """numpy 'S' drops trailing NULs; so does the Arrow value (no NUL inside: as pyarrow)."""
    values = np.array(items or [b""], dtype="S8")[: len(items)]
    assert _arrow.array(values).equals(pa.array(values, type=pa.binary()))
    ascii_values = np.array([b.decode("latin-1").encode("ascii", "replace") for b in items] or [b""], "S8")[: len(items)]
    assert _arrow.array(ascii_values, pa.string()).equals(pa.array(ascii_values, type=pa.binary()).cast(pa.string()))


def test_bytes_that_are_not_utf8_are_refused_as_strings():
    with pytest.raises(pa.ArrowInvalid):
        _arrow.array(np.array([b"\xff\xfe"], "S2"), pa.string())
    with pytest.raises(pa.ArrowInvalid):  # a cut multi-byte character
        _arrow.array(np.array([b"ok", "é".encode()[:1]], "S2"), pa.string())


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.text(max_size=3).map(lambda t: t.replace("\x00", "") or "A"), max_size=20))
def test_fixed_width_utf8_bytes_as_strings(items):
    """Bytes beyond ASCII (valid UTF-8) as strings, as a cast of the binary array makes them."""
    values = np.array([t.encode() for t in items] or [b""], np.bytes_)[: len(items)]
    got = _arrow.array(values, pa.string())
    assert got.equals(pa.array(values, type=pa.binary()).cast(pa.string()))
    assert got.to_pylist() == items


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.one_of(st.none(), st.text(max_size=5)), max_size=20))
def test_lists_of_strings_with_nulls(items):
    assert _arrow.array(items, pa.string()).equals(pa.array(items, type=pa.string()))
    if items and all(v is not None for v in items):
        assert _arrow.strings(items).equals(pa.array(items, type=pa.string()))
        assert _arrow.array(np.array(items, object), pa.string()).equals(pa.array(items, type=pa.string()))


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.one_of(st.none(), st.integers(0, 65535)), max_size=20),
       target=st.sampled_from(["uint16", "int64", "uint32"]))
def test_lists_of_integers_with_nulls(items, target):
    typ = pa.type_for_alias(target)
    assert _arrow.array(items, typ).equals(pa.array(items, type=typ))


@settings(max_examples=40, deadline=None)
@given(items=st.lists(st.one_of(st.none(), st.integers(0, 2**62)), max_size=12),
       target=st.sampled_from(["large_string", "binary", "timestamp_utc", "float64"]))
def test_lists_of_other_types_with_nulls(items, target):
    """Strings of the other widths, timestamps and floats, with None among them."""
    if target == "timestamp_utc":
        typ = pa.timestamp("ns", tz="UTC")
    elif target == "float64":
        typ, items = pa.float64(), [None if v is None else float(v % 1000) for v in items]
    else:
        typ = pa.type_for_alias(target)
        items = [None if v is None else (str(v) if target == "large_string" else str(v).encode()) for v in items]
    assert _arrow.array(items, typ).equals(pa.array(items, type=typ))


def test_lists_of_booleans_and_an_empty_list():
    assert _arrow.array([True, None, False], pa.bool_()).equals(pa.array([True, None, False], pa.bool_()))
    for typ in (pa.int64(), pa.string(), pa.timestamp("ns", tz="UTC")):
        assert _arrow.array([], typ).equals(pa.array([], type=typ))


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(NUMERIC + ["bool"]), data=st.data())
def test_to_numpy_reads_sliced_and_chunked_arrays(dtype, data):
    a = data.draw(hnp.arrays(np.dtype(dtype), st.integers(0, 30), elements=_elements(dtype)))
    b = data.draw(hnp.arrays(np.dtype(dtype), st.integers(0, 30), elements=_elements(dtype)))
    lo = data.draw(st.integers(0, len(a)))
    chunked = pa.chunked_array([pa.array(a).slice(lo), pa.array(b)], type=pa.from_numpy_dtype(np.dtype(dtype)))
    got = _arrow.to_numpy(chunked)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.concatenate([a[lo:], b]))


def test_to_numpy_fills_nulls_only_when_asked():
    arr = pa.array([1, None, 3, None], pa.int64()).slice(1)
    np.testing.assert_array_equal(_arrow.to_numpy(arr, fill=-7), [-7, 3, -7])
    np.testing.assert_array_equal(_arrow.to_numpy(pa.array([True, None, False]), fill=False), [True, False, False])
    with pytest.raises(ValueError, match="nulls"):
        _arrow.to_numpy(arr)
    with pytest.raises(TypeError, match="string"):
        _arrow.to_numpy(pa.array(["a"]))
    ts = pa.array([5, 6], pa.timestamp("ns", tz="UTC"))
    np.testing.assert_array_equal(_arrow.to_numpy(ts), [5, 6])
    assert _arrow.to_numpy(pa.chunked_array([], pa.int32())).dtype == np.int32


def test_a_value_that_does_not_fit_the_type_is_refused():
    """Not wrapped around: a report column that does not fit its schema is a bug to see."""
    with pytest.raises(OverflowError, match="uint16"):
        _arrow.array(np.array([1, 70000], np.int64), pa.uint16())
    with pytest.raises(OverflowError, match="uint64"):
        _arrow.array(np.array([-1], np.int64), pa.uint64())
    assert _arrow.array(np.array([0, 65535], np.int64), pa.uint16()).to_pylist() == [0, 65535]
    with pytest.raises(pa.ArrowInvalid):  # a fraction into an integer: pyarrow's refusal
        _arrow.array(np.array([1.5]), pa.int64())


@settings(max_examples=80, deadline=None)
@given(codes=hnp.arrays(st.sampled_from([np.dtype(np.uint16), np.dtype(np.int64)]), st.integers(0, 50),
                        elements=st.integers(0, 70)))
def test_dictionary_holds_the_codes_present_in_order(codes):
    """_arrow.dictionary (the symbol columns of every report): the same values as the names
    looked up row by row, and a dictionary of the codes present only, in code order."""
    names = np.array([f"S{i}" for i in range(71)], object)
    got = _arrow.dictionary(codes, lambda present: pa.array(names[present].tolist(), pa.string()))
    assert got.to_pylist() == names[codes.astype(np.intp)].tolist()
    assert got.dictionary.to_pylist() == [f"S{i}" for i in sorted(set(codes.tolist()))]
    assert got.type == pa.dictionary(pa.int32(), pa.string())
