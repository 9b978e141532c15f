// The runtime's core: a dispatch database loaded into an immutable in-memory table.
//
// WinnerTable::open checks the file (integrity, schema version, provenance against the running
// device, winners digest) and loads its buckets - from its dispatch snapshot (db/snapshot.h) when
// the snapshot is bound to this state of the file, else from the rows - checking every winner
// against the linked kernels, then closes SQLite; lookup() only reads flat sorted arrays, so it
// needs no lock and no allocation. The C API (c_api.cc) is a thin exception-to-status wrapper
// around this class.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "db/snapshot.h"
#include "mla_decode/device.h"
#include "mla_decode/registry.h"
#include "mlatune/mlatune.h"

namespace mlatune {

// A refusal during open: the status the C API returns and a message naming the file and problem.
class RuntimeError : public std::runtime_error {
 public:
  RuntimeError(mlatune_status status, const std::string& what)
      : std::runtime_error(what), status_(status) {}
  mlatune_status status() const { return status_; }

 private:
  mlatune_status status_;
};

struct OpenOptions {
  // The device the winners must have been tuned on; empty: host_device_info().
  std::optional<DeviceInfo> expected_device;
  // Accept a database tuned on another device; the handle's info string records it.
  bool allow_foreign_device = false;
  // The kernels winners are checked against; null: builtin_registry(). Its variants must outlive
  // the table (a plan launches them); the registry object itself is only used during open.
  const Registry* registry = nullptr;
  // false: read the rows even where a dispatch snapshot could stand for them (tests compare the
  // two paths; the result must be the same).
  bool use_snapshot = true;
};

struct TableStats {
  int64_t usable = 0;    // buckets whose winner can be returned
  int64_t stale = 0;     // buckets whose winner's variant changed or is not in this build
  int64_t no_valid = 0;  // buckets where no candidate passed validation
};

class WinnerTable {
 public:
  // Throws RuntimeError (IO_ERROR, CORRUPT, SCHEMA_MISMATCH, FOREIGN_DEVICE, OUT_OF_MEMORY,
  // INTERNAL) with a message naming `path` and what is wrong.
  static std::unique_ptr<WinnerTable> open(const std::string& path, const OpenOptions& options);

  // Fills *out (not null) with the winner of the bucket covering `key` and returns OK; otherwise
  // zero-fills *out and returns INVALID_ARGUMENT, UNTUNED, STALE or NO_VALID_KERNEL. Never
  // allocates, never locks, writes nothing else; safe from any number of threads.
  mlatune_status lookup(const mlatune_decode_key& key, mlatune_selection* out) const noexcept;

  // Writes why lookup(key) fails into error[0..error_size) (NUL-terminated, truncated to fit):
  // the invalid field, the stale variant and both identities, or for a miss the requested shape
  // and up to three nearest tuned keys. Kept apart from lookup() so that hits never pay for it;
  // it too never allocates.
  void explain(const mlatune_decode_key& key, char* error, size_t error_size) const noexcept;

  // The largest Variant::plan_words() any usable winner needs for a call of `batch` sequences
  // (0 when no winner plans on the host), so that a plan object can be sized once.
  size_t max_plan_words(int32_t batch) const;

  const TableStats& stats() const { return stats_; }
  // Whether the buckets were loaded from the dispatch snapshot rather than the rows.
  bool from_snapshot() const { return from_snapshot_; }
  // Provenance summary: file, tool, device, config, kernel build, and any accepted override.
  const std::string& info() const { return info_; }

  // Internal representation, public only so that the implementation's helpers can name it.
  enum class Kind : uint8_t { kUsable, kStale, kNoValid };
  struct Entry {
    uint64_t key;  // packed discrete key (see pack_key in winner_table.cc)
    int32_t batch_lo, batch_hi, kv_lo, kv_hi;
    Kind kind;
    uint32_t message;             // stale entries: their variant's reason in messages_
    const Variant* variant;       // the winner's kernel (usable entries), else null
    LaunchParams params;          // its launch parameters (usable entries)
    mlatune_selection selection;  // the winner (usable and stale entries)
  };

  // The entry covering `key`: OK (usable, *entry set), INVALID_ARGUMENT, UNTUNED, STALE or
  // NO_VALID_KERNEL. Never allocates; thread-safe.
  mlatune_status find(const mlatune_decode_key& key, const Entry** entry) const noexcept;

 private:
  class MessageWriter;
  WinnerTable() = default;
  // Fills entries_ and stats_ from a snapshot (decoded, or made from the rows), checking each
  // winner against `registry`; throws RuntimeError (CORRUPT: launch parameters outside the
  // variant's space).
  void load(const DispatchSnapshot& s, const Registry& registry, const std::string& path);
  void build_index(const std::string& path);
  void describe_miss(const mlatune_decode_key& key, MessageWriter& w) const noexcept;
  size_t key_slot(uint64_t packed) const {
    return static_cast<size_t>((packed * 0x9e3779b97f4a7c15ULL) >> key_shift_);
  }

  // Entries sorted by (key, batch_lo, kv_lo); keys_[i] owns entries [key_entry_[i],
  // key_entry_[i + 1]) and elementary batch intervals [key_interval_[i], key_interval_[i + 1]).
  std::vector<Entry> entries_;
  std::vector<uint64_t> keys_;
  // Open-addressing hash of keys_: slot -> key index + 1 (0: empty), a power of two at least
  // twice as many slots as keys, so a lookup finds its key in one or two probes instead of a
  // dependent binary search. key_shift_: 64 - log2(slots).
  std::vector<uint32_t> key_slots_;
  int key_shift_ = 64;
  std::vector<uint32_t> key_entry_;
  std::vector<uint32_t> key_interval_;
  // Elementary batch intervals of each key: [interval_lo_[j], interval_hi_[j]], in which the same
  // set of buckets applies; they own cells [interval_cell_[j], interval_cell_[j + 1]).
  std::vector<int32_t> interval_lo_;
  std::vector<int32_t> interval_hi_;
  std::vector<uint32_t> interval_cell_;
  // Cells: kv ranges [cell_kv_lo_[c], cell_kv_hi_[c]] of the buckets covering an interval,
  // sorted and disjoint; cell_entry_[c] indexes entries_.
  std::vector<int32_t> cell_kv_lo_;
  std::vector<int32_t> cell_kv_hi_;
  std::vector<uint32_t> cell_entry_;

  std::vector<std::string> messages_;  // why a variant's winners are stale, one per such variant
  TableStats stats_;
  bool from_snapshot_ = false;
  std::string info_;
};

}  // namespace mlatune
