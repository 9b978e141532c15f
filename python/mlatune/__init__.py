"""mlatune runtime for Python: ctypes over libmlatune's C ABI (mlatune/mlatune.h).

No compile step: the module loads the shared library at import time, from $MLATUNE_LIBRARY when
set, else by its soname (libmlatune.so.0) through the dynamic loader's search path.

Tensors are passed by address: anything with .data_ptr() (torch.Tensor), anything exposing
__array_interface__ (numpy arrays, for the CPU backend), or a plain int. Streams likewise: an int
(cudaStream_t / hipStream_t value), an object with .cuda_stream (torch.cuda.Stream), or None.
Every refusal raises MlatuneError carrying the status code, its name and the library's message.

Threads: a Database may be shared between threads (lookups are lock-free in the library); a Plan
is used by one thread at a time; LiveDatabase is thread-safe.
"""

import ctypes
import os

__all__ = ["MlatuneError", "Database", "Plan", "LiveDatabase", "Selection", "DTYPES", "STATUS",
           "version"]

DTYPES = {"bf16": 0, "fp8_e4m3fn": 1, "fp8_e4m3fnuz": 2}
STATUS = {0: "ok", 1: "invalid argument", 2: "io error", 3: "corrupt", 4: "schema mismatch",
          5: "foreign device", 6: "untuned", 7: "stale", 8: "no valid kernel", 9: "out of memory",
          10: "internal", 11: "bad plan", 12: "launch failed"}


class MlatuneError(RuntimeError):
    """A refusal of the runtime: .status (int), .status_name and .message."""

    def __init__(self, status, message):
        self.status = status
        self.status_name = STATUS.get(status, "unknown status")
        self.message = message
        super().__init__(f"{self.status_name}: {message}")


class _Key(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int32) for n in
                ("heads", "qlen", "q_dtype", "kv_dtype", "page_size", "lse", "batch",
                 "max_kv_len")]


class _Options(ctypes.Structure):
    _fields_ = [("expected_device", ctypes.c_char_p), ("allow_foreign_device", ctypes.c_int32)]


class _Selection(ctypes.Structure):
    _fields_ = [("variant", ctypes.c_char * 64)] + [
        (n, ctypes.c_int32) for n in ("kv_splits", "kv_tile", "block_rows", "workers",
                                      "batch_lo", "batch_hi", "kv_lo", "kv_hi")
    ] + [("time_median_us", ctypes.c_double)]


class _Problem(ctypes.Structure):
    _fields_ = [("key", _Key), ("q_scale", ctypes.c_float), ("kv_scale", ctypes.c_float),
                ("sm_scale", ctypes.c_float), ("max_pages_per_seq", ctypes.c_int32),
                ("num_pages", ctypes.c_int64)]


class _Buffers(ctypes.Structure):
    _fields_ = [(n, ctypes.c_void_p) for n in
                ("q", "kv", "block_table", "kv_lens", "out", "lse", "workspace")] + [
        ("workspace_bytes", ctypes.c_size_t)]


