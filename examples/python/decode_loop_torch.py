"""A decode loop on the GPU through the mlatune runtime, checked against PyTorch.

Simulates a serving stack's decode steps for DeepSeek-V3 TP8 (16 query heads on one latent KV
head): a paged bf16 or fp8 KV pool in torch tensors, sequences that grow by one token per step,
and per step one plan (host lengths) and one run (device buffers, on a torch stream of its own).
Then the last step is captured into a CUDA graph and replayed. Every output is compared with a
float32 PyTorch reference; the script exits non-zero on a mismatch or on any refusal.

  MLATUNE_LIBRARY=build-nvidia/runtime/libmlatune.so.0 \
    python3 examples/python/decode_loop_torch.py --db db/h200-deepseek-v3-tp8.db

Needs a GPU build of libmlatune (-DMLATUNE_GPU=nvidia or amd) and torch with that GPU.
"""

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import mlatune  # noqa: E402

HEADS, DIM_QK, DIM_V = 16, 576, 512


def reference(q, kv_pool, table, lens, sm_scale, kv_scale):
    """float32 attention over each sequence's pages: [batch, heads, 512]."""
    out = torch.empty(q.shape[0], HEADS, DIM_V, device=q.device, dtype=torch.float32)
    page = kv_pool.shape[1]
    for b, n in enumerate(lens):
        pages = table[b, : (n + page - 1) // page].long()
        rows = kv_pool[pages].reshape(-1, DIM_QK)[:n].float() * kv_scale
        s = (q[b].float() @ rows.T) * sm_scale
        out[b] = torch.softmax(s, dim=-1) @ rows[:, :DIM_V]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--start-len", type=int, default=3000)
    ap.add_argument("--kv-dtype", choices=["bf16", "fp8_e4m3fn"], default="bf16")
    ap.add_argument("--page-size", type=int, default=64)
    ap.add_argument("--allow-foreign-device", action="store_true",
                    help="accept a database tuned on another GPU (same arch and kernel build)")
    args = ap.parse_args()

    dev = torch.device("cuda")
    torch.manual_seed(0)
    db = mlatune.Database(args.db, allow_foreign_device=args.allow_foreign_device)
    print(f"mlatune {mlatune.version()}: {db.info()}")
    page, batch = args.page_size, args.batch
    max_len = args.start_len + args.steps + batch
    pages_per_seq = (max_len + page - 1) // page
    num_pages = batch * pages_per_seq
    kv_scale = 1.0 if args.kv_dtype == "bf16" else 0.05
    kv_f = torch.randn(num_pages, page, DIM_QK, device=dev) * 0.5
    if args.kv_dtype == "bf16":
        kv_pool = kv_f.to(torch.bfloat16)
    else:
        kv_pool = (kv_f / kv_scale).to(torch.float8_e4m3fn)
    table = torch.randperm(num_pages, device=dev, dtype=torch.int32).reshape(batch, pages_per_seq)
    lens = [args.start_len + b for b in range(batch)]  # unequal, as in serving
    sm_scale = DIM_QK ** -0.5
    plan = mlatune.Plan(db, batch)
    workspace = None
    worst, times = 0.0, []
    stream = torch.cuda.Stream()
    for step in range(args.steps):
        lens = [n + 1 for n in lens]
        q = (torch.randn(batch, HEADS, DIM_QK, device=dev) * 0.5).to(torch.bfloat16)
        out = torch.empty(batch, HEADS, DIM_V, device=dev, dtype=torch.bfloat16)
        lens_dev = torch.tensor(lens, device=dev, dtype=torch.int32)
        t0 = time.perf_counter()
        plan.plan(db, heads=HEADS, qlen=1, q_dtype="bf16", kv_dtype=args.kv_dtype,
                  page_size=page, lse=False, kv_lens=lens, sm_scale=sm_scale,
                  kv_scale=kv_scale, max_pages_per_seq=pages_per_seq, num_pages=num_pages)
        need = plan.workspace_bytes()
        if need and (workspace is None or workspace.numel() < need):
            workspace = torch.empty(need, device=dev, dtype=torch.uint8)
        stream.wait_stream(torch.cuda.current_stream())  # q, out, lens_dev are made there
        with torch.cuda.stream(stream):
            plan.run(db, q=q, kv=kv_pool, block_table=table, kv_lens=lens_dev, out=out,
                     workspace=workspace if need else None, stream=stream)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e6)
        ref = reference(q, kv_pool, table, lens, sm_scale, kv_scale)
        err = (out.float() - ref).abs().max().item()
        worst = max(worst, err)
        if step == 0:
            print(f"step 0: batch {batch}, kv {min(lens)}..{max(lens)}, winner "
                  f"{plan.selection()}")
    times.sort()
    print(f"{args.steps} steps: worst |out - torch reference| = {worst:.2e}; "
          f"plan+run+sync median {times[len(times) // 2]:.1f} us")

    # The last step's launch captured into a CUDA graph, then replayed on fresh q (same lengths:
    # the plan's, as the header requires of persistent winners).
    graph_out = torch.empty_like(out)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.run(db, q=q, kv=kv_pool, block_table=table, kv_lens=lens_dev, out=graph_out,
                 workspace=workspace if need else None, stream=torch.cuda.current_stream())
    q.copy_((torch.randn(batch, HEADS, DIM_QK, device=dev) * 0.5).to(torch.bfloat16))
    graph.replay()
    torch.cuda.synchronize()
    ref = reference(q, kv_pool, table, lens, sm_scale, kv_scale)
    graph_err = (graph_out.float() - ref).abs().max().item()
    print(f"CUDA graph replay: |out - torch reference| = {graph_err:.2e}")
    worst = max(worst, graph_err)
    if not worst < 1e-2:
        print("FAILED: output differs from the reference")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
