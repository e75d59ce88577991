"""Arrow arrays from numpy arrays and lists of strings, without pandas.

`pyarrow.array` asks pandas whether its argument is a pandas object, and so imports
pandas (0.25 s of CPU here, on top of pyarrow's 0.04 s) in any process that builds a
report, though no report needs it. The arrays a replay writes are plain numpy columns
(integers, timestamps, booleans, fixed-width bytes) and symbol names: built here from
their buffers (zero-copy for numbers), they leave pandas unloaded. Anything else goes
to `pyarrow.array`.
"""
from __future__ import annotations

import numpy as np

from lobreplay._lazy import Deferred

pa = Deferred("pyarrow")

# Arrow type name -> the numpy dtype of its values buffer
_NUMPY = {name: np.dtype(name) for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                            "uint64", "float16", "float32", "float64")}
_NUMPY.update({"halffloat": np.dtype(np.float16), "float": np.dtype(np.float32), "double": np.dtype(np.float64)})


def array(values, type=None):
    """values (a numpy array, a list or tuple of str, or an Arrow array) as an Arrow array
    of `type` (default: from the numpy dtype)."""
    if isinstance(values, pa.Array):
        return values if type is None or values.type == type else values.cast(type)
    if isinstance(values, np.ndarray) and values.dtype.kind == "O" and values.ndim == 1:
        values = values.tolist()  # e.g. strings with None among them
    if isinstance(values, (list, tuple)):
        if not values:
            return pa.nulls(0, type if type is not None else pa.null())
        valid = np.fromiter((v is not None for v in values), bool, len(values))
        if not valid.all():
            if type is None:
                return pa.array(values)
            if not valid.any():
                return pa.nulls(len(values), type)
            return _with_nulls(values, valid, type)
        if all(isinstance(v, str) for v in values):
            return strings(values, type or pa.string())
        if all(isinstance(v, (bool, int, float, np.generic)) for v in values):
            values = np.asarray(values)
    if not isinstance(values, np.ndarray) or values.ndim != 1:
        return pa.array(values, type=type)
    kind = values.dtype.kind
    if kind == "S":
        return _from_bytes(values, type or pa.binary())
    if kind == "U":
        return strings(values.tolist(), type or pa.string())
    if kind == "M":
        unit = np.datetime_data(values.dtype)[0]
        return _from_numbers(values.view(np.int64), type or pa.timestamp(unit))
    if kind == "b" and (type is None or type == pa.bool_()):
        bits = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])
    if kind in "iuf":
        return _from_numbers(values, type if type is not None else pa.from_numpy_dtype(values.dtype))
    return pa.array(values, type=type)


def _with_nulls(values: list, valid: np.ndarray, type):
    """values (a list with None where valid is False) as an Arrow array of `type`: the values
    there, spread out under a validity bitmap (a take would import pyarrow.compute, 60-75 ms)."""
    dense = array([v for v in values if v is not None], type)
    n, bitmap = len(values), pa.py_buffer(np.packbits(valid, bitorder="little"))
    where = np.flatnonzero(valid)
    if str(type) in _NUMPY or pa.types.is_timestamp(type) or pa.types.is_duration(type):
        d = to_numpy(dense)
        spread = np.zeros(n, d.dtype)
        spread[where] = d
        return pa.Array.from_buffers(type, n, [bitmap, pa.py_buffer(spread)], null_count=n - len(where))
    if type in (pa.string(), pa.binary(), pa.large_string(), pa.large_binary()):
        offsets, data = dense.buffers()[1:]
        wide = type in (pa.large_string(), pa.large_binary())
        o = np.frombuffer(offsets, np.int64 if wide else np.int32, count=len(dense) + 1)
        spread = np.zeros(n, np.int64)
        spread[where] = np.diff(o)
        out = _with_offsets(type, n, spread, np.frombuffer(data, np.uint8, count=int(o[-1])) if data else
                            np.empty(0, np.uint8))
        return pa.Array.from_buffers(type, n, [bitmap] + out.buffers()[1:], null_count=n - len(where))
    # another type: spread out by a take whose index is null where None is
    index = np.cumsum(valid) - 1
    return dense.take(pa.Array.from_buffers(pa.int64(), n, [bitmap, pa.py_buffer(index)]))


