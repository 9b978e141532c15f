"""Checks of what Python hands to libmlatune, done before anything reaches ctypes.

ctypes silently truncates an int to the width of its C type (2**32 + 16 heads becomes 16), and the
library cannot see how large a buffer behind a pointer is, nor its element type or where it lives.
Everything here is pure Python: no library call, so the checks are testable without a database.
"""

import math
import numbers
import os
import sys
from collections import namedtuple

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
UINTPTR_MAX = 2**64 - 1
FLOAT32_MAX = 3.4028234663852886e38

DTYPES = {"bf16": 0, "fp8_e4m3fn": 1, "fp8_e4m3fnuz": 2}
DTYPE_BYTES = {"bf16": 2, "fp8_e4m3fn": 1, "fp8_e4m3fnuz": 1}
HEAD_DIM_QK = 576  # 512 latent dims + 64 rope dims (kernels/mla_decode/problem.h)
HEAD_DIM_V = 512   # V is the first 512 dims of each KV row

# Element types a buffer of each kind may have: the float type itself, or an integer container of
# the same width holding its bit patterns (numpy has no bf16 or fp8; torch's fp8 is recent).
_ELEMENT_TYPES = {
    "bf16": ("bfloat16", "uint16", "int16"),
    "fp8_e4m3fn": ("float8_e4m3fn", "uint8", "int8"),
    "fp8_e4m3fnuz": ("float8_e4m3fnuz", "uint8", "int8"),
    "int32": ("int32",),
    "float32": ("float32",),
}

_NUMPY_KIND_NAMES = {"u": "uint", "i": "int", "f": "float", "c": "complex", "b": "bool"}


class ArgumentError(Exception):
    """Raised by the checks below; __init__.py turns it into the public exception types."""

    def __init__(self, message, wrong_type=False):
        super().__init__(message)
        self.wrong_type = wrong_type


def _kind_of(value):
    return type(value).__name__


def integer(name, value, hi, lo=0):
    """value as an int, refused unless it is an integer (not a bool) in [lo, hi]."""
    # numbers.Integral covers numpy's integer scalars; bool is an Integral but never a count.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentError(f"{name} must be an integer in [{lo}, {hi}], got {_kind_of(value)} "
                            f"{value!r}", wrong_type=True)
    value = int(value)
    if not lo <= value <= hi:
        raise ArgumentError(f"{name}={value} is out of range: must be an integer in [{lo}, {hi}]")
    return value


def int32_count(name, value):
    # Non-negative int32: the library checks the tighter limits of each field (problem.h), so that
    # they live in one place; this check only keeps ctypes from wrapping the value around.
    return integer(name, value, INT32_MAX)


def float32(name, value):
    """value as a float, refused unless it is a finite real number that float32 can hold."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentError(f"{name} must be a finite real number, got {_kind_of(value)} "
                            f"{value!r}", wrong_type=True)
    value = float(value)
    if not (math.isfinite(value) and abs(value) <= FLOAT32_MAX):
        raise ArgumentError(f"{name}={value} is out of range: must be finite and within "
                            f"+-{FLOAT32_MAX:.7g} (float32)")
    return value


def flag(name, value):
    """A yes/no argument: a bool, or the ints 0 and 1 (anything else is a likely mistake)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral) and int(value) in (0, 1):
        return bool(value)
    raise ArgumentError(f"{name} must be a bool (or 0 or 1), got {_kind_of(value)} {value!r}",
                        wrong_type=True)


def dtype(name, value):
    """(dtype name, code) of a dtype given by name or by its MLATUNE_DTYPE_* code."""
    allowed = ", ".join(DTYPES)
    if isinstance(value, str):
        if value not in DTYPES:
            raise ArgumentError(f"{name}={value!r} is not a dtype: allowed values are {allowed}")
        return value, DTYPES[value]
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        for dtype_name, code in DTYPES.items():
            if code == int(value):
                return dtype_name, code
        raise ArgumentError(f"{name}={value!r} is not a dtype code: allowed values are {allowed} "
                            f"(codes {', '.join(map(str, DTYPES.values()))})")
    raise ArgumentError(f"{name} must be a dtype name ({allowed}), got {_kind_of(value)} "
                        f"{value!r}", wrong_type=True)


