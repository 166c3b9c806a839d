// SPDX-License-Identifier: MIT
// Pages faulted in ahead of the reader's arrays, on a second core.

#include "page_prefaulter.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace rlmem::detail {

page_prefaulter::page_prefaulter() noexcept {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  try {
    thread_ = std::thread([this] { run(); });
    running_ = true;
  } catch (...) {  // no thread: the parser takes its own page faults, as without this
    running_ = false;
  }
#endif
}

page_prefaulter::~page_prefaulter() {
  if (!running_) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void page_prefaulter::run() noexcept {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096);
  std::uintptr_t seen_base[regions] = {};
  std::uintptr_t populated_end[regions] = {};
  try {
  for (;;) {
    for (std::size_t region = 0; region < regions; ++region) {
      std::uintptr_t base = published_[region].base.load(std::memory_order_relaxed);
      std::size_t used = published_[region].used.load(std::memory_order_relaxed);
      std::size_t capacity = published_[region].capacity.load(std::memory_order_relaxed);
      if (base == 0 || used > capacity) continue;
      if (base != seen_base[region]) {  // a new array (the old one grew and moved)
        seen_base[region] = base;
        populated_end[region] = 0;
      }
      std::uintptr_t from = std::max((base + used) & ~(page - 1), populated_end[region]);
      std::uintptr_t to = (base + std::min(capacity, used + ahead_bytes)) & ~(page - 1);
      if (to <= from) continue;
      // The values published together may be from two moments; whatever range they name, this
      // only maps pages, so a stale one costs memory within `ahead_bytes`, never data.
      if (madvise(reinterpret_cast<void*>(from), to - from, MADV_POPULATE_WRITE) != 0 && errno == EINVAL) {
        return;  // a kernel without MADV_POPULATE_WRITE: nothing to do here
      }
      populated_end[region] = to;
    }
    std::unique_lock lock(mutex_);
    if (wake_.wait_for(lock, std::chrono::microseconds(500), [&] { return stopping_; })) return;
  }
  } catch (...) {  // a lock that failed: stop advising; the parser is not affected
    return;
  }
#endif
}

}  // namespace rlmem::detail
