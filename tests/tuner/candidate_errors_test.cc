// Config errors found only against the registry (enumerate_candidates: an unknown variant, a
// launch parameter value a variant does not declare, no variant left) name file:line:column, the
// key and the value, like every error parse_config finds itself.
#include <gtest/gtest.h>

#include <string>

#include "mla_decode/registry.h"
#include "tuner/base_config.h"
#include "tuner/config.h"
#include "tuner/tune.h"

namespace mlatune {
namespace {

constexpr const char* kBase = testing::kBaseConfig;

std::string candidate_error(const std::string& tail, const Registry& registry) {
  const TuneConfig config = parse_config(std::string(kBase) + tail, "t.yaml");
  try {
    enumerate_candidates(config, registry);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string candidate_error(const std::string& tail) {
  return candidate_error(tail, builtin_registry());
}

TEST(CandidateErrors, UnknownVariantNamesWhereItIsWritten) {
  EXPECT_EQ(candidate_error("variants: [host_split_kv_v1, host_nope_v1]\n"),
            "t.yaml:12:30: variants: unknown variant 'host_nope_v1' (see `mlatune variants`)");
}

TEST(CandidateErrors, UnknownVariantInParamsNamesTheEntry) {
  // Not a builtin variant: params may name it only while variants is absent.
  EXPECT_EQ(candidate_error("params:\n  host_nope_v1: {workers: [1]}\n"),
            "t.yaml:13:3: params: unknown variant 'host_nope_v1' (see `mlatune variants`)");
}

TEST(CandidateErrors, UndeclaredParameterValueNamesKeyValueAndPlace) {
  // host_split_kv_v1 declares kv_splits 1, 2, 3, 4, 8, 16.
  EXPECT_EQ(candidate_error("params:\n  host_split_kv_v1: {kv_splits: [2, 5], workers: [1]}\n"),
            "t.yaml:13:37: params.host_split_kv_v1.kv_splits: 5 is outside the variant's "
            "declared values [1, 2, 3, 4, 8, 16]");
  EXPECT_EQ(candidate_error("params:\n  host_split_kv_v1:\n    kv_tile: [64]\n    workers: [3]\n"),
            "t.yaml:15:15: params.host_split_kv_v1.workers: 3 is outside the variant's declared "
            "values [1, 2, 4, 8, 16, 32, 64]");
}

TEST(CandidateErrors, NoVariantOfTheBackendNamesTheBackend) {
  const Registry none;
  EXPECT_EQ(candidate_error("", none),
            "t.yaml:1:10: backend: no variant of backend 'host' is selected");
}

TEST(CandidateErrors, ConfigMadeInCodeStillNamesKeyAndValue) {
  TuneConfig config = parse_config(std::string(kBase) + "variants: [host_nope_v1]\n", "t.yaml");
  config.locations.clear();
  try {
    enumerate_candidates(config, builtin_registry());
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "t.yaml: variants: unknown variant 'host_nope_v1' (see `mlatune variants`)");
  }
}

}  // namespace
}  // namespace mlatune
