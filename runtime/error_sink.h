// Where the runtime writes a refusal's message: a fixed caller-owned buffer (the C API's
// per-thread last error), so that reporting never allocates and a hot path that fails stays
// allocation-free too.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdio>

#include "mlatune/mlatune.h"

namespace mlatune {

struct ErrorSink {
  char* buffer;
  size_t capacity;

  // Writes the printf-style message (truncated to fit) and returns `status`.
  [[gnu::format(printf, 3, 4)]] mlatune_status fail(mlatune_status status, const char* format,
                                                    ...) const noexcept {
    va_list args;
    va_start(args, format);
    std::vsnprintf(buffer, capacity, format, args);
    va_end(args);
    return status;
  }
};

}  // namespace mlatune