def lengths(name, values):
    """The kv lengths as a list of non-negative int32s."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ArgumentError(f"{name} must be a sequence of integers (a list or an int32 array), "
                            f"got {_kind_of(values)}", wrong_type=True)
    return [int32_count(f"{name}[{i}]", v) for i, v in enumerate(values)]


def path(name, value):
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise ArgumentError(f"{name} must be a path (str, bytes or os.PathLike), got "
                            f"{_kind_of(value)} {value!r}", wrong_type=True)
    return os.fsencode(value)


def stream(value):
    """A stream handle as an int (0 for none): an int, or an object with .cuda_stream."""
    if value is None:
        return 0
    if hasattr(value, "cuda_stream") and not isinstance(value, numbers.Integral):
        value = value.cuda_stream
    return integer("stream", value, UINTPTR_MAX)


# ---- Buffers ---------------------------------------------------------------------------------

# What the plan says one run must get; sizes in bytes, element types as keys of _ELEMENT_TYPES.
# on_device: the winner runs on a GPU, so its buffers must be device memory (else host memory).
PlannedCall = namedtuple("PlannedCall", "buffers workspace_bytes lse on_device")
BufferSpec = namedtuple("BufferSpec", "nbytes element shape writable")

# One buffer as the caller handed it: location is "host", "device" or None (a bare address).
BufferView = namedtuple("BufferView", "address nbytes element contiguous location writable")


def planned_call(*, heads, qlen, q_dtype, kv_dtype, page_size, lse, batch, max_pages_per_seq,
                 num_pages, workspace_bytes, on_device):
    """The buffers a planned call needs (the layouts of mlatune_decode_buffers in mlatune.h)."""
    tokens = batch * qlen
    buffers = {
        "q": BufferSpec(tokens * heads * HEAD_DIM_QK * DTYPE_BYTES[q_dtype], q_dtype,
                        (tokens, heads, HEAD_DIM_QK), False),
        "kv": BufferSpec(num_pages * page_size * HEAD_DIM_QK * DTYPE_BYTES[kv_dtype], kv_dtype,
                         (num_pages, page_size, HEAD_DIM_QK), False),
        "block_table": BufferSpec(batch * max_pages_per_seq * 4, "int32",
                                  (batch, max_pages_per_seq), False),
        "kv_lens": BufferSpec(batch * 4, "int32", (batch,), False),
        "out": BufferSpec(tokens * heads * HEAD_DIM_V * 2, "bf16", (tokens, heads, HEAD_DIM_V),
                          True),
    }
    if lse:
        buffers["lse"] = BufferSpec(tokens * heads * 4, "float32", (tokens, heads), True)
    return PlannedCall(buffers, workspace_bytes, lse, on_device)


def _c_contiguous(shape, strides, itemsize):
    if strides is None or 0 in shape:
        return True
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:  # a unit dimension's stride is never used
            return False
        expected *= extent
    return True


def _itemsize(name, typestr):
    """Bytes per element of an array interface's typestr, e.g. "<u2" -> 2."""
    size = typestr[2:]
    if not size.isdigit():  # "|O" (Python objects), "<M8[s]" (datetimes): no plain numbers
        raise ArgumentError(f"{name} has element type {typestr}, not a numeric one")
    return int(size)


def _numpy_element(name, interface, obj):
    typestr = interface["typestr"]
    if typestr[0] == (">" if sys.byteorder == "little" else "<") and _itemsize(name, typestr) > 1:
        return "non-native-endian " + typestr
    dtype_attr = getattr(obj, "dtype", None)
    if getattr(dtype_attr, "name", None):  # numpy (and ml_dtypes: "bfloat16", "float8_...")
        return dtype_attr.name
    kind = _NUMPY_KIND_NAMES.get(typestr[1])
    return f"{kind}{8 * int(typestr[2:])}" if kind else typestr


def _from_array_interface(name, obj, interface, location):
    data = interface.get("data")
    if not isinstance(data, tuple):
        raise ArgumentError(f"{name}: an array interface without a (pointer, read-only) data "
                            "tuple is not supported; pass a numpy array", wrong_type=True)
    shape = tuple(interface["shape"])
    itemsize = _itemsize(name, interface["typestr"])
    return BufferView(int(data[0]), math.prod(shape) * itemsize,
                      _numpy_element(name, interface, obj),
                      _c_contiguous(shape, interface.get("strides"), itemsize), location,
                      not data[1])


