// The validation gate (design.md §4): decides whether a candidate (variant x launch parameters)
// computes a shape bucket correctly, and records the evidence.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/records.h"
#include "mla_decode/memory.h"
#include "mla_decode/variant.h"
#include "tuner/config.h"
#include "tuner/validation_case.h"

namespace mlatune {

namespace gate_detail {
struct Failure;
struct Metrics;
}  // namespace gate_detail

// The validation cases of one bucket, built once (inputs and reference) and shared by every
// candidate of the bucket.
class BucketValidator {
 public:
  BucketValidator(const BucketKey& bucket, const TuneConfig& config, int reference_threads);

  BucketValidator(const BucketValidator&) = delete;
  BucketValidator& operator=(const BucketValidator&) = delete;
  ~BucketValidator();

  // Validates one candidate on every case: can_implement on every case's shape, then `repeats`
  // runs per case, in the memory of the variant's backend, into guarded, NaN-prefilled outputs
  // and workspace; checks guards, NaN/Inf, bitwise equality across runs, and every checked row
  // against the reference. Never throws for a bad candidate: the disposition says what
  // happened. Timing fields are left empty. Throws when a case's inputs cannot be built (device
  // out of memory, device lost): that is no verdict on the candidate.
  TrialRecord validate(const Variant& v, const LaunchParams& p) const;
  // Generates every case and its reference in the memory of `backend` now (validate() otherwise
  // does so on first use). Throws LaunchError / std::invalid_argument like validate().
  void prepare(Backend backend) const;
  // Frees every prepared case (validate() makes them again on next use).
  void release() const { prepared_.clear(); }
  // can_implement of the candidate on every case's shape (the first refusal, or yes).
  Support supports(const Variant& v, const LaunchParams& p) const;

  const std::vector<ValidationCase>& cases() const { return cases_; }
  const Tolerance& tolerance() const { return tol_; }

 private:
  // Case `i` in the memory of `backend`, generated with its reference on first use and kept for
  // the bucket's candidates.
  const PreparedCase& prepared_case(Backend backend, size_t i) const;
  std::optional<gate_detail::Failure> run_case(const Variant& v, const LaunchParams& p,
                                               MemorySpace& memory, const ValidationCase& c,
                                               const PreparedCase& inputs, TrialRecord& t,
                                               gate_detail::Metrics& m) const;

  BucketKey bucket_;
  Tolerance tol_;
  ValidationSettings settings_;
  double timeout_s_;
  int reference_threads_;
  std::vector<ValidationCase> cases_;
  mutable std::map<Backend, std::vector<std::unique_ptr<PreparedCase>>> prepared_;
};

}  // namespace mlatune
