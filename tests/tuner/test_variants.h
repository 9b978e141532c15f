// Test-only kernel variants for the gate and the tuner: a reference-backed kernel with planted
// faults, and the planted variants of the seed failure, registered through the external C ABI
// (mlatune/variant_abi.h) exactly as a vendor's kernels would be.
#pragma once

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mla_decode/external_variant.h"
#include "mla_decode/host/host_variants.h"
#include "mla_decode/numformat.h"
#include "mla_decode/reference.h"
#include "mla_decode/registry.h"
#include "mlatune/variant_abi.h"
#include "tuner/timing.h"

namespace mlatune::testing {

// Faults a test kernel can plant.
enum class Fault {
  kNone,
  kLeakCausal,        // every query token sees all L keys
  kWritePastEnd,      // writes one element after the output buffer
  kSkipLastRow,       // leaves the last output row unwritten
  kNondeterministic,  // perturbs one element on every 5th call
  kThrow,             // launch fails
  kUnsupported,       // can_implement says no
  kOneRowWrong,       // one (token, head) row gets the values of another head
};

// Output of the float64 reference, rounded to bf16: the most accurate kernel there can be.
class ReferenceKernel final : public Variant {
 public:
  explicit ReferenceKernel(Fault fault, std::string name = "test_reference_v1")
      : fault_(fault), name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  std::string_view description() const override { return "test: reference rounded to bf16"; }
  Backend backend() const override { return Backend::kHost; }
  std::string_view code_identity() const override { return "test-identity"; }
  ParamSpace param_space() const override { return {}; }
  Support can_implement(const DecodeShape&, const LaunchParams&) const override {
    return fault_ == Fault::kUnsupported ? Support::no("planted: unsupported") : Support::yes();
  }
  size_t workspace_bytes(const DecodeShape&, const LaunchParams&) const override { return 0; }
  void run(const DecodeShape& s, const LaunchParams&, const DecodeArgs& a) const override {
    if (fault_ == Fault::kThrow) throw LaunchError("planted launch failure");
    ReferenceResult r =
        fault_ == Fault::kLeakCausal ? leaky_reference(s, a) : reference_decode(s, a);
    int64_t n = s.out_elems();
    if (fault_ == Fault::kSkipLastRow) n -= kHeadDimV;
    for (int64_t i = 0; i < n; ++i) a.out[i] = float_to_bf16(static_cast<float>(r.out[i]));
    if (a.lse) {
      for (int64_t i = 0; i < s.rows(); ++i) a.lse[i] = static_cast<float>(r.lse[i]);
    }
    if (fault_ == Fault::kWritePastEnd) a.out[s.out_elems()] = 0;
    if (fault_ == Fault::kNondeterministic && ++calls_ % 5 == 0) a.out[0] ^= 1;
    if (fault_ == Fault::kOneRowWrong && s.heads > 1) {
      std::memcpy(a.out + (s.rows() - 1) * kHeadDimV, a.out + (s.rows() - 2) * kHeadDimV,
                  kHeadDimV * sizeof(uint16_t));
    }
  }

 private:
  // The reference with causality ignored: token i of a sequence sees all of its L keys. Computed
  // as qlen = 1 over batch * qlen sequences that share their parent's pages.
  static ReferenceResult leaky_reference(const DecodeShape& s, const DecodeArgs& a) {
    DecodeShape t = s;
    t.batch = s.batch * s.qlen;
    t.qlen = 1;
    std::vector<int32_t> lens, table;
    for (int32_t b = 0; b < s.batch; ++b) {
      for (int32_t i = 0; i < s.qlen; ++i) {
        lens.push_back(a.kv_lens[b]);
        table.insert(table.end(), a.block_table + int64_t{b} * s.max_pages_per_seq,
                     a.block_table + int64_t{b + 1} * s.max_pages_per_seq);
      }
    }
    DecodeArgs ta = a;
    ta.kv_lens = lens.data();
    ta.block_table = table.data();
    return reference_decode(t, ta);
  }

  Fault fault_;
  std::string name_;
  mutable std::atomic<int64_t> calls_{0};
};

// A clock only scripted kernels advance, each run by its scripted cost: the timings a tune makes
// with its timers (TuneHooks::make_timer) are exactly the scripted costs, whatever the load of the
// machine, so tests can assert on their ratios.
class ScriptedClock {
 public:
  void advance_us(int64_t us) { now_us_ += us; }
  int64_t now_us() const { return now_us_; }
  TimerFactory timer_factory() {
    return [this](MemorySpace&) { return std::make_unique<Timer>(*this); };
  }