def _from_torch(name, tensor):
    device = tensor.device.type
    # ROCm builds of torch call their devices "cuda" too.
    if device not in ("cpu", "cuda"):
        raise ArgumentError(f"{name} is a torch tensor on device '{tensor.device}'; "
                            "mlatune takes cpu (host backend) or cuda tensors")
    return BufferView(int(tensor.data_ptr()), int(tensor.numel()) * int(tensor.element_size()),
                      str(tensor.dtype).replace("torch.", ""), bool(tensor.is_contiguous()),
                      "host" if device == "cpu" else "device", True)


def view(name, obj):
    """A BufferView of a tensor-like: torch tensor, __cuda_array_interface__ or
    __array_interface__ object (numpy), or a bare int address (nothing about it can be checked)."""
    if isinstance(obj, bool):
        raise ArgumentError(f"{name} must be a tensor, an array or an int address, got bool",
                            wrong_type=True)
    if isinstance(obj, numbers.Integral):
        return BufferView(integer(name, obj, UINTPTR_MAX), None, None, True, None, True)
    # torch first: its cuda tensors also expose __cuda_array_interface__, its cpu tensors nothing.
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):
        return _from_torch(name, obj)
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_array_interface(name, obj, obj.__cuda_array_interface__, "device")
    if hasattr(obj, "__array_interface__"):
        return _from_array_interface(name, obj, obj.__array_interface__, "host")
    raise ArgumentError(f"{name} must be a tensor, an array or an int address, got "
                        f"{_kind_of(obj)}", wrong_type=True)


def _location_words(on_device):
    return ("device (GPU) memory, e.g. a torch cuda tensor" if on_device
            else "host memory, e.g. a numpy array or a torch cpu tensor")


def checked_buffer(name, obj, spec, on_device):
    """The address of obj after checking it against spec (None: a NULL pointer)."""
    buf = view(name, obj)
    if buf.location is None:
        return buf.address  # a bare address: the caller vouches for it
    where = "GPU" if on_device else "host (CPU)"
    if buf.location != ("device" if on_device else "host"):
        raise ArgumentError(f"{name} is in {buf.location} memory, but the planned winner runs on "
                            f"the {where} backend: pass {_location_words(on_device)}")
    if not buf.contiguous:
        raise ArgumentError(f"{name} is not C-contiguous: pass a dense row-major buffer "
                            "(numpy.ascontiguousarray, tensor.contiguous())")
    if spec.element is not None and buf.element not in _ELEMENT_TYPES[spec.element]:
        raise ArgumentError(f"{name} has element type {buf.element}, but the plan needs "
                            f"{spec.element}: allowed {', '.join(_ELEMENT_TYPES[spec.element])}")
    if spec.shape is None:
        if buf.nbytes < spec.nbytes:
            raise ArgumentError(f"{name} has {buf.nbytes} bytes, but the plan needs at least "
                                f"{spec.nbytes}")
    elif buf.nbytes != spec.nbytes:
        shape = "x".join(map(str, spec.shape))
        raise ArgumentError(f"{name} has {buf.nbytes} bytes, but the plan needs {spec.nbytes} "
                            f"([{shape}] of {spec.element})")
    if spec.writable and not buf.writable:
        raise ArgumentError(f"{name} is read-only, but the run writes into it")
    return buf.address


def checked_buffers(planned, buffers):
    """Addresses of the run's buffers (a dict name -> object) after every check against the plan;
    the workspace's size is the size of the object given (or 0 without one)."""
    addresses = {"lse": None}
    for name, spec in planned.buffers.items():
        if buffers[name] is None:
            raise ArgumentError(f"{name} is None, but the plan needs "
                                f"[{'x'.join(map(str, spec.shape))}] of {spec.element}")
        addresses[name] = checked_buffer(name, buffers[name], spec, planned.on_device)
    if buffers["lse"] is not None and not planned.lse:
        raise ArgumentError("lse is given, but the plan was made with lse=False: pass None")
    workspace = buffers["workspace"]
    if workspace is None:
        if planned.workspace_bytes:
            raise ArgumentError(f"workspace is None, but the plan needs "
                                f"{planned.workspace_bytes} bytes (Plan.workspace_bytes())")
        addresses["workspace"], addresses["workspace_bytes"] = None, 0
        return addresses
    spec = BufferSpec(planned.workspace_bytes, None, None, True)
    addresses["workspace"] = checked_buffer("workspace", workspace, spec, planned.on_device)
    size = view("workspace", workspace).nbytes
    if size is None:
        raise ArgumentError("workspace: a bare address has no size; pass an array or a tensor",
                            wrong_type=True)
    addresses["workspace_bytes"] = size
    return addresses

