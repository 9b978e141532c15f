// The validation gate (design.md §4): decides whether a candidate (variant x launch parameters)
// computes a shape bucket correctly, and records the evidence.
#pragma once

#include <memory>
#include <vector>

#include "db/records.h"
#include "mla_decode/variant.h"
#include "tuner/config.h"
#include "tuner/validation_case.h"

namespace mlatune {

// The validation cases of one bucket, built once (inputs and reference) and shared by every
// candidate of the bucket.
class BucketValidator {
 public:
  BucketValidator(const BucketKey& bucket, const TuneConfig& config, int reference_threads);

  // Validates one candidate on every case: can_implement on every case's shape, then `repeats`
  // runs per case into guarded, NaN-prefilled outputs and workspace; checks guards, NaN/Inf,
  // bitwise equality across runs, and every checked row against the reference. Never throws for
  // a bad candidate: the disposition says what happened. Timing fields are left empty.
  TrialRecord validate(const Variant& v, const LaunchParams& p) const;

  const std::vector<ValidationCase>& cases() const { return cases_; }
  const Tolerance& tolerance() const { return tol_; }

 private:
  BucketKey bucket_;
  Tolerance tol_;
  ValidationSettings settings_;
  double timeout_s_;
  std::vector<ValidationCase> cases_;
};

}  // namespace mlatune