def _load():
    lib = ctypes.CDLL(os.environ.get("MLATUNE_LIBRARY") or "libmlatune.so.0")
    P = ctypes.POINTER
    vp, st = ctypes.c_void_p, ctypes.c_int
    sigs = {
        "mlatune_open": (st, [ctypes.c_char_p, P(_Options), P(vp)]),
        "mlatune_close": (None, [vp]),
        "mlatune_db_retain": (st, [vp]),
        "mlatune_lookup": (st, [vp, P(_Key), P(_Selection)]),
        "mlatune_table_stats": (st, [vp, P(ctypes.c_int64), P(ctypes.c_int64),
                                     P(ctypes.c_int64)]),
        "mlatune_db_info": (ctypes.c_char_p, [vp]),
        "mlatune_last_error": (ctypes.c_char_p, []),
        "mlatune_version": (ctypes.c_char_p, []),
        "mlatune_plan_create": (st, [vp, ctypes.c_int32, P(vp)]),
        "mlatune_plan_destroy": (None, [vp]),
        "mlatune_plan_decode": (st, [vp, P(_Problem), P(ctypes.c_int32), vp]),
        "mlatune_plan_workspace_size": (st, [vp, P(ctypes.c_size_t)]),
        "mlatune_plan_selection": (st, [vp, P(_Selection)]),
        "mlatune_run": (st, [vp, vp, P(_Buffers), vp]),
        "mlatune_live_open": (st, [ctypes.c_char_p, P(_Options), P(vp)]),
        "mlatune_live_update": (st, [vp, ctypes.c_char_p, P(_Options)]),
        "mlatune_live_acquire": (st, [vp, P(vp)]),
        "mlatune_live_generation": (st, [vp, P(ctypes.c_int64)]),
        "mlatune_live_close": (None, [vp]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


_lib = _load()


def version():
    return _lib.mlatune_version().decode()


def _check(status):
    if status != 0:
        raise MlatuneError(status, _lib.mlatune_last_error().decode(errors="replace"))


def _options(allow_foreign_device):
    return ctypes.byref(_Options(None, 1 if allow_foreign_device else 0))


def _address(x, what, optional=False):
    """The address of a tensor-like (see the module doc), or None."""
    if x is None:
        if optional:
            return None
        raise MlatuneError(1, f"{what} is None")
    if isinstance(x, int):
        return x
    if hasattr(x, "data_ptr"):
        return x.data_ptr()
    if hasattr(x, "__array_interface__"):
        return x.__array_interface__["data"][0]
    raise TypeError(f"{what}: expected a tensor, an array or an int address, got {type(x)}")


def _nbytes(x):
    if x is None:
        return 0
    if hasattr(x, "nbytes"):
        return int(x.nbytes)
    if hasattr(x, "element_size"):
        return int(x.numel() * x.element_size())
    raise TypeError("workspace: cannot tell its size; pass an array or a tensor")


def _key(heads, qlen, q_dtype, kv_dtype, page_size, lse, batch, max_kv_len):
    def code(t):
        return DTYPES[t] if isinstance(t, str) else int(t)
    return _Key(heads, qlen, code(q_dtype), code(kv_dtype), page_size, 1 if lse else 0, batch,
                max_kv_len)


class Selection:
    """The validated winner of a shape: variant name, launch parameters, bucket, tuned time."""

    def __init__(self, s):
        self.variant = s.variant.decode()
        for n in ("kv_splits", "kv_tile", "block_rows", "workers", "batch_lo", "batch_hi",
                  "kv_lo", "kv_hi", "time_median_us"):
            setattr(self, n, getattr(s, n))

    def __repr__(self):
        return (f"Selection({self.variant} splits={self.kv_splits} tile={self.kv_tile} "
                f"rows={self.block_rows} workers={self.workers} bucket batch "
                f"{self.batch_lo}..{self.batch_hi} kv {self.kv_lo}..{self.kv_hi}, "
                f"{self.time_median_us:.2f} us)")


class Database:
    """One reference to an open dispatch database; closed by close() or the with-block's end."""

    def __init__(self, path=None, allow_foreign_device=False, _handle=None):
        if _handle is not None:
            self._db = _handle
            return
        handle = ctypes.c_void_p()
        _check(_lib.mlatune_open(os.fsencode(path), _options(allow_foreign_device),
                                 ctypes.byref(handle)))
        self._db = handle

    def close(self):
        if self._db:
            _lib.mlatune_close(self._db)
            self._db = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _handle(self):
        if not self._db:
            raise MlatuneError(1, "the database is closed")
        return self._db

    def lookup(self, heads, qlen, q_dtype, kv_dtype, page_size, lse, batch, max_kv_len):
        sel = _Selection()
        key = _key(heads, qlen, q_dtype, kv_dtype, page_size, lse, batch, max_kv_len)
        _check(_lib.mlatune_lookup(self._handle(), ctypes.byref(key), ctypes.byref(sel)))
        return Selection(sel)

    def stats(self):
        v = [ctypes.c_int64() for _ in range(3)]
        _check(_lib.mlatune_table_stats(self._handle(), *[ctypes.byref(x) for x in v]))
        return {"usable": v[0].value, "stale": v[1].value, "no_valid": v[2].value}

    def info(self):
        return _lib.mlatune_db_info(self._handle()).decode()


class Plan:
    """A plan object: plan() a decode call on the host, then run() it on the buffers."""

    def __init__(self, db, max_batch):
        handle = ctypes.c_void_p()
        _check(_lib.mlatune_plan_create(db._handle(), max_batch, ctypes.byref(handle)))
        self._plan = handle
        self._db = None

    def __del__(self):
        if getattr(self, "_plan", None):
            _lib.mlatune_plan_destroy(self._plan)
            self._plan = None

    def plan(self, db, *, heads, qlen, q_dtype, kv_dtype, page_size, lse, kv_lens, sm_scale,
             max_pages_per_seq, num_pages, q_scale=1.0, kv_scale=1.0):
        """kv_lens: host lengths (a list, or an int32 array); their max is the key's max_kv_len."""
        lens = (ctypes.c_int32 * len(kv_lens))(*[int(x) for x in kv_lens])
        problem = _Problem(_key(heads, qlen, q_dtype, kv_dtype, page_size, lse, len(lens),
                                max(lens) if len(lens) else 0),
                           q_scale, kv_scale, sm_scale, max_pages_per_seq, num_pages)
        self._db = db
        _check(_lib.mlatune_plan_decode(db._handle(), ctypes.byref(problem), lens, self._plan))
        return self

    def workspace_bytes(self):
        n = ctypes.c_size_t()
        _check(_lib.mlatune_plan_workspace_size(self._plan, ctypes.byref(n)))
        return n.value

    def selection(self):
        sel = _Selection()
        _check(_lib.mlatune_plan_selection(self._plan, ctypes.byref(sel)))
        return Selection(sel)

    def run(self, db, *, q, kv, block_table, kv_lens, out, lse=None, workspace=None,
            stream=None):
        """Launches the planned call; buffers are host memory (CPU winner) or device memory."""
        b = _Buffers(_address(q, "q"), _address(kv, "kv"), _address(block_table, "block_table"),
                     _address(kv_lens, "kv_lens"), _address(out, "out"),
                     _address(lse, "lse", True), _address(workspace, "workspace", True),
                     _nbytes(workspace))
        if stream is not None and not isinstance(stream, int):
            stream = stream.cuda_stream
        _check(_lib.mlatune_run(db._handle(), self._plan, ctypes.byref(b), stream or None))


class LiveDatabase:
    """The current database of a serving process, switchable with update() while others read."""

    def __init__(self, path, allow_foreign_device=False):
        handle = ctypes.c_void_p()
        _check(_lib.mlatune_live_open(os.fsencode(path), _options(allow_foreign_device),
                                      ctypes.byref(handle)))
        self._live = handle

    def __del__(self):
        if getattr(self, "_live", None):
            _lib.mlatune_live_close(self._live)
            self._live = None

    def update(self, path, allow_foreign_device=False):
        _check(_lib.mlatune_live_update(self._live, os.fsencode(path),
                                        _options(allow_foreign_device)))

    def acquire(self):
        handle = ctypes.c_void_p()
        _check(_lib.mlatune_live_acquire(self._live, ctypes.byref(handle)))
        return Database(_handle=handle)

    def generation(self):
        g = ctypes.c_int64()
        _check(_lib.mlatune_live_generation(self._live, ctypes.byref(g)))
        return g.value
