#include "db/snapshot.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <tuple>

#include "common/sha256.h"
#include "db/digest.h"
#include "db/schema_sql.h"
#include "mla_decode/problem.h"

namespace mlatune {

namespace {

constexpr char kMagic[8] = {'M', 'L', 'A', 'T', 'S', 'N', 'A', 'P'};
constexpr size_t kEnvelopeSize = 12;  // magic and format version: the same in every version
constexpr size_t kHeaderSize = 92;
constexpr size_t kEntrySize = 52;
constexpr size_t kTrailerSize = 32;
constexpr size_t kMaxNameLength = 63;  // MLATUNE_VARIANT_NAME_MAX - 1
constexpr size_t kMaxIdentityLength = 255;
constexpr uint8_t kFlagLse = 1, kFlagNoValid = 2;

// ---- little-endian bytes (assembled with shifts: the same bytes whatever the host's order) ------

void put_u8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }
void put_u16(std::string& out, uint16_t v) {
  put_u8(out, uint8_t(v));
  put_u8(out, uint8_t(v >> 8));
}
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) put_u8(out, uint8_t(v >> (8 * i)));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) put_u8(out, uint8_t(v >> (8 * i)));
}
uint16_t get_u16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }
uint32_t get_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint64_t get_u64(const uint8_t* p) { return uint64_t(get_u32(p)) | uint64_t(get_u32(p + 4)) << 32; }
int32_t get_i32(const uint8_t* p) { return std::bit_cast<int32_t>(get_u32(p)); }

// ---- field checks, shared by the encoder (refuses to write) and the decoder (refuses to read) ---

std::string name_problem(std::string_view n) {
  if (n.empty() || n.size() > kMaxNameLength) {
    return "variant name of " + std::to_string(n.size()) + " bytes (must be 1.." +
           std::to_string(kMaxNameLength) + ")";
  }
  bool ok = n[0] >= 'a' && n[0] <= 'z';
  for (char c : n) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (!ok) return "variant name '" + std::string(n) + "' is not [a-z][a-z0-9_]*";
  return {};
}

std::string identity_problem(std::string_view id) {
  if (id.empty() || id.size() > kMaxIdentityLength) {
    return "code identity of " + std::to_string(id.size()) + " bytes (must be 1.." +
           std::to_string(kMaxIdentityLength) + ")";
  }
  for (char c : id) {
    if (c < 0x20 || c > 0x7e) return "code identity with a byte that is not printable ASCII";
  }
  return {};
}

std::string range_problem(const char* field, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return {};
  return std::string(field) + "=" + std::to_string(v) + " outside " + std::to_string(lo) + ".." +
         std::to_string(hi);
}

// Everything about an entry that does not need its neighbours: whether it holds (cheap, for the
// 100 000 entries of a large table) and, only when it does not, what is wrong.
bool entry_ok(const SnapshotEntry& e, size_t variants) {
  const BucketKey& b = e.bucket;
  const auto in = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  if (!in(b.key.heads, 1, kMaxHeads) || !in(b.key.qlen, 1, kMaxQlen) ||
      !in(b.key.page_size, 1, kMaxPageSize) || !in(static_cast<int>(b.key.q_dtype), 0, 2) ||
      !in(static_cast<int>(b.key.kv_dtype), 0, 2) || !in(b.batch_lo, 1, kMaxBatch) ||
      !in(b.batch_hi, b.batch_lo, kMaxBatch) || !in(b.kv_lo, 1, kMaxKvLen) ||
      !in(b.kv_hi, b.kv_lo, kMaxKvLen)) {
    return false;
  }
  const double t = e.time_median_us;
  if (!e.has_winner) {
    return e.variant == kSnapshotNoVariant && e.params == LaunchParams{0, 0, 0, 0} && std::isnan(t);
  }
  return e.variant < variants && (std::isnan(t) || (std::isfinite(t) && t >= 0));
}

