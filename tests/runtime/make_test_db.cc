// Writes the database the plain C test (c_api_test.c) reads: run as a CTest fixture, since C has
// no convenient way to build one. Usage: mlatune_make_test_db PATH
//
// Contents, for key heads=16 qlen=1 bf16/bf16 page=64 lse=0:
//   batch 1..8   x kv 1..4096     -> host_split_kv_v1
//   batch 9..64  x kv 1..4096     -> host_online_softmax_v1
//   batch 1..64  x kv 4097..8192  -> no valid candidate
#include <cstdio>
#include <exception>

#include "runtime/test_db.h"

int main(int argc, char** argv) {
  using namespace mlatune;
  using namespace mlatune::test_db;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PATH\n", argv[0]);
    return 2;
  }
  try {
    const DecodeKey key = make_key(16, 1, DType::kBF16, DType::kBF16, 64, false);
    TestDbSpec spec;
    spec.buckets.push_back({key, 1, 8, 1, 4096, false, "host_split_kv_v1", std::nullopt, 12.5});
    spec.buckets.push_back(
        {key, 9, 64, 1, 4096, false, "host_online_softmax_v1", std::nullopt, 40.0});
    spec.buckets.push_back({key, 1, 64, 4097, 8192, true, "", std::nullopt, 0.0});
    spec.wal = true;  // as the tuner writes it
    write_test_db(argv[1], spec);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlatune_make_test_db: %s\n", e.what());
    return 1;
  }
  return 0;
}
