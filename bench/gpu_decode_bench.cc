// GPU decode throughput against the device's own copy bandwidth, measured in the same run
// (docs/design.md §5: the shapes of its GPU speed targets).
//
//   mlatune_bench_gpu_decode [--db=FILE] [--shape=TEXT] [--variant=NAME] [--params=TEXT]
//                            [--list-sweep] [--also-dirty-l2]
//                            [Google Benchmark flags]
//
// For each shape the kernel is the winner the tuned database FILE holds for it (looked up through
// the runtime, exactly as a serving stack would); for a shape the database does not cover, or
// without --db, every GPU variant x launch parameter set that can implement it is swept (median
// of device-event samples, L2 flushed before each) and the fastest taken, which the label says.
// The kernel is then timed under Google Benchmark with manual time and reported with achieved
// GB/s (KV bytes read / time), TFLOP/s and its fraction of copy bandwidth. --shape keeps the shapes
// whose label contains TEXT, --variant restricts the sweep to one variant,
// --params to the launch parameters whose text ("splits=4 tile=64 ...") contains TEXT, and
// --list-sweep prints every swept candidate's median (kernel work). --also-dirty-l2 times every
// shape a second time ("/dirty_l2") with a 256 MB memset after the flush, i.e. with the L2 full
// of dirty lines the kernel has to write back (the flush before 2026-12-04 left it so). This
// program does not validate (the tuner and `mlatune verify` do).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "mla_decode/gate_backend.h"
#include "mla_decode/memory.h"
#include "mla_decode/registry.h"
#include "runtime/winner_table.h"
#include "tuner/validation_case.h"