std::string entry_problem(const SnapshotEntry& e, size_t variants) {
  const BucketKey& b = e.bucket;
  std::string p;
  auto check = [&](const char* field, int64_t v, int64_t lo, int64_t hi) {
    if (p.empty()) p = range_problem(field, v, lo, hi);
  };
  check("heads", b.key.heads, 1, kMaxHeads);
  check("qlen", b.key.qlen, 1, kMaxQlen);
  check("page_size", b.key.page_size, 1, kMaxPageSize);
  check("q_dtype", static_cast<int64_t>(b.key.q_dtype), 0, 2);
  check("kv_dtype", static_cast<int64_t>(b.key.kv_dtype), 0, 2);
  check("batch_lo", b.batch_lo, 1, kMaxBatch);
  check("batch_hi", b.batch_hi, b.batch_lo, kMaxBatch);
  check("kv_lo", b.kv_lo, 1, kMaxKvLen);
  check("kv_hi", b.kv_hi, b.kv_lo, kMaxKvLen);
  if (!p.empty()) return p;
  const double t = e.time_median_us;
  if (!e.has_winner) {
    if (e.variant != kSnapshotNoVariant) return "a bucket without a winner names a variant";
    if (!(e.params == LaunchParams{0, 0, 0, 0})) {
      return "a bucket without a winner has launch parameters";
    }
    if (!std::isnan(t)) return "a bucket without a winner has a time";
    return {};
  }
  if (e.variant >= variants) {
    return "variant index " + std::to_string(e.variant) + " (the snapshot lists " +
           std::to_string(variants) + ")";
  }
  if (!std::isnan(t) && !(std::isfinite(t) && t >= 0)) {
    return "time_median_us " + std::to_string(t) + " is not a duration";
  }
  return {};
}

// SHA-256 of blob[0, size - 32) against its last 32 bytes.
bool trailer_matches(std::span<const uint8_t> blob) {
  Sha256 sha;
  sha.update(blob.data(), blob.size() - kTrailerSize);
  const std::array<uint8_t, 32> want = sha.finish();
  return std::memcmp(want.data(), blob.data() + blob.size() - kTrailerSize, 32) == 0;
}

[[noreturn]] void damaged(const std::string& what) {
  throw SnapshotError("dispatch snapshot: " + what);
}

std::string at(size_t offset) { return " (at byte " + std::to_string(offset) + ")"; }

bool from_hex(std::string_view hex, std::array<uint8_t, 32>& out) {
  if (hex.size() != 64) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < 32; ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace

bool SnapshotEntry::same_as(const SnapshotEntry& o) const {
  return bucket == o.bucket && has_winner == o.has_winner && variant == o.variant &&
         params == o.params &&
         std::bit_cast<uint64_t>(time_median_us) == std::bit_cast<uint64_t>(o.time_median_us);
}

bool DispatchSnapshot::same_as(const DispatchSnapshot& o) const {
  if (file_change_counter != o.file_change_counter || winners_digest != o.winners_digest ||
      provenance_sha256 != o.provenance_sha256 || variants != o.variants ||
      entries.size() != o.entries.size()) {
    return false;
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!entries[i].same_as(o.entries[i])) return false;
  }
  return true;
}

bool snapshot_entry_less(const SnapshotEntry& a, const SnapshotEntry& b) {
  auto key = [](const SnapshotEntry& e) {
    const BucketKey& k = e.bucket;
    return std::make_tuple(k.key.heads, k.key.qlen, static_cast<int>(k.key.q_dtype),
                           static_cast<int>(k.key.kv_dtype), k.key.page_size, k.key.lse, k.batch_lo,
                           k.kv_lo, k.batch_hi, k.kv_hi);
  };
  return key(a) < key(b);
}

std::string to_hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * bytes.size());
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

// ---- encoding -----------------------------------------------------------------------------------

