// SPDX-License-Identifier: MIT
// The live set replayed on its own thread, handed over chunk by chunk (see live_feed.hpp).

#include "live_feed.hpp"

#include <rlmem/base/invariants.hpp>
#include <rlmem/base/saturating.hpp>

#include <algorithm>
#include <cassert>

namespace rlmem::detail {

std::vector<live_block> live_blocks_of(const live_set& state) {
  std::vector<live_block> blocks;
  blocks.reserve(state.blocks().size());
  for (const auto& [address, held] : state.blocks()) blocks.push_back(held);
  return blocks;
}

result<std::unique_ptr<live_feed>, inspect_errc> live_feed::start(const live_set& state_at_start, std::span<const trace_event> events,
                                                                  std::int64_t reserved_at_start, std::span<std::int64_t> allocated,
                                                                  std::span<std::int64_t> reserved, std::vector<std::size_t> moments,
                                                                  bool on_thread, std::size_t chunk_events, std::size_t ring_chunks) {
  if (allocated.size() != events.size() || reserved.size() != events.size()) {
    return basic_error<inspect_errc>{inspect_errc::timeline_size_mismatch, 0,
                                     "live_feed: the allocated and reserved arrays must hold one figure per event"};
  }
  // The constructor is private: make_unique cannot call it.
  return std::unique_ptr<live_feed>(
      new live_feed(state_at_start, events, reserved_at_start, allocated, reserved, std::move(moments), on_thread, chunk_events, ring_chunks));
}

live_feed::live_feed(const live_set& start, std::span<const trace_event> events, std::int64_t reserved_at_start,
                     std::span<std::int64_t> allocated, std::span<std::int64_t> reserved, std::vector<std::size_t> moments,
                     bool on_thread, std::size_t chunk_events, std::size_t ring_chunks)
    : state_(start), events_(events), reserved_now_(reserved_at_start), allocated_(allocated), reserved_(reserved),
      moment_events_(std::move(moments)), on_thread_(on_thread), chunk_events_(std::max<std::size_t>(chunk_events, 1)),
      ring_chunks_(std::max<std::size_t>(ring_chunks, 1)), ring_(on_thread ? chunk_events_ * ring_chunks_ : 1) {
  std::sort(moment_events_.begin(), moment_events_.end());
  moment_events_.erase(std::unique(moment_events_.begin(), moment_events_.end()), moment_events_.end());
  moments_.resize(moment_events_.size());
  if (on_thread_) thread_ = std::thread([this] { run(); });
}

live_feed::~live_feed() {
  {
    std::lock_guard hold(lock_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void live_feed::step(std::size_t index, allocation_change& change) {
  const trace_event& event = events_[index];
  change = state_.apply(event);
  RLMEM_CHECK_INVARIANTS(state_);
  reserved_now_ = saturating_add(reserved_now_, reserved_delta(event));
  allocated_[index] = state_.allocated_bytes();
  reserved_[index] = reserved_now_;
  if (next_moment_ < moment_events_.size() && moment_events_[next_moment_] == index) {
    moments_[next_moment_] = {state_.free_spaces(), live_blocks_of(state_)};
    ++next_moment_;
  }
}

void live_feed::run() noexcept {
  try {
    for (std::size_t begin = 0; begin < events_.size(); begin += chunk_events_) {
      std::size_t end = std::min(events_.size(), begin + chunk_events_);
      {
        std::unique_lock hold(lock_);
        changed_.wait(hold, [&] { return stop_ || end - released_ <= ring_.size(); });
        if (stop_) break;
      }
      allocation_change* slots = ring_.data() + first_slot(begin);
      for (std::size_t i = begin; i < end; ++i) step(i, slots[i - begin]);
      {
        std::lock_guard hold(lock_);
        applied_ = end;
      }
      changed_.notify_all();
    }
  } catch (...) {
    failure_ = std::current_exception();
  }
  {
    std::lock_guard hold(lock_);
    done_ = true;
  }
  changed_.notify_all();
}

std::size_t live_feed::first_slot(std::size_t chunk_begin) const {
  return chunk_begin / chunk_events_ % ring_chunks_ * chunk_events_;
}

const allocation_change& live_feed::change(std::size_t index) {
  assert(index < events_.size());
  if (!on_thread_) {
    assert(index == applied_);
    step(index, ring_.front());
    ++applied_;
    return ring_.front();
  }
  if (index >= chunk_end_) enter_chunk(index);
  return chunk_slots_[index - chunk_begin_];
}

// The reader hands back the ring's slots a chunk at a time, as it enters the next chunk; the
// thread hands over whole chunks, so the one entered is there in full once `index` is.
void live_feed::enter_chunk(std::size_t index) {
  std::size_t begin = index - index % chunk_events_;
  std::unique_lock hold(lock_);
  released_ = begin;
  changed_.notify_all();
  changed_.wait(hold, [&] { return applied_ > index || done_; });
  // The thread ends short of an index below events.size() only when it failed (the reader, here,
  // has not given up).
  if (applied_ <= index) std::rethrow_exception(failure_);
  chunk_begin_ = begin;
  chunk_end_ = std::min(begin + chunk_events_, applied_);
  chunk_slots_ = ring_.data() + first_slot(begin);
}

const live_moment& live_feed::moment(std::size_t index) const {
  auto found = std::lower_bound(moment_events_.begin(), moment_events_.end(), index);
  assert(found != moment_events_.end() && *found == index);
  return moments_[static_cast<std::size_t>(found - moment_events_.begin())];
}

const live_set& live_feed::final_state() {
  if (!on_thread_) {
    for (; applied_ < events_.size(); ++applied_) step(applied_, ring_.front());
    return state_;
  }
  {
    std::lock_guard hold(lock_);
    released_ = events_.size();  // the reader is done with every change
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (failure_) std::rethrow_exception(failure_);
  return state_;
}

}  // namespace rlmem::detail