 private:
  class Timer final : public IntervalTimer {
   public:
    explicit Timer(const ScriptedClock& clock) : clock_(clock) {}
    void start() override { start_us_ = clock_.now_us(); }
    void stop() override { stop_us_ = clock_.now_us(); }
    double seconds() override { return static_cast<double>(stop_us_ - start_us_) * 1e-6; }

   private:
    const ScriptedClock& clock_;
    int64_t start_us_ = 0, stop_us_ = 0;
  };
  std::atomic<int64_t> now_us_{0};  // validation may run candidates on several threads
};

// The exact kernel with a chosen speed and a switchable misbehaviour: for the pruning, isolation
// and verify tests. `run` sleeps `sleep_us` after computing (or, given a ScriptedClock, advances
// it by that much instead), then does what `mode` says.
class ScriptedKernel final : public Variant {
 public:
  enum class Mode { kCorrect, kOneRowWrong, kSegfault, kHang };
  ScriptedKernel(std::string name, int64_t sleep_us, Mode mode, std::string identity = "scripted")
      : name_(std::move(name)), identity_(std::move(identity)), sleep_us_(sleep_us), mode_(mode) {}
  void set_mode(Mode m) { mode_ = m; }
  // The backend it claims (it always computes on the host).
  void set_backend(Backend b) { backend_ = b; }
  // Extra sleep per sequence of the batch: a cost that grows with the shape.
  void set_sleep_per_sequence_us(int64_t us) { sleep_per_seq_us_ = us; }
  // Its cost goes to `clock` instead of a sleep: timings independent of the machine's load.
  void use_clock(ScriptedClock* clock) { clock_ = clock; }
  std::string_view name() const override { return name_; }
  std::string_view description() const override { return "test: scripted reference kernel"; }
  Backend backend() const override { return backend_; }
  std::string_view code_identity() const override { return identity_; }
  ParamSpace param_space() const override { return {}; }
  Support can_implement(const DecodeShape&, const LaunchParams&) const override {
    return Support::yes();
  }
  size_t workspace_bytes(const DecodeShape&, const LaunchParams&) const override { return 0; }
  void run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const override {
    exact_.run(s, p, a);
    const int64_t sleep = sleep_us_ + sleep_per_seq_us_ * s.batch;
    if (clock_) {
      clock_->advance_us(sleep);
    } else if (sleep > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(sleep));
    }
    switch (mode_) {
      case Mode::kCorrect:
        break;
      case Mode::kOneRowWrong:
        std::memcpy(a.out + (s.rows() - 1) * kHeadDimV, a.out, kHeadDimV * sizeof(uint16_t));
        a.out[(s.rows() - 1) * kHeadDimV] ^= 0x4000;  // and far off, even if rows agree
        break;
      case Mode::kSegfault:
        std::raise(SIGSEGV);
        break;
      case Mode::kHang:
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }

