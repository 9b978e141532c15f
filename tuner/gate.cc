#include "tuner/gate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>

#include "mla_decode/numformat.h"
#include "tuner/device_case.h"

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
// payload. The host inspects a copy taken after the run.
class GuardedBuffer {
 public:
  GuardedBuffer(MemorySpace& m, size_t payload)
      : memory_(m),
        payload_(payload),
        device_(m, payload + 2 * kGuardBytes),
        host_(payload + 2 * kGuardBytes) {}
  void refill() {
    uint8_t* base = static_cast<uint8_t*>(device_.data());
    memory_.fill(base, kGuardByte, kGuardBytes);
    memory_.fill(base + kGuardBytes, kPrefillByte, payload_);
    memory_.fill(base + kGuardBytes + payload_, kGuardByte, kGuardBytes);
  }
  uint8_t* device_payload() {
    return payload_ ? static_cast<uint8_t*>(device_.data()) + kGuardBytes : nullptr;
  }
  // Copies the buffer back (after the run finished) for inspection.
  void fetch() { memory_.copy_to_host(host_.data(), device_.data(), host_.size()); }
  const uint8_t* host_payload() const { return host_.data() + kGuardBytes; }
  size_t size() const { return payload_; }
  // Describes the first damaged guard byte of the fetched copy, if any.
  std::optional<std::string> damaged_guard(const char* what) const {
    for (size_t i = 0; i < kGuardBytes; ++i) {
      if (host_[i] != kGuardByte) {
        return std::string("wrote before the start of ") + what + " (byte -" +
               std::to_string(kGuardBytes - i) + ")";
      }
      if (host_[kGuardBytes + payload_ + i] != kGuardByte) {
        return std::string("wrote past the end of ") + what + " (byte +" + std::to_string(i) + ")";
      }
    }
    return std::nullopt;
  }

