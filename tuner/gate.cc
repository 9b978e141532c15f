#include "tuner/gate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>

#include "mla_decode/numformat.h"
#include "tuner/heartbeat.h"

namespace mlatune {
namespace gate_detail {

struct Failure {
  Disposition disposition;
  std::string reason;
  std::string where;
};

// Running worst-case metrics over all checked rows of all cases.
struct Metrics {
  double max_abs = 0, max_ratio = 0, min_cos = 1, max_lse = 0;
  std::string worst_row;
  int64_t rows = 0;
};

}  // namespace gate_detail

namespace {
using gate_detail::Failure;
using gate_detail::Metrics;

constexpr size_t kGuardBytes = 256;
constexpr uint8_t kGuardByte = 0x5a;
// 0xff bytes read as NaN in bf16 and fp32: a kernel that leaves part of its output unwritten, or
// reads workspace it never wrote, produces NaN the gate sees.
constexpr uint8_t kPrefillByte = 0xff;

// A buffer in a backend's memory with guard regions on both sides, to catch writes outside the
// payload. Only the guards are copied back for inspection; the payload is checked in place.
class GuardedBuffer {
 public:
  GuardedBuffer(MemorySpace& m, size_t payload)
      : memory_(m), payload_(payload), device_(m, payload + 2 * kGuardBytes) {}
  void refill() {
    uint8_t* base = static_cast<uint8_t*>(device_.data());
    memory_.fill(base, kGuardByte, kGuardBytes);
    memory_.fill(base + kGuardBytes, kPrefillByte, payload_);
    memory_.fill(base + kGuardBytes + payload_, kGuardByte, kGuardBytes);
  }
  uint8_t* payload() const {
    return payload_ ? static_cast<uint8_t*>(device_.data()) + kGuardBytes : nullptr;
  }
  size_t size() const { return payload_; }
  // Describes the first damaged guard byte (after the run finished), if any.
  std::optional<std::string> damaged_guard(const char* what) const {
    uint8_t before[kGuardBytes], after[kGuardBytes];
    const uint8_t* base = static_cast<const uint8_t*>(device_.data());
    memory_.copy_to_host(before, base, kGuardBytes);
    memory_.copy_to_host(after, base + kGuardBytes + payload_, kGuardBytes);
    for (size_t i = 0; i < kGuardBytes; ++i) {
      if (before[i] != kGuardByte) {
        return std::string("wrote before the start of ") + what + " (byte -" +
               std::to_string(kGuardBytes - i) + ")";
      }
      if (after[i] != kGuardByte) {
        return std::string("wrote past the end of ") + what + " (byte +" + std::to_string(i) + ")";
      }
    }
    return std::nullopt;
  }

