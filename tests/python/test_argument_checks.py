"""Arguments the Python binding checks before they reach ctypes, which would silently wrap an int
to its C type's width (2**32 + 16 heads looked up the 16-head winner), truncate a float length, or
take any truthy object for a flag: each is refused with ArgumentValueError (a ValueError) or
ArgumentTypeError (a TypeError), both MlatuneError with status 1, naming the argument and what it
allows. Also: unknown dtypes, and that refused constructors leave nothing for __del__ to trip on.
Usage: test_argument_checks.py DB (mlatune_make_test_db's). MLATUNE_LIBRARY names libmlatune."""

import os
import sys
import unittest

from binding_test_util import C_API_SHAPE, SOURCE_DIR, HostCall, mlatune, run_python

DB = sys.argv.pop(1) if len(sys.argv) > 1 else os.environ.get("MLATUNE_TEST_DB", "")
INT32_RANGE = "[0, 2147483647]"


class IntegerRangeTest(unittest.TestCase):
    def setUp(self):
        self.db = mlatune.Database(DB)

    def tearDown(self):
        self.db.close()

    def assert_refused(self, kind, text, call, *args, **kwargs):
        with self.assertRaises(kind) as cm:
            call(*args, **kwargs)
        self.assertIsInstance(cm.exception, mlatune.MlatuneError)
        self.assertEqual(cm.exception.status_name, "invalid argument")
        for part in text:
            self.assertIn(part, str(cm.exception))
        return cm.exception

    def lookup(self, **changes):
        key = dict(C_API_SHAPE, batch=4, max_kv_len=1000)
        key.update(changes)
        return self.db.lookup(**key)

    def test_key_fields_outside_int32_are_refused_not_wrapped(self):
        self.assertEqual(self.lookup().variant, "host_split_kv_v1")
        # Each of these wraps around to a tuned shape in a c_int32.
        for field, value in (("heads", 2**32 + 16), ("qlen", 2**32 + 1), ("batch", 2**32 + 4),
                             ("page_size", 2**32 + 64), ("max_kv_len", 2**32 + 1000),
                             ("heads", -(2**32) + 16), ("batch", -1)):
            self.assert_refused(ValueError, [f"{field}={value}", INT32_RANGE], self.lookup,
                                **{field: value})

    def test_plan_arguments_outside_their_c_types_are_refused(self):
        call = HostCall(C_API_SHAPE, [100, 37])
        plan = mlatune.Plan(self.db, 8)

        def plan_with(**changes):
            arguments = dict(C_API_SHAPE, kv_lens=call.lens, sm_scale=0.04,
                             max_pages_per_seq=call.pages_per_seq, num_pages=call.num_pages)
            arguments.update(changes)
            plan.plan(self.db, **arguments)

        plan_with()  # the unspoiled call plans
        # A length of 2**32 + 10 was planned as 10.
        self.assert_refused(ValueError, ["kv_lens[1]=4294967306", INT32_RANGE], plan_with,
                            kv_lens=[100, 2**32 + 10])
        self.assert_refused(ValueError, ["max_pages_per_seq=4294967298", INT32_RANGE], plan_with,
                            max_pages_per_seq=2**32 + 2)
        self.assert_refused(ValueError, ["num_pages=", "[0, 9223372036854775807]"], plan_with,
                            num_pages=2**64 + call.num_pages)
        self.assert_refused(ValueError, ["heads=4294967312"], plan_with, heads=2**32 + 16)
        for scale in ("sm_scale", "q_scale", "kv_scale"):
            self.assert_refused(ValueError, [f"{scale}=inf", "finite"], plan_with,
                                **{scale: float("inf")})
            self.assert_refused(ValueError, [f"{scale}=1e+39", "float32"], plan_with,
                                **{scale: 1e39})  # inf as a c_float
        self.assert_refused(ValueError, ["max_batch=4294967304", INT32_RANGE], mlatune.Plan,
                            self.db, 2**32 + 8)

    def test_stream_outside_a_pointer_is_refused(self):
        call = HostCall(C_API_SHAPE, [60, 10])
        plan = call.plan(mlatune.Plan(self.db, 8), self.db)
        self.assert_refused(ValueError, ["stream=18446744073709551616",
                                         "[0, 18446744073709551615]"],
                            plan.run, self.db, **call.buffers(), stream=2**64)
        self.assert_refused(TypeError, ["stream", "bool"], plan.run, self.db, **call.buffers(),
                            stream=True)


