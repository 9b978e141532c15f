"""What the binding's tests share: the import of python/mlatune from the source tree, bf16 bit
conversions, a host decode call on numpy arrays, and a stand-in for a torch tensor."""

import os
import subprocess
import sys

import numpy as np

__all__ = ["SOURCE_DIR", "mlatune", "C_API_SHAPE", "TINY_SHAPE", "to_bf16", "HostCall",
           "FakeTorchTensor", "run_python", "clean_env", "loader_finds_the_soname"]

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))
import mlatune  # noqa: E402  (for the tests: from binding_test_util import mlatune)

# The database of mlatune_make_test_db: batch 1..8 -> host_split_kv_v1 (see test_runtime.py).
C_API_SHAPE = dict(heads=16, qlen=1, q_dtype="bf16", kv_dtype="bf16", page_size=64, lse=False)
# A database tuned by the CLI from tests/cli/tiny.yaml: causal, with the LSE.
TINY_SHAPE = dict(heads=4, qlen=2, q_dtype="bf16", kv_dtype="bf16", page_size=16, lse=True)


def to_bf16(x):
    """float -> bf16 bits (uint16), round to nearest even."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


class HostCall:
    """Random bf16 inputs of one decode call of `shape` for `lens`, with fitting output buffers;
    buffers() gives run()'s keyword arguments, which a test then spoils one at a time."""

    def __init__(self, shape, lens, seed=0):
        rng = np.random.default_rng(seed)
        self.shape, self.lens = shape, np.asarray(lens, dtype=np.int32)
        batch, page, heads, qlen = len(lens), shape["page_size"], shape["heads"], shape["qlen"]
        self.pages_per_seq = int(-(-self.lens.max() // page))
        self.num_pages = batch * self.pages_per_seq
        self.table = np.arange(self.num_pages, dtype=np.int32).reshape(batch, -1)
        self.q = to_bf16(rng.uniform(-1, 1, (batch * qlen, heads, 576)))
        self.kv = to_bf16(rng.uniform(-1, 1, (self.num_pages, page, 576)))
        self.out = np.zeros((batch * qlen, heads, 512), dtype=np.uint16)
        self.lse = np.zeros((batch * qlen, heads), dtype=np.float32) if shape["lse"] else None

    def plan(self, plan, db):
        plan.plan(db, **self.shape, kv_lens=self.lens, sm_scale=576 ** -0.5,
                  max_pages_per_seq=self.pages_per_seq, num_pages=self.num_pages)
        self.workspace = np.zeros(max(plan.workspace_bytes(), 1), dtype=np.uint8)
        return plan

    def buffers(self, **changes):
        buffers = dict(q=self.q, kv=self.kv, block_table=self.table, kv_lens=self.lens,
                       out=self.out, lse=self.lse, workspace=self.workspace)
        buffers.update(changes)
        return buffers


class FakeTorchTensor:
    """Answers what the binding asks a torch.Tensor (data_ptr, dtype, device, is_contiguous,
    element_size, numel) over a numpy array's memory, so that tests need no torch."""

    def __init__(self, array, device="cpu", dtype=None, contiguous=True):
        self._array = array
        self.device = _FakeDevice(device)
        self.dtype = dtype or f"torch.{array.dtype.name}"
        self._contiguous = contiguous

    def data_ptr(self):
        return self._array.__array_interface__["data"][0]

    def element_size(self):
        return self._array.itemsize

    def numel(self):
        return self._array.size

    def is_contiguous(self):
        return self._contiguous


class _FakeDevice:
    def __init__(self, kind):
        self.type = kind

    def __str__(self):
        return self.type if self.type == "cpu" else f"{self.type}:0"


def run_python(code, env=None, cwd=None):
    """Runs `code` in a fresh python3 (this one); returns the CompletedProcess (text)."""
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def clean_env(**extra):
    """The environment of a user with nothing set up: no MLATUNE_LIBRARY, no LD_LIBRARY_PATH, no
    PYTHONPATH (LD_PRELOAD stays: a sanitized build needs it)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLATUNE_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env.update(PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def loader_finds_the_soname():
    """Whether libmlatune.so.0 is on this machine's default search path (then no 'nothing found'
    case can be made)."""
    return run_python("import ctypes; ctypes.CDLL('libmlatune.so.0')",
                      env=clean_env()).returncode == 0
