"""The only module that imports the compiled core (lobreplay._core).

Everything here is thin: validate arrays (dtype, dimensions, contiguity,
writability, length) before ``ffi.from_buffer``, call, and turn status codes
into exceptions in one place (:func:`raise_for_status`).
"""
from __future__ import annotations

import os

import numpy as np

from lobreplay import errors


def _load_core():
    """The compiled core; LOBREPLAY_CORE=path/to/_core*.so loads another build of it
    (the sanitizer build in .ci/run) in place of the installed one."""
    path = os.environ.get("LOBREPLAY_CORE")
    if not path:
        from lobreplay import _core
        return _core
    import importlib.util
    spec = importlib.util.spec_from_file_location("lobreplay._core", path)
    if spec is None or not os.path.exists(path):
        raise ImportError(f"LOBREPLAY_CORE={path}: no such compiled module")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_core = _load_core()
ffi, lib = _core.ffi, _core.lib

# ---- dtypes from the C structs (the C header is the single source of truth) ----

_CTYPE_TO_NUMPY = {
    "uint64_t": "<u8", "int64_t": "<i8", "uint32_t": "<u4", "int32_t": "<i4",
    "uint16_t": "<u2", "int16_t": "<i2", "uint8_t": "u1", "int8_t": "i1",
}


def struct_dtype(cname: str) -> np.dtype:
    """A numpy structured dtype with the same field names, offsets and size as a C struct."""
    fields = ffi.typeof(cname).fields
    return np.dtype({
        "names": [name for name, _ in fields],
        "formats": [_CTYPE_TO_NUMPY[f.type.cname] for _, f in fields],
        "offsets": [f.offset for _, f in fields],
        "itemsize": ffi.sizeof(cname),
    })


EVENT_DTYPE = struct_dtype("lob_event")
EXEC_DTYPE = struct_dtype("lob_exec")
RESULT_DTYPE = struct_dtype("lob_result")
BBO_DTYPE = struct_dtype("lob_bbo")
DESYNC_DTYPE = struct_dtype("lob_desync")

HIST_BUCKETS = lib.LOB_HIST_BUCKETS
BOOK_HIST_BUCKETS = lib.LOB_BOOK_HIST_BUCKETS
HIST_KINDS = lib.LOB_HIST_KINDS

_NO_EXECS = np.empty(0, EXEC_DTYPE)
_NO_EXECS.flags.writeable = False
NO_DESYNCS = np.empty(0, DESYNC_DTYPE)
NO_DESYNCS.flags.writeable = False

# ---- status codes -> exceptions ----

STATUS_NAMES = {getattr(lib, f"LOB_{n}"): n for n in (
    "OK", "EUNKNOWN_ID", "EDUP_ID", "EBAND", "EFULL", "EQTY", "EPRICE", "EKIND", "EINSTRUMENT", "EEXECFULL",
    "EARG", "ENOMEM", "ECORRUPT", "EFRAME")}

_EXCEPTIONS = {
    lib.LOB_EUNKNOWN_ID: errors.UnknownOrderError,
    lib.LOB_EDUP_ID: errors.DuplicateOrderError,
    lib.LOB_EBAND: errors.OutOfBandError,
    lib.LOB_EFULL: errors.BookFullError,
    lib.LOB_EQTY: errors.BadQuantityError,
    lib.LOB_EPRICE: errors.BadPriceError,
    lib.LOB_EKIND: errors.BadEventError,
    lib.LOB_EINSTRUMENT: errors.UnknownInstrumentError,
    lib.LOB_EARG: errors.CoreArgumentError,
    lib.LOB_ENOMEM: errors.CoreMemoryError,
    lib.LOB_ECORRUPT: errors.CorruptBookError,
    lib.LOB_EFRAME: errors.InputError,
}


def strerror(status: int) -> str:
    return ffi.string(lib.lob_strerror(int(status))).decode()


def exception_for(status: int, context: str = "", **attrs) -> errors.LobError:
    """The exception for a non-zero status, its message built from lob_strerror plus context."""
    cls = _EXCEPTIONS.get(int(status), errors.LobError)
    msg = f"{strerror(status)} ({STATUS_NAMES.get(int(status), status)})"
    if context:
        msg = f"{context}: {msg}"
    return cls(msg, status=int(status), **attrs)


def raise_for_status(status: int, context: str = "", **attrs) -> None:
    if status != lib.LOB_OK:
        raise exception_for(status, context, **attrs)


# ---- array checks ----

