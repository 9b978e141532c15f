// A small persistent thread pool for the host kernels: threads are created once per process, so a
// kernel launch pays a wake-up, not a thread creation.
#pragma once

#include <cstdint>
#include <functional>

namespace mlatune {

// Runs fn(i) for every i in [0, count) on at most `workers` threads (the caller included) and
// returns when all are done. Exceptions thrown by fn are rethrown (the first one) after all tasks
// finished. Safe to call from several threads at once (calls are serialised).
void parallel_for(int64_t count, int workers, const std::function<void(int64_t)>& fn);

// Hardware threads available to the pool (at least 1).
int hardware_workers();

}  // namespace mlatune
