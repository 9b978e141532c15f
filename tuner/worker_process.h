// The process machinery of supervised work (tuning: isolation.h; verification: verify.h): a
// forked worker that reports to its supervisor in lines over a pipe, and a supervisor that reads
// them under a watchdog, so that work which kills or hangs its process costs a restart and a
// recorded outcome, not the run.
//
// The supervisor never touches a GPU (a forked child cannot use a GPU runtime its parent
// initialised): device checks and kernel runs happen in the worker.
#pragma once

#include <functional>
#include <string>

namespace mlatune::worker {

// Worker exit codes besides 0 (finished).
inline constexpr int kExitError = 3;       // it sent an "error" line and stopped
inline constexpr int kExitDeviceLost = 4;  // the device did not survive what it ran

// The worker's end of the pipe. send() writes one line (newlines in it become spaces, at most
// 1000 bytes: one atomic pipe write); when the supervisor is gone the worker exits.
class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}
  void send(std::string line) const;

 private:
  int fd_;
};

// How a worker ended.
struct Ended {
  bool watchdog = false;  // silent for watchdog_s, killed
  int signal = 0;         // killed by this signal (other than the watchdog's)
  int exit_code = 0;      // its exit status when it exited
  // "signal 11 (SIGSEGV)" or "exit code 3": for messages.
  std::string describe() const;
};

// Forks a worker that runs `body` and exits with its return value, installing a heartbeat
// (heartbeat.h) that sends "beat". The supervisor passes every other line to `on_line`, and kills
// the worker after `watchdog_s` without any line. Throws std::runtime_error when pipe, fork or
// poll fail.
Ended run_supervised(const std::function<int(const Channel&)>& body,
                     const std::function<void(const std::string&)>& on_line, double watchdog_s);

// Runs `work` in a worker; sends "error KIND MESSAGE" for a ConfigError (config), DbError (db,
// with its code), LaunchError (device) or any other exception (other) and returns kExitError,
// otherwise returns 0.
int report_errors(const Channel& ch, const std::function<void()>& work);

// Rethrows the "KIND MESSAGE" of an error line as the exception kind the worker caught.
[[noreturn]] void rethrow(const std::string& error);

}  // namespace mlatune::worker