std::string encode_snapshot(const DispatchSnapshot& s) {
  auto refuse = [](const std::string& what) {
    throw std::invalid_argument("encode_snapshot: " + what);
  };
  if (s.variants.size() > kSnapshotMaxVariants) refuse("too many variants");
  if (s.entries.size() > kSnapshotMaxEntries) refuse("too many entries");
  std::string variants;
  for (size_t i = 0; i < s.variants.size(); ++i) {
    const SnapshotVariant& v = s.variants[i];
    std::string p = name_problem(v.name);
    if (p.empty()) p = identity_problem(v.code_identity);
    if (p.empty() && i > 0 && !(s.variants[i - 1].name < v.name))
      p = "variants not ordered by name";
    if (!p.empty()) refuse("variant " + std::to_string(i) + ": " + p);
    put_u8(variants, static_cast<uint8_t>(v.name.size()));
    variants += v.name;
    put_u8(variants, static_cast<uint8_t>(v.code_identity.size()));
    variants += v.code_identity;
  }
  std::string out;
  out.reserve(kHeaderSize + variants.size() + s.entries.size() * kEntrySize + kTrailerSize);
  out.append(kMagic, sizeof kMagic);
  put_u32(out, kSnapshotFormatVersion);
  put_u32(out, s.file_change_counter);
  out.append(reinterpret_cast<const char*>(s.winners_digest.data()), 32);
  out.append(reinterpret_cast<const char*>(s.provenance_sha256.data()), 32);
  put_u32(out, static_cast<uint32_t>(s.variants.size()));
  put_u32(out, static_cast<uint32_t>(variants.size()));
  put_u32(out, static_cast<uint32_t>(s.entries.size()));
  out += variants;
  for (size_t i = 0; i < s.entries.size(); ++i) {
    const SnapshotEntry& e = s.entries[i];
    std::string p = entry_ok(e, s.variants.size()) ? "" : entry_problem(e, s.variants.size());
    if (p.empty() && i > 0 && !snapshot_entry_less(s.entries[i - 1], e)) {
      p = "entries not in order, or a duplicate";
    }
    if (!p.empty()) refuse("entry " + std::to_string(i) + ": " + p);
    const BucketKey& b = e.bucket;
    put_u16(out, static_cast<uint16_t>(b.key.heads));
    put_u16(out, static_cast<uint16_t>(b.key.page_size));
    put_u8(out, static_cast<uint8_t>(b.key.qlen));
    put_u8(out, static_cast<uint8_t>(b.key.q_dtype));
    put_u8(out, static_cast<uint8_t>(b.key.kv_dtype));
    put_u8(out,
           static_cast<uint8_t>((b.key.lse ? kFlagLse : 0) | (e.has_winner ? 0 : kFlagNoValid)));
    put_u32(out, static_cast<uint32_t>(b.batch_lo));
    put_u32(out, static_cast<uint32_t>(b.batch_hi));
    put_u32(out, static_cast<uint32_t>(b.kv_lo));
    put_u32(out, static_cast<uint32_t>(b.kv_hi));
    put_u32(out, e.variant);
    put_u32(out, static_cast<uint32_t>(e.params.kv_splits));
    put_u32(out, static_cast<uint32_t>(e.params.kv_tile));
    put_u32(out, static_cast<uint32_t>(e.params.block_rows));
    put_u32(out, static_cast<uint32_t>(e.params.workers));
    const double t =
        std::isnan(e.time_median_us) ? std::numeric_limits<double>::quiet_NaN() : e.time_median_us;
    put_u64(out, std::bit_cast<uint64_t>(t));
  }
  Sha256 sha;
  sha.update(out);
  const std::array<uint8_t, 32> trailer = sha.finish();
  out.append(reinterpret_cast<const char*>(trailer.data()), trailer.size());
  return out;
}

// ---- decoding -----------------------------------------------------------------------------------

SnapshotEnvelope open_snapshot_envelope(std::span<const uint8_t> blob) {
  if (blob.size() < kEnvelopeSize + kTrailerSize) {
    damaged("truncated: " + std::to_string(blob.size()) + " bytes, less than the " +
            std::to_string(kEnvelopeSize + kTrailerSize) +
            " of any version's magic, version and SHA-256 trailer");
  }
  if (!trailer_matches(blob)) {
    damaged("damaged: the SHA-256 of its " + std::to_string(blob.size() - kTrailerSize) +
            " bytes does not match its trailer");
  }
  if (std::memcmp(blob.data(), kMagic, sizeof kMagic) != 0) {
    damaged("not a dispatch snapshot (no MLATSNAP magic at byte 0)");
  }
  SnapshotEnvelope e;
  e.format_version = get_u32(blob.data() + 8);
  if (e.format_version != kSnapshotFormatVersion) return e;
  if (blob.size() < kHeaderSize + kTrailerSize) {
    damaged("truncated: " + std::to_string(blob.size()) + " bytes, less than version " +
            std::to_string(kSnapshotFormatVersion) + "'s header and trailer (" +
            std::to_string(kHeaderSize + kTrailerSize) + ")");
  }
  e.file_change_counter = get_u32(blob.data() + 12);
  std::memcpy(e.winners_digest.data(), blob.data() + 16, 32);
  std::memcpy(e.provenance_sha256.data(), blob.data() + 48, 32);
  return e;
}

