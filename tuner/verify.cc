#include "tuner/verify.h"

#include <map>

#include "common/sha256.h"
#include "db/tuning_db.h"
#include "mla_decode/host/thread_pool.h"
#include "mla_decode/memory.h"
#include "runtime/winner_table.h"
#include "tuner/gate.h"

namespace mlatune {

VerifySummary verify_database(const std::string& path, const Registry& registry,
                              bool allow_foreign_device, std::FILE* out) {
  auto db = TuningDb::open_read_only(path);
  const Provenance p = db->provenance();
  if (sha256_hex(p.config_text) != p.config_hash) {
    throw DbError(SQLITE_CORRUPT, path + ": the stored config does not match its hash " +
                                      p.config_hash.substr(0, 12) + " (damaged or doctored)");
  }
  TuneConfig config =
      parse_config(p.config_text, path + " (stored config '" + p.config_name + "')");
  config.name = p.config_name;
  const DeviceInfo device = current_device_info(config.backend);
  // The runtime's own checks first: integrity, schema, device, stale winners.
  OpenOptions options;
  options.expected_device = device;
  options.allow_foreign_device = allow_foreign_device;
  options.registry = &registry;
  try {
    WinnerTable::open(path, options);
  } catch (const RuntimeError& e) {
    throw DbError(SQLITE_ERROR, e.what());
  }
  std::map<std::string, std::string> identity;
  for (const VariantRecord& v : db->variants()) identity[v.name] = v.code_identity;

  std::fprintf(out, "verifying %s (config %s, tuned on %s) on %s\n", path.c_str(),
               p.config_name.c_str(), p.device.to_string().c_str(), device.to_string().c_str());
  VerifySummary s;
  for (const BucketSummary& b : db->buckets()) {
    if (!b.winner) {
      ++s.no_valid;
      continue;
    }
    const TrialRecord& w = *b.winner;
    const Variant* v = registry.find(w.variant);
    const std::string what = b.bucket.to_string() + " " + w.variant + " " + w.params.to_string();
    if (!v || v->code_identity() != identity[w.variant]) {
      ++s.stale;
      std::fprintf(out, "STALE %s: the variant's code differs from the tuned one\n", what.c_str());
      continue;
    }
    BucketValidator validator(b.bucket, config, hardware_workers());
    const TrialRecord t = validator.validate(*v, w.params);
    if (t.disposition == Disposition::kPassed) {
      ++s.passed;
      std::fprintf(out, "ok    %s: worst %.3gx tolerance (tuned %.3gx), %lld rows\n", what.c_str(),
                   t.max_rel_err.value_or(0), w.max_rel_err.value_or(0),
                   static_cast<long long>(t.rows_checked));
    } else {
      ++s.failed;
      std::fprintf(out, "FAIL  %s: %s: %s at %s\n", what.c_str(),
                   std::string(disposition_name(t.disposition)).c_str(), t.reason.c_str(),
                   t.worst_row.c_str());
    }
    std::fflush(out);
  }
  std::fprintf(out,
               "verified %lld winners: %lld passed, %lld failed, %lld stale (%lld buckets have "
               "no valid kernel)\n",
               static_cast<long long>(s.passed + s.failed + s.stale),
               static_cast<long long>(s.passed), static_cast<long long>(s.failed),
               static_cast<long long>(s.stale), static_cast<long long>(s.no_valid));
  return s;
}

}  // namespace mlatune
