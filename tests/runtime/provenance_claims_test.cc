// What the winners digest binds cannot be rearranged under it, and every claim the provenance
// makes that a reader can check is checked at open: a doctored file that moves bytes between
// fields, hides a deleted bucket inside a stored text, or swaps its config text is refused, and
// `mlatune snapshot` (write_snapshot) cannot re-seal it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "runtime/runtime_fixture.h"

namespace mlatune::test_db {
namespace {

using ::testing::HasSubstr;

std::string stored_digest(const std::string& path) {
  SqliteDb db(path, SQLITE_OPEN_READONLY);
  Statement st(db, "SELECT winners_digest FROM provenance");
  EXPECT_TRUE(st.step());
  return st.column_text(0);
}

std::string recomputed_digest(const std::string& path) {
  SqliteDb db(path, SQLITE_OPEN_READONLY);
  return compute_winners_digest(db);
}

// The first bucket in digest order has no winner, so that its whole record is ints and texts a
// forger can spell in SQL.
TestDbSpec first_bucket_untuned_spec() {
  TestDbSpec spec;
  TestBucket b;
  b.key = make_key(4, 1, DType::kBF16, DType::kBF16, 16, false);
  b.batch_lo = 1, b.batch_hi = 4, b.kv_lo = 1, b.kv_hi = 64;
  b.no_valid = true;
  spec.buckets.push_back(b);
  b.key.heads = 8;
  b.no_valid = false;
  spec.buckets.push_back(b);
  return spec;
}

class ProvenanceClaimsTest : public ::testing::Test {
 protected:
  void SetUp() override { path_ = temp_path(); }
  mlatune_status open() { return open_db(path_, &db_); }
  std::string path_;
  DbHandle db_;
};

// With fields joined by a separator byte, moving that byte from one stored text into its
// neighbour left the hashed text, and so the digest, unchanged.
TEST_F(ProvenanceClaimsTest, BytesMovedBetweenAdjacentFieldsChangeTheDigest) {
  write_test_db(path_, first_bucket_untuned_spec());
  // kernel_build_id and config_name are hashed in that order, side by side.
  edit_db(path_, "UPDATE provenance SET kernel_build_id = 'a' || char(31) || 'b', config_name = 'c'",
          true);
  const std::string before = stored_digest(path_);
  edit_db(path_, "UPDATE provenance SET kernel_build_id = 'a', config_name = 'b' || char(31) || 'c'",
          false);
  EXPECT_NE(recomputed_digest(path_), before);
}

// The attack on the old encoding (fields joined by 0x1f, records by a newline): delete the first
// bucket and append its record, newline first, to the provenance's last hashed field.
TEST_F(ProvenanceClaimsTest, ADeletedBucketHiddenInAStoredTextChangesTheDigest) {
  write_test_db(path_, first_bucket_untuned_spec());
  const std::string before = stored_digest(path_);
  ASSERT_EQ(recomputed_digest(path_), before);
  const std::string first =
      "(SELECT id FROM buckets ORDER BY heads, qlen, q_dtype, kv_dtype, page_size, lse, "
      "batch_lo, batch_hi, kv_lo, kv_hi LIMIT 1)";
  const std::string old_record =
      "(SELECT char(10) || heads || char(31) || qlen || char(31) || q_dtype || char(31) || "
      "kv_dtype || char(31) || page_size || char(31) || lse || char(31) || batch_lo || char(31) || "
      "batch_hi || char(31) || kv_lo || char(31) || kv_hi || char(31) || status FROM buckets "
      "WHERE id = " + first + ")";
  edit_db(path_,
          "UPDATE provenance SET config_hash = config_hash || " + old_record +
              "; DELETE FROM buckets WHERE id = " + first,
          false);
  {
    SqliteDb db(path_, SQLITE_OPEN_READONLY);
    Statement st(db, "SELECT count(*) FROM buckets");
    ASSERT_TRUE(st.step());
    ASSERT_EQ(st.column_int(0), 1);  // the bucket is gone
  }
  EXPECT_NE(recomputed_digest(path_), before);
  ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("integrity digest mismatch"));
  // And the snapshot writer, which `mlatune snapshot` runs, refuses to re-seal it.
  SqliteDb db(path_, SQLITE_OPEN_READWRITE);
  EXPECT_THROW(write_snapshot(db), DbError);
}

// The digest covers the config hash, not the config text that `mlatune verify` re-validates
// with: a text that does not hash to the recorded hash is refused on either load path, even with
// the digest and the snapshot rewritten by a forger.
TEST_F(ProvenanceClaimsTest, AConfigTextThatDoesNotHashToItsRecordedHashIsRefused) {
  for (const bool snapshot : {true, false}) {
    SCOPED_TRACE(snapshot ? "from its snapshot" : "from its rows");
    TestDbSpec spec = standard_spec();
    spec.snapshot = snapshot;
    write_test_db(path_, spec);
    ASSERT_EQ(open(), MLATUNE_STATUS_OK) << mlatune_last_error();
    edit_db(path_, "UPDATE provenance SET config_text = 'tolerances: {}'", true, snapshot);
    ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
    EXPECT_THAT(mlatune_last_error(), HasSubstr("the stored config text hashes to"));
  }
}

// A file of the previous schema version (whose digest used the old encoding) is refused with its
// version named, not as damage.
TEST_F(ProvenanceClaimsTest, AVersionTwoFileIsRefusedAsAnOlderSchema) {
  TestDbSpec spec = standard_spec();
  spec.user_version = 2;
  write_test_db(path_, spec);
  ASSERT_EQ(open(), MLATUNE_STATUS_SCHEMA_MISMATCH);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("schema version 2"));
}

}  // namespace
}  // namespace mlatune::test_db
