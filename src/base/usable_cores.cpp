// SPDX-License-Identifier: MIT
// several_cores_usable(): the process's CPU affinity on Linux, the hardware elsewhere.

#include <rlmem/base/usable_cores.hpp>

#include <sched.h>

#include <thread>

namespace rlmem {

bool several_cores_usable() noexcept {
#if defined(__linux__)
  cpu_set_t usable;
  CPU_ZERO(&usable);
  if (sched_getaffinity(0, sizeof usable, &usable) == 0) return CPU_COUNT(&usable) > 1;
#endif
  return std::thread::hardware_concurrency() > 1;
}

}  // namespace rlmem
