// SPDX-License-Identifier: MIT
#pragma once
// Faults in, on a thread of its own, the pages just ahead of where the reader writes its
// largest arrays (the trace entries and the memo), so that the page faults and the kernel's
// zeroing of fresh pages happen on a second core instead of in the parse. It never writes the
// arrays' memory: MADV_POPULATE_WRITE maps the pages as a write would, and the data the parser
// writes there is the parser's alone. It is advice only: it reads no result and changes none;
// where the kernel refuses (older than Linux 5.14, or a range already gone) it stops.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

namespace rlmem::detail {

class page_prefaulter {
 public:
  /// The arrays followed: 0 the trace entries, 1 the memo.
  static constexpr std::size_t regions = 2;
  /// How far ahead of the written end pages are faulted in: at most this much of each array
  /// is resident before it is used (2 MiB: the parser fills it in a few milliseconds).
  static constexpr std::size_t ahead_bytes = std::size_t{2} << 20;

  /// Starts the thread; without one (it could not be started) publish() does nothing.
  page_prefaulter() noexcept;
  ~page_prefaulter();
  page_prefaulter(const page_prefaulter&) = delete;
  page_prefaulter& operator=(const page_prefaulter&) = delete;

  /// Where array `region` lies and how much of it is written: `used` bytes from `base`, in an
  /// allocation of `capacity` bytes. Called by the parser every few hundred entries; cheap.
  void publish(std::size_t region, const void* base, std::size_t used, std::size_t capacity) noexcept {
    if (!running_) return;
    shared& at = published_[region];
    at.base.store(reinterpret_cast<std::uintptr_t>(base), std::memory_order_relaxed);
    at.used.store(used, std::memory_order_relaxed);
    at.capacity.store(capacity, std::memory_order_relaxed);
  }

 private:
  struct shared {
    std::atomic<std::uintptr_t> base{0};
    std::atomic<std::size_t> used{0};
    std::atomic<std::size_t> capacity{0};
  };
  void run() noexcept;

  shared published_[regions];
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool running_ = false;
  std::thread thread_;
};

}  // namespace rlmem::detail
