#include "tuner/worker_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "db/tuning_db.h"
#include "mla_decode/variant.h"
#include "tuner/config.h"
#include "tuner/heartbeat.h"

namespace mlatune::worker {

void Channel::send(std::string line) const {
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
    if (n <= 0) _exit(kExitError);  // the supervisor is gone
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::string Ended::describe() const {
  if (watchdog) return "killed by the watchdog";
  if (signal != 0) {
    const char* name = sigabbrev_np(signal);
    return "signal " + std::to_string(signal) + (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "exit code " + std::to_string(exit_code);
}

Ended run_supervised(const std::function<int(const Channel&)>& body,
                     const std::function<void(const std::string&)>& on_line, double watchdog_s) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
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
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the supervisor
    const Channel ch(fds[1]);
    set_heartbeat([&ch] { ch.send("beat"); });
    const int code = body(ch);
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(code);
  }
  close(fds[1]);
  const int fd = fds[0];
  Ended end;
  try {
    std::string buffer;
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
      if (r < 0) {
        throw std::runtime_error(std::string("poll on the worker pipe: ") + std::strerror(errno));
      }
      if (r == 0) continue;
      char chunk[4096];
      const ssize_t n = read(fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the worker closed the pipe: it exited
      buffer.append(chunk, static_cast<size_t>(n));
      for (size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
        const std::string line = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        if (line != "beat") on_line(line);
      }
      deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(watchdog_s);
    }
  } catch (...) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close(fd);
    throw;
  }
  close(fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status) && !end.watchdog) end.signal = WTERMSIG(status);
  if (WIFEXITED(status)) end.exit_code = WEXITSTATUS(status);
  return end;
}

int report_errors(const Channel& ch, const std::function<void()>& work) {
  try {
    work();
    return 0;
  } catch (const ConfigError& e) {
    ch.send(std::string("error config ") + e.what());
  } catch (const DbError& e) {
    ch.send("error db " + std::to_string(e.code()) + " " + e.what());
  } catch (const LaunchError& e) {
    ch.send(std::string("error device ") + e.what());
  } catch (const std::exception& e) {
    ch.send(std::string("error other ") + e.what());
  }
  return kExitError;
}

void rethrow(const std::string& error) {
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

}  // namespace mlatune::worker