namespace mlatune {
namespace {

constexpr size_t kFlushBytes = size_t{256} << 20;  // > 60 MB L2 of an H200

struct Shape {
  const char* label;
  int32_t heads, qlen, batch, kv_len;
  DType q_dtype, kv_dtype;
};

const Shape kShapes[] = {
    {"h16_q1_b64_kv8192_bf16", 16, 1, 64, 8192, DType::kBF16, DType::kBF16},
    {"h16_q1_b64_kv8192_fp8", 16, 1, 64, 8192, DType::kBF16, DType::kFP8E4M3FN},
    {"h16_q1_b64_kv8192_fp8q_fp8", 16, 1, 64, 8192, DType::kFP8E4M3FN, DType::kFP8E4M3FN},
    {"h16_q1_b64_kv16384_fp8", 16, 1, 64, 16384, DType::kBF16, DType::kFP8E4M3FN},
    {"h16_q1_b128_kv8192_fp8", 16, 1, 128, 8192, DType::kBF16, DType::kFP8E4M3FN},
    {"h16_q1_b2_kv65536_fp8", 16, 1, 2, 65536, DType::kBF16, DType::kFP8E4M3FN},
    {"h16_q4_b64_kv8192_bf16", 16, 4, 64, 8192, DType::kBF16, DType::kBF16},
    {"h128_q1_b64_kv4096_bf16", 128, 1, 64, 4096, DType::kBF16, DType::kBF16},
};

double median_seconds(MemorySpace& m, const std::function<void()>& work, int samples) {
  auto timer = m.make_timer();
  std::vector<double> t;
  for (int i = 0; i < samples; ++i) {
    m.flush_caches(kFlushBytes);
    timer->start();
    work();
    timer->stop();
    t.push_back(timer->seconds());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Prepared {
  Shape shape;
  std::unique_ptr<PreparedCase> input;
  const Variant* variant = nullptr;
  LaunchParams params;
  std::string source;  // "db" or "sweep"
  double kv_bytes = 0, flops = 0;
  DeviceBuffer out, ws;
  std::vector<int32_t> plan;  // host memory, for variants with a plan
};

std::vector<std::unique_ptr<Prepared>> g_prepared;
double g_copy_gbps = 0;

struct Options {
  std::string db_path;
  std::string shape_filter;  // substring of the labels to keep; empty: all
  std::string variant;       // the only variant swept; empty: all GPU variants
  std::string params;        // substring of LaunchParams::to_string() to keep; empty: all
  bool list_sweep = false;
  bool also_dirty_l2 = false;
};

// The database's winner for the shape, or false when it has none (the reason is printed).
bool winner_from_db(const WinnerTable& table, const Registry& registry, const Shape& sh,
                    Prepared& p) {
  const mlatune_decode_key key{sh.heads,
                               sh.qlen,
                               static_cast<int32_t>(sh.q_dtype),
                               static_cast<int32_t>(sh.kv_dtype),
                               64,
                               0,
                               sh.batch,
                               sh.kv_len};
  mlatune_selection sel{};
  const mlatune_status st = table.lookup(key, &sel);
  if (st != MLATUNE_STATUS_OK) {
    std::printf("%-26s not in the database (status %d): swept instead\n", sh.label,
                static_cast<int>(st));
    return false;
  }
  p.variant = registry.find(sel.variant);
  p.params = LaunchParams{sel.kv_splits, sel.kv_tile, sel.block_rows, sel.workers};
  p.source = "db";
  return p.variant != nullptr;
}

void prepare(MemorySpace& m, const Registry& registry, const WinnerTable* table,
             const Options& opt) {
  // Copy bandwidth: read + write bytes of a 2 GiB device-to-device copy.
  const size_t copy_bytes = size_t{2} << 30;
  DeviceBuffer a(m, copy_bytes), b(m, copy_bytes);
  m.fill(a.data(), 1, copy_bytes);
  double copy_s = median_seconds(
      m, [&] { m.copy_within(b.data(), a.data(), copy_bytes); }, 10);
  g_copy_gbps = 2.0 * static_cast<double>(copy_bytes) / copy_s / 1e9;
  std::printf("device copy bandwidth (read + write): %.0f GB/s\n", g_copy_gbps);

  for (const Shape& sh : kShapes) {
    if (std::string(sh.label).find(opt.shape_filter) == std::string::npos) continue;
    auto p = std::make_unique<Prepared>();
    p->shape = sh;
    BucketKey bucket;
    bucket.key = {sh.heads, sh.qlen, sh.q_dtype, sh.kv_dtype, 64, false};
    bucket.batch_lo = bucket.batch_hi = sh.batch;
    bucket.kv_lo = bucket.kv_hi = sh.kv_len;
    const ValidationCase tc = make_timing_case(bucket, 1.0 / 24.0);  // every sequence at kv_len
    p->input = gate_backend(Backend::kHip).prepare(tc.spec, {}, 1);
    const DecodeShape& s = tc.shape();
    p->kv_bytes = static_cast<double>(sh.batch) * sh.kv_len * kHeadDimQK * dtype_bytes(sh.kv_dtype);
    p->flops = 2.0 * s.rows() * sh.kv_len * (kHeadDimQK + kHeadDimV);
    p->out = DeviceBuffer(m, static_cast<size_t>(s.out_elems()) * 2);
    double best = 1e30;
    if (!table || !winner_from_db(*table, registry, sh, *p)) {
      p->source = "sweep";
      for (const Variant* v : registry.all()) {
        if (v->backend() != Backend::kHip) continue;
        if (!opt.variant.empty() && v->name() != opt.variant) continue;
        for (const LaunchParams& lp : v->param_space().enumerate()) {
          if (!v->can_implement(s, lp).ok) continue;
          if (lp.to_string().find(opt.params) == std::string::npos) continue;
          DeviceBuffer ws(m, v->workspace_bytes(s, lp));
          DecodeArgs args = p->input->args();
          args.out = static_cast<uint16_t*>(p->out.data());
          args.workspace = ws.data();
          args.workspace_bytes = ws.size();
          const std::vector<int32_t> plan = plan_launch(*v, s, lp, p->input->spec().kv_lens);
          args.plan = plan.data();
          args.plan_words = plan.size();
          v->run(s, lp, args);
          m.synchronize();
          double t = median_seconds(
              m, [&] { v->run(s, lp, args); }, 7);
          if (opt.list_sweep) {
            std::printf("  sweep %-26s %-18s %-28s %8.1f us\n", sh.label,
                        std::string(v->name()).c_str(), lp.to_string().c_str(), t * 1e6);
          }
          if (t < best) {
            best = t;
            p->variant = v;
            p->params = lp;
          }
        }
      }
    }
    if (!p->variant) throw std::runtime_error(std::string(sh.label) + ": no variant implements it");
    p->ws = DeviceBuffer(m, p->variant->workspace_bytes(s, p->params));
    p->plan = plan_launch(*p->variant, s, p->params, p->input->spec().kv_lens);
    std::printf("%-26s %s %s (%s)\n", sh.label, std::string(p->variant->name()).c_str(),
                p->params.to_string().c_str(), p->source.c_str());
    g_prepared.push_back(std::move(p));
  }
}

// A memset of kFlushBytes right before the interval when `dirty` holds a buffer (--also-dirty-l2).
void BM_Decode(benchmark::State& state, Prepared* p, DeviceBuffer* dirty) {
  MemorySpace& m = memory_space(Backend::kHip);
  DecodeArgs args = p->input->args();
  args.out = static_cast<uint16_t*>(p->out.data());
  args.workspace = p->ws.data();
  args.workspace_bytes = p->ws.size();
  args.plan = p->plan.data();
  args.plan_words = p->plan.size();
  auto timer = m.make_timer();
  for (auto _ : state) {
    m.flush_caches(kFlushBytes);
    if (dirty) m.fill(dirty->data(), 0x5a, dirty->size());
    timer->start();
    p->variant->run(p->input->spec().shape, p->params, args);
    timer->stop();
    state.SetIterationTime(timer->seconds());
  }
  state.SetLabel(std::string(p->variant->name()) + " " + p->params.to_string() + " (" + p->source +
                 ")");
  // Per-iteration amounts over the (manual) time of all iterations.
  const auto rate = benchmark::Counter::kIsIterationInvariantRate;
  state.counters["GB/s"] = benchmark::Counter(p->kv_bytes / 1e9, rate);
  state.counters["TFLOP/s"] = benchmark::Counter(p->flops / 1e12, rate);
  state.counters["copy_fraction"] = benchmark::Counter(p->kv_bytes / 1e9 / g_copy_gbps, rate);
  state.counters["copy_GB/s"] = g_copy_gbps;
}

}  // namespace
}  // namespace mlatune

int main(int argc, char** argv) {
  using namespace mlatune;
  benchmark::Initialize(&argc, argv);
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--db=", 0) == 0) {
      opt.db_path = arg.substr(5);
    } else if (arg.rfind("--shape=", 0) == 0) {
      opt.shape_filter = arg.substr(8);
    } else if (arg.rfind("--variant=", 0) == 0) {
      opt.variant = arg.substr(10);
    } else if (arg.rfind("--params=", 0) == 0) {
      opt.params = arg.substr(9);
    } else if (arg == "--list-sweep") {
      opt.list_sweep = true;
    } else if (arg == "--also-dirty-l2") {
      opt.also_dirty_l2 = true;
    } else {
      std::fprintf(stderr,
                   "gpu_decode_bench: unknown argument '%s' (use --db=FILE, --shape=TEXT, "
                   "--variant=NAME, --params=TEXT, --list-sweep, --also-dirty-l2)\n",
                   argv[i]);
      return 2;
    }
  }
  MemorySpace* m = nullptr;
  try {
    m = &memory_space(Backend::kHip);
    m->synchronize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_decode_bench: %s\n", e.what());
    return 1;
  }
  Registry registry = builtin_registry();
  std::unique_ptr<WinnerTable> table;
  if (!opt.variant.empty() && registry.find(opt.variant) == nullptr) {
    std::fprintf(stderr, "gpu_decode_bench: --variant=%s: no such variant in this build\n",
                 opt.variant.c_str());
    return 2;
  }
  if (!opt.db_path.empty()) {
    try {
      OpenOptions options;
      options.registry = &registry;
      table = WinnerTable::open(opt.db_path, options);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gpu_decode_bench: %s\n", e.what());
      return 1;
    }
  }
  try {
    prepare(*m, registry, table.get(), opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_decode_bench: %s\n", e.what());
    return 1;
  }
  DeviceBuffer dirty;
  if (opt.also_dirty_l2) dirty = DeviceBuffer(*m, kFlushBytes);
  for (auto& p : g_prepared) {
    for (DeviceBuffer* d : {static_cast<DeviceBuffer*>(nullptr), &dirty}) {
      if (d && !opt.also_dirty_l2) continue;
      const std::string name = std::string(p->shape.label) + (d ? "/dirty_l2" : "");
      benchmark::RegisterBenchmark(name.c_str(), BM_Decode, p.get(), d)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond)
          ->Iterations(20)
          ->Repetitions(5)
          ->ReportAggregatesOnly(true);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
