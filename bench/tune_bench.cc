// Wall time of `mlatune tune --config configs/host-smoke.yaml` end to end (validation, timing,
// database writes), run as a user runs it: the CLI in a child process. Target: <= 60 s on a
// 2-core machine. (A child process also keeps the tuner's own use of Google Benchmark, for
// timing candidates, apart from this benchmark's.)
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

namespace {

void BM_TuneHostSmoke(benchmark::State& state) {
  const std::string config = std::string(MLATUNE_SOURCE_DIR) + "/configs/host-smoke.yaml";
  const std::string db = (std::filesystem::temp_directory_path() /
                          ("mlatune-bench-" + std::to_string(getpid()) + ".db"))
                             .string();
  for (auto _ : state) {
    std::filesystem::remove(db);
    auto t0 = std::chrono::steady_clock::now();
    pid_t pid = fork();
    if (pid == 0) {
      // Progress and the summary are not part of the measurement's output.
      freopen("/dev/null", "w", stdout);
      freopen("/dev/null", "w", stderr);
      execl(MLATUNE_CLI, MLATUNE_CLI, "tune", "--config", config.c_str(), "--db", db.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      state.SkipWithError("mlatune tune failed");
      break;
    }
  }
  std::filesystem::remove(db);
}
BENCHMARK(BM_TuneHostSmoke)->Iterations(1)->Unit(benchmark::kSecond)->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