DispatchSnapshot decode_snapshot(std::span<const uint8_t> blob) {
  const SnapshotEnvelope e = open_snapshot_envelope(blob);
  if (e.format_version != kSnapshotFormatVersion) {
    damaged("format version " + std::to_string(e.format_version) + at(8) +
            "; this build reads version " + std::to_string(kSnapshotFormatVersion));
  }
  DispatchSnapshot s;
  s.file_change_counter = e.file_change_counter;
  s.winners_digest = e.winners_digest;
  s.provenance_sha256 = e.provenance_sha256;
  const uint8_t* p = blob.data();
  const uint32_t variant_count = get_u32(p + 80);
  const uint32_t variants_bytes = get_u32(p + 84);
  const uint32_t entry_count = get_u32(p + 88);
  if (variant_count > kSnapshotMaxVariants) {
    damaged("variant count " + std::to_string(variant_count) + at(80) + " over the limit of " +
            std::to_string(kSnapshotMaxVariants));
  }
  if (entry_count > kSnapshotMaxEntries) {
    damaged("entry count " + std::to_string(entry_count) + at(88) + " over the limit of " +
            std::to_string(kSnapshotMaxEntries));
  }
  // Every count is bounded above, so this sum cannot overflow 64 bits.
  const uint64_t expected =
      uint64_t{kHeaderSize} + variants_bytes + uint64_t{entry_count} * kEntrySize + kTrailerSize;
  if (expected != blob.size()) {
    damaged("its header (" + std::to_string(variant_count) + " variants in " +
            std::to_string(variants_bytes) + " bytes, " + std::to_string(entry_count) +
            " entries) implies " + std::to_string(expected) + " bytes, but it has " +
            std::to_string(blob.size()));
  }
  if (variant_count > variants_bytes / 4) {
    damaged(std::to_string(variant_count) + " variants" + at(80) + " cannot fit in " +
            std::to_string(variants_bytes) + " bytes");
  }

  size_t pos = kHeaderSize;
  const size_t variants_end = kHeaderSize + variants_bytes;
  s.variants.reserve(variant_count);
  for (uint32_t i = 0; i < variant_count; ++i) {
    const std::string where = "variant " + std::to_string(i) + at(pos);
    auto string_at = [&](size_t max) {
      if (pos >= variants_end) damaged(where + ": runs past the variants section");
      const size_t n = p[pos++];
      if (n == 0 || n > max || n > variants_end - pos) {
        damaged(where + ": a length of " + std::to_string(n) + " bytes (at most " +
                std::to_string(std::min(max, variants_end - pos)) + ")");
      }
      std::string out(reinterpret_cast<const char*>(p + pos), n);
      pos += n;
      return out;
    };
    SnapshotVariant v;
    v.name = string_at(kMaxNameLength);
    v.code_identity = string_at(kMaxIdentityLength);
    std::string problem = name_problem(v.name);
    if (problem.empty()) problem = identity_problem(v.code_identity);
    if (problem.empty() && i > 0 && !(s.variants.back().name < v.name)) {
      problem = "'" + v.name + "' is not after '" + s.variants.back().name +
                "' (names must be ordered and unique)";
    }
    if (!problem.empty()) damaged(where + ": " + problem);
    s.variants.push_back(std::move(v));
  }
  if (pos != variants_end) {
    damaged(std::to_string(variants_end - pos) + " bytes left over after the last variant" +
            at(pos));
  }

  s.entries.resize(entry_count);
  for (uint32_t i = 0; i < entry_count; ++i, pos += kEntrySize) {
    const uint8_t* r = p + pos;
    SnapshotEntry& x = s.entries[i];
    const uint8_t q_dtype = r[5], kv_dtype = r[6], flags = r[7];
    auto bad = [&](const std::string& what) {
      damaged("entry " + std::to_string(i) + at(pos) + ": " + what);
    };
    if (q_dtype > 2 || kv_dtype > 2) {
      bad(range_problem(q_dtype > 2 ? "q_dtype" : "kv_dtype", q_dtype > 2 ? q_dtype : kv_dtype, 0,
                        2));
    }
    if (flags & ~(kFlagLse | kFlagNoValid)) bad("unknown flag bits " + std::to_string(flags));
    BucketKey& b = x.bucket;
    b.key.heads = get_u16(r);
    b.key.page_size = get_u16(r + 2);
    b.key.qlen = r[4];
    b.key.q_dtype = static_cast<DType>(q_dtype);
    b.key.kv_dtype = static_cast<DType>(kv_dtype);
    b.key.lse = (flags & kFlagLse) != 0;
    b.batch_lo = get_i32(r + 8);
    b.batch_hi = get_i32(r + 12);
    b.kv_lo = get_i32(r + 16);
    b.kv_hi = get_i32(r + 20);
    x.has_winner = (flags & kFlagNoValid) == 0;
    x.variant = get_u32(r + 24);
    x.params = {get_i32(r + 28), get_i32(r + 32), get_i32(r + 36), get_i32(r + 40)};
    x.time_median_us = std::bit_cast<double>(get_u64(r + 44));
    if (std::isnan(x.time_median_us)) x.time_median_us = std::numeric_limits<double>::quiet_NaN();
    if (!entry_ok(x, s.variants.size())) bad(entry_problem(x, s.variants.size()));
    if (i > 0 && !snapshot_entry_less(s.entries[i - 1], x)) {
      bad("not after entry " + std::to_string(i - 1) + " (entries must be ordered and unique)");
    }
  }
  return s;
}

