"""One MLA decode call on the CPU backend through the Python binding, checked against numpy.

Opens a host database, plans one decode call (bf16 q and paged bf16 KV, causal when qlen > 1,
with the LSE by default), runs it on numpy arrays and compares the output and the LSE with a
float64 numpy reference: softmax(q k^T * sm_scale) v, with V the first 512 dims of each KV row and
query token i of a sequence of length L seeing its keys 0 .. L - qlen + i. Exits non-zero on a
mismatch or a refusal.

The defaults fit tests/cli/tiny.yaml (heads 4, qlen 2, page 16, LSE, batch 1..2, kv 41..80):

  build/tuner/mlatune tune --config tests/cli/tiny.yaml --db /tmp/tiny.db --in-process
  MLATUNE_LIBRARY=build/runtime/libmlatune.so.0 \
    python3 examples/python/decode_numpy.py --db /tmp/tiny.db

Needs numpy, and libmlatune (MLATUNE_LIBRARY, or an installed package: see python/README.md).
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import mlatune  # noqa: E402

DIM_QK, DIM_V = 576, 512
# The tolerances of tests/cli/tiny.yaml: bf16 output rounding is a relative 2**-9.
ATOL, RTOL, LSE_ATOL = 1e-3, 1e-2, 2e-4


def to_bf16_bits(x):
    """float -> bf16 bit patterns (uint16), rounded to nearest even: numpy has no bf16 type."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def reference(q, kv_pool, table, lens, qlen, sm_scale):
    """float64 MLA decode: (out [tokens, heads, 512], lse [tokens, heads])."""
    tokens, heads = q.shape[0], q.shape[1]
    out, lse = np.empty((tokens, heads, DIM_V)), np.empty((tokens, heads))
    for b, length in enumerate(lens):
        keys = kv_pool[table[b]].reshape(-1, DIM_QK)[:length]
        for i in range(qlen):
            visible = length - qlen + i + 1  # causal, right-aligned to the sequence's end
            scores = q[b * qlen + i] @ keys[:visible].T * sm_scale  # [heads, visible]
            top = scores.max(axis=1, keepdims=True)
            weights = np.exp(scores - top)
            total = weights.sum(axis=1, keepdims=True)
            out[b * qlen + i] = (weights / total) @ keys[:visible, :DIM_V]
            lse[b * qlen + i] = (top + np.log(total))[:, 0]
    return out, lse


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, help="a database tuned on this CPU")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--qlen", type=int, default=2)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--kv-lens", default="60,45", help="comma-separated sequence lengths")
    ap.add_argument("--no-lse", dest="lse", action="store_false", help="plan without the LSE")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    lens = [int(n) for n in args.kv_lens.split(",")]
    batch, page, heads, qlen = len(lens), args.page_size, args.heads, args.qlen
    rng = np.random.default_rng(args.seed)
    pages_per_seq = -(-max(lens) // page)
    num_pages = batch * pages_per_seq + 3  # a few pages no sequence uses
    # Each sequence's pages scattered over the pool, as a serving stack's allocator leaves them.
    table = rng.permutation(num_pages)[: batch * pages_per_seq]
    table = table.astype(np.int32).reshape(batch, pages_per_seq)
    q = to_bf16_bits(rng.uniform(-1, 1, (batch * qlen, heads, DIM_QK)))
    kv_pool = to_bf16_bits(rng.uniform(-1, 1, (num_pages, page, DIM_QK)))
    out = np.zeros((batch * qlen, heads, DIM_V), dtype=np.uint16)
    lse = np.zeros((batch * qlen, heads), dtype=np.float32) if args.lse else None
    sm_scale = DIM_QK ** -0.5

    try:
        with mlatune.Database(args.db) as db, mlatune.Plan(db, batch) as plan:
            print(f"mlatune {mlatune.version()} ({mlatune.library_path()}): {db.info()}")
            plan.plan(db, heads=heads, qlen=qlen, q_dtype="bf16", kv_dtype="bf16",
                      page_size=page, lse=args.lse, kv_lens=lens, sm_scale=sm_scale,
                      max_pages_per_seq=pages_per_seq, num_pages=num_pages)
            print(f"batch {batch}, kv lens {lens}: winner {plan.selection()}")
            workspace = np.zeros(plan.workspace_bytes(), dtype=np.uint8)
            plan.run(db, q=q, kv=kv_pool, block_table=table, kv_lens=np.asarray(lens, np.int32),
                     out=out, lse=lse, workspace=workspace if workspace.size else None)
    except mlatune.MlatuneError as e:
        print(f"FAILED: refused ({e.status_name}): {e.message}")
        return 1

    ref_out, ref_lse = reference(from_bf16_bits(q).astype(np.float64),
                                 from_bf16_bits(kv_pool).astype(np.float64), table, lens, qlen,
                                 sm_scale)
    out_error = np.abs(from_bf16_bits(out).astype(np.float64) - ref_out)
    out_ok = bool(np.all(out_error <= ATOL + RTOL * np.abs(ref_out)))
    print(f"|out - float64 reference|: max {out_error.max():.2e}")
    lse_ok = True
    if args.lse:
        lse_error = np.abs(lse.astype(np.float64) - ref_lse)
        lse_ok = bool(np.all(lse_error <= LSE_ATOL))
        print(f"|lse - float64 reference|: max {lse_error.max():.2e}")
    if not (out_ok and lse_ok):
        print(f"FAILED: beyond atol {ATOL} + rtol {RTOL} (out) or {LSE_ATOL} (lse)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
