// SPDX-License-Identifier: MIT
#pragma once
// The forward replay of a live set on a thread of its own, a few chunks of events ahead of the
// pass that reads it. inspect's pass over the events splits in two: the live blocks' tree
// (lookups, inserts, erases) on one core, and the accounting that follows each change (sites,
// categories, samples) on another. The thread hands over, in event order, what the pass read of
// the state before: each event's change, the allocated and reserved bytes after it, and at the
// events asked for, the state's free spaces and live blocks.

#include <rlmem/inspect/inspect_errors.hpp>
#include <rlmem/model/live_set.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace rlmem::detail {

/// The live blocks of `state` in address order, pending frees included.
std::vector<live_block> live_blocks_of(const live_set& state);

/// What the state held just after one event.
struct live_moment {
  std::vector<free_space> spaces;   ///< as live_set::free_spaces()
  std::vector<live_block> blocks;   ///< as live_blocks_of()
};

/// Nothing it does throws but running out of memory (std::bad_alloc, also when the thread ran
/// out), as any allocation does: a wrong argument is refused by start(), and a wrong query is a
/// broken precondition, which its only caller (the forward pass) cannot break, since it asks in
/// order, up to the last event, for moments it asked to keep.
class live_feed {
 public:
  /// Starts the thread, which applies `events` to a copy of `state_at_start` and writes allocated[i] and
  /// reserved[i] after event i (reserved counted from `reserved_at_start` by reserved_delta).
  /// `moments`: event indices to keep a live_moment at. Holds at most `ring_chunks` chunks of
  /// `chunk_events` changes unread. With `on_thread` false (one usable core, where a thread
  /// only adds switches) there is no thread: change() applies each event as it is asked for.
  /// Fails with inspect_errc::timeline_size_mismatch, starting nothing, unless `allocated` and
  /// `reserved` are each events.size() long.
  /// IMPORTANT: `events`, `allocated` and `reserved`, and the snapshot `state_at_start` points to, must
  /// outlive the feed; allocated and reserved are read only through change() having passed the index.
  static result<std::unique_ptr<live_feed>, inspect_errc> start(const live_set& state_at_start, std::span<const trace_event> events,
                                                                std::int64_t reserved_at_start, std::span<std::int64_t> allocated,
                                                                std::span<std::int64_t> reserved, std::vector<std::size_t> moments,
                                                                bool on_thread = true, std::size_t chunk_events = 16384,
                                                                std::size_t ring_chunks = 4);
  /// Stops the thread where it is (also when the reader gives up early) and waits for it.
  ~live_feed();
  live_feed(const live_feed&) = delete;
  live_feed& operator=(const live_feed&) = delete;

  /// The change event `index` made, once the thread has applied it; allocated[index] and
  /// reserved[index] are written by then. The reference holds until the next call. Rethrows what
  /// the thread failed with (std::bad_alloc).
  /// Precondition: indices come 0, 1, 2, ..., each below events.size().
  const allocation_change& change(std::size_t index);
  /// The moment kept at `index`. Precondition: `index` is one of `moments`, and change(index) was called.
  const live_moment& moment(std::size_t index) const;
  /// The state after the last event; waits for the thread. Rethrows what it failed with.
  const live_set& final_state();

 private:
  // start() checks the arguments first.
  live_feed(const live_set& start, std::span<const trace_event> events, std::int64_t reserved_at_start,
            std::span<std::int64_t> allocated, std::span<std::int64_t> reserved, std::vector<std::size_t> moments,
            bool on_thread, std::size_t chunk_events, std::size_t ring_chunks);
  // Event `index` through the live set: its change, its figures, the moment kept there.
  void step(std::size_t index, allocation_change& change);
  void run() noexcept;
  void enter_chunk(std::size_t index);
  // Where the chunk that starts at event `chunk_begin` lies in the ring.
  std::size_t first_slot(std::size_t chunk_begin) const;

  live_set state_;
  std::span<const trace_event> events_;
  std::int64_t reserved_now_;    // reserved after the last event stepped
  std::span<std::int64_t> allocated_;
  std::span<std::int64_t> reserved_;
  std::vector<std::size_t> moment_events_;
  std::vector<live_moment> moments_;
  std::size_t next_moment_ = 0;  // the first of moment_events_ not yet reached
  bool on_thread_;
  std::size_t chunk_events_;
  std::size_t ring_chunks_;
  std::vector<allocation_change> ring_;

  std::mutex lock_;
  std::condition_variable changed_;
  std::size_t applied_ = 0;    // events applied and handed over (guarded by lock_ with a thread)
  std::size_t released_ = 0;   // events the reader is done with (guarded by lock_)
  bool stop_ = false;          // the reader gave up (guarded by lock_)
  bool done_ = false;          // the thread ended, applied_ is final (guarded by lock_)
  std::exception_ptr failure_; // what the thread failed with (set before done_)
  // The reader's chunk: events [chunk_begin_, chunk_end_), at chunk_slots_ in the ring.
  std::size_t chunk_begin_ = 0;
  std::size_t chunk_end_ = 0;
  const allocation_change* chunk_slots_ = nullptr;
  std::thread thread_;
};

}  // namespace rlmem::detail