def check_array(arr, dtype: np.dtype, name: str, *, writable: bool = False, length: int | None = None):
    """Raise TypeError/ValueError naming the argument unless arr is a 1-D,
    C-contiguous ndarray of exactly dtype (and writable / long enough)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{name}: expected a numpy array of {dtype}, got {type(arr).__name__}")
    if arr.dtype != dtype:
        raise TypeError(f"{name}: expected dtype {dtype}, got {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array, got {arr.ndim} dimensions")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{name}: expected a C-contiguous array (use np.ascontiguousarray)")
    if writable and not arr.flags.writeable:
        raise ValueError(f"{name}: the array must be writable")
    if length is not None and len(arr) < length:
        raise ValueError(f"{name}: expected at least {length} elements, got {len(arr)}")


def _buf(ctype: str, arr, writable: bool = False):
    return ffi.from_buffer(ctype, arr, require_writable=writable)


# ---- sessions and books ----

class CoreSession:
    """Owns one lob_session (freed when this object is collected)."""

    def __init__(self, max_instrument: int):
        if not 0 <= max_instrument <= (1 << 24):
            raise errors.CoreArgumentError(
                f"max_instrument: expected 0 .. {1 << 24}, got {max_instrument}", status=lib.LOB_EARG)
        st = ffi.new("int *")
        ptr = lib.lob_session_new(max_instrument, st)
        if ptr == ffi.NULL:
            raise_for_status(st[0], f"creating a session for instruments 0..{max_instrument}")
        self.ptr = ffi.gc(ptr, lib.lob_session_free)
        self.max_instrument = max_instrument
        self._out = ffi.new("lob_outputs *")
        self._one = None

    def add_book(self, instrument: int, band_low: int, band_high: int, tick: int, capacity: int) -> None:
        if not 0 <= instrument <= self.max_instrument:
            raise errors.CoreArgumentError(
                f"instrument: expected 0 .. {self.max_instrument}, got {instrument}", status=lib.LOB_EARG)
        if lib.lob_session_book(self.ptr, instrument) != ffi.NULL:
            raise errors.CoreArgumentError(f"instrument {instrument} already has a book", status=lib.LOB_EARG)
        st = lib.lob_session_add_book(self.ptr, instrument, band_low, band_high, tick, capacity)
        raise_for_status(st, f"book for instrument {instrument} (band {band_low}..{band_high}, "
                             f"tick {tick}, capacity {capacity})", instrument=instrument)

    def depth(self, instruments: np.ndarray, n: int):
        """The n best levels of both sides of many books in one call: three arrays
        shaped (books, 2, n) (side 0 bid, 1 ask), zeros past a side's last level."""
        inst = np.ascontiguousarray(instruments, dtype=np.uint32)
        k = len(inst)
        prices = np.zeros((k, 2, n), np.int64)
        qtys = np.zeros((k, 2, n), np.int64)
        counts = np.zeros((k, 2, n), np.uint32)
        lib.lob_session_depth(self.ptr, _buf("uint32_t[]", inst), k, n, _buf("int64_t[]", prices, True),
                              _buf("int64_t[]", qtys, True), _buf("uint32_t[]", counts, True))
        return prices, qtys, counts

    def book(self, instrument: int):
        if not 0 <= instrument <= self.max_instrument:
            return None
        ptr = lib.lob_session_book(self.ptr, instrument)
        return None if ptr == ffi.NULL else ptr

    def apply(self, events, results, execs, bbo=None, desyncs=None, depth=None,
              bbo_event=None) -> tuple[int, int, int, int, int, int]:
        """One C call over a whole array. Returns (status, n_done, n_exec, n_desync, n_depth, n_bbo).
        depth: None, or (levels, event uint32[rows], prices int64[rows*2*levels], qtys, counts uint32).
        bbo_event (uint32, one per event, with bbo): rows only for the events that change the
        top of their book, bbo_event[r] the event of row r; n_bbo rows.
        Arrays are checked here; status is LOB_OK or LOB_EEXECFULL."""
        n = len(events)
        check_array(events, EVENT_DTYPE, "events")
        check_array(results, RESULT_DTYPE, "results", writable=True, length=n)
        check_array(execs, EXEC_DTYPE, "execs", writable=True)
        out = self._out
        out.results = _buf("lob_result[]", results, True)
        out.execs = _buf("lob_exec[]", execs, True)
        out.exec_cap = len(execs)
        if bbo is not None:
            check_array(bbo, BBO_DTYPE, "bbo", writable=True, length=n)
            out.bbo = _buf("lob_bbo[]", bbo, True)
        else:
            out.bbo = ffi.NULL
        if bbo is not None and bbo_event is not None:
            check_array(bbo_event, np.dtype(np.uint32), "bbo events", writable=True, length=n)
            out.bbo_event = _buf("uint32_t[]", bbo_event, True)
        else:
            out.bbo_event = ffi.NULL
        if desyncs is not None:
            check_array(desyncs, DESYNC_DTYPE, "desyncs", writable=True)
            out.desyncs = _buf("lob_desync[]", desyncs, True)
            out.desync_cap = len(desyncs)
        else:
            out.desyncs = ffi.NULL
            out.desync_cap = 0
        if depth is not None:
            levels, dev, dp, dq, dc = depth
            rows = len(dev)
            check_array(dev, np.dtype(np.uint32), "depth events", writable=True)
            for name, a, dt in (("depth prices", dp, np.int64), ("depth qtys", dq, np.int64),
                                ("depth counts", dc, np.uint32)):
                check_array(a, np.dtype(dt), name, writable=True, length=rows * 2 * levels)
            out.depth_levels = levels
            out.depth_event = _buf("uint32_t[]", dev, True)
            out.depth_prices = _buf("int64_t[]", dp, True)
            out.depth_qtys = _buf("int64_t[]", dq, True)
            out.depth_counts = _buf("uint32_t[]", dc, True)
            out.depth_cap = rows
        else:
            out.depth_levels = 0
            out.depth_event = out.depth_prices = out.depth_qtys = out.depth_counts = ffi.NULL
            out.depth_cap = 0
        rc = lib.lob_session_apply(self.ptr, _buf("lob_event[]", events), n, out)
        if rc not in (lib.LOB_OK, lib.LOB_EEXECFULL):
            raise_for_status(rc, "applying a batch")
        return rc, out.n_done, out.n_exec, out.n_desync, out.n_depth, out.n_bbo

    def apply_one(self, kind: int, order_id: int, new_id: int, price: int, qty: int, instrument: int,
                  side: int, tif: int, flags: int = 0):
        """One event through the same batch call, without numpy (the interactive
        path). Returns (status, filled, resting, executions as an EXEC_DTYPE array,
        desyncs as a DESYNC_DTYPE array: a FEED order that meets stale orders, as in a batch).
        When the core says the outputs may be too small (EEXECFULL), they get room for the
        book's live orders + 3 rows each, which lob.h says always suffices for one event; if
        the core still says so, a LobError (EEXECFULL) rather than growing again."""
        if self._one is None:
            self._one = (ffi.new("lob_event[1]"), ffi.new("lob_result[1]"), ffi.new("lob_exec[]", 1024),
                         ffi.new("lob_desync[]", 64))
        ev, res, ex, dx = self._one
        e = ev[0]
        e.id, e.new_id, e.price, e.qty = order_id, new_id, price, qty
        e.instrument, e.kind, e.side, e.tif, e.flags = instrument, kind, side, tif, flags
        out = self._out
        while True:
            out.results, out.execs, out.exec_cap = res, ex, len(ex)
            out.bbo, out.bbo_event, out.desyncs, out.desync_cap = ffi.NULL, ffi.NULL, dx, len(dx)
            out.depth_levels = 0
            rc = lib.lob_session_apply(self.ptr, ev, 1, out)
            if rc == lib.LOB_OK:
                break
            if rc != lib.LOB_EEXECFULL:
                raise_for_status(rc, "applying one event")
            book = lib.lob_session_book(self.ptr, instrument)
            need = (lib.lob_book_order_count(book) if book != ffi.NULL else 0) + 3
            if len(ex) >= need and len(dx) >= need:
                raise exception_for(rc, f"one event (kind {kind}, order {order_id}) on instrument {instrument}: "
                                        f"the core asks for more than {need} rows of executions and desyncs "
                                        f"(its book's live orders + 3, which always suffice): a bug in the core",
                                    instrument=instrument)
            ex = ffi.new("lob_exec[]", max(need, len(ex)))  # room for one event, as lob.h bounds it
            dx = ffi.new("lob_desync[]", max(need, len(dx)))
            self._one = (ev, res, ex, dx)
        n, nd = out.n_exec, out.n_desync
        execs = (np.frombuffer(ffi.buffer(ex, n * EXEC_DTYPE.itemsize), EXEC_DTYPE).copy() if n
                 else _NO_EXECS)
        desyncs = (np.frombuffer(ffi.buffer(dx, nd * DESYNC_DTYPE.itemsize), DESYNC_DTYPE).copy() if nd
                   else NO_DESYNCS)
        r = res[0]
        return r.status, r.filled, r.resting, execs, desyncs

    def set_timing(self, every: int) -> None:
        """0: off; N: every Nth event timed (1: all of them)."""
        raise_for_status(lib.lob_session_set_timing(self.ptr, int(every)), "turning timing on")

    def clock(self, iterations: int = 200_000) -> dict:
        """The clock timing reads, probed: source, ns per tick, cost of one reading, smallest step."""
        cost, step, per = ffi.new("double *"), ffi.new("int64_t *"), ffi.new("double *")
        src = lib.lob_session_clock(self.ptr, iterations, cost, step, per)
        return {"source": "TSC" if src == lib.LOB_CLOCK_TSC else "CLOCK_MONOTONIC", "ns_per_tick": per[0],
                "cost_ns": cost[0], "min_step_ns": step[0]}

    def clock_ticks(self) -> int:
        return int(lib.lob_session_clock_ticks(self.ptr))

    def book_histogram(self, instrument: int, kind: int) -> np.ndarray:
        counts = np.zeros(BOOK_HIST_BUCKETS, dtype=np.uint32)
        raise_for_status(lib.lob_session_book_histogram(self.ptr, instrument, kind,
                                                        _buf("uint32_t[]", counts, True)),
                         f"histogram of instrument {instrument}, kind {kind}")
        return counts

    def book_histograms(self, instruments) -> np.ndarray:
        """Every kind's coarse histogram of many books, shaped (books, HIST_KINDS, BOOK_HIST_BUCKETS)
        (index 1..5 on the second axis: the kinds; 0: unknown kinds), in one core call."""
        ids = np.ascontiguousarray(instruments, dtype=np.uint32)
        counts = np.empty((len(ids), HIST_KINDS, BOOK_HIST_BUCKETS), dtype=np.uint32)
        st = lib.lob_session_book_histograms(self.ptr, _buf("uint32_t[]", ids), len(ids),
                                             _buf("uint32_t[]", counts, True))
        if st == lib.LOB_EINSTRUMENT:
            missing = [int(i) for i in ids if i > self.max_instrument or self.book(int(i)) is None]
            raise_for_status(st, f"histograms of instrument {missing[0] if missing else '?'}")
        raise_for_status(st, "histograms of books")
        return counts

    def set_prefetch(self, mode: int) -> None:
        lib.lob_session_set_prefetch(self.ptr, mode)

    def book_bytes(self) -> int:
        return int(lib.lob_session_book_bytes(self.ptr))

    def histogram(self, kind: int) -> np.ndarray:
        counts = np.zeros(HIST_BUCKETS, dtype=np.uint64)
        raise_for_status(lib.lob_session_histogram(self.ptr, kind, _buf("uint64_t[]", counts, True)),
                         f"histogram of kind {kind}")
        return counts

    def reset_histograms(self) -> None:
        lib.lob_session_reset_histograms(self.ptr)


