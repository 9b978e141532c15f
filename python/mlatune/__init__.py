"""mlatune runtime for Python: ctypes over libmlatune's C ABI (mlatune/mlatune.h).

No compile step: the module loads the shared library at import time, trying in order
  1. $MLATUNE_LIBRARY, when set (a path to libmlatune.so.0; nothing else is tried then),
  2. the library of the install prefix the package was installed into by `cmake --install` (its
     relative path from the package directory is recorded in mlatune/_install_layout.py),
  3. its soname, libmlatune.so.0, through the dynamic loader's search path (LD_LIBRARY_PATH, ...).
When none loads, the import raises LibraryNotFoundError (an ImportError) saying how to fix it.

Tensors are passed by address: torch tensors (.data_ptr(), cpu or cuda), objects exposing
__cuda_array_interface__ (device memory) or __array_interface__ (numpy arrays: host memory), or
a bare int address. Before a run every buffer but a bare address is checked against the plan:
byte size, element type (the float type, or an integer container of its width holding the bit
patterns: uint16 for bf16, uint8 for fp8), C-contiguity, writability of the outputs, and host vs
device memory as the winner's backend needs. A bare int address is trusted as it is: nothing
about it can be checked. Streams: an int (cudaStream_t / hipStream_t value), an object with
.cuda_stream (torch.cuda.Stream), or None.

Errors: every refusal of the library raises MlatuneError carrying the status code, its name and
the library's message. Arguments refused before they reach the library raise MlatuneError too,
with status 1 ("invalid argument"), as ArgumentValueError (also a ValueError: an integer out of
the range of its C type, an unknown dtype, a buffer that does not fit the plan) or
ArgumentTypeError (also a TypeError: a bool or a float where an integer is needed, ...).

Threads: a Database may be shared between threads (lookups are lock-free in the library); a Plan
is used by one thread at a time; LiveDatabase is thread-safe.
"""

import ctypes
import os
import re

from . import _checks
from ._checks import DTYPES

__all__ = ["MlatuneError", "ArgumentValueError", "ArgumentTypeError", "LibraryNotFoundError",
           "Database", "Plan", "LiveDatabase", "Selection", "DTYPES", "STATUS", "version",
           "library_path"]


LIBRARY_SONAME = "libmlatune.so.0"
STATUS = {0: "ok", 1: "invalid argument", 2: "io error", 3: "corrupt", 4: "schema mismatch",
          5: "foreign device", 6: "untuned", 7: "stale", 8: "no valid kernel", 9: "out of memory",
          10: "internal", 11: "bad plan", 12: "launch failed"}
_INVALID_ARGUMENT, _BAD_PLAN = 1, 11


class MlatuneError(RuntimeError):
    """A refusal of the runtime: .status (int), .status_name and .message."""

    def __init__(self, status, message):
        self.status = status
        self.status_name = STATUS.get(status, "unknown status")
        self.message = message
        super().__init__(f"{self.status_name}: {message}")


class ArgumentValueError(MlatuneError, ValueError):
    """An argument refused before the library call: out of range, unknown, or a buffer that does
    not fit the plan. Status 1 (invalid argument), as the library's own refusals of arguments."""

    def __init__(self, message):
        super().__init__(_INVALID_ARGUMENT, message)


class ArgumentTypeError(MlatuneError, TypeError):
    """An argument of the wrong Python type (e.g. a bool or a float for an integer); status 1."""

    def __init__(self, message):
        super().__init__(_INVALID_ARGUMENT, message)


class LibraryNotFoundError(ImportError):
    """Raised by `import mlatune` when no libmlatune could be loaded; the message says how to fix
    it and what was tried."""


def _checked(check, *args):
    """check(*args), its _checks.ArgumentError raised as the public exception of its kind."""
    try:
        return check(*args)
    except _checks.ArgumentError as e:
        kind = ArgumentTypeError if e.wrong_type else ArgumentValueError
        raise kind(str(e)) from None


# ---- Loading the library ------------------------------------------------------------------

_FIX = ("set MLATUNE_LIBRARY=/path/to/libmlatune.so.0 (e.g. <build-dir>/runtime/libmlatune.so.0),"
        " or install mlatune with `cmake --install <build-dir>` (its Python package then finds "
        "the library of its own prefix), or put the library's directory on LD_LIBRARY_PATH")


def _installed_library():
    """The library of the prefix `cmake --install` put this package into, or None."""
    try:
        from . import _install_layout  # written by cmake/install.cmake; absent elsewhere
    except ImportError:
        return None
    package_dir = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(package_dir, _install_layout.LIBRARY_DIR,
                                         _install_layout.LIBRARY_FILE))


