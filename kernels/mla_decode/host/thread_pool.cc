#include "mla_decode/host/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace mlatune {
namespace {

// Upper bound on helper threads; far above any useful worker count, it only stops a typo from
// spawning millions of threads.
constexpr int kMaxWorkers = 1024;

// Set while a thread runs tasks of a job, so that a nested parallel_for runs inline instead of
// deadlocking on the call mutex.
thread_local bool t_in_job = false;

class Pool {
 public:
  Pool() = default;
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Joins the helpers at process exit (function-local static), so no thread outlives the pool.
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  void run(int64_t count, int workers, const std::function<void(int64_t)>& fn) {
    std::lock_guard<std::mutex> call(call_mu_);
    const int helpers = workers - 1;
    ensure_threads(helpers);
    {
      std::lock_guard<std::mutex> lk(mu_);
      fn_ = &fn;
      count_ = count;
      next_.store(0, std::memory_order_relaxed);
      error_ = nullptr;
      helpers_ = helpers;
      pending_ = helpers;
      ++generation_;
    }
    wake_.notify_all();
    work();
    std::exception_ptr error;
    {
      std::unique_lock<std::mutex> lk(mu_);
      done_.wait(lk, [&] { return pending_ == 0; });
      fn_ = nullptr;
      helpers_ = 0;
      error = std::exchange(error_, nullptr);
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  void ensure_threads(int helpers) {
    while (static_cast<int>(threads_.size()) < helpers) {
      const int index = static_cast<int>(threads_.size());
      threads_.emplace_back([this, index] { helper_loop(index); });
    }
  }

  void helper_loop(int index) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      wake_.wait(lk, [&] { return stop_ || (generation_ != seen && index < helpers_); });
      if (stop_) return;
      seen = generation_;
      lk.unlock();
      work();
      lk.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  // Takes tasks until none is left. After the first exception the remaining tasks are skipped:
  // the call fails anyway, and finishing early keeps a failing launch cheap.
  void work() {
    t_in_job = true;
    for (;;) {
      const int64_t i = next_.fetch_add(1, std::memory_order_relaxed);
      if (i >= count_) break;
      try {
        (*fn_)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu_);
        if (!error_) error_ = std::current_exception();
        next_.store(count_, std::memory_order_relaxed);
      }
    }
    t_in_job = false;
  }

  std::mutex call_mu_;  // serialises callers; held for a whole job
  std::mutex mu_;       // guards everything below except next_
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> threads_;  // touched only under call_mu_ (and by the destructor)
  bool stop_ = false;
  uint64_t generation_ = 0;
  int helpers_ = 0;  // helpers taking part in the current job: those with index < helpers_
  int pending_ = 0;  // helpers of the current job not yet finished
  // The current job. Written under mu_ before the generation bump, read by helpers after they
  // observed it under mu_, so plain fields suffice.
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t count_ = 0;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

int hardware_workers() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(std::min<unsigned>(n, kMaxWorkers));
}

void parallel_for(int64_t count, int workers, const std::function<void(int64_t)>& fn) {
  if (count <= 0) return;
  if (workers <= 0) workers = hardware_workers();
  const int threads = static_cast<int>(std::min<int64_t>({count, workers, kMaxWorkers}));
  if (threads <= 1 || t_in_job) {
    for (int64_t i = 0; i < count; ++i) fn(i);
    return;
  }
  pool().run(count, threads, fn);
}

}  // namespace mlatune