// ---- binding to the file ------------------------------------------------------------------------

SqliteFileHeader read_file_header(const SqliteDb& db) {
  sqlite3_file* file = nullptr;
  int rc = sqlite3_file_control(db.get(), "main", SQLITE_FCNTL_FILE_POINTER, &file);
  if (rc != SQLITE_OK || !file || !file->pMethods) {
    throw DbError(rc != SQLITE_OK ? rc : SQLITE_ERROR,
                  db.path() + ": cannot reach the database file to read its header");
  }
  uint8_t h[100];
  rc = file->pMethods->xRead(file, h, sizeof h, 0);
  if (rc != SQLITE_OK) {
    throw DbError(rc, db.path() + ": cannot read the 100-byte SQLite header");
  }
  SqliteFileHeader out;
  out.change_counter = uint32_t(h[24]) << 24 | uint32_t(h[25]) << 16 | uint32_t(h[26]) << 8 | h[27];
  out.wal = h[18] == 2 || h[19] == 2;
  return out;
}

std::string snapshot_unbound_reason(const SnapshotEnvelope& e, const SqliteFileHeader& h,
                                    std::string_view provenance_digest) {
  if (e.format_version != kSnapshotFormatVersion) {
    return "its dispatch snapshot has format version " + std::to_string(e.format_version) +
           ", this build reads version " + std::to_string(kSnapshotFormatVersion);
  }
  if (h.wal) {
    return "the database is in WAL mode (a tuner may be writing it), where a dispatch snapshot "
           "cannot be bound to the file";
  }
  const std::string made_from = to_hex(e.winners_digest);
  if (made_from != provenance_digest) {
    return "its dispatch snapshot was made from winners digest " + made_from +
           ", but the provenance records " + std::string(provenance_digest) +
           " (the rows changed since)";
  }
  if (e.file_change_counter != h.change_counter) {
    return "the file was changed after its dispatch snapshot was written (SQLite change counter " +
           std::to_string(h.change_counter) + ", the snapshot was bound to " +
           std::to_string(e.file_change_counter) + ")";
  }
  return {};
}

// ---- from the rows ------------------------------------------------------------------------------

namespace {

// Columns of kDigestRowsSql (db/digest.h).
enum Col {
  kHeads = 0,
  kQlen = 1,
  kQDtype = 2,
  kKvDtype = 3,
  kPageSize = 4,
  kLse = 5,
  kBatchLo = 6,
  kBatchHi = 7,
  kKvLo = 8,
  kKvHi = 9,
  kStatus = 10,
  kVariant = 12,
  kKvSplits = 13,
  kKvTile = 14,
  kBlockRows = 15,
  kWorkers = 16,
  kDisposition = 17,
  kTimeMedian = 22,
  kCodeIdentity = 23,
  kBucketId = kDigestRowColumns,
  kWinnerTrial,
  kTrialId,
  kTrialBucket,
  kVariantRow,
};

bool in_range(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }

int32_t clamp_param(int64_t v) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, std::numeric_limits<int32_t>::min(),
                                                  std::numeric_limits<int32_t>::max()));
}

std::optional<DType> dtype_code(std::string_view s) {
  if (s == "bf16") return DType::kBF16;
  if (s == "fp8_e4m3fn") return DType::kFP8E4M3FN;
  if (s == "fp8_e4m3fnuz") return DType::kFP8E4M3FNUZ;
  return std::nullopt;
}

// Variants named by winners, indexed in first-seen order until finish() orders them by name.
class VariantIndex {
 public:
  // Whether `name` with `identity` is the variant add() returned last (already checked).
  bool is_last(std::string_view name, std::string_view identity) const {
    return last_ < names_.size() && names_[last_].name == name &&
           names_[last_].code_identity == identity;
  }
  uint32_t add(std::string_view name, std::string_view identity) {
    if (is_last(name, identity)) return last_;
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      it = by_name_.emplace(std::string(name), static_cast<uint32_t>(names_.size())).first;
      names_.push_back({std::string(name), std::string(identity)});
    }
    return last_ = it->second;
  }
  // Orders the variants by name and renumbers the entries' indexes to match.
  void finish(DispatchSnapshot& s) {
    std::vector<uint32_t> renumber(names_.size());
    uint32_t i = 0;
    for (const auto& [name, provisional] : by_name_) {
      renumber[provisional] = i++;
      s.variants.push_back(std::move(names_[provisional]));
    }
    for (SnapshotEntry& e : s.entries) {
      if (e.has_winner) e.variant = renumber[e.variant];
    }
  }

 private:
  std::map<std::string, uint32_t, std::less<>> by_name_;
  std::vector<SnapshotVariant> names_;
  uint32_t last_ = 0;
};

