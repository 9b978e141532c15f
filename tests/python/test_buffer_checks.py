"""Buffers the Python binding checks against the plan before a run, where the library sees only
pointers: byte size (a 16-byte out for a 16 KiB output crashed the process), element type (a
float32 q for bf16 ran on garbage), C-contiguity, writability of what the run writes, and host vs
device memory as the winner's backend needs. Each is refused with ArgumentValueError naming the
buffer, and a refused run leaves the plan usable. Usage: test_buffer_checks.py C_API_DB TINY_DB
(mlatune_make_test_db's, and one tuned from tests/cli/tiny.yaml). MLATUNE_LIBRARY names
libmlatune."""

import os
import sys
import unittest

import numpy as np

from binding_test_util import C_API_SHAPE, TINY_SHAPE, FakeTorchTensor, HostCall, mlatune

C_API_DB = sys.argv.pop(1) if len(sys.argv) > 1 else os.environ.get("MLATUNE_TEST_DB", "")
TINY_DB = sys.argv.pop(1) if len(sys.argv) > 1 else os.environ.get("MLATUNE_TINY_DB", "")

from mlatune import _checks  # noqa: E402  (the GPU side is checked without a GPU)


class BufferCheckTest(unittest.TestCase):
    def setUp(self):
        self.db = mlatune.Database(C_API_DB)
        self.call = HostCall(C_API_SHAPE, [60, 10])  # 2 x 16 x 512 bf16 out: 32 KiB
        self.plan = self.call.plan(mlatune.Plan(self.db, 8), self.db)

    def tearDown(self):
        self.plan.close()
        self.db.close()

    def assert_refused(self, texts, **changes):
        with self.assertRaises(mlatune.ArgumentValueError) as cm:
            self.plan.run(self.db, **self.call.buffers(**changes))
        self.assertIsInstance(cm.exception, ValueError)
        self.assertEqual(cm.exception.status_name, "invalid argument")
        for text in texts:
            self.assertIn(text, str(cm.exception))

    def assert_runs(self, **changes):
        self.call.out[...] = 0
        self.plan.run(self.db, **self.call.buffers(**changes))
        self.assertTrue(self.call.out.any())

    def test_byte_sizes(self):
        self.assert_refused(["out has 16 bytes", "needs 32768", "[2x16x512] of bf16"],
                            out=np.zeros(8, dtype=np.uint16))
        self.assert_refused(["q has", "needs 36864"], q=self.call.q[:1])
        self.assert_refused(["kv has", "[2x64x576]"], kv=np.concatenate([self.call.kv] * 2))
        self.assert_refused(["block_table has 4 bytes", "needs 8"],
                            block_table=self.call.table[:1, :1])
        self.assert_refused(["kv_lens has 4 bytes", "needs 8"], kv_lens=self.call.lens[:1])
        self.assert_runs()  # the refusals left the plan intact
        # A plan() refused before the library replaced the plan keeps checking against it.
        closed = mlatune.Database(C_API_DB)
        closed.close()
        with self.assertRaises(mlatune.MlatuneError):
            self.call.plan(self.plan, closed)
        self.assert_refused(["out has 16 bytes"], out=np.zeros(8, dtype=np.uint16))
        # After a failed plan() there is nothing to check against: the run is refused.
        with self.assertRaises(mlatune.MlatuneError):
            self.plan.plan(self.db, **dict(C_API_SHAPE, heads=32), kv_lens=self.call.lens,
                           sm_scale=0.04, max_pages_per_seq=self.call.pages_per_seq,
                           num_pages=self.call.num_pages)
        with self.assertRaises(mlatune.MlatuneError) as cm:
            self.plan.run(self.db, **self.call.buffers(out=np.zeros(8, dtype=np.uint16)))
        self.assertEqual(cm.exception.status_name, "bad plan")

    def test_element_types(self):
        self.assert_refused(["q has element type float32", "needs bf16",
                             "bfloat16, uint16, int16"], q=self.call.q.astype(np.float32))
        self.assert_refused(["q has element type float16"], q=self.call.q.view(np.float16))
        self.assert_refused(["out has element type float16"], out=self.call.out.view(np.float16))
        self.assert_refused(["kv_lens has element type uint32", "needs int32"],
                            kv_lens=self.call.lens.view(np.uint32))
        self.assert_refused(["block_table has element type float32"],
                            block_table=self.call.table.view(np.float32))
        self.assert_refused(["q has element type non-native-endian >u2"],
                            q=self.call.q.astype(">u2"))
        self.assert_refused(["kv has element type |O, not a numeric one"],
                            kv=np.zeros(4, dtype=object))
        self.assert_runs(q=self.call.q.view(np.int16))  # bit patterns in either int16 or uint16

    def test_contiguity_and_writability(self):
        strided = np.zeros((2 * 16, 2 * 512), dtype=np.uint16)[:, ::2]
        self.assert_refused(["out is not C-contiguous"], out=strided)
        q_fortran = np.asfortranarray(self.call.q)
        self.assert_refused(["q is not C-contiguous"], q=q_fortran)
        read_only = self.call.out.copy()
        read_only.setflags(write=False)
        self.assert_refused(["out is read-only"], out=read_only)
        read_only_q = self.call.q.copy()
        read_only_q.setflags(write=False)
        self.plan.run(self.db, **self.call.buffers(q=read_only_q))  # inputs may be read-only
        self.assert_runs(q=np.ascontiguousarray(q_fortran))

    def test_workspace_and_missing_buffers(self):
        self.assert_refused(["out is None", "[2x16x512] of bf16"], out=None)
        self.assert_refused(["lse is given", "lse=False"],
                            lse=np.zeros((2, 16), dtype=np.float32))
        need = self.plan.workspace_bytes()
        if need:
            self.assert_refused([f"workspace is None, but the plan needs {need} bytes"],
                                workspace=None)
            self.assert_refused(["workspace has 1 bytes", f"at least {need}"],
                                workspace=np.zeros(1, dtype=np.uint8))
        self.assert_runs(workspace=np.zeros(need + 100, dtype=np.float32))  # any type, if large

    def test_device_memory_for_a_host_winner(self):
        self.assertEqual(self.plan.selection().variant, "host_split_kv_v1")
        cuda_out = FakeTorchTensor(self.call.out, device="cuda", dtype="torch.bfloat16")
        self.assert_refused(["out is in device memory", "host (CPU) backend",
                             "numpy array or a torch cpu tensor"], out=cuda_out)

        class CudaArray:  # __cuda_array_interface__ (cupy, numba): device memory
            __cuda_array_interface__ = self.call.q.__array_interface__

        self.assert_refused(["q is in device memory"], q=CudaArray())
        meta = FakeTorchTensor(self.call.out, device="meta", dtype="torch.bfloat16")
        self.assert_refused(["out is a torch tensor on device 'meta:0'"], out=meta)

    def test_torch_cpu_tensors_are_checked_like_arrays(self):
        bf16_q = FakeTorchTensor(self.call.q, dtype="torch.bfloat16")
        self.assert_refused(["q has element type float16"],
                            q=FakeTorchTensor(self.call.q, dtype="torch.float16"))
        self.assert_refused(["q is not C-contiguous"],
                            q=FakeTorchTensor(self.call.q, dtype="torch.bfloat16",
                                              contiguous=False))
        self.assert_refused(["out has 16 bytes"],
                            out=FakeTorchTensor(self.call.out[0, 0, :8], dtype="torch.bfloat16"))
        self.assert_runs(q=bf16_q, out=FakeTorchTensor(self.call.out, dtype="torch.bfloat16"))

    def test_bare_addresses_are_trusted(self):
        # Nothing can be checked about an int: it is passed on as it is.
        self.assert_runs(q=self.call.q.ctypes.data, out=self.call.out.ctypes.data)
        with self.assertRaises(mlatune.ArgumentValueError):
            self.plan.run(self.db, **self.call.buffers(q=-1))