class CoreBook:
    """Read-only queries on one book (owned by its session, which this keeps alive)."""

    def __init__(self, ptr, owner):
        self.ptr = ptr
        self._owner = owner

    def info(self) -> tuple[int, int, int, int]:
        lo, hi, tick = ffi.new("int64_t *"), ffi.new("int64_t *"), ffi.new("int64_t *")
        cap = ffi.new("uint32_t *")
        lib.lob_book_info(self.ptr, lo, hi, tick, cap)
        return lo[0], hi[0], tick[0], cap[0]

    def order_count(self) -> int:
        return lib.lob_book_order_count(self.ptr)

    def halted(self) -> bool:
        return bool(lib.lob_book_halted(self.ptr))

    def parked(self) -> int:
        return lib.lob_book_parked(self.ptr)

    def best(self, side: int):
        p, q, c = ffi.new("int64_t *"), ffi.new("int64_t *"), ffi.new("uint32_t *")
        if not lib.lob_book_best(self.ptr, side, p, q, c):
            return None
        return p[0], q[0], c[0]

    def depth(self, side: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        prices = np.zeros(n, np.int64)
        qtys = np.zeros(n, np.int64)
        counts = np.zeros(n, np.uint32)
        k = lib.lob_book_depth(self.ptr, side, n, _buf("int64_t[]", prices, True),
                               _buf("int64_t[]", qtys, True), _buf("uint32_t[]", counts, True))
        return prices[:k], qtys[:k], counts[:k]

    def level_orders(self, price: int) -> tuple[np.ndarray, np.ndarray, int]:
        side = ffi.new("uint8_t *")
        n = lib.lob_book_level_orders(self.ptr, price, ffi.NULL, ffi.NULL, 0, side)
        if n < 0:
            raise_for_status(-n, f"level at price {price}")
        ids = np.zeros(n, np.uint64)
        qtys = np.zeros(n, np.int64)
        if n:
            lib.lob_book_level_orders(self.ptr, price, _buf("uint64_t[]", ids, True),
                                      _buf("int64_t[]", qtys, True), n, side)
        return ids, qtys, side[0] if n else 0

    def orders(self, side: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, qtys, prices) of every order on a side: best price first, queue order."""
        n = lib.lob_book_orders(self.ptr, side, ffi.NULL, ffi.NULL, ffi.NULL, 0)
        ids, qtys, prices = np.zeros(n, np.uint64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        if n:
            lib.lob_book_orders(self.ptr, side, _buf("uint64_t[]", ids, True), _buf("int64_t[]", qtys, True),
                                _buf("int64_t[]", prices, True), n)
        return ids, qtys, prices

    def find(self, order_id: int):
        side, p, q = ffi.new("uint8_t *"), ffi.new("int64_t *"), ffi.new("int64_t *")
        if not lib.lob_book_find(self.ptr, order_id, side, p, q):
            return None
        return side[0], p[0], q[0]

    def participant(self, order_id: int):
        part = ffi.new("uint32_t *")
        if not lib.lob_book_participant(self.ptr, order_id, part):
            return None
        return part[0]

    def validate(self) -> None:
        msg = ffi.new("char[512]")
        st = lib.lob_book_validate(self.ptr, msg, 512)
        raise_for_status(st, ffi.string(msg).decode(errors="replace"))


# ---- clock, histograms, allocations ----

def clock_probe(iterations: int = 1_000_000) -> dict:
    cost, step, res = ffi.new("double *"), ffi.new("int64_t *"), ffi.new("int64_t *")
    lib.lob_clock_probe(iterations, cost, step, res)
    return {"cost_ns": cost[0], "min_step_ns": step[0], "os_resolution_ns": res[0]}


_BUCKET_LOWS = None


def bucket_lows() -> np.ndarray:
    """Lowest value (ns) of each histogram bucket (computed by the core once)."""
    global _BUCKET_LOWS
    if _BUCKET_LOWS is None:
        lows = np.empty(HIST_BUCKETS, np.uint64)  # (one call: a call per bucket took 13 ms)
        lib.lob_hist_lows(ffi.from_buffer("uint64_t[]", lows))
        _BUCKET_LOWS = lows
    return _BUCKET_LOWS


_BOOK_BUCKET_LOWS = None


def book_bucket_lows() -> np.ndarray:
    """Lowest value (ns) of each bucket of a book's coarse histogram."""
    global _BOOK_BUCKET_LOWS
    if _BOOK_BUCKET_LOWS is None:
        _BOOK_BUCKET_LOWS = np.array([lib.lob_book_hist_lowest(i) for i in range(BOOK_HIST_BUCKETS)],
                                     dtype=np.uint64)
    return _BOOK_BUCKET_LOWS


def book_hist_index(value_ns: int) -> int:
    return lib.lob_book_hist_index(value_ns)


def hist_index(value_ns: int) -> int:
    return lib.lob_hist_index(value_ns)


def alloc_count() -> int:
    return lib.lob_alloc_count()


def alloc_stats() -> dict:
    """The core's allocation counters since the process started: allocations, bytes
    allocated, frees, bytes freed (every allocation and free in lob.c is counted)."""
    v = [ffi.new("uint64_t *") for _ in range(4)]
    lib.lob_alloc_stats(*v)
    return dict(zip(("allocs", "bytes", "frees", "bytes_freed"), (p[0] for p in v)))


CONSTANTS = {n: getattr(lib, n) for n in dir(lib) if n.startswith("LOB_") and isinstance(getattr(lib, n), int)}


# ---- ITCH (csrc/feeds/itch.h) ----

LOCATE_DTYPE = struct_dtype("lob_itch_locate")


def itch_length(msg_type: int) -> int:
    return lib.lob_itch_length(msg_type)


def itch_frames(buf: np.ndarray, nbytes: int, offsets: np.ndarray, types: np.ndarray,
                type_counts: np.ndarray | None = None):
    """Frame buf[:nbytes]; type_counts (uint64[256], optional) gains the messages per
    type byte. Returns (status, n, consumed, end_of_session, bad_offset)."""
    check_array(buf, np.dtype(np.uint8), "buf", length=nbytes)
    check_array(offsets, np.dtype(np.uint32), "offsets", writable=True)
    check_array(types, np.dtype(np.uint8), "types", writable=True, length=len(offsets))
    counts = ffi.NULL
    if type_counts is not None:
        check_array(type_counts, np.dtype(np.uint64), "type_counts", writable=True, length=256)
        counts = _buf("uint64_t[]", type_counts, True)
    n, consumed, bad = ffi.new("size_t *"), ffi.new("size_t *"), ffi.new("size_t *")
    end = ffi.new("int *")
    st = lib.lob_itch_frames(_buf("uint8_t[]", buf), nbytes, _buf("uint32_t[]", offsets, True),
                             _buf("uint8_t[]", types, True), len(offsets), counts, n, consumed, end, bad)
    if st == lib.LOB_EARG:
        raise_for_status(st, "framing ITCH bytes")
    return st, n[0], consumed[0], bool(end[0]), bad[0]


def _framed(buf, offsets, types, n: int, select=None) -> tuple:
    """Checked cffi views of n framed messages (lob_itch_frames' offsets and types into buf)
    and of a locate mask (select: uint8[65536]; None: NULL, every locate)."""
    check_array(buf, np.dtype(np.uint8), "buf")
    check_array(offsets, np.dtype(np.uint32), "offsets", length=n)
    check_array(types, np.dtype(np.uint8), "types", length=n)
    sel = ffi.NULL
    if select is not None:
        check_array(select, np.dtype(np.uint8), "select", length=65536)
        sel = _buf("uint8_t[]", select)
    return _buf("uint8_t[]", buf), _buf("uint32_t[]", offsets), _buf("uint8_t[]", types), sel


def itch_partition(buf: np.ndarray, offsets: np.ndarray, types: np.ndarray, n: int, owner: np.ndarray,
                   out_offsets: np.ndarray, out_types: np.ndarray) -> np.ndarray:
    """Split n framed messages by owner[locate] (uint8[65536]) into the rows of out_offsets
    (uint32) and out_types (uint8), each (parts, cap >= n); returns the counts per part."""
    fb, fo, ft, _ = _framed(buf, offsets, types, n)
    check_array(owner, np.dtype(np.uint8), "owner", length=65536)
    parts, cap = out_offsets.shape
    if out_types.shape != (parts, cap) or cap < n:
        raise ValueError(f"out arrays {out_offsets.shape} / {out_types.shape}: need ({parts}, >= {n}) both")
    check_array(out_offsets.reshape(-1), np.dtype(np.uint32), "out_offsets", writable=True)
    check_array(out_types.reshape(-1), np.dtype(np.uint8), "out_types", writable=True)
    counts = np.zeros(parts, np.uintp)
    lib.lob_itch_partition(fb, fo, ft, n,
                           _buf("uint8_t[]", owner), parts, _buf("uint32_t[]", out_offsets, True),
                           _buf("uint8_t[]", out_types, True), cap, _buf("size_t[]", counts, True))
    return counts


class ItchScan:
    """Pass 1 over framed messages (lob_itch_scan): per-locate sizing figures."""

    def __init__(self):
        st = ffi.new("int *")
        ptr = lib.lob_itch_scan_new(st)
        if ptr == ffi.NULL:
            raise_for_status(st[0], "creating an ITCH scan")
        self.ptr = ffi.gc(ptr, lib.lob_itch_scan_free)

    def feed(self, buf: np.ndarray, offsets: np.ndarray, types: np.ndarray, n: int, select=None) -> None:
        fb, fo, ft, sel = _framed(buf, offsets, types, n, select)
        raise_for_status(lib.lob_itch_scan_feed(self.ptr, fb, fo, ft, n, sel), "ITCH first pass")

    def stats(self) -> np.ndarray:
        out = np.zeros(65536, LOCATE_DTYPE)
        lib.lob_itch_scan_stats(self.ptr, _buf("lob_itch_locate[]", out, True))
        return out

    @property
    def scrambled(self) -> bool:
        """True once the order map hashes references instead of placing them by their low
        bits (which it does while the feed numbers its orders in sequence)."""
        return bool(lib.lob_itch_scan_scrambled(self.ptr))


SYNTH_FEATURES = {"halts": lib.LOB_SYNTH_HALTS, "ipo": lib.LOB_SYNTH_IPO, "operational": lib.LOB_SYNTH_OPERATIONAL,
                  "far_off": lib.LOB_SYNTH_FAR_OFF, "mwcb": lib.LOB_SYNTH_MWCB,
                  "max_price": lib.LOB_SYNTH_MAX_PRICE}
SYNTH_MIN_CAP = lib.LOB_SYNTH_MIN_CAP


class ItchSynth:
    """The C day generator (csrc/tools/itch_synth.c): fill(buf) writes whole frames into a uint8
    array and returns (bytes, messages); (0, 0) when the day is done."""

    def __init__(self, n_messages: int, n_symbols: int, seed: int, features: int = 0, resting_per_symbol: int = 0):
        cfg = ffi.new("lob_synth_config *", {"n_messages": n_messages, "seed": seed & (2**64 - 1),
                                             "n_symbols": n_symbols, "resting_per_symbol": resting_per_symbol,
                                             "features": features})
        st = ffi.new("int *")
        ptr = lib.lob_synth_new(cfg, st)
        if ptr == ffi.NULL:
            raise_for_status(st[0], f"creating the day generator ({n_messages} messages, {n_symbols} symbols)")
        self.ptr = ffi.gc(ptr, lib.lob_synth_free)
        self._n = ffi.new("uint64_t *")

    def fill(self, buf: np.ndarray) -> tuple[int, int]:
        check_array(buf, np.dtype(np.uint8), "buf", writable=True)
        if len(buf) < SYNTH_MIN_CAP:
            raise ValueError(f"the generator's buffer needs at least {SYNTH_MIN_CAP} bytes, got {len(buf)}")
        self._n[0] = 0
        nbytes = lib.lob_synth_fill(self.ptr, _buf("uint8_t[]", buf, True), len(buf), self._n)
        return int(nbytes), int(self._n[0])

    def stats(self) -> dict:
        st = ffi.new("lob_synth_stats *")
        lib.lob_synth_get_stats(self.ptr, st)
        counts = {chr(t): int(st.counts[t]) for t in range(128) if st.counts[t]}
        return {"counts": counts, "messages": int(st.messages), "bytes": int(st.bytes),
                "peak_live": int(st.peak_live), "live": int(st.live), "last_order_ref": int(st.last_order_ref),
                "last_match": int(st.last_match), "executed_shares": int(st.executed_shares),
                "book_bytes": int(st.book_bytes), "plants": int(st.n_plants), "done": bool(st.done)}

    def plants(self) -> np.ndarray:
        n = lib.lob_synth_plants(self.ptr, ffi.NULL, 0)
        out = np.zeros(n, _struct_dtype_arrays("lob_synth_plant"))
        if n:
            lib.lob_synth_plants(self.ptr, _buf("lob_synth_plant[]", out, True), n)
        return out

    def symbol(self, locate: int) -> tuple[str, int, bool]:
        name, tick, test = ffi.new("char[8]"), ffi.new("uint32_t *"), ffi.new("int *")
        raise_for_status(lib.lob_synth_symbol(self.ptr, locate, name, tick, test), f"locate {locate}")
        return ffi.unpack(name, 8).decode("ascii").rstrip(" "), int(tick[0]), bool(test[0])


def itch_events(buf, offsets, types, n, select, events, ts, msg_index, state=None) -> int:
    """Order messages among n framed ones -> events (lob_itch_events). Returns the count.
    state: the locates' trading states (uint16[65536], kept from chunk to chunk): with it,
    H and h messages that change a locate's state become STATE events."""
    fb, fo, ft, sel = _framed(buf, offsets, types, n, select)
    check_array(events, EVENT_DTYPE, "events", writable=True, length=n)
    check_array(ts, np.dtype(np.int64), "ts", writable=True, length=n)
    check_array(msg_index, np.dtype(np.uint32), "msg_index", writable=True, length=n)
    st = ffi.NULL
    if state is not None:
        check_array(state, np.dtype(np.uint16), "state", writable=True, length=65536)
        st = _buf("uint16_t[]", state, True)
    return lib.lob_itch_events(fb, fo, ft, n,
                               sel, _buf("lob_event[]", events, True), _buf("int64_t[]", ts, True),
                               _buf("uint32_t[]", msg_index, True), st)


def itch_order_prices(buf, offsets, types, n, select) -> tuple[np.ndarray, np.ndarray]:
    """(locates uint16, prices uint32) of every A, F and U among n framed messages of the
    selected locates (select: uint8[65536], or None: all), in order (lob_itch_order_prices)."""
    fb, fo, ft, sel = _framed(buf, offsets, types, n, select)
    locs, prices = np.empty(n, np.uint16), np.empty(n, np.uint32)
    k = lib.lob_itch_order_prices(fb, fo, ft, n,
                                  sel, _buf("uint16_t[]", locs, True), _buf("uint32_t[]", prices, True))
    return locs[:k], prices[:k]


def itch_map_prices(book_map, maps, extras, ranks, events, outside) -> None:
    """The events of mapped books to their core prices, in place (lob_itch_map_prices):
    book_map uint16[65536] (1 + index into maps; 0: not mapped), maps ITCH_PMAP_DTYPE,
    extras int64 and ranks uint32 (each map's slice), outside uint64[len(maps)] (added to)."""
    check_array(book_map, np.dtype(np.uint16), "book_map", length=65536)
    check_array(maps, ITCH_PMAP_DTYPE, "maps")
    check_array(extras, np.dtype(np.int64), "extras")
    check_array(ranks, np.dtype(np.uint32), "ranks", length=len(extras))
    check_array(events, EVENT_DTYPE, "events", writable=True)
    check_array(outside, np.dtype(np.uint64), "outside", writable=True, length=len(maps))
    if len(maps) and int(book_map.max()) > len(maps):
        raise ValueError(f"book_map: an index past the {len(maps)} maps")
    ends = maps["first"].astype(np.int64) + maps["n_extra"]
    if len(maps) and int(ends.max()) > len(extras):
        raise ValueError("maps: extras past the end of the extras array")
    lib.lob_itch_map_prices(_buf("uint16_t[]", book_map), _buf("lob_itch_pmap[]", maps), _buf("int64_t[]", extras),
                            _buf("uint32_t[]", ranks), _buf("lob_event[]", events, True), len(events),
                            _buf("uint64_t[]", outside, True))


def itch_group(events, ts, msg_index, counts, events_out, ts_out, msg_out) -> None:
    """A chunk's events regrouped by book, each book's in their order, with their
    timestamps and message indexes (lob_itch_group). counts: uint32 scratch of 65,536."""
    n = len(events)
    check_array(events, EVENT_DTYPE, "events")
    check_array(ts, np.dtype(np.int64), "ts", length=n)
    check_array(msg_index, np.dtype(np.uint32), "msg_index", length=n)
    check_array(counts, np.dtype(np.uint32), "counts", writable=True, length=65536)
    check_array(events_out, EVENT_DTYPE, "events_out", writable=True, length=n)
    check_array(ts_out, np.dtype(np.int64), "ts_out", writable=True, length=n)
    check_array(msg_out, np.dtype(np.uint32), "msg_out", writable=True, length=n)
    raise_for_status(lib.lob_itch_group(_buf("lob_event[]", events), _buf("int64_t[]", ts), _buf("uint32_t[]", msg_index),
                                        n, _buf("uint32_t[]", counts, True), _buf("lob_event[]", events_out, True),
                                        _buf("int64_t[]", ts_out, True), _buf("uint32_t[]", msg_out, True)),
                     "grouping events by book (an instrument past 65,535?)")


# ---- L2 replay of .lobc records (csrc/feeds/l2.h) ----

def _struct_dtype_arrays(cname: str) -> np.dtype:
    """struct_dtype for structs that also have fixed-size array fields."""
    names, formats, offsets = [], [], []
    for name, f in ffi.typeof(cname).fields:
        t = f.type
        names.append(name)
        formats.append((_CTYPE_TO_NUMPY[t.item.cname], t.length) if t.kind == "array" else _CTYPE_TO_NUMPY[t.cname])
        offsets.append(f.offset)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": ffi.sizeof(cname)})


ITCH_PMAP_DTYPE = struct_dtype("lob_itch_pmap")
L2_RECORD_DTYPE = struct_dtype("lob_l2_record")
L2_SCAN_SYMBOL_DTYPE = struct_dtype("lob_l2_scan_symbol")
L2_BBO_DTYPE = struct_dtype("lob_l2_bbo")
L2_DESYNC_DTYPE = _struct_dtype_arrays("lob_l2_desync")
L2_TRADE_DTYPE = _struct_dtype_arrays("lob_l2_trade")
L2_MISMATCH_DTYPE = _struct_dtype_arrays("lob_l2_mismatch")
L2_DEPTH_DTYPE = _struct_dtype_arrays("lob_l2_depth")
L2_ROWS = (("bbo", L2_BBO_DTYPE, "lob_l2_bbo[]"), ("desyncs", L2_DESYNC_DTYPE, "lob_l2_desync[]"),
           ("trades", L2_TRADE_DTYPE, "lob_l2_trade[]"), ("mismatches", L2_MISMATCH_DTYPE, "lob_l2_mismatch[]"),
           ("depth", L2_DEPTH_DTYPE, "lob_l2_depth[]"))


def l2_records_check(records: np.ndarray, n_symbols: int) -> tuple[int, int]:
    """(the first record whose symbol is n_symbols or more, the first whose kind or side is
    not one a .lobc file holds), each len(records) where there is none (lob_l2_records_check).
    records: contiguous, of a 64-byte record dtype."""
    n = len(records)
    bs, bk = ffi.new("size_t *"), ffi.new("size_t *")
    lib.lob_l2_records_check(_buf("lob_l2_record[]", records), n, n_symbols, bs, bk)
    return bs[0], bk[0]


class L2Scan:
    """Pass 1 of the L2 replay (lob_l2_scan): per symbol whether it has a book, its distinct
    level prices and the peak number of live levels (an upper bound of pass 2's book).
    n_symbols: the file's symbols (records of a higher index are pass 2's unknown_symbol);
    max_message: the levels a message may hold (0: lib.LOB_L2_MAX_MESSAGE; pass 2 must take
    the same). finish() after the last records, before the figures."""

    def __init__(self, n_symbols: int = 65536, max_message: int = 0):
        st = ffi.new("int *")
        ptr = lib.lob_l2_scan_new(n_symbols, max_message, st)
        if ptr == ffi.NULL:
            raise_for_status(st[0], "creating an L2 scan")
        self.ptr = ffi.gc(ptr, lib.lob_l2_scan_free)

    def feed(self, records: np.ndarray) -> None:
        check_array(records, L2_RECORD_DTYPE, "records")
        raise_for_status(lib.lob_l2_scan_feed(self.ptr, _buf("lob_l2_record[]", records), len(records)),
                         "L2 first pass")

    def finish(self) -> None:
        raise_for_status(lib.lob_l2_scan_finish(self.ptr), "L2 first pass")

    def symbols(self) -> np.ndarray:
        out = np.zeros(65536, L2_SCAN_SYMBOL_DTYPE)
        lib.lob_l2_scan_symbols(self.ptr, _buf("lob_l2_scan_symbol[]", out, True))
        return out

    def kinds(self) -> np.ndarray:
        """Records by kind (256 counts)."""
        out = np.zeros(256, np.uint64)
        lib.lob_l2_scan_kinds(self.ptr, _buf("uint64_t[]", out, True))
        return out

    def levels(self) -> tuple[np.ndarray, np.ndarray]:
        """Every distinct (symbol, price), unsorted."""
        n = lib.lob_l2_scan_levels(self.ptr, ffi.NULL, ffi.NULL, 0)
        sym = np.zeros(n, np.uint16)
        price = np.zeros(n, np.int64)
        lib.lob_l2_scan_levels(self.ptr, _buf("uint16_t[]", sym, True), _buf("int64_t[]", price, True), n)
        return sym, price


class L2Core:
    """Pass 2 of the L2 replay (lob_l2): records in, report rows out, one C call per
    range of records; owns the output arrays (grown when a step needs more room)."""

    def __init__(self, session: CoreSession, *, n_symbols: int, symbol, real, core, order_id, has_book, ladder,
                 band_low, tick, ticker_history: int, compare_tickers: bool, sequence: int = 0,
                 depth_levels: int = 0, depth_every_ns: int = 0, rows: int = 4096, desync_rows: int = 4096,
                 max_message: int = 0):
        """sequence: the update-id rule diff messages are checked by (lib.LOB_L2_SEQ_*);
        max_message: the levels a message may hold (0: lib.LOB_L2_MAX_MESSAGE), as pass 1 took it;
        depth_levels, depth_every_ns: depth samples (lob_l2_depth; feed() returns their levels as
        "depth_book", 4 x depth_levels a row); rows: the first size of the row arrays;
        desync_rows that of the desync array (a message needs room for 3 rows per live level of
        its book: give 3 x the largest book capacity)."""
        arrays = {"symbol": (symbol, np.uint16, "uint16_t[]"), "real": (real, np.int64, "int64_t[]"),
                  "core": (core, np.int64, "int64_t[]"), "id": (order_id, np.uint64, "uint64_t[]"),
                  "has_book": (has_book, np.uint8, "uint8_t[]"), "ladder": (ladder, np.uint8, "uint8_t[]"),
                  "band_low": (band_low, np.int64, "int64_t[]"), "tick": (tick, np.int64, "int64_t[]")}
        cfg = ffi.new("lob_l2_config *")
        cfg.n_symbols, cfg.ticker_history, cfg.compare_tickers = n_symbols, ticker_history, int(compare_tickers)
        cfg.sequence, cfg.max_message = sequence, max_message
        cfg.depth_levels, cfg.depth_every_ns = depth_levels, depth_every_ns
        self.depth_levels = depth_levels
        cfg.n_levels = len(symbol)
        keep = []
        for name, (a, dt, ct) in arrays.items():
            a = np.ascontiguousarray(a, dt)
            check_array(a, np.dtype(dt), name, length=n_symbols if name in ("has_book", "ladder", "band_low", "tick")
                        else len(symbol))
            b = _buf(ct, a)
            keep.append((a, b))
            setattr(cfg, name, b)
        st = ffi.new("int *")
        ptr = lib.lob_l2_new(session.ptr, cfg, st)  # copies the arrays
        if ptr == ffi.NULL:
            raise_for_status(st[0], "creating the L2 replay")
        self.ptr = ffi.gc(ptr, lib.lob_l2_free)
        self._session = session  # the books must outlive the replay
        self.n_symbols = n_symbols
        self._out = ffi.new("lob_l2_outputs *")
        self._pos = ffi.new("size_t *")
        self._arrays: dict[str, np.ndarray] = {}
        self._cdata = {}
        for name, dt, _ in L2_ROWS:
            self._grow(name, max(rows, desync_rows) if name == "desyncs" else rows)

    _FIELDS = {"bbo": ("bbo_cap", "n_bbo", "need_bbo"), "desyncs": ("desync_cap", "n_desync", "need_desync"),
               "trades": ("trade_cap", "n_trade", "need_trade"),
               "mismatches": ("mismatch_cap", "n_mismatch", "need_mismatch"),
               "depth": ("depth_cap", "n_depth", "need_depth")}

    def _grow(self, name: str, n: int) -> None:
        if name == "depth" and not self.depth_levels:
            n = 0  # (no samples: no room needed)
        dt, ct = {nm: (d, c) for nm, d, c in L2_ROWS}[name]
        a = np.empty(n, dt)
        self._arrays[name] = a
        self._cdata[name] = b = _buf(ct, a, True)
        setattr(self._out, name, b)
        setattr(self._out, self._FIELDS[name][0], n)
        if name == "depth":  # and each row's levels
            book = np.empty((n, 4 * self.depth_levels), np.int64)
            self._arrays["depth_book"] = book
            self._cdata["depth_book"] = self._out.depth_book = _buf("int64_t[]", book, True) if book.size else ffi.NULL

    def _run(self, call) -> dict[str, np.ndarray]:
        """Call until done, draining the rows after each call. An array that a call filled is
        doubled (up to 2^20 rows), and one that a step needs more of gets what it needs."""
        out = self._out
        parts = {name: [] for name, _, _ in L2_ROWS}
        books = []  # the depth rows' levels
        while True:
            rc = call()
            for name, (_, nf, _) in self._FIELDS.items():
                k = getattr(out, nf)
                if k:
                    a = self._arrays[name]
                    parts[name].append(a[:k].copy())
                    if name == "depth":
                        books.append(self._arrays["depth_book"][:k].copy())
                    if k == len(a) and k < 1 << 20:
                        self._grow(name, 2 * k)
            if rc == lib.LOB_OK:
                break
            if rc != lib.LOB_EEXECFULL:
                raise_for_status(rc, "L2 replay")
            for name, (_, _, needf) in self._FIELDS.items():
                need = getattr(out, needf)
                if need > len(self._arrays[name]):
                    self._grow(name, max(need, 2 * len(self._arrays[name])))
        rows = {name: (np.concatenate(p) if len(p) > 1 else p[0]) if p else np.empty(0, dt)
                for (name, dt, _), p in zip(L2_ROWS, parts.values())}
        rows["depth_book"] = np.concatenate(books) if books else np.empty((0, 4 * self.depth_levels), np.int64)
        return rows

    def feed(self, records: np.ndarray, first_index: int) -> dict[str, np.ndarray]:
        """Replay one range of records (a whole number of groups); rows by table."""
        check_array(records, L2_RECORD_DTYPE, "records")
        rec = _buf("lob_l2_record[]", records)
        n = len(records)
        self._pos[0] = 0
        return self._run(lambda: lib.lob_l2_feed(self.ptr, rec, n, first_index, self._pos, self._out))

    def finish(self) -> dict[str, np.ndarray]:
        return self._run(lambda: lib.lob_l2_finish(self.ptr, self._out))

    def counts(self) -> dict:
        c = ffi.new("lob_l2_counts *")
        lib.lob_l2_counts_get(self.ptr, c)
        out = {}
        for name, f in ffi.typeof("lob_l2_counts").fields:
            v = getattr(c, name)
            out[name] = [v[i] for i in range(f.type.length)] if f.type.kind == "array" else v
        return out

    def symbols(self) -> dict[str, np.ndarray]:
        n = self.n_symbols
        out = {"state": np.zeros(n, np.uint8), "snapshot_id": np.zeros(n, np.int64), "last_u": np.zeros(n, np.uint64),
               "messages": np.zeros(n, np.uint64), "skipped": np.zeros(n, np.uint64)}
        lib.lob_l2_symbols(self.ptr, _buf("uint8_t[]", out["state"], True), _buf("int64_t[]", out["snapshot_id"], True),
                           _buf("uint64_t[]", out["last_u"], True), _buf("uint64_t[]", out["messages"], True),
                           _buf("uint64_t[]", out["skipped"], True))
        return out


# ---- Binance depthUpdate, trade, aggTrade and bookTicker messages (csrc/feeds/bnjson.h) ----

BN_LINE_DTYPE = _struct_dtype_arrays("lob_bn_line")
BN_DEPTH = lib.LOB_BN_DEPTH
BN_TRADE, BN_AGGTRADE, BN_TICKER = lib.LOB_BN_TRADE, lib.LOB_BN_AGGTRADE, lib.LOB_BN_TICKER


BN_SYMBOL_DTYPE = _struct_dtype_arrays("lob_bn_symbol")
BN_TOTALS_DTYPE = _struct_dtype_arrays("lob_bn_totals")
BN_EVENT_DTYPE = struct_dtype("lob_bn_event")
BN_EV_GAP, BN_EV_SYNCED, BN_EV_RESYNC = lib.LOB_BN_EV_GAP, lib.LOB_BN_EV_SYNCED, lib.LOB_BN_EV_RESYNC


class BnMachine:
    """Owns one Binance depth sync machine (csrc/feeds/bnsync.h; freed when this object is
    collected): every symbol's sync state, written to by the calls below in arrival order.
    symbols and totals are views of the machine's own counts (BN_SYMBOL_DTYPE per symbol,
    one BN_TOTALS_DTYPE), current at every moment; read them, never write them."""

    def __init__(self, n_symbols: int, *, usdm: bool, max_buffer: int):
        st = ffi.new("int *")
        ptr = lib.lob_bn_sync_new(n_symbols, lib.LOB_BN_USDM if usdm else 0, max_buffer, st)
        if ptr == ffi.NULL:
            raise_for_status(st[0], f"creating a sync machine for {n_symbols} symbols (max_buffer {max_buffer})")
        self.ptr = ffi.gc(ptr, lib.lob_bn_sync_free)
        self.n_symbols = n_symbols
        self.symbols = np.frombuffer(ffi.buffer(lib.lob_bn_sync_symbols(ptr), n_symbols * BN_SYMBOL_DTYPE.itemsize),
                                     BN_SYMBOL_DTYPE)
        self.totals = np.frombuffer(ffi.buffer(lib.lob_bn_sync_totals(ptr), BN_TOTALS_DTYPE.itemsize),
                                    BN_TOTALS_DTYPE)[0]
        self._n = ffi.new("size_t *")
        self._wanted = ffi.new("uint32_t[]", n_symbols)
        # one message decoded on its own (message()): the decoder's output, kept for the next
        self._one = ffi.new("lob_bn_line[1]")
        self._one_levels, self._one_cap = ffi.new("int64_t[]", 512), 256
        self._one_names = ffi.new("uint32_t[]", lib.LOB_BN_NAMES)
        self._one_sym = ffi.new("int32_t[1]")
        self._one_out = ffi.new("size_t[4]")
        self._one_pos = ffi.new("size_t *")

    def _check(self, status: int, what: str) -> None:
        if status != lib.LOB_OK:
            raise_for_status(status, f"sync machine: {what}")

    def snapshot(self, symbol: int, L: int, exch_ns: int, recv_ns: int, levels: np.ndarray, n_bids: int) -> None:
        self._check(lib.lob_bn_sync_snapshot(self.ptr, symbol, L, exch_ns, recv_ns, _buf("int64_t[]", levels),
                                             n_bids, len(levels) - n_bids), "a snapshot")

    def bad_snapshot(self, symbol: int, recv_ns: int) -> None:
        self._check(lib.lob_bn_sync_bad_snapshot(self.ptr, symbol, recv_ns), "a malformed snapshot")

    def bad_depth(self, symbol: int, recv_ns: int) -> None:
        self._check(lib.lob_bn_sync_bad_depth(self.ptr, symbol, recv_ns), "a malformed depth message")

    def snapshot_failed(self, symbol: int, recv_ns: int, reason: int) -> None:
        self._check(lib.lob_bn_sync_snapshot_failed(self.ptr, symbol, recv_ns, reason), "a failed snapshot")

    def disconnected(self, recv_ns: int, reason: int, symbols=None) -> None:
        if symbols is None:
            st = lib.lob_bn_sync_disconnected(self.ptr, recv_ns, reason, ffi.NULL, 0)
        else:
            st = lib.lob_bn_sync_disconnected(self.ptr, recv_ns, reason, ffi.new("uint32_t[]", list(symbols)),
                                              len(symbols))
        self._check(st, "a disconnect")

    def end_file(self, recv_ns: int) -> None:
        self._check(lib.lob_bn_sync_end_file(self.ptr, recv_ns), "the end of a file")

    def request(self, symbol: int, requested: bool) -> None:
        self._check(lib.lob_bn_sync_request(self.ptr, symbol, int(requested)), "a snapshot request")

    def wanted(self) -> list[int]:
        """The symbols whose buffered events wait for a snapshot nobody asked for yet."""
        n = lib.lob_bn_sync_wanted(self.ptr, self._wanted, self.n_symbols)
        return [self._wanted[k] for k in range(n)] if n else []

    def decode_message(self, msg: bytes, *, usdm: bool, price_digits: int, qty_digits: int):
        """One message (no receive time, no newline) decoded by the C decoder (lob_bn_decode):
        its line (a cffi lob_bn_line, valid until the next call) if the decoder took it, else
        None. Then take_message(symbol, recv_ns) runs it through the machine."""
        n = len(msg)
        if n // 8 + 16 > self._one_cap:
            self._one_cap = n // 8 + 16
            self._one_levels = ffi.new("int64_t[]", 2 * self._one_cap)
        o = self._one_out
        st = lib.lob_bn_decode(msg, n, lib.LOB_BN_BARE | (lib.LOB_BN_USDM if usdm else 0), price_digits, qty_digits,
                               self._one, 1, o, self._one_levels, self._one_cap, o + 1, o + 2, self._one_names, o + 3)
        if st != lib.LOB_OK or o[0] != 1 or o[2] != n or self._one[0].status == lib.LOB_BN_OTHER:
            return None
        return self._one[0]

    def message(self, recv_ns: int, symbol: int, status: int, first_id: int, last_id: int, prev_id: int,
                exch_ms: int, levels, n_bids: int, maker: bool) -> None:
        """A message read in Python, in the form the C decoder gives (a lob_bn_line: status
        BN_DEPTH, BN_TRADE, BN_AGGTRADE or BN_TICKER; exch_ms -1: none; levels: int64 (n, 2)
        price, qty, n_bids bids first; a ticker's bid then ask), through the machine as
        take_message takes a decoded one (symbol -1: none of its symbols)."""
        lv = np.ascontiguousarray(levels, np.int64).reshape(-1, 2)
        if len(lv) > self._one_cap:
            self._one_cap = len(lv)
            self._one_levels = ffi.new("int64_t[]", 2 * self._one_cap)
        ffi.memmove(self._one_levels, ffi.from_buffer(lv), lv.nbytes)
        ln = self._one[0]
        ln.status, ln.first_id, ln.last_id, ln.prev_id, ln.exch_ms = status, first_id, last_id, prev_id, exch_ms
        ln.level, ln.n_bids, ln.n_asks, ln.maker = 0, n_bids, len(lv) - n_bids, int(maker)
        self._one_out[1] = len(lv)
        self.take_message(symbol, recv_ns)

    def take_message(self, symbol: int, recv_ns: int) -> None:
        """The message decode_message took, through the machine (symbol -1: none of its symbols)."""
        ln = self._one[0]
        ln.recv_ns = recv_ns
        ln.name_id = 0
        self._one_sym[0] = symbol
        self._one_pos[0] = 0
        self._check(lib.lob_bn_sync_lines(self.ptr, self._one, 1, self._one_pos, self._one_levels,
                                          self._one_out[1], self._one_sym, 1), "a message")

    def guess(self, L: int) -> int:
        """The symbol a snapshot without one most likely is for (-1: none waits)."""
        return lib.lob_bn_sync_guess(self.ptr, L)

    def lines(self, lines: np.ndarray, levels: np.ndarray, pos: int, name_sym: np.ndarray) -> int:
        """bn_decode's lines from line pos on through the machine (name_sym: int32, the symbol of
        each name_id, -1: none of the machine's), up to the first line the decoder left to
        Python; returns that line (len(lines): all taken)."""
        check_array(name_sym, np.dtype(np.int32), "name_sym")
        p = ffi.new("size_t *", pos)
        st = lib.lob_bn_sync_lines(self.ptr, _buf("lob_bn_line[]", lines), len(lines), p, _buf("int64_t[]", levels),
                                   len(levels), _buf("int32_t[]", name_sym), len(name_sym))
        self._check(st, "decoded lines")
        return p[0]

    @property
    def pending(self) -> int:
        return lib.lob_bn_sync_pending(self.ptr)

    def take(self) -> np.ndarray:
        """The records written since the last take (L2_RECORD_DTYPE)."""
        out = np.empty(lib.lob_bn_sync_pending(self.ptr), L2_RECORD_DTYPE)
        self._check(lib.lob_bn_sync_take(self.ptr, _buf("lob_l2_record[]", out, True), len(out), self._n), "take")
        return out

    def take_events(self) -> np.ndarray | None:
        """The events since the last take (BN_EVENT_DTYPE), None if there are none."""
        n = lib.lob_bn_sync_pending_events(self.ptr)
        if not n:
            return None
        out = np.empty(n, BN_EVENT_DTYPE)
        self._check(lib.lob_bn_sync_take_events(self.ptr, _buf("lob_bn_event[]", out, True), n, self._n), "events")
        return out


def bn_values(buf: bytes, key: bytes, *, word: bool = False, cap: int = 256) -> list[bytes] | None:
    """The distinct values of the string field `key` anywhere in buf, in order of first
    appearance (lob_bn_values: as the regex `"key":\\s*"([^"]+)"` finds them, or with word
    `"key":\\s*"([A-Za-z0-9_\\-]+)"`); None if there are more than cap."""
    n = len(buf)
    if n >= 1 << 32:
        raise ValueError("bn_values: at most 4 GiB per call")
    cap = min(cap, lib.LOB_BN_VALUES_MAX)
    starts, lens = np.empty(cap, np.uint32), np.empty(cap, np.uint32)
    got, more = ffi.new("size_t *"), ffi.new("int *")
    raise_for_status(lib.lob_bn_values(ffi.from_buffer("uint8_t[]", buf), n, key, len(key), int(word),
                                       _buf("uint32_t[]", starts, True), _buf("uint32_t[]", lens, True), cap, got,
                                       more), f"finding the values of {key!r}")
    if more[0]:
        return None
    return [buf[a:a + k] for a, k in zip(starts[:got[0]].tolist(), lens[:got[0]].tolist())]


def bn_decode(buf: bytes, *, usdm: bool, price_digits: int, qty_digits: int, bare: bool = False,
              names: bool = False):
    """The lines of buf (split at newlines) with their depthUpdate, trade, aggTrade and bookTicker
    messages decoded (lob_bn_decode): (lines as a BN_LINE_DTYPE array, one per line; levels as
    int64 (n, 2) price, qty). Lines with status BN_OTHER (0) are for the Python path.
    names=True: also the line index of the first trade/ticker of each name_id (uint32 array)."""
    n = len(buf)
    if n >= 1 << 32:
        raise ValueError("bn_decode: at most 4 GiB per call")
    src = np.frombuffer(buf, np.uint8)
    levels = np.empty((n // 8 + 16, 2), np.int64)  # a price, qty pair takes at least 9 bytes of text
    first = np.empty(lib.LOB_BN_NAMES, np.uint32)
    nl, nv, used, nn = ffi.new("size_t *"), ffi.new("size_t *"), ffi.new("size_t *"), ffi.new("size_t *")
    flags = (lib.LOB_BN_USDM if usdm else 0) | (lib.LOB_BN_BARE if bare else 0)
    # room for lines of 40 bytes on average (Binance messages are longer); else counted and again
    for cap in (n // 40 + 16, None):
        lines = np.empty(buf.count(b"\n") + 1 if cap is None else cap, BN_LINE_DTYPE)
        raise_for_status(lib.lob_bn_decode(_buf("uint8_t[]", src), n, flags, price_digits, qty_digits,
                                           _buf("lob_bn_line[]", lines, True), len(lines), nl,
                                           _buf("int64_t[]", levels, True), len(levels), nv, used,
                                           _buf("uint32_t[]", first, True), nn),
                         "decoding Binance messages")
        if used[0] == n:
            break
    else:
        raise AssertionError("bn_decode: every line fits the arrays it is given")
    if names:
        return lines[:nl[0]], levels[:nv[0]], first[:nn[0]]
    return lines[:nl[0]], levels[:nv[0]]