def _from_numbers(values: np.ndarray, type):
    if pa.types.is_timestamp(type) or pa.types.is_duration(type):
        want = np.dtype(np.int64)
    else:
        want = _NUMPY.get(str(type))
        if want is None:  # e.g. a decimal or a dictionary type: pyarrow converts
            return pa.array(values, type=type)
    if values.dtype != want:
        if values.dtype.kind == "f" and want.kind in "iu":  # truncation rules: pyarrow's
            return pa.array(values, type=type)
        if values.dtype.kind in "iu" and want.kind in "iu" and len(values):
            lo, hi = np.iinfo(want).min, np.iinfo(want).max
            if int(values.min()) < lo or int(values.max()) > hi:  # refused, as pyarrow does
                raise OverflowError(f"a value of {values.dtype} does not fit {type} ({lo} .. {hi})")
    values = np.ascontiguousarray(values, dtype=want)
    return pa.Array.from_buffers(type, len(values), [None, pa.py_buffer(values)])


def _from_bytes(values: np.ndarray, type):
    """Fixed-width bytes (numpy 'S', trailing NULs not part of the value, as numpy reads
    them) as binary, or as `type` (string: checked to be UTF-8)."""
    n, width = len(values), values.dtype.itemsize
    raw = np.ascontiguousarray(values).view(np.uint8).reshape(n, width)
    nonzero = raw != 0  # a value ends after its last non-NUL byte
    lengths = np.where(nonzero.any(axis=1), width - np.argmax(nonzero[:, ::-1], axis=1), 0)
    data = raw[np.arange(width) < lengths[:, None]]
    if type == pa.string():
        # built as strings directly: a cast would import pyarrow.compute (60-75 ms here);
        # ASCII is UTF-8, anything else is checked as the cast would
        out = _with_offsets(type, n, lengths, data)
        if len(data) and data.max() >= 0x80:
            out.validate(full=True)
        return out
    binary = _with_offsets(pa.binary(), n, lengths, data)
    return binary if type == pa.binary() else binary.cast(type)


def strings(items, type=None):
    """A list of str as a string array (or as `type`, e.g. large_string or binary)."""
    encoded = [s.encode() for s in items]
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    data = np.frombuffer(b"".join(encoded), np.uint8)
    type = type or pa.string()
    if type in (pa.string(), pa.binary(), pa.large_string(), pa.large_binary()):
        return _with_offsets(type, len(encoded), lengths, data)  # UTF-8 by construction
    return _with_offsets(pa.binary(), len(encoded), lengths, data).cast(type)


def dictionary(codes: np.ndarray, names) -> pa.DictionaryArray:
    """Small non-negative integer codes (symbol numbers: < 65536) dictionary-encoded with only
    the codes present, in code order; names(present codes) gives their dictionary (a string
    array). The codes present come from a table, not the sort np.unique would do."""
    codes = np.asarray(codes).astype(np.intp, copy=False)
    size = int(codes.max()) + 1 if len(codes) else 0
    seen = np.zeros(size, bool)
    seen[codes] = True
    present = np.flatnonzero(seen)
    index = np.empty(size, np.int32)
    index[present] = np.arange(len(present), dtype=np.int32)
    return pa.DictionaryArray.from_arrays(array(index[codes]), names(present))


def _with_offsets(type, n: int, lengths: np.ndarray, data: np.ndarray):
    """A variable-width array of `type` (string, binary or their large forms)."""
    offsets = np.zeros(n + 1, np.int64 if type in (pa.large_string(), pa.large_binary()) else np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(type, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def to_numpy(values, fill=None) -> np.ndarray:
    """A numeric, timestamp or boolean Arrow array (or chunked array) as numpy, read from
    its buffers (`to_numpy` of pyarrow imports pandas); nulls become `fill` (an array with
    nulls and no fill is an error)."""
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    t = values.type
    if pa.types.is_boolean(t):
        dtype = np.dtype(bool)
    elif pa.types.is_timestamp(t) or pa.types.is_duration(t):
        dtype = np.dtype(np.int64)
    elif str(t) in _NUMPY:
        dtype = _NUMPY[str(t)]
    else:
        raise TypeError(f"to_numpy: {t} is not a numeric, timestamp or boolean type")
    parts = []
    for c in chunks:
        if c.null_count and fill is None:
            raise ValueError("to_numpy: the array has nulls and no fill value was given")
        validity, data = c.buffers()[:2]
        n = len(c)
        if n == 0:
            continue
        if dtype == bool:
            part = _bits(data, c.offset, n)
        else:
            part = np.frombuffer(data, dtype, count=c.offset + n)[c.offset:]
        if c.null_count:
            part = np.where(_bits(validity, c.offset, n), part, np.asarray(fill, dtype))
        parts.append(part)
    if not parts:
        return np.empty(0, dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _bits(buf, offset: int, n: int) -> np.ndarray:
    """n bits of an Arrow bitmap from bit `offset`, as booleans."""
    bits = np.unpackbits(np.frombuffer(buf, np.uint8), bitorder="little", count=offset + n)
    return bits[offset:].astype(bool)