 private:
  MemorySpace& memory_;
  size_t payload_;
  DeviceBuffer device_;
  std::vector<uint8_t> host_;
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

// Checks one run's outputs against the reference; returns the first violation.
std::optional<Failure> check_outputs(const ValidationCase& c, const Tolerance& tol,
                                     const uint16_t* out, const float* lse, Metrics& m) {
  const DecodeShape& s = c.shape;
  for (int64_t i = 0; i < s.out_elems(); ++i) {
    float v = bf16_to_float(out[i]);
    if (!std::isfinite(v)) {
      return Failure{
          Disposition::kIncorrect, std::string(std::isnan(v) ? "NaN" : "Inf") + " in the output",
          c.label + " " + row_name(s, i / kHeadDimV) + " dim " + std::to_string(i % kHeadDimV)};
    }
  }
  if (lse) {
    for (int64_t r = 0; r < s.rows(); ++r) {
      if (!std::isfinite(lse[r])) {
        return Failure{Disposition::kIncorrect, "non-finite LSE " + fmt(lse[r]),
                       c.label + " " + row_name(s, r)};
      }
    }
  }
  std::optional<Failure> first;
  for (size_t k = 0; k < c.checked_rows.size(); ++k) {
    const int64_t row = c.checked_rows[k];
    const uint16_t* o = out + row * kHeadDimV;
    const double* r = &c.ref.out[k * kHeadDimV];
    double worst_ratio = 0, worst_abs = 0, dot = 0, no = 0, nr = 0;
    int worst_dim = 0;
    for (int d = 0; d < kHeadDimV; ++d) {
      double v = bf16_to_float(o[d]);
      double err = std::fabs(v - r[d]);
      double ratio = err / (tol.atol + tol.rtol * std::fabs(r[d]));
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        worst_dim = d;
      }
      worst_abs = std::max(worst_abs, err);
      dot += v * r[d];
      no += v * v;
      nr += r[d] * r[d];
    }
    double cosine = (no == 0 && nr == 0) ? 1.0 : dot / std::sqrt(std::max(no * nr, 1e-300));
    double lse_err = lse ? std::fabs(double(lse[row]) - c.ref.lse[k]) : 0.0;
    ++m.rows;
    m.max_abs = std::max(m.max_abs, worst_abs);
    m.min_cos = std::min(m.min_cos, cosine);
    m.max_lse = std::max(m.max_lse, lse_err);
    std::string where = c.label + " " + row_name(s, row);
    if (worst_ratio > m.max_ratio) {
      m.max_ratio = worst_ratio;
      m.worst_row = where + " dim " + std::to_string(worst_dim);
    }
    if (first) continue;  // keep measuring the case, report its first violation
    if (worst_ratio > 1.0) {
      first = Failure{Disposition::kIncorrect,
                      "error " + fmt(worst_abs) + " exceeds tolerance (" + fmt(worst_ratio) +
                          "x atol+rtol|ref|) at dim " + std::to_string(worst_dim) + ", cosine " +
                          fmt(cosine),
                      where};
    } else if (cosine < tol.min_cosine) {
      first = Failure{Disposition::kIncorrect,
                      "row cosine " + fmt(cosine) + " below " + fmt(tol.min_cosine), where};
    } else if (lse_err > tol.lse_atol) {
      first = Failure{Disposition::kIncorrect,
                      "LSE error " + fmt(lse_err) + " exceeds " + fmt(tol.lse_atol), where};
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
      timeout_s_(config.timing.candidate_timeout_s) {
  static constexpr InputPattern kPatterns[] = {InputPattern::kRandom, InputPattern::kCausalTrap,
                                               InputPattern::kPeaked, InputPattern::kWideRange};
  size_t k = 0;
  for (const ValidationPoint& p : validation_points(bucket, settings_.interior_points)) {
    for (int32_t seed = 0; seed < settings_.seeds; ++seed, ++k) {
      // Patterns rotate over (point, seed) so every pattern meets several points.
      cases_.push_back(make_validation_case(bucket, p, static_cast<uint64_t>(seed) + 1,
                                            kPatterns[k % 4], config.sm_scale, settings_,
                                            reference_threads));
    }
  }
}

const DeviceCase& BucketValidator::device_case(MemorySpace& memory, size_t i) const {
  std::vector<std::unique_ptr<DeviceCase>>& cached = uploaded_[std::string(memory.name())];
  if (cached.empty()) cached.resize(cases_.size());
  if (!cached[i]) cached[i] = std::make_unique<DeviceCase>(memory, cases_[i]);
  return *cached[i];
}

std::optional<gate_detail::Failure> BucketValidator::run_case(const Variant& v,
                                                              const LaunchParams& p,
                                                              MemorySpace& memory,
                                                              size_t case_index, TrialRecord& t,
                                                              gate_detail::Metrics& m) const {
  const ValidationCase& c = cases_[case_index];
  const DecodeShape& s = c.shape;
  size_t ws_bytes = v.workspace_bytes(s, p);
  if (ws_bytes > (size_t{1} << 34)) {
    return Failure{Disposition::kLaunchError,
                   "absurd workspace request of " + std::to_string(ws_bytes) + " bytes", c.label};
  }
  const DeviceCase& inputs = device_case(memory, case_index);
  GuardedBuffer out(memory, static_cast<size_t>(s.out_elems()) * sizeof(uint16_t));
  GuardedBuffer lse(memory, s.return_lse ? static_cast<size_t>(s.rows()) * sizeof(float) : 0);
  GuardedBuffer ws(memory, ws_bytes);
  std::vector<uint8_t> first_out, first_lse;
  for (int32_t run = 0; run < settings_.repeats; ++run) {
    out.refill();
    lse.refill();
    ws.refill();
    DecodeArgs a = inputs.args();
    a.out = reinterpret_cast<uint16_t*>(out.device_payload());
    a.lse = s.return_lse ? reinterpret_cast<float*>(lse.device_payload()) : nullptr;
    a.workspace = ws.device_payload();
    a.workspace_bytes = ws_bytes;
    ++t.validation_runs;
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
      buf->fetch();
      if (auto d = buf->damaged_guard(what)) return Failure{Disposition::kIncorrect, *d, c.label};
    }
    const uint8_t* o = out.host_payload();
    const uint8_t* l = lse.host_payload();
    if (run == 0) {
      if (auto f = check_outputs(c, tol_, reinterpret_cast<const uint16_t*>(o),
                                 s.return_lse ? reinterpret_cast<const float*>(l) : nullptr, m)) {
        return f;
      }
      first_out.assign(o, o + out.size());
      if (s.return_lse) first_lse.assign(l, l + lse.size());
      continue;
    }
    if (std::memcmp(first_out.data(), o, out.size()) != 0 ||
        (s.return_lse && std::memcmp(first_lse.data(), l, lse.size()) != 0)) {
      size_t i = 0;
      while (i < out.size() && first_out[i] == o[i]) ++i;
      std::string where = i < out.size() ? row_name(s, static_cast<int64_t>(i / 2 / kHeadDimV))
                                         : std::string("the LSE");
      return Failure{
          Disposition::kIncorrect,
          "nondeterministic: run " + std::to_string(run + 1) + " differs bitwise from run 1",
          c.label + " " + where};
    }
  }
  return std::nullopt;
}

BucketValidator::~BucketValidator() = default;

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

  for (const ValidationCase& c : cases_) {
    Support sup = v.can_implement(c.shape, p);
    if (!sup.ok) {
      return finish(
          Failure{Disposition::kUnsupported, sup.reason.empty() ? "refused" : sup.reason, c.label});
    }
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
    try {
      if (auto f = run_case(v, p, *memory, ci, t, m)) return finish(f);
    } catch (const std::exception& e) {
      // Memory operations surface device faults of the candidate's launches here.
      return finish(Failure{Disposition::kLaunchError, e.what(), c.label});
    }
  }
  return finish(std::nullopt);
}

}  // namespace mlatune