class IntegerTypeTest(unittest.TestCase):
    """bools and floats where an integer is needed: ctypes takes True as 1 and int() truncates."""

    def setUp(self):
        self.db = mlatune.Database(DB)

    def tearDown(self):
        self.db.close()

    def assert_type_refused(self, text, call, *args, **kwargs):
        with self.assertRaises(mlatune.ArgumentTypeError) as cm:
            call(*args, **kwargs)
        self.assertIsInstance(cm.exception, TypeError)
        for part in text:
            self.assertIn(part, str(cm.exception))

    def test_bools_and_floats_for_integers(self):
        key = dict(C_API_SHAPE, batch=4, max_kv_len=1000)
        for field in ("heads", "qlen", "page_size", "batch", "max_kv_len"):
            for value in (True, float(key[field]), 2.5):
                self.assert_type_refused([field, "integer", type(value).__name__],
                                         self.db.lookup, **dict(key, **{field: value}))
        self.assert_type_refused(["max_batch", "bool"], mlatune.Plan, self.db, True)
        self.assert_type_refused(["max_batch", "float"], mlatune.Plan, self.db, 8.0)

    def test_float_and_bool_lengths_are_not_truncated(self):
        call = HostCall(C_API_SHAPE, [100, 37])
        plan = mlatune.Plan(self.db, 8)
        arguments = dict(C_API_SHAPE, sm_scale=0.04, max_pages_per_seq=call.pages_per_seq,
                         num_pages=call.num_pages)
        for lens, text in (([100.7, 37], "kv_lens[0]"), ([100, True], "kv_lens[1]"),
                           (call.lens.astype("float64"), "kv_lens[0]")):
            self.assert_type_refused([text, "integer"], plan.plan, self.db, kv_lens=lens,
                                     **arguments)
        self.assert_type_refused(["num_pages", "float"], plan.plan, self.db, kv_lens=call.lens,
                                 **dict(arguments, num_pages=float(call.num_pages)))
        self.assert_type_refused(["sm_scale", "bool"], plan.plan, self.db, kv_lens=call.lens,
                                 **dict(arguments, sm_scale=True))

    def test_flags_take_bools_not_any_truthy_object(self):
        key = dict(C_API_SHAPE, batch=4, max_kv_len=1000)
        self.assertEqual(self.db.lookup(**dict(key, lse=0)).variant, "host_split_kv_v1")
        self.assert_type_refused(["lse", "bool", "'no'"], self.db.lookup, **dict(key, lse="no"))
        self.assert_type_refused(["lse"], self.db.lookup, **dict(key, lse=2))
        self.assert_type_refused(["allow_foreign_device", "'no'"], mlatune.Database, DB,
                                 allow_foreign_device="no")


class DtypeTest(unittest.TestCase):
    def test_unknown_dtypes_name_the_allowed_values(self):
        with mlatune.Database(DB) as db:
            key = dict(C_API_SHAPE, batch=4, max_kv_len=1000)
            for field, value in (("q_dtype", "bf32"), ("kv_dtype", "fp8"), ("q_dtype", 7),
                                 ("kv_dtype", -1)):
                with self.assertRaises(mlatune.ArgumentValueError) as cm:
                    db.lookup(**dict(key, **{field: value}))
                self.assertIsInstance(cm.exception, ValueError)
                self.assertIn(f"{field}={value!r}", str(cm.exception))
                self.assertIn("bf16, fp8_e4m3fn, fp8_e4m3fnuz", str(cm.exception))
            with self.assertRaises(mlatune.ArgumentTypeError):
                db.lookup(**dict(key, q_dtype=None))
            # Codes are still accepted for the names: MLATUNE_DTYPE_BF16 is 0.
            self.assertEqual(db.lookup(**dict(key, q_dtype=0, kv_dtype=0)).variant,
                             "host_split_kv_v1")


class LifetimeTest(unittest.TestCase):
    def test_refused_constructors_print_nothing_from_del(self):
        # Each refusal is caught; the half-made objects are then collected.
        code = f"""
import gc, sys
sys.path.insert(0, {os.path.join(SOURCE_DIR, "python")!r})
import mlatune
refusals = [lambda: mlatune.Database({DB + ".missing"!r}),
            lambda: mlatune.Database(None),
            lambda: mlatune.Database({DB!r}, allow_foreign_device="yes"),
            lambda: mlatune.LiveDatabase({DB + ".missing"!r}),
            lambda: mlatune.Plan(mlatune.Database({DB!r}), 2**40),
            lambda: mlatune.Plan(mlatune.Database({DB!r}), True)]
for refusal in refusals:
    try:
        refusal()
    except (mlatune.MlatuneError, TypeError, ValueError) as e:
        print(type(e).__name__)
    gc.collect()
print("done")
"""
        result = run_python(code, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, "")  # no "Exception ignored in: ... __del__"
        self.assertEqual(result.stdout.split()[-1], "done")
        self.assertEqual(len(result.stdout.split()), 7, result.stdout)

    def test_close_is_idempotent_and_closed_objects_refuse(self):
        db = mlatune.Database(DB)
        plan = mlatune.Plan(db, 8)
        plan.close()
        plan.close()
        with self.assertRaises(mlatune.MlatuneError) as cm:
            plan.workspace_bytes()
        self.assertIn("closed", cm.exception.message)
        db.close()
        db.close()
        with self.assertRaises(mlatune.MlatuneError):
            db.stats()
        with mlatune.LiveDatabase(DB) as live:
            self.assertEqual(live.generation(), 0)
        with self.assertRaises(mlatune.MlatuneError):
            live.generation()


if __name__ == "__main__":
    unittest.main(verbosity=2)
