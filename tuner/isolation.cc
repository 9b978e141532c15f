#include "tuner/isolation.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "mla_decode/memory.h"
#include "tuner/heartbeat.h"

namespace mlatune {
namespace {

// Worker exit codes besides 0 (finished).
constexpr int kWorkerError = 3;       // it sent an "error" line and stopped
constexpr int kWorkerDeviceLost = 4;  // it sent a "fault" line: the device did not survive

// Lines the worker sends, one per write(2) (atomic for pipes below PIPE_BUF):
//   start B C | beat | bucket B tuned|none | fault B C REASON | error KIND MESSAGE | done
class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}
  void send(std::string line) const {
    for (char& ch : line) {
      if (ch == '\n') ch = ' ';
    }
    if (line.size() > 1000) line.resize(1000);
    line += '\n';
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(kWorkerError);  // the supervisor is gone
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
};

struct WorkerJob {
  const TuneConfig* config;
  const std::vector<Candidate>* candidates;
  const Registry* registry;
  std::string db_path;
  TuningDb::Mode mode;
  bool live;
  bool announce;  // print the "tuning ..." line (first worker only)
  std::map<std::pair<size_t, size_t>, std::pair<Disposition, std::string>> quarantined;
};

[[noreturn]] void run_worker(const WorkerJob& job, int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the supervisor
  const Channel ch(fd);
  set_heartbeat([&ch] { ch.send("beat"); });
  int code = 0;
  try {
    const TuneConfig& config = *job.config;
    const DeviceInfo device = current_device_info(config.backend);
    std::unique_ptr<TuningDb> db =
        TuningDb::open_for_tuning(job.db_path, job.mode, make_provenance(config, *job.registry),
                                  variant_records(*job.candidates));
    const int64_t buckets = static_cast<int64_t>(config.buckets().size());
    if (job.announce) {
      std::fprintf(stderr, "tuning %s: %lld buckets x %zu candidates on %s (isolated worker)\n",
                   config.name.c_str(), static_cast<long long>(buckets), job.candidates->size(),
                   device.to_string().c_str());
    }
    Progress progress(stderr, job.live, buckets);
    TuneHooks hooks;
    hooks.quarantined = job.quarantined;
    hooks.candidate_started = [&ch](size_t b, size_t c) {
      ch.send("start " + std::to_string(b) + " " + std::to_string(c));
    };
    hooks.candidate_failed = [&](size_t b, size_t c, const TrialRecord& t) {
      // A fault can leave the device unusable for every later candidate: find out now.
      try {
        memory_space((*job.candidates)[c].variant->backend()).synchronize();
      } catch (const std::exception& e) {
        ch.send("fault " + std::to_string(b) + " " + std::to_string(c) + " " + t.reason +
                " (the device was unusable afterwards: " + e.what() + ")");
        std::fflush(stderr);
        _exit(kWorkerDeviceLost);
      }
    };
    hooks.bucket_recorded = [&ch](size_t b, bool has_winner) {
      ch.send("bucket " + std::to_string(b) + (has_winner ? " tuned" : " none"));
    };
    tune(config, *job.candidates, *db, progress, hooks);
    db->finalize();
    db.reset();
    ch.send("done");
  } catch (const ConfigError& e) {
    ch.send(std::string("error config ") + e.what());
    code = kWorkerError;
  } catch (const DbError& e) {
    ch.send("error db " + std::to_string(e.code()) + " " + e.what());
    code = kWorkerError;
  } catch (const LaunchError& e) {
    ch.send(std::string("error device ") + e.what());
    code = kWorkerError;
  } catch (const std::exception& e) {
    ch.send(std::string("error other ") + e.what());
    code = kWorkerError;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}

std::string signal_text(int sig) {
  const char* name = sigabbrev_np(sig);
  return "signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
}

// What a finished worker left behind.
struct WorkerEnd {
  bool done = false;  // it sent "done"
  std::optional<std::pair<size_t, size_t>> in_flight;
  std::string fault;                // reason of a "fault" line
  std::string error;                // "KIND MESSAGE" of an "error" line
  std::string death;                // how it died, when not by exit
  bool watchdog = false;            // killed by the watchdog
  std::map<size_t, bool> recorded;  // bucket -> has a winner
};

WorkerEnd supervise(pid_t pid, int fd, double watchdog_s) {
  WorkerEnd end;
  std::string buffer;
  auto handle = [&](const std::string& line) {
    std::istringstream in(line);
    std::string verb;
    in >> verb;
    if (verb == "start") {
      size_t b = 0, c = 0;
      in >> b >> c;
      end.in_flight = std::pair(b, c);
    } else if (verb == "bucket") {
      size_t b = 0;
      std::string outcome;
      in >> b >> outcome;
      end.recorded[b] = outcome == "tuned";
      end.in_flight.reset();
    } else if (verb == "fault") {
      size_t b = 0, c = 0;
      in >> b >> c;
      end.in_flight = std::pair(b, c);
      std::getline(in >> std::ws, end.fault);
    } else if (verb == "error") {
      std::getline(in >> std::ws, end.error);
    } else if (verb == "done") {
      end.done = true;
    }
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(watchdog_s);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      end.watchdog = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      throw std::runtime_error(std::string("poll on the worker pipe: ") + std::strerror(errno));
    if (r == 0) continue;
    char chunk[4096];
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the worker closed the pipe: it exited
    buffer.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
      handle(buffer.substr(0, nl));
      buffer.erase(0, nl + 1);
    }
    deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(watchdog_s);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status) && !end.watchdog) end.death = signal_text(WTERMSIG(status));
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0 && end.error.empty() && end.fault.empty()) {
    end.death = "exit code " + std::to_string(WEXITSTATUS(status));
  }
  return end;
}