// One row of kDigestRowsSql as an entry; returns the problem ("" if none).
std::string read_row(const Statement& st, VariantIndex& variants, SnapshotEntry& e) {
  const int64_t id = st.column_int(kBucketId);
  auto bad = [&](const std::string& what) { return "bucket " + std::to_string(id) + ": " + what; };
  const int64_t heads = st.column_int(kHeads), qlen = st.column_int(kQlen);
  const int64_t page = st.column_int(kPageSize), lse = st.column_int(kLse);
  const int64_t batch_lo = st.column_int(kBatchLo), batch_hi = st.column_int(kBatchHi);
  const int64_t kv_lo = st.column_int(kKvLo), kv_hi = st.column_int(kKvHi);
  // The schema's CHECKs make these impossible in an intact file; the runtime's packed key and
  // lookup arithmetic rely on them, so they are checked rather than trusted.
  if (!in_range(heads, 1, kMaxHeads) || !in_range(qlen, 1, kMaxQlen) ||
      !in_range(page, 1, kMaxPageSize) || !in_range(lse, 0, 1) ||
      !in_range(batch_lo, 1, kMaxBatch) || !in_range(batch_hi, batch_lo, kMaxBatch) ||
      !in_range(kv_lo, 1, kMaxKvLen) || !in_range(kv_hi, kv_lo, kMaxKvLen)) {
    return bad("key or range outside the schema's limits");
  }
  for (int col : {kQDtype, kKvDtype}) {
    if (!dtype_code(st.column_text_view(col))) {
      return "bucket " + std::to_string(id) + " has unknown dtype '" + st.column_text(col) + "'";
    }
  }
  BucketKey& b = e.bucket;
  b.key = DecodeKey{int32_t(heads),
                    int32_t(qlen),
                    *dtype_code(st.column_text_view(kQDtype)),
                    *dtype_code(st.column_text_view(kKvDtype)),
                    int32_t(page),
                    lse != 0};
  b.batch_lo = int32_t(batch_lo);
  b.batch_hi = int32_t(batch_hi);
  b.kv_lo = int32_t(kv_lo);
  b.kv_hi = int32_t(kv_hi);

  const std::string_view status = st.column_text_view(kStatus);
  const bool has_winner = !st.is_null(kWinnerTrial);
  if (status == "no_valid_candidate") {
    if (has_winner) return bad("marked no_valid_candidate but has a winner");
    e.has_winner = false;
    return {};
  }
  if (status != "tuned") return bad("unknown status '" + std::string(status) + "'");
  if (!has_winner) return bad("marked tuned but has no winner");
  if (st.is_null(kTrialId)) return bad("its winner names a trial that does not exist");
  if (st.column_int(kTrialBucket) != id) return bad("its winner is a trial of another bucket");
  if (st.column_text_view(kDisposition) != "passed") {
    return bad("its winner is a trial with disposition '" + st.column_text(kDisposition) +
               "', not 'passed'");
  }
  // Views into the row: valid until the next step, and copied only for a new variant.
  const std::string_view variant = st.column_text_view(kVariant);
  const std::string_view identity = st.column_text_view(kCodeIdentity);
  if (st.is_null(kVariantRow)) {
    return bad("winner variant '" + std::string(variant) + "' is not in the variants table");
  }
  if (variant.empty() || variant.size() > kMaxNameLength) {
    return bad("winner variant name '" + std::string(variant) +
               "' does not fit the runtime's selection");
  }
  if (!variants.is_last(variant, identity)) {  // checked once per run of the same variant
    if (std::string p = name_problem(variant); !p.empty()) return bad("winner " + p);
    if (std::string p = identity_problem(identity); !p.empty()) {
      return bad("winner variant '" + std::string(variant) + "' has a " + p);
    }
  }
  const double time = st.is_null(kTimeMedian) ? std::numeric_limits<double>::quiet_NaN()
                                              : st.column_double(kTimeMedian);
  if (!std::isnan(time) && !(std::isfinite(time) && time >= 0)) {
    return bad("its winner's time_median_us " + std::to_string(time) + " is not a duration");
  }
  e.has_winner = true;
  e.variant = variants.add(variant, identity);
  e.params = {clamp_param(st.column_int(kKvSplits)), clamp_param(st.column_int(kKvTile)),
              clamp_param(st.column_int(kBlockRows)), clamp_param(st.column_int(kWorkers))};
  e.time_median_us = time;
  return {};
}

