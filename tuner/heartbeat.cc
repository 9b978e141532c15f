#include "tuner/heartbeat.h"

#include <utility>

namespace mlatune {
namespace {
std::function<void()>& installed() {
  static std::function<void()> f;
  return f;
}
}  // namespace

void heartbeat() {
  if (const std::function<void()>& f = installed()) f();
}

void set_heartbeat(std::function<void()> f) { installed() = std::move(f); }

}  // namespace mlatune
