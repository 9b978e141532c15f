#include "tuner/progress.h"

namespace mlatune {
namespace {
std::string clock_text(double secs) {
  long s = static_cast<long>(secs + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}
}  // namespace

Progress::Progress(FILE* out, bool live, int64_t total_buckets)
    : out_(out), live_(live), total_(total_buckets) {}

std::string Progress::eta() const {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  int64_t tuned = done_ - skipped_;
  std::string s = "elapsed " + clock_text(elapsed);
  if (tuned > 0) {
    s += ", ETA " +
         clock_text(elapsed / static_cast<double>(tuned) * static_cast<double>(total_ - done_));
  }
  return s;
}

void Progress::bucket_started(int64_t index, const std::string& bucket, int64_t candidates) {
  index_ = index;
  bucket_ = bucket;
  candidates_ = candidates;
  candidate_done(0);
}

void Progress::candidate_done(int64_t done) {
  if (!live_) return;
  std::fprintf(out_, "\r\033[K[%lld/%lld] %s: candidate %lld/%lld (%s)",
               static_cast<long long>(index_ + 1), static_cast<long long>(total_), bucket_.c_str(),
               static_cast<long long>(done), static_cast<long long>(candidates_), eta().c_str());
  std::fflush(out_);
}

void Progress::bucket_done(const std::string& outcome) {
  ++done_;
  std::fprintf(out_, "%s[%lld/%lld] %s: %s (%s)\n", live_ ? "\r\033[K" : "",
               static_cast<long long>(index_ + 1), static_cast<long long>(total_), bucket_.c_str(),
               outcome.c_str(), eta().c_str());
  std::fflush(out_);
}

void Progress::bucket_skipped(const std::string& bucket) {
  ++done_;
  ++skipped_;
  if (!live_) {
    std::fprintf(out_, "[%lld/%lld] %s: already tuned, skipped\n", static_cast<long long>(done_),
                 static_cast<long long>(total_), bucket.c_str());
  }
}

void Progress::message(const std::string& line) {
  std::fprintf(out_, "%s%s\n", live_ ? "\r\033[K" : "", line.c_str());
  std::fflush(out_);
}

}  // namespace mlatune