std::string_view snapshot_table_sql() {
  constexpr std::string_view kStart = "CREATE TABLE dispatch_snapshot (";
  constexpr std::string_view kEnd = ") STRICT;";
  static_assert(kSchemaSql.find(kStart) != std::string_view::npos);
  const size_t begin = kSchemaSql.find(kStart);
  const size_t end = kSchemaSql.find(kEnd, begin);
  return kSchemaSql.substr(begin, end + kEnd.size() - begin);
}

std::string informative_digest(std::span<const uint8_t> blob) {
  if (blob.size() < 48 || std::memcmp(blob.data(), kMagic, sizeof kMagic) != 0) return "";
  return to_hex(blob.subspan(16, 32));
}

// In one write transaction: reads the change counter c, stores make(c + 1) and checks after the
// commit that the transaction left exactly c + 1 in the header (it does in rollback-journal mode;
// anything else means the snapshot could never be used, which is reported rather than ignored).
void store_bound(SqliteDb& db, const std::function<std::string(uint32_t)>& make) {
  Transaction tx(db);
  const SqliteFileHeader before = read_file_header(db);
  if (before.wal) {
    throw DbError(SQLITE_MISUSE,
                  db.path() +
                      ": the database is in WAL mode; a dispatch snapshot needs rollback-journal "
                      "mode (PRAGMA journal_mode = DELETE, as a finished tune leaves it)");
  }
  if (!has_snapshot_table(db)) db.exec(snapshot_table_sql());
  const uint32_t bound = before.change_counter + 1;  // wraps as SQLite's does
  const std::string blob = make(bound);
  const auto bytes = std::span(reinterpret_cast<const uint8_t*>(blob.data()), blob.size());
  Statement(
      db, "INSERT OR REPLACE INTO dispatch_snapshot (id, winners_digest, data) VALUES (1, ?1, ?2)")
      .bind(1, informative_digest(bytes))
      .bind_blob(2, bytes)
      .run();
  tx.commit();
  const SqliteFileHeader after = read_file_header(db);
  if (after.change_counter != bound) {
    throw DbError(SQLITE_ERROR, db.path() +
                                    ": after writing the dispatch snapshot the file's change "
                                    "counter is " +
                                    std::to_string(after.change_counter) + ", not " +
                                    std::to_string(bound) +
                                    " (another writer, or an SQLite that counts differently); the "
                                    "snapshot will not be used");
  }
}

}  // namespace

RowsSnapshot snapshot_from_rows(const SqliteDb& db) {
  RowsSnapshot out;
  {
    Sha256 sha;
    sha.update(provenance_digest_line(db));
    out.snapshot.provenance_sha256 = sha.finish();
  }
  WinnersDigest digest(db);
  VariantIndex variants;
  Statement st(db, kDigestRowsSql);
  while (st.step()) {
    digest.add(st);
    if (!out.problem.empty()) continue;  // the rest is hashed only
    SnapshotEntry e;
    out.problem = read_row(st, variants, e);
    if (out.problem.empty()) out.snapshot.entries.push_back(e);
  }
  out.computed_digest = digest.finish_hex();
  variants.finish(out.snapshot);
  std::vector<SnapshotEntry>& entries = out.snapshot.entries;
  if (!std::is_sorted(entries.begin(), entries.end(), snapshot_entry_less)) {
    std::sort(entries.begin(), entries.end(), snapshot_entry_less);
  }
  return out;
}

int64_t count_orphan_winners(const SqliteDb& db) {
  Statement st(db, "SELECT count(*) FROM winners WHERE bucket_id NOT IN (SELECT id FROM buckets)");
  return st.step() ? st.column_int(0) : 0;
}

bool has_snapshot_table(const SqliteDb& db) {
  Statement st(db,
               "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'dispatch_snapshot'");
  return st.step();
}

DispatchSnapshot write_snapshot(SqliteDb& db) {
  DispatchSnapshot stored;
  store_bound(db, [&](uint32_t counter) {
    const std::string& path = db.path();
    auto refuse = [&](const std::string& what) {
      throw DbError(SQLITE_CORRUPT, path + ": " + what + "; not writing a dispatch snapshot");
    };
    std::string recorded;
    {
      Statement st(db, "SELECT winners_digest FROM provenance");
      if (!st.step()) refuse("the provenance table is empty");
      recorded = st.column_text(0);
    }
    RowsSnapshot rows = snapshot_from_rows(db);
    if (rows.computed_digest != recorded) {
      refuse("the buckets and winners hash to " + rows.computed_digest +
             ", but the provenance records " + recorded + " (the file was damaged or edited)");
    }
    if (!rows.problem.empty()) refuse(rows.problem);
    if (const int64_t orphans = count_orphan_winners(db); orphans != 0) {
      refuse(std::to_string(orphans) + " winner(s) name a bucket that does not exist");
    }
    if (!from_hex(recorded, rows.snapshot.winners_digest)) {
      refuse("the provenance's winners digest '" + recorded + "' is not 64 hex digits");
    }
    rows.snapshot.file_change_counter = counter;
    stored = std::move(rows.snapshot);
    return encode_snapshot(stored);
  });
  return stored;
}

