// The variant registry, the never-reused name ledger, and the external (C ABI) variant adapter.
#include "mla_decode/registry.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "mla_decode/external_variant.h"

namespace mlatune {
namespace {

std::map<std::string, std::string> read_ledger() {
  std::ifstream in(std::string(MLATUNE_SOURCE_DIR) + "/kernels/mla_decode/variant_names.txt");
  EXPECT_TRUE(in.good());
  std::map<std::string, std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, status;
    fields >> name >> status;
    // std::regex would do, but g++ 12 warns spuriously inside it under ASan (-Werror).
    bool valid = !name.empty() && name[0] >= 'a' && name[0] <= 'z';
    for (char c : name)
      valid = valid && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    EXPECT_TRUE(valid) << line;
    EXPECT_TRUE(status == "active" || status == "retired") << line;
    EXPECT_TRUE(names.emplace(name, status).second) << "listed twice: " << name;
  }
  return names;
}

TEST(RegistryTest, EveryBuiltinVariantIsInTheLedgerAsActive) {
  std::map<std::string, std::string> ledger = read_ledger();
  Registry r = builtin_registry();
  ASSERT_GE(r.all().size(), 3u);
  for (const Variant* v : r.all()) {
    auto it = ledger.find(std::string(v->name()));
    ASSERT_NE(it, ledger.end()) << v->name() << " is missing from variant_names.txt";
    EXPECT_EQ(it->second, "active") << v->name();
    EXPECT_EQ(v->code_identity().size(), 32u) << v->name();
    EXPECT_FALSE(v->description().empty());
  }
}

TEST(RegistryTest, IdentitiesDifferBetweenVariantsAndBuildIdCoversThem) {
  Registry r = builtin_registry();
  EXPECT_NE(r.all()[0]->code_identity(), r.all()[1]->code_identity());
  std::string id = kernel_build_id(r);
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(id, kernel_build_id(builtin_registry()));
  Registry fewer;
  fewer.add_borrowed(r.all()[0]);
  EXPECT_NE(kernel_build_id(fewer), id);
}

TEST(RegistryTest, DuplicateAndNullVariantsAreRefused) {
  Registry r = builtin_registry();
  EXPECT_THROW(r.add_borrowed(r.all()[0]), std::invalid_argument);
  EXPECT_THROW(r.add_borrowed(nullptr), std::invalid_argument);
  EXPECT_EQ(r.find("host_split_kv_v1"), r.all()[2]);
  EXPECT_EQ(r.find("nope"), nullptr);
}

// A minimal external variant: refuses everything it is asked to implement with a reason, and
// fails every launch with a message.
int refuse(void*, const mlatune_decode_shape_v1* s, const mlatune_launch_params_v1*, char* why,
           size_t n) {
  std::snprintf(why, n, "only batch 1, not %d", s->batch);
  return s->batch == 1 ? 1 : 0;
}
uint64_t no_workspace(void*, const mlatune_decode_shape_v1*, const mlatune_launch_params_v1*) {
  return 128;
}
int fail_run(void*, const mlatune_decode_shape_v1*, const mlatune_launch_params_v1*,
             const mlatune_decode_args_v1*, char* error, size_t n) {
  std::snprintf(error, n, "vendor kernel failed");
  return 7;
}

class ExternalVariantTest : public ::testing::Test {
 protected:
  ExternalVariantTest() {
    d_.abi_version = MLATUNE_VARIANT_ABI_VERSION;
    d_.struct_size = sizeof d_;
    d_.name = "vendor_asm_v1";
    d_.description = "vendor kernels";
    d_.backend = "hip";
    d_.code_identity = "abc";
    d_.kv_splits = kSplits;
    d_.kv_splits_count = 2;
    d_.kv_tile = kZero;
    d_.kv_tile_count = 1;
    d_.block_rows = kZero;
    d_.block_rows_count = 1;
    d_.workers = kZero;
    d_.workers_count = 1;
    d_.can_implement = refuse;
    d_.workspace_bytes = no_workspace;
    d_.run = fail_run;
  }
  static constexpr int32_t kSplits[] = {1, 4};
  static constexpr int32_t kZero[] = {0};
  mlatune_variant_v1 d_{};
};

TEST_F(ExternalVariantTest, WrapsAValidDescriptor) {
  auto v = wrap_external_variant(&d_);
  EXPECT_EQ(v->name(), "vendor_asm_v1");
  EXPECT_EQ(v->backend(), Backend::kHip);
  EXPECT_EQ(v->code_identity(), "abc");
  EXPECT_EQ(v->param_space().enumerate().size(), 2u);
  DecodeShape s;
  s.batch = 3;
  LaunchParams p{4, 0, 0, 0};
  Support sup = v->can_implement(s, p);
  EXPECT_FALSE(sup.ok);
  EXPECT_EQ(sup.reason, "only batch 1, not 3");
  EXPECT_FALSE(v->can_implement(s, LaunchParams{2, 0, 0, 0}).ok);  // outside the declared space
  EXPECT_EQ(v->workspace_bytes(s, p), 128u);
  try {
    v->run(s, p, DecodeArgs{});
    FAIL() << "no LaunchError";
  } catch (const LaunchError& e) {
    EXPECT_STREQ(e.what(), "vendor_asm_v1: vendor kernel failed");
  }
}

TEST_F(ExternalVariantTest, RefusesMalformedDescriptors) {
  EXPECT_THROW(wrap_external_variant(nullptr), std::invalid_argument);
  auto refused = [&](auto edit) {
    mlatune_variant_v1 d = d_;
    edit(d);
    EXPECT_THROW(wrap_external_variant(&d), std::invalid_argument);
  };
  refused([](mlatune_variant_v1& d) { d.abi_version = 2; });
  refused([](mlatune_variant_v1& d) { d.struct_size = 8; });
  refused([](mlatune_variant_v1& d) { d.name = "Bad-Name"; });
  refused([](mlatune_variant_v1& d) { d.name = ""; });
  refused([](mlatune_variant_v1& d) { d.name = nullptr; });
  refused([](mlatune_variant_v1& d) { d.backend = "cuda"; });
  refused([](mlatune_variant_v1& d) { d.code_identity = ""; });
  refused([](mlatune_variant_v1& d) { d.run = nullptr; });
  refused([](mlatune_variant_v1& d) { d.kv_splits_count = 0; });
  refused([](mlatune_variant_v1& d) { d.workers = nullptr; });
}

}  // namespace
}  // namespace mlatune
