// Progress of a tuning run: a live status line with ETA on a terminal, plain lines otherwise.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace mlatune {

class Progress {
 public:
  // `out` is where progress goes (stderr for the CLI); `live` selects the terminal format.
  Progress(FILE* out, bool live, int64_t total_buckets);

  // A bucket starts; `candidates` will be tried.
  void bucket_started(int64_t index, const std::string& bucket, int64_t candidates);
  void candidate_done(int64_t done);
  // A bucket was recorded; `outcome` says what won (or that nothing passed).
  void bucket_done(const std::string& outcome);
  void bucket_skipped(const std::string& bucket);  // already in the database (--resume)
  void message(const std::string& line);

 private:
  std::string eta() const;
  FILE* out_;
  bool live_;
  int64_t total_, done_ = 0, skipped_ = 0, index_ = 0, candidates_ = 0;
  std::string bucket_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace mlatune