void store_snapshot(SqliteDb& db, DispatchSnapshot s) {
  store_bound(db, [&](uint32_t counter) {
    s.file_change_counter = counter;
    return encode_snapshot(s);
  });
}

void store_snapshot_blob(SqliteDb& db, std::span<const uint8_t> blob, bool rebind) {
  if (!rebind) {
    Transaction tx(db);
    if (!has_snapshot_table(db)) db.exec(snapshot_table_sql());
    Statement(
        db,
        "INSERT OR REPLACE INTO dispatch_snapshot (id, winners_digest, data) VALUES (1, ?1, ?2)")
        .bind(1, informative_digest(blob))
        .bind_blob(2, blob)
        .run();
    tx.commit();
    return;
  }
  if (blob.size() < 16 + kTrailerSize) {
    throw std::invalid_argument("store_snapshot_blob: too short to carry a change counter");
  }
  store_bound(db, [&](uint32_t counter) {
    std::string b(reinterpret_cast<const char*>(blob.data()), blob.size());
    for (int i = 0; i < 4; ++i) b[12 + i] = static_cast<char>(counter >> (8 * i));
    Sha256 sha;
    sha.update(b.data(), b.size() - kTrailerSize);
    const std::array<uint8_t, 32> t = sha.finish();
    std::memcpy(b.data() + b.size() - kTrailerSize, t.data(), t.size());
    return b;
  });
}

SnapshotReport inspect_snapshot(SqliteDb& db, bool compare_with_rows) {
  SnapshotReport r;
  const ReadTransaction read(db);
  if (!has_snapshot_table(db)) {
    r.detail = "none (a file written before snapshots existed; `mlatune snapshot` writes one)";
    return r;
  }
  Statement st(db, "SELECT data FROM dispatch_snapshot WHERE id = 1");
  if (!st.step()) {
    r.detail = "none (`mlatune snapshot` writes one)";
    return r;
  }
  const std::span<const uint8_t> blob = st.column_blob(0);
  const SqliteFileHeader header = read_file_header(db);
  std::string recorded;
  {
    Statement p(db, "SELECT winners_digest FROM provenance");
    if (p.step()) recorded = p.column_text(0);
  }
  try {
    const SnapshotEnvelope e = open_snapshot_envelope(blob);
    if (std::string why = snapshot_unbound_reason(e, header, recorded); !why.empty()) {
      r.detail =
          "not used: " + why + "; the rows are read instead (`mlatune snapshot` rewrites it)";
      return r;
    }
    const DispatchSnapshot s = decode_snapshot(blob);
    size_t tuned = 0;
    for (const SnapshotEntry& x : s.entries) tuned += x.has_winner;
    r.detail = "current: " + std::to_string(s.entries.size()) + " buckets (" +
               std::to_string(tuned) + " with a winner), " + std::to_string(s.variants.size()) +
               " variants, " + std::to_string(blob.size()) + " bytes, made from winners digest " +
               to_hex(s.winners_digest).substr(0, 12);
    if (compare_with_rows) {
      RowsSnapshot rows = snapshot_from_rows(db);
      if (rows.computed_digest != recorded) {
        r.detail = "the rows hash to " + rows.computed_digest + ", but the provenance records " +
                   recorded + " (damaged or edited rows; the runtime reads the snapshot)";
        return r;
      }
      if (!rows.problem.empty()) {
        r.detail = "the rows are inconsistent: " + rows.problem;
        return r;
      }
      rows.snapshot.file_change_counter = s.file_change_counter;
      rows.snapshot.winners_digest = s.winners_digest;
      if (!rows.snapshot.same_as(s)) {
        r.detail =
            "the snapshot differs from what its rows say (made by another tool, or "
            "forged); `mlatune snapshot` rewrites it from the rows";
        return r;
      }
      r.detail += "; identical to its rows";
    }
    r.usable = true;
  } catch (const SnapshotError& e) {
    r.detail = std::string("damaged (the runtime refuses the file): ") + e.what();
  }
  return r;
}

}  // namespace mlatune