def _open_library():
    """(CDLL, what was loaded)."""
    explicit = os.environ.get("MLATUNE_LIBRARY")
    if explicit:
        # An explicit choice is never replaced by another library behind the user's back.
        try:
            return ctypes.CDLL(explicit), explicit
        except OSError as e:
            raise LibraryNotFoundError(
                f"mlatune: cannot load MLATUNE_LIBRARY={explicit}: {e}. Fix: point "
                f"MLATUNE_LIBRARY at an existing libmlatune.so.0, or unset it to use an installed "
                f"library") from None
    tried = []
    installed = _installed_library()
    if installed is not None:
        if os.path.exists(installed):
            try:
                return ctypes.CDLL(installed), installed
            except OSError as e:
                tried.append(f"{installed} (the install prefix): {e}")
        else:
            tried.append(f"{installed} (the install prefix): no such file")
    try:
        return ctypes.CDLL(LIBRARY_SONAME), LIBRARY_SONAME
    except OSError as e:
        tried.append(f"{LIBRARY_SONAME} (the dynamic loader's search path): {e}")
    raise LibraryNotFoundError("mlatune: cannot find libmlatune. Fix: " + _FIX + ". Tried: " +
                               "; ".join(tried))


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
    lib, loaded = _open_library()
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
    return lib, loaded


_lib, _library_path = _load()


def version():
    """The loaded library's "major.minor.patch"."""
    return _lib.mlatune_version().decode()


def library_path():
    """What was loaded: the path given or found, or the soname when the loader's search found it."""
    return _library_path


def _check(status):
    if status != 0:
        raise MlatuneError(status, _lib.mlatune_last_error().decode(errors="replace"))


def _options(allow_foreign_device):
    allow = _checked(_checks.flag, "allow_foreign_device", allow_foreign_device)
    return ctypes.byref(_Options(None, 1 if allow else 0))