 private:
  MemorySpace& memory_;
  size_t payload_;
  DeviceBuffer device_;
};

std::string row_name(const DecodeShape& s, int64_t row) {
  int64_t token = row / s.heads, head = row % s.heads;
  return "token " + std::to_string(token) + " (seq " + std::to_string(token / s.qlen) + ", q " +
         std::to_string(token % s.qlen) + ") head " + std::to_string(head);
}

std::string fmt(double x) {
  std::ostringstream o;
  o.precision(3);
  o << x;
  return o.str();
}

// Judges one run's comparison with the reference; returns the first violation and folds every
// checked row into the metrics.
std::optional<Failure> judge(const ValidationCase& c, const Tolerance& tol, const OutputCheck& oc,
                             bool with_lse, Metrics& m) {
  const DecodeShape& s = c.shape();
  if (oc.bad_out >= 0) {
    return Failure{Disposition::kIncorrect,
                   std::string(std::isnan(oc.bad_out_value) ? "NaN" : "Inf") + " in the output",
                   c.label + " " + row_name(s, oc.bad_out / kHeadDimV) + " dim " +
                       std::to_string(oc.bad_out % kHeadDimV)};
  }
  if (oc.bad_lse >= 0) {
    return Failure{Disposition::kIncorrect, "non-finite LSE " + fmt(oc.bad_lse_value),
                   c.label + " " + row_name(s, oc.bad_lse)};
  }
  std::optional<Failure> first;
  for (size_t k = 0; k < c.checked_rows.size(); ++k) {
    const RowCheck& r = oc.rows[k];
    ++m.rows;
    m.max_abs = std::max(m.max_abs, r.max_abs);
    m.min_cos = std::min(m.min_cos, r.cosine);
    if (with_lse) m.max_lse = std::max(m.max_lse, r.lse_err);
    std::string where = c.label + " " + row_name(s, c.checked_rows[k]);
    if (r.worst_ratio > m.max_ratio) {
      m.max_ratio = r.worst_ratio;
      m.worst_row = where + " dim " + std::to_string(r.worst_dim);
    }
    if (first) continue;  // keep measuring the case, report its first violation
    if (r.worst_ratio > 1.0) {
      first = Failure{Disposition::kIncorrect,
                      "error " + fmt(r.max_abs) + " exceeds tolerance (" + fmt(r.worst_ratio) +
                          "x atol+rtol|ref|) at dim " + std::to_string(r.worst_dim) + ", cosine " +
                          fmt(r.cosine),
                      where};
    } else if (r.cosine < tol.min_cosine) {
      first = Failure{Disposition::kIncorrect,
                      "row cosine " + fmt(r.cosine) + " below " + fmt(tol.min_cosine), where};
    } else if (with_lse && r.lse_err > tol.lse_atol) {
      first = Failure{Disposition::kIncorrect,
                      "LSE error " + fmt(r.lse_err) + " exceeds " + fmt(tol.lse_atol), where};
    }
  }
  return first;
}

}  // namespace

BucketValidator::BucketValidator(const BucketKey& bucket, const TuneConfig& config,
                                 int reference_threads)
    : bucket_(bucket),
      tol_(config.tolerance_for({bucket.key.q_dtype, bucket.key.kv_dtype})),
      settings_(config.validation),
      timeout_s_(config.timing.candidate_timeout_s),
      reference_threads_(reference_threads) {
  static constexpr InputPattern kPatterns[] = {InputPattern::kRandom, InputPattern::kCausalTrap,
                                               InputPattern::kPeaked, InputPattern::kWideRange};
  size_t k = 0;
  for (const ValidationPoint& p : validation_points(bucket, settings_.interior_points)) {
    for (int32_t seed = 0; seed < settings_.seeds; ++seed, ++k) {
      // Patterns rotate over (point, seed) so every pattern meets several points.
      cases_.push_back(make_validation_case(bucket, p, static_cast<uint64_t>(seed) + 1,
                                            kPatterns[k % 4], config.sm_scale, settings_));
    }
  }
}

const PreparedCase& BucketValidator::prepared_case(Backend backend, size_t i) const {
  std::vector<std::unique_ptr<PreparedCase>>& cached = prepared_[backend];
  if (cached.empty()) cached.resize(cases_.size());
  if (!cached[i]) {
    cached[i] =
        gate_backend(backend).prepare(cases_[i].spec, cases_[i].checked_rows, reference_threads_);
  }
  return *cached[i];
}

std::optional<gate_detail::Failure> BucketValidator::run_case(
    const Variant& v, const LaunchParams& p, MemorySpace& memory, const ValidationCase& c,
    const PreparedCase& inputs, TrialRecord& t, gate_detail::Metrics& m) const {
  const DecodeShape& s = c.shape();
  size_t ws_bytes = v.workspace_bytes(s, p);
  if (ws_bytes > (size_t{1} << 36)) {
    return Failure{Disposition::kLaunchError,
                   "absurd workspace request of " + std::to_string(ws_bytes) + " bytes", c.label};
  }
  GateBackend& gate = gate_backend(v.backend());
  GuardedBuffer out(memory, static_cast<size_t>(s.out_elems()) * sizeof(uint16_t));
  GuardedBuffer lse(memory, s.return_lse ? static_cast<size_t>(s.rows()) * sizeof(float) : 0);
  GuardedBuffer ws(memory, ws_bytes);
  DeviceBuffer first_out(memory, out.size()), first_lse(memory, lse.size());
  std::vector<int32_t> plan;
  try {
    plan = plan_launch(v, s, p, c.spec.kv_lens);
  } catch (const LaunchError& e) {
    return Failure{Disposition::kLaunchError, std::string("plan: ") + e.what(), c.label};
  }
  for (int32_t run = 0; run < settings_.repeats; ++run) {
    out.refill();
    lse.refill();
    ws.refill();
    DecodeArgs a = inputs.args();
    a.out = reinterpret_cast<uint16_t*>(out.payload());
    a.lse = s.return_lse ? reinterpret_cast<float*>(lse.payload()) : nullptr;
    a.workspace = ws.payload();
    a.workspace_bytes = ws_bytes;
    a.plan = plan.empty() ? nullptr : plan.data();
    a.plan_words = plan.size();
    ++t.validation_runs;
    heartbeat();
    memory.synchronize();
    auto t0 = std::chrono::steady_clock::now();
    v.run(s, p, a);
    memory.synchronize();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (secs > timeout_s_) {
      return Failure{Disposition::kTimedOut,
                     "a run took " + fmt(secs) + " s (limit " + fmt(timeout_s_) + " s)", c.label};
    }
    for (auto [buf, what] : {std::pair{&out, "out"}, {&lse, "lse"}, {&ws, "workspace"}}) {
      if (auto d = buf->damaged_guard(what)) return Failure{Disposition::kIncorrect, *d, c.label};
    }
    if (run == 0) {
      const OutputCheck oc = inputs.check(a.out, a.lse, tol_.atol, tol_.rtol);
      if (auto f = judge(c, tol_, oc, s.return_lse, m)) return f;
      memory.copy_within(first_out.data(), out.payload(), out.size());
      memory.copy_within(first_lse.data(), lse.payload(), lse.size());
      continue;
    }
    const int64_t diff_out = gate.first_difference(first_out.data(), out.payload(), out.size());
    const int64_t diff_lse = gate.first_difference(first_lse.data(), lse.payload(), lse.size());
    if (diff_out >= 0 || diff_lse >= 0) {
      std::string where = diff_out >= 0 ? row_name(s, diff_out / 2 / kHeadDimV)
                                        : "the LSE of " + row_name(s, diff_lse / 4);
      return Failure{
          Disposition::kIncorrect,
          "nondeterministic: run " + std::to_string(run + 1) + " differs bitwise from run 1",
          c.label + " " + where};
    }
  }
  return std::nullopt;
}

BucketValidator::~BucketValidator() = default;

void BucketValidator::prepare(Backend backend) const {
  for (size_t i = 0; i < cases_.size(); ++i) {
    heartbeat();
    prepared_case(backend, i);
  }
}

Support BucketValidator::supports(const Variant& v, const LaunchParams& p) const {
  for (const ValidationCase& c : cases_) {
    Support sup = v.can_implement(c.shape(), p);
    if (!sup.ok) return Support::no(c.label + ": " + (sup.reason.empty() ? "refused" : sup.reason));
  }
  return Support::yes();
}

TrialRecord BucketValidator::validate(const Variant& v, const LaunchParams& p) const {
  TrialRecord t;
  t.variant = std::string(v.name());
  t.params = p;
  Metrics m;
  auto finish = [&](std::optional<Failure> f) {
    if (m.rows > 0) {
      t.max_abs_err = m.max_abs;
      t.max_rel_err = m.max_ratio;
      t.min_cosine = m.min_cos;
      if (bucket_.key.lse) t.max_lse_err = m.max_lse;
    }
    t.rows_checked = m.rows;
    if (f) {
      t.disposition = f->disposition;
      t.reason = f->reason;
      t.worst_row = f->where;
    } else {
      t.disposition = Disposition::kPassed;
      t.worst_row = m.worst_row;
    }
    return t;
  };

  if (Support sup = supports(v, p); !sup.ok) {
    return finish(Failure{Disposition::kUnsupported, sup.reason, "can_implement"});
  }
  MemorySpace* memory = nullptr;
  try {
    memory = &memory_space(v.backend());
  } catch (const std::exception& e) {
    return finish(Failure{Disposition::kUnsupported, e.what(), "backend"});
  }
  for (size_t ci = 0; ci < cases_.size(); ++ci) {
    const ValidationCase& c = cases_[ci];
    ++t.validation_points;
    // Outside the try: failing to build the inputs is no fault of the candidate's; it propagates.
    const PreparedCase& inputs = prepared_case(v.backend(), ci);
    try {
      if (auto f = run_case(v, p, *memory, c, inputs, t, m)) return finish(f);
    } catch (const std::exception& e) {
      // Memory operations surface device faults of the candidate's launches here.
      return finish(Failure{Disposition::kLaunchError, e.what(), c.label});
    }
  }
  return finish(std::nullopt);
}

}  // namespace mlatune
