"""The Python binding (python/mlatune) on the CPU backend: open, lookup, plan and run of both
winners of the C test's database against a float64 numpy reference, and every refusal raising
MlatuneError with its status. Usage: test_runtime.py DB (written by mlatune_make_test_db:
heads 16, qlen 1, bf16, page 64; batch 1..8 -> host_split_kv_v1, 9..64 -> host_online_softmax_v1,
kv 4097..8192 without a valid kernel). MLATUNE_LIBRARY names libmlatune."""

import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import mlatune  # noqa: E402

DB = sys.argv.pop(1) if len(sys.argv) > 1 else os.environ.get("MLATUNE_TEST_DB", "")
SHAPE = dict(heads=16, qlen=1, q_dtype="bf16", kv_dtype="bf16", page_size=64, lse=False)


def to_bf16(x):
    """float -> bf16 bits (uint16), round to nearest even."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


class Call:
    """Random bf16 q and paged KV for `lens`, and the reference output in float64."""

    def __init__(self, lens, seed):
        rng = np.random.default_rng(seed)
        self.lens = np.asarray(lens, dtype=np.int32)
        batch, page, heads = len(lens), SHAPE["page_size"], SHAPE["heads"]
        self.pages_per_seq = int(-(-self.lens.max() // page))
        self.num_pages = batch * self.pages_per_seq + 2
        self.table = rng.permutation(self.num_pages)[: batch * self.pages_per_seq]
        self.table = self.table.astype(np.int32).reshape(batch, self.pages_per_seq)
        self.q = to_bf16(rng.uniform(-1, 1, (batch, heads, 576)))
        self.kv = to_bf16(rng.uniform(-1, 1, (self.num_pages, page, 576)))
        self.out = np.full((batch, heads, 512), 0xFFFF, dtype=np.uint16)
        self.sm_scale = 576 ** -0.5

    def reference(self):
        q, kv = from_bf16(self.q).astype(np.float64), from_bf16(self.kv).astype(np.float64)
        out = np.empty(self.out.shape)
        page = SHAPE["page_size"]
        for b, n in enumerate(self.lens):
            rows = kv[self.table[b]].reshape(-1, 576)[:n]
            s = q[b] @ rows.T * self.sm_scale
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[b] = (p / p.sum(axis=1, keepdims=True)) @ rows[:, :512]
        del page
        return out

    def plan(self, plan, db):
        return plan.plan(db, **SHAPE, kv_lens=self.lens, sm_scale=self.sm_scale,
                         max_pages_per_seq=self.pages_per_seq, num_pages=self.num_pages)

    def run(self, plan, db, workspace=None):
        plan.run(db, q=self.q, kv=self.kv, block_table=self.table, kv_lens=self.lens,
                 out=self.out, workspace=workspace)

    def error(self):
        return float(np.abs(from_bf16(self.out).astype(np.float64) - self.reference()).max())


class RuntimeTest(unittest.TestCase):
    def setUp(self):
        self.db = mlatune.Database(DB)

    def tearDown(self):
        self.db.close()

    def test_version_stats_and_info(self):
        self.assertRegex(mlatune.version(), r"^\d+\.\d+\.\d+$")
        self.assertEqual(self.db.stats(), {"usable": 2, "stale": 0, "no_valid": 1})
        self.assertIn("tuned on", self.db.info())

    def test_lookup_and_its_refusals(self):
        sel = self.db.lookup(**SHAPE, batch=4, max_kv_len=1000)
        self.assertEqual(sel.variant, "host_split_kv_v1")
        self.assertEqual((sel.batch_lo, sel.batch_hi, sel.kv_lo, sel.kv_hi), (1, 8, 1, 4096))
        self.assertEqual(self.db.lookup(**SHAPE, batch=20, max_kv_len=10).variant,
                         "host_online_softmax_v1")
        cases = [(dict(SHAPE, heads=32), 6, "nearest"),
                 (dict(SHAPE, q_dtype="fp8_e4m3fn"), 6, ""),
                 (dict(SHAPE, heads=0), 1, "heads=0")]
        for shape, status, text in cases:
            with self.assertRaises(mlatune.MlatuneError) as cm:
                self.db.lookup(**shape, batch=4, max_kv_len=100)
            self.assertEqual(cm.exception.status, status)
            self.assertIn(text, cm.exception.message)
        with self.assertRaises(mlatune.MlatuneError) as cm:
            self.db.lookup(**SHAPE, batch=4, max_kv_len=5000)
        self.assertEqual(cm.exception.status_name, "no valid kernel")

    def test_plan_and_run_both_winners_against_numpy(self):
        for lens, winner in (([100, 37, 1], "host_split_kv_v1"),
                             ([5 + 13 * i for i in range(12)], "host_online_softmax_v1")):
            call = Call(lens, seed=len(lens))
            plan = call.plan(mlatune.Plan(self.db, 64), self.db)
            self.assertEqual(plan.selection().variant, winner)
            workspace = np.zeros(plan.workspace_bytes(), dtype=np.uint8)
            call.run(plan, self.db, workspace if workspace.size else None)
            self.assertLess(call.error(), 4e-3, winner)

    def test_run_refusals(self):
        call = Call([60, 10], seed=3)
        plan = mlatune.Plan(self.db, 8)
        with self.assertRaises(mlatune.MlatuneError) as cm:
            call.run(plan, self.db)
        self.assertEqual(cm.exception.status_name, "bad plan")
        call.plan(plan, self.db)
        workspace = np.zeros(plan.workspace_bytes(), dtype=np.uint8)
        with mlatune.Database(DB) as other, self.assertRaises(mlatune.MlatuneError) as cm:
            call.run(plan, other, workspace)
        self.assertEqual(cm.exception.status_name, "bad plan")
        if workspace.size:
            with self.assertRaises(mlatune.MlatuneError) as cm:
                call.run(plan, self.db, None)
            self.assertEqual(cm.exception.status_name, "invalid argument")
        with self.assertRaises(mlatune.MlatuneError) as cm:
            plan.run(self.db, q=call.q, kv=call.kv, block_table=call.table, kv_lens=call.lens,
                     out=call.out, workspace=workspace, stream=1234)
        self.assertIn("stream must be NULL", cm.exception.message)
        with self.assertRaises(mlatune.MlatuneError) as cm:
            plan.run(self.db, q=None, kv=call.kv, block_table=call.table, kv_lens=call.lens,
                     out=call.out)
        call.run(plan, self.db, workspace)  # refusals left the plan intact
        self.assertLess(call.error(), 4e-3)

    def test_bad_files_and_live_update(self):
        with self.assertRaises(mlatune.MlatuneError) as cm:
            mlatune.Database(DB + ".missing")
        self.assertEqual(cm.exception.status_name, "io error")
        live = mlatune.LiveDatabase(DB)
        db = live.acquire()
        live.update(DB)
        self.assertEqual(live.generation(), 1)
        with self.assertRaises(mlatune.MlatuneError):
            live.update(DB + ".missing")
        self.assertEqual(live.generation(), 1)
        self.assertEqual(db.lookup(**SHAPE, batch=1, max_kv_len=1).variant, "host_split_kv_v1")
        db.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