def _key(heads, qlen, q_dtype, kv_dtype, page_size, lse, batch, max_kv_len):
    """The C key, every field checked to fit its int32 (see _checks.int32_count)."""
    count = _checks.int32_count
    return _Key(_checked(count, "heads", heads), _checked(count, "qlen", qlen),
                _checked(_checks.dtype, "q_dtype", q_dtype)[1],
                _checked(_checks.dtype, "kv_dtype", kv_dtype)[1],
                _checked(count, "page_size", page_size), int(_checked(_checks.flag, "lse", lse)),
                _checked(count, "batch", batch), _checked(count, "max_kv_len", max_kv_len))


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
        # Set first: a refused open leaves an object whose __del__ still runs.
        self._db = None
        if _handle is not None:
            self._db = _handle
            return
        encoded = _checked(_checks.path, "path", path)
        handle = ctypes.c_void_p()
        _check(_lib.mlatune_open(encoded, _options(allow_foreign_device), ctypes.byref(handle)))
        self._db = handle

    def close(self):
        handle, self._db = getattr(self, "_db", None), None
        if handle:
            _lib.mlatune_close(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _handle(self):
        if not self._db:
            raise MlatuneError(_INVALID_ARGUMENT, "the database is closed")
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


def _runs_on_device(variant, db_info):
    """Whether a winner runs on a GPU (device buffers) rather than on the host; db_info() gives
    the database's info string, asked for only when the variant's name does not tell."""
    # Built-in variant names start with their backend (kernels/mla_decode/variant_names.txt);
    # another (an external variant) runs on the backend its database was tuned on.
    if variant.startswith("host_"):
        return False
    if variant.startswith("hip_"):
        return True
    tuned = re.search(r"tuned on backend=(\w+)", db_info())
    return not (tuned and tuned.group(1) == "host")


class Plan:
    """A plan object: plan() a decode call on the host, then run() it on the buffers."""

    def __init__(self, db, max_batch):
        self._plan = None  # set first, as in Database
        self._planned = None  # _checks.PlannedCall of the last successful plan()
        max_batch = _checked(_checks.int32_count, "max_batch", max_batch)
        handle = ctypes.c_void_p()
        _check(_lib.mlatune_plan_create(db._handle(), max_batch, ctypes.byref(handle)))
        self._plan = handle

    def close(self):
        handle, self._plan = getattr(self, "_plan", None), None
        if handle:
            _lib.mlatune_plan_destroy(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _handle(self):
        if not self._plan:
            raise MlatuneError(_INVALID_ARGUMENT, "the plan object is closed")
        return self._plan

    def plan(self, db, *, heads, qlen, q_dtype, kv_dtype, page_size, lse, kv_lens, sm_scale,
             max_pages_per_seq, num_pages, q_scale=1.0, kv_scale=1.0):
        """kv_lens: host lengths (a list, or an int32 array); their max is the key's max_kv_len."""
        lens = _checked(_checks.lengths, "kv_lens", kv_lens)
        key = _key(heads, qlen, q_dtype, kv_dtype, page_size, lse, len(lens),
                   max(lens) if lens else 0)
        problem = _Problem(key, _checked(_checks.float32, "q_scale", q_scale),
                           _checked(_checks.float32, "kv_scale", kv_scale),
                           _checked(_checks.float32, "sm_scale", sm_scale),
                           _checked(_checks.int32_count, "max_pages_per_seq", max_pages_per_seq),
                           _checked(_checks.integer, "num_pages", num_pages, _checks.INT64_MAX))
        c_lens = (ctypes.c_int32 * len(lens))(*lens)
        plan, db_handle = self._handle(), db._handle()
        # From here the library's plan is replaced or marked failed: so is what run() checks.
        self._planned = None
        _check(_lib.mlatune_plan_decode(db_handle, ctypes.byref(problem), c_lens, plan))
        variant = self.selection().variant
        self._planned = _checks.planned_call(
            heads=key.heads, qlen=key.qlen, q_dtype=_checks.dtype("q_dtype", q_dtype)[0],
            kv_dtype=_checks.dtype("kv_dtype", kv_dtype)[0], page_size=key.page_size,
            lse=bool(key.lse), batch=key.batch, max_pages_per_seq=problem.max_pages_per_seq,
            num_pages=problem.num_pages, workspace_bytes=self.workspace_bytes(),
            on_device=_runs_on_device(variant, db.info))
        return self

    def workspace_bytes(self):
        n = ctypes.c_size_t()
        _check(_lib.mlatune_plan_workspace_size(self._handle(), ctypes.byref(n)))
        return n.value

    def selection(self):
        sel = _Selection()
        _check(_lib.mlatune_plan_selection(self._handle(), ctypes.byref(sel)))
        return Selection(sel)

    def run(self, db, *, q, kv, block_table, kv_lens, out, lse=None, workspace=None,
            stream=None):
        """Launches the planned call; buffers are host memory (CPU winner) or device memory,
        checked against the plan first (see the module doc)."""
        if self._planned is None:
            # Buffers are never passed on unchecked: refused here as the library refuses it.
            raise MlatuneError(_BAD_PLAN, "run: the plan holds no launch (never planned, or its "
                                          "last plan() failed); refusing to guess one")
        given = dict(q=q, kv=kv, block_table=block_table, kv_lens=kv_lens, out=out, lse=lse,
                     workspace=workspace)
        addresses = _checked(_checks.checked_buffers, self._planned, given)
        buffers = _Buffers(*(addresses[n] for n in ("q", "kv", "block_table", "kv_lens", "out",
                                                    "lse", "workspace", "workspace_bytes")))
        stream_handle = _checked(_checks.stream, stream)
        _check(_lib.mlatune_run(db._handle(), self._handle(), ctypes.byref(buffers),
                                stream_handle or None))


class LiveDatabase:
    """The current database of a serving process, switchable with update() while others read."""

    def __init__(self, path, allow_foreign_device=False):
        self._live = None  # set first, as in Database
        encoded = _checked(_checks.path, "path", path)
        handle = ctypes.c_void_p()
        _check(_lib.mlatune_live_open(encoded, _options(allow_foreign_device),
                                      ctypes.byref(handle)))
        self._live = handle

    def close(self):
        handle, self._live = getattr(self, "_live", None), None
        if handle:
            _lib.mlatune_live_close(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _handle(self):
        if not self._live:
            raise MlatuneError(_INVALID_ARGUMENT, "the live database is closed")
        return self._live

    def update(self, path, allow_foreign_device=False):
        _check(_lib.mlatune_live_update(self._handle(), _checked(_checks.path, "path", path),
                                        _options(allow_foreign_device)))

    def acquire(self):
        handle = ctypes.c_void_p()
        _check(_lib.mlatune_live_acquire(self._handle(), ctypes.byref(handle)))
        return Database(_handle=handle)

    def generation(self):
        g = ctypes.c_int64()
        _check(_lib.mlatune_live_generation(self._handle(), ctypes.byref(g)))
        return g.value
