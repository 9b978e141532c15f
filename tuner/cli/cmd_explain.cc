// mlatune explain --db FILE <shape>: every candidate tried for the bucket of a shape, and why it
// won or lost.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "db/tuning_db.h"
#include "tuner/cli/guard.h"
#include "tuner/cli/shape_options.h"
#include "tuner/staleness.h"

namespace mlatune::cli {

void add_explain_command(CLI::App& app, int& exit_code) {
  auto db_path = std::make_shared<std::string>();
  auto shape = std::make_shared<ShapeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "explain", "show every candidate tried for the bucket of a shape and why it won or lost");
  cmd->add_option("--db", *db_path, "dispatch database")->required();
  shape->add_to(*cmd);
  cmd->callback([db_path, shape, &exit_code] {
    exit_code = run_guarded([&] {
      auto db = TuningDb::open_read_only(*db_path);
      mlatune_decode_key k = shape->key();
      const BucketSummary* found = nullptr;
      std::vector<BucketSummary> buckets = db->buckets();
      for (const BucketSummary& b : buckets) {
        const DecodeKey& d = b.bucket.key;
        if (d.heads == k.heads && d.qlen == k.qlen && static_cast<int>(d.q_dtype) == k.q_dtype &&
            static_cast<int>(d.kv_dtype) == k.kv_dtype && d.page_size == k.page_size &&
            d.lse == (k.lse != 0) && b.bucket.contains(k.batch, k.max_kv_len)) {
          found = &b;
        }
      }
      if (!found) {
        std::fprintf(stderr, "mlatune: no bucket of %s covers %s\n", db_path->c_str(),
                     shape->describe().c_str());
        return kExitRefused;
      }
      std::printf("bucket %s: %s\n", found->bucket.to_string().c_str(), found->status.c_str());
      const std::optional<TrialRecord>& w = found->winner;
      // Whether this build can run the winner, and if not why (lookup refuses it as stale).
      Staleness winner_staleness = Staleness::kCurrent;
      if (w) {
        const std::vector<VariantRecord> variants = db->variants();
        const auto v = std::find_if(variants.begin(), variants.end(),
                                    [&](const VariantRecord& r) { return r.name == w->variant; });
        winner_staleness = v == variants.end()
                               ? Staleness::kNotInBuild
                               : staleness_of(builtin_registry(), v->name, v->code_identity);
      }
      for (const TrialRecord& t : db->trials(found->id)) {
        bool is_winner = w && t.variant == w->variant && t.params == w->params;
        std::string verdict;
        if (is_winner) {
          verdict = "WINNER";
          if (winner_staleness != Staleness::kCurrent) {
            verdict += " (STALE: " + std::string(staleness_reason(winner_staleness)) +
                       "; lookups refuse it)";
          }
        } else if (t.disposition == Disposition::kPassed && w && t.time_median_us) {
          double slower = (*t.time_median_us / *w->time_median_us - 1.0) * 100.0;
          char buf[160];
          // Several timing points: the winner is picked by the worst point's slowdown, not by
          // this combined median (pick_winner), so a loser's median can be the smaller one.
          std::snprintf(buf, sizeof buf, "lost: median %+.1f%% vs winner%s", slower,
                        slower <= 0 ? " (tied with a simpler winner, or slower at one of its "
                                      "timing points: see time)"
                                    : "");
          verdict = buf;
        } else {
          verdict = "rejected: " + std::string(disposition_name(t.disposition));
        }
        std::printf("\n%-24s %s\n  %s\n", t.variant.c_str(), t.params.to_string().c_str(),
                    verdict.c_str());
        if (t.time_median_us) {
          std::printf("  time: median %.2f us, IQR %.2f us, %d samples (%s)\n", *t.time_median_us,
                      t.time_spread_us.value_or(0), t.time_samples.value_or(0),
                      t.timing_method.c_str());
        }
        if (!t.reason.empty()) std::printf("  reason: %s\n", t.reason.c_str());
        if (t.max_abs_err) {
          std::printf("  errors: max abs %.3g, max %.3g x tolerance, min cosine %.6f",
                      *t.max_abs_err, t.max_rel_err.value_or(0), t.min_cosine.value_or(0));
          if (t.max_lse_err) std::printf(", max LSE err %.3g", *t.max_lse_err);
          std::printf("\n");
        }
        if (!t.worst_row.empty()) std::printf("  worst row: %s\n", t.worst_row.c_str());
        std::printf("  validated: %d points, %d runs, %lld rows checked\n", t.validation_points,
                    t.validation_runs, static_cast<long long>(t.rows_checked));
      }
      return kExitOk;
    });
  });
}

}  // namespace mlatune::cli
