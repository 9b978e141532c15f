// A process-wide "still working" signal for a supervising process (tuner/isolation.h): the gate
// and the timing engine call heartbeat() around every run of a candidate, so that a supervisor's
// watchdog can tell a slow bucket from a hung kernel.
#pragma once

#include <functional>

namespace mlatune {

// Calls the installed function, if any. Cheap when none is installed.
void heartbeat();
// Installs `f` (empty: none). Not thread-safe: install before tuning starts.
void set_heartbeat(std::function<void()> f);

}  // namespace mlatune