[[noreturn]] void rethrow(const std::string& error) {
  std::istringstream in(error);
  std::string kind;
  in >> kind;
  std::string message;
  if (kind == "db") {
    int code = 0;
    in >> code;
    std::getline(in >> std::ws, message);
    throw DbError(code, message);
  }
  std::getline(in >> std::ws, message);
  if (kind == "config") throw ConfigError(message);
  if (kind == "device") throw LaunchError(message);
  throw std::runtime_error(message);
}

}  // namespace

double watchdog_seconds(const TuneConfig& config) {
  return std::max(60.0, 3.0 * config.timing.candidate_timeout_s);
}

TuneSummary tune_isolated(const TuneConfig& config, const std::vector<Candidate>& candidates,
                          const Registry& registry, const std::string& db_path, TuningDb::Mode mode,
                          bool live_progress, const IsolationSettings& settings) {
  const auto start = std::chrono::steady_clock::now();
  WorkerJob job{&config, &candidates, &registry, db_path, mode, live_progress, true, {}};
  TuneSummary summary;
  summary.buckets = static_cast<int64_t>(config.buckets().size());
  std::map<size_t, bool> recorded;
  for (int restarts = 0;; ++restarts) {
    int fds[2];
    if (pipe(fds) != 0) {
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    }
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      close(fds[0]);
      run_worker(job, fds[1]);
    }
    close(fds[1]);
    WorkerEnd end;
    try {
      end = supervise(pid, fds[0], settings.watchdog_s);
    } catch (...) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      close(fds[0]);
      throw;
    }
    close(fds[0]);
    recorded.insert(end.recorded.begin(), end.recorded.end());
    if (end.done) break;
    if (!end.error.empty()) rethrow(end.error);
    if (!end.in_flight) {
      throw std::runtime_error(
          "the tuning worker " +
          (end.watchdog ? "hung (no progress for " + std::to_string(settings.watchdog_s) + " s)"
                        : "died (" + end.death + ")") +
          " while no candidate was running (preparing a bucket's inputs "
          "or writing the database)");
    }
    std::pair<Disposition, std::string> verdict;
    if (end.watchdog) {
      verdict = {Disposition::kTimedOut, "hung: no progress for " +
                                             std::to_string(static_cast<int>(settings.watchdog_s)) +
                                             " s; the watchdog killed the tuning worker"};
    } else if (!end.fault.empty()) {
      verdict = {Disposition::kLaunchError, "device fault: " + end.fault};
    } else {
      verdict = {Disposition::kLaunchError, "crashed the tuning worker: " + end.death};
    }
    const Candidate& c = candidates.at(end.in_flight->second);
    std::fprintf(stderr, "mlatune: %s %s of bucket %zu: %s; restarting the worker\n",
                 std::string(c.variant->name()).c_str(), c.params.to_string().c_str(),
                 end.in_flight->first + 1, verdict.second.c_str());
    job.quarantined[*end.in_flight] = verdict;
    if (restarts + 1 >= settings.max_restarts) {
      throw std::runtime_error("the tuning worker was restarted " + std::to_string(restarts + 1) +
                               " times; giving up");
    }
    job.mode = TuningDb::Mode::kResume;
    job.announce = false;
  }
  for (const auto& [bucket, has_winner] : recorded)
    ++(has_winner ? summary.tuned : summary.no_valid);
  // Every bucket not recorded by this run's workers was in the database before it.
  summary.skipped = summary.buckets - static_cast<int64_t>(recorded.size());
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace mlatune