class LseBufferTest(unittest.TestCase):
    def test_lse_buffer_against_the_plan(self):
        call = HostCall(TINY_SHAPE, [60, 45])  # lse [4 tokens, 4 heads] float32: 64 bytes
        with mlatune.Database(TINY_DB) as db, mlatune.Plan(db, 2) as plan:
            call.plan(plan, db)
            for lse, text in ((None, "lse is None"),
                              (np.zeros(2, dtype=np.float32), "lse has 8 bytes, but the plan "
                                                              "needs 64"),
                              (np.zeros((4, 2), dtype=np.float64), "lse has element type float64"),
                              (np.zeros((4, 4), dtype=np.float16), "needs float32")):
                with self.assertRaises(mlatune.ArgumentValueError) as cm:
                    plan.run(db, **call.buffers(lse=lse))
                self.assertIn(text, str(cm.exception))
            plan.run(db, **call.buffers())
            self.assertTrue(np.all(call.lse > 0))


class GpuWinnerTest(unittest.TestCase):
    """A GPU winner's buffers must be device memory; checked on the plan's description alone."""

    def setUp(self):
        self.planned = _checks.planned_call(
            heads=16, qlen=1, q_dtype="bf16", kv_dtype="fp8_e4m3fn", page_size=64, lse=False,
            batch=2, max_pages_per_seq=3, num_pages=6, workspace_bytes=256, on_device=True)
        self.q = np.zeros((2, 16, 576), dtype=np.uint16)
        self.kv = np.zeros((6, 64, 576), dtype=np.uint8)
        self.table = np.zeros((2, 3), dtype=np.int32)
        self.lens = np.zeros(2, dtype=np.int32)
        self.out = np.zeros((2, 16, 512), dtype=np.uint16)
        self.workspace = np.zeros(256, dtype=np.uint8)

    def cuda(self, array, dtype=None):
        return FakeTorchTensor(array, device="cuda", dtype=dtype)

    def buffers(self, **changes):
        buffers = dict(q=self.cuda(self.q, "torch.bfloat16"),
                       kv=self.cuda(self.kv, "torch.float8_e4m3fn"), block_table=self.cuda(
                           self.table), kv_lens=self.cuda(self.lens), out=self.cuda(self.out),
                       lse=None, workspace=self.cuda(self.workspace))
        buffers.update(changes)
        return buffers

    def test_host_arrays_for_a_gpu_winner(self):
        addresses = _checks.checked_buffers(self.planned, self.buffers())
        self.assertEqual(addresses["workspace_bytes"], 256)
        self.assertEqual(addresses["q"], self.q.ctypes.data)
        for name, host in (("q", self.q), ("kv_lens", self.lens),
                           ("out", FakeTorchTensor(self.out))):
            with self.assertRaises(_checks.ArgumentError) as cm:
                _checks.checked_buffers(self.planned, self.buffers(**{name: host}))
            self.assertIn(f"{name} is in host memory, but the planned winner runs on the GPU",
                          str(cm.exception))
        with self.assertRaises(_checks.ArgumentError) as cm:  # e4m3fnuz bits are not e4m3fn's
            _checks.checked_buffers(self.planned, self.buffers(
                kv=self.cuda(self.kv, "torch.float8_e4m3fnuz")))
        self.assertIn("kv has element type float8_e4m3fnuz", str(cm.exception))

    def test_winner_backends(self):
        def info(backend):
            return lambda: f'file x.db; tool mlatune 0.1.0; tuned on backend={backend} arch=x'

        self.assertFalse(mlatune._runs_on_device("host_split_kv_v1", info("hip")))
        self.assertTrue(mlatune._runs_on_device("hip_mma_split_v1", info("host")))
        self.assertFalse(mlatune._runs_on_device("external_thing", info("host")))
        self.assertTrue(mlatune._runs_on_device("external_thing", info("hip")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
