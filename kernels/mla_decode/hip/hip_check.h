// Turns HIP runtime errors into mlatune::LaunchError, the exception the validation gate records as
// a "launch error" disposition. For GPU sources only (includes gpu/hip_compat.h).
#pragma once

#include <string>

#include "gpu/hip_compat.h"
#include "mla_decode/variant.h"

namespace mlatune::hip_detail {

[[noreturn]] inline void throw_hip_error(hipError_t e, const char* expr, const char* file,
                                         int line) {
  throw LaunchError(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                    " failed: " + hipGetErrorString(e));
}

}  // namespace mlatune::hip_detail

// Evaluates `expr` (a HIP runtime call returning hipError_t) once; on failure throws LaunchError
// "file:line: expr failed: <hipGetErrorString>".
#define MLATUNE_HIP_CHECK(expr)                                                               \
  do {                                                                                        \
    const hipError_t mlatune_hip_status_ = (expr);                                            \
    if (mlatune_hip_status_ != hipSuccess) {                                                  \
      ::mlatune::hip_detail::throw_hip_error(mlatune_hip_status_, #expr, __FILE__, __LINE__); \
    }                                                                                         \
  } while (0)

namespace mlatune {

// Call right after a kernel launch: throws LaunchError naming `kernel` if the launch was refused
// (bad configuration, too much shared memory, no kernel image for this device). Reading the
// error clears it, so a later call does not report it again. Faults raised while the kernel runs
// surface later, at MemorySpace::synchronize or a copy.
inline void hip_check_launch(const char* kernel) {
  const hipError_t e = hipGetLastError();
  if (e != hipSuccess) {
    throw LaunchError(std::string("launch of ") + kernel + " failed: " + hipGetErrorString(e));
  }
}

// The stream a launch enqueues on (DecodeArgs::stream; null: the default stream).
inline hipStream_t stream_of(const DecodeArgs& a) { return static_cast<hipStream_t>(a.stream); }

}  // namespace mlatune