 private:
  ReferenceKernel exact_{Fault::kNone};
  std::string name_, identity_;
  int64_t sleep_us_;
  int64_t sleep_per_seq_us_ = 0;
  ScriptedClock* clock_ = nullptr;
  Mode mode_;
  Backend backend_ = Backend::kHost;
};

// ---- The planted variants of the seed failure, behind the C ABI --------------------------------

inline DecodeShape shape_from_abi(const mlatune_decode_shape_v1* a) {
  DecodeShape s;
  s.batch = a->batch;
  s.qlen = a->qlen;
  s.heads = a->heads;
  s.page_size = a->page_size;
  s.q_dtype = static_cast<DType>(a->q_dtype);
  s.kv_dtype = static_cast<DType>(a->kv_dtype);
  s.q_scale = a->q_scale;
  s.kv_scale = a->kv_scale;
  s.sm_scale = a->sm_scale;
  s.return_lse = a->return_lse != 0;
  s.num_pages = a->num_pages;
  s.max_pages_per_seq = a->max_pages_per_seq;
  s.max_kv_len = a->max_kv_len;
  return s;
}

inline LaunchParams params_from_abi(const mlatune_launch_params_v1* p) {
  return {p->kv_splits, p->kv_tile, p->block_rows, p->workers};
}

inline DecodeArgs args_from_abi(const mlatune_decode_args_v1* a) {
  return {a->q,   a->kv,  a->block_table, a->kv_lens,
          a->out, a->lse, a->workspace,   a->workspace_bytes};
}

// Which planted fault a C-ABI variant carries (its `user` pointer).
enum class PlantedFault {
  kSeedBug,    // wrong exactly when heads == 16, qlen in {3, 4} and kv_splits > 1
  kOneRow,     // one output row wrong, always
  kOneInFive,  // wrong on every 5th call
};

struct PlantedState {
  PlantedFault fault;
  std::atomic<int64_t> calls{0};
};

inline int planted_can_implement(void*, const mlatune_decode_shape_v1* shape,
                                 const mlatune_launch_params_v1* params, char* why, size_t n) {
  Support s = host_split_kv_variant().can_implement(shape_from_abi(shape), params_from_abi(params));
  if (!s.ok) std::snprintf(why, n, "%s", s.reason.c_str());
  return s.ok ? 1 : 0;
}

inline uint64_t planted_workspace(void*, const mlatune_decode_shape_v1* shape,
                                  const mlatune_launch_params_v1* params) {
  return host_split_kv_variant().workspace_bytes(shape_from_abi(shape), params_from_abi(params));
}

// Swaps heads within every row group of a token: plausible values, uncorrelated with the answer.
inline void rotate_heads(const DecodeShape& s, uint16_t* out, int64_t token) {
  std::vector<uint16_t> first(out + token * s.heads * kHeadDimV,
                              out + (token * s.heads + 1) * kHeadDimV);
  std::memmove(out + token * s.heads * kHeadDimV, out + (token * s.heads + 1) * kHeadDimV,
               size_t(s.heads - 1) * kHeadDimV * sizeof(uint16_t));
  std::memcpy(out + (token * s.heads + s.heads - 1) * kHeadDimV, first.data(),
              kHeadDimV * sizeof(uint16_t));
}

inline int planted_run(void* user, const mlatune_decode_shape_v1* shape,
                       const mlatune_launch_params_v1* params, const mlatune_decode_args_v1* args,
                       char* error, size_t n) {
  auto* state = static_cast<PlantedState*>(user);
  DecodeShape s = shape_from_abi(shape);
  DecodeArgs a = args_from_abi(args);
  try {
    host_split_kv_variant().run(s, params_from_abi(params), a);
  } catch (const std::exception& e) {
    std::snprintf(error, n, "%s", e.what());
    return 1;
  }
  int64_t call = ++state->calls;
  switch (state->fault) {
    case PlantedFault::kSeedBug:
      if (s.heads == 16 && (s.qlen == 3 || s.qlen == 4) && params->kv_splits > 1) {
        for (int64_t t = 0; t < s.tokens(); ++t) rotate_heads(s, a.out, t);
      }
      break;
    case PlantedFault::kOneRow:  // the last row takes the values of the row before it
      std::memcpy(a.out + (s.rows() - 1) * kHeadDimV, a.out + (s.rows() - 2) * kHeadDimV,
                  kHeadDimV * sizeof(uint16_t));
      break;
    case PlantedFault::kOneInFive:
      if (call % 5 == 0) rotate_heads(s, a.out, 0);
      break;
  }
  return 0;
}

// Owns the descriptors and states of the three planted variants.
struct PlantedVariants {
  static constexpr int32_t kSplits[] = {1, 2, 4};
  static constexpr int32_t kTile[] = {64};
  static constexpr int32_t kRows[] = {0};
  static constexpr int32_t kWorkers[] = {1, 2};

  PlantedState seed{PlantedFault::kSeedBug}, one_row{PlantedFault::kOneRow},
      one_in_five{PlantedFault::kOneInFive};
  mlatune_variant_v1 descs[3];

  PlantedVariants() {
    const char* names[] = {"planted_seed_bug_v1", "planted_one_row_v1", "planted_one_in_five_v1"};
    PlantedState* states[] = {&seed, &one_row, &one_in_five};
    for (int i = 0; i < 3; ++i) {
      mlatune_variant_v1& d = descs[i];
      std::memset(&d, 0, sizeof d);
      d.abi_version = MLATUNE_VARIANT_ABI_VERSION;
      d.struct_size = sizeof d;
      d.name = names[i];
      d.description = "test: split-KV host kernel with a planted fault";
      d.backend = "host";
      d.code_identity = names[i];
      d.kv_splits = kSplits;
      d.kv_splits_count = 3;
      d.kv_tile = kTile;
      d.kv_tile_count = 1;
      d.block_rows = kRows;
      d.block_rows_count = 1;
      d.workers = kWorkers;
      d.workers_count = 2;
      d.user = states[i];
      d.can_implement = planted_can_implement;
      d.workspace_bytes = planted_workspace;
      d.run = planted_run;
    }
  }

  // The built-in variants plus the three planted ones.
  Registry registry() const {
    Registry r = builtin_registry();
    for (const mlatune_variant_v1& d : descs) r.add(wrap_external_variant(&d));
    return r;
  }
};

}  // namespace mlatune::testing
