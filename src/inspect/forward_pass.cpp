// SPDX-License-Identifier: MIT
// inspect()'s one forward pass: the timeline, and categories and site totals following every
// change, read at the step ends, the OOMs and the end as it reaches them. The timeline's samples
// (the highest points of each of 1000 buckets, as timeline_points chooses them) and its peak are
// only known once their bucket or the trace is over: the categories are kept at the highest
// point so far, and what the peaks need of the live blocks is read by a second, partial replay
// up to the later peak (peaks.cpp).

#include "stages.hpp"

#include <rlmem/base/saturating.hpp>
#include <rlmem/base/usable_cores.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

namespace rlmem::detail {

namespace {

class forward_pass {
 public:
  forward_pass(const forward_pass_input& input, stack_index& stacks, inspection& result)
      : in_(input), stacks_(stacks), result_(result), line_(result.memory) {}

  forward_pass_result run();

 private:
  // The live set's state after event `index` (-1: at trace start).
  const live_moment& moment_after(std::int64_t index) {
    if (index >= 0) return feed_->moment(static_cast<std::size_t>(index));
    if (!at_trace_start_moment_) at_trace_start_moment_ = live_moment{in_.start.free_spaces(), live_blocks_of(in_.start)};
    return *at_trace_start_moment_;
  }
  void account(std::int64_t bytes, std::int32_t count, stack_id stack, bool before_trace) {
    std::int64_t& in_category = by_category_[static_cast<std::size_t>(stacks_.category(stack, before_trace))];
    in_category = saturating_add(in_category, bytes);
    out_.sites.change(stacks_.site(stack, before_trace), bytes, count, stack);
  }
  // What is read of the state after event `index` (-1: at trace start), in the order the kinds
  // were always read in: step end, OOM, end.
  void read_state(std::int64_t index) {
    if (index < 0) read_step_end(index);  // the series of step ends starts at the trace start
    while (next_step_end_ < in_.step_ends.size() && static_cast<std::int64_t>(in_.step_ends[next_step_end_]) == index) {
      read_step_end(index);
      ++next_step_end_;
    }
    if (next_oom_ < in_.plan.oom_events.size() && static_cast<std::int64_t>(in_.plan.oom_events[next_oom_]) == index) {
      if (in_.plan.reported[next_oom_]) {
        auto at = static_cast<std::size_t>(index);
        result_.ooms.push_back(report_oom(at, in_.events[at], line_, in_.recorded, in_.limit_given, in_.expandable,
                                          moment_after(index).spaces, out_.sites, stacks_));
        out_.reports_of_oom.push_back(next_oom_);
      }
      ++next_oom_;
    }
    if (index == last_event_) read_end(index);
  }
  void read_step_end(std::int64_t index) {
    out_.sites.end_step();
    // Leaks show the largest allocation live at the last step end: one walk of the blocks.
    if (out_.sites.step_ends() == in_.step_ends.size() + 1) out_.at_last_step_end = totals_by_site(moment_after(index).blocks, stacks_);
  }
  void read_end(std::int64_t index) {
    result_.categories_at_end = by_category_;
    const live_moment& end = moment_after(index);
    result_.end_by_site = usage_by_site(totals_by_site(end.blocks, stacks_), stacks_);
    std::uint64_t largest = 0;
    for (const auto& space : end.spaces) largest = std::max(largest, space.largest_free_bytes);
    result_.fragmentation.largest_free_block_at_end_bytes = largest;
  }
  // The next event read_state has something to read at.
  std::size_t next_read_after(std::size_t count) const {
    std::size_t next = count - 1;
    if (next_step_end_ < in_.step_ends.size()) next = std::min<std::size_t>(next, in_.step_ends[next_step_end_]);
    if (next_oom_ < in_.plan.oom_events.size()) next = std::min<std::size_t>(next, in_.plan.oom_events[next_oom_]);
    return next;
  }
  void add_sample(std::size_t index, const category_bytes& bytes) {
    result_.categories.events.push_back(index);
    result_.categories.bytes.push_back(bytes);
  }

  const forward_pass_input& in_;
  stack_index& stacks_;
  inspection& result_;
  timeline& line_;
  std::int64_t last_event_ = -1;
  std::unique_ptr<live_feed> feed_;
  std::optional<live_moment> at_trace_start_moment_;
  category_bytes by_category_{};
  std::size_t next_step_end_ = 0;
  std::size_t next_oom_ = 0;
  forward_pass_result out_;
};

forward_pass_result forward_pass::run() {
  std::span<const trace_event> events = in_.events;
  timeline& line = line_;
  line.device = result_.device;
  line.allocated_at_start = in_.start.allocated_bytes();
  line.blocks_live_at_start = in_.start.blocks().size();
  line.reserved_at_start = in_.reserved_at_start;
  last_event_ = static_cast<std::int64_t>(events.size()) - 1;

  // The live set goes through the events on another core, a few chunks ahead of this pass, and
  // keeps what read_state needs of it: the live blocks at the last step end, the free spaces
  // at the reported OOMs, both after the last event.
  std::vector<std::size_t> moments;
  if (!in_.step_ends.empty()) moments.push_back(in_.step_ends.back());
  for (std::size_t k = 0; k < in_.plan.oom_events.size(); ++k) {
    if (in_.plan.reported[k]) moments.push_back(in_.plan.oom_events[k]);
  }
  if (last_event_ >= 0) moments.push_back(static_cast<std::size_t>(last_event_));
  if (last_event_ >= 0) {
    // inspect() sized the timeline's arrays to the events, so start() cannot refuse them.
    feed_ = live_feed::start(in_.start, events, line.reserved_at_start, line.allocated, line.reserved, std::move(moments),
                             several_cores_usable())
                .value();
  }
  for (const auto& [address, held] : in_.start.blocks()) {
    if (!held.pending_free) account(signed_bytes(held.bytes), 1, held.stack, held.before_trace);
  }

  // Samples: as timeline_points(line, 1000) chooses them, every event of a short trace, else the
  // first highest allocated and the first highest reserved event of each bucket.
  constexpr std::size_t buckets = 1000;
  const std::size_t count = events.size();
  const bool sample_all = count <= 2 * buckets;
  std::size_t bucket = 0;
  std::size_t bucket_end = sample_all ? 0 : count / buckets;
  std::size_t most_allocated = 0;
  std::size_t most_reserved = 0;
  category_bytes at_most_allocated{};
  category_bytes at_most_reserved{};
  // The categories at the first highest allocated point so far (the peak, once the pass is over).
  std::int64_t peak_so_far = line.allocated_at_start;
  result_.categories_at_peak = by_category_;

  read_state(-1);
  std::size_t next_read = next_read_after(count);
  for (std::size_t i = 0; i < count; ++i) {
    const allocation_change& change = feed_->change(i);
    std::int64_t allocated = line.allocated[i];
    std::int64_t reserved = line.reserved[i];
    if (change.replaced_bytes != 0) account(change.replaced_bytes, -1, change.replaced_stack, change.replaced_before_trace);
    if (change.bytes != 0) account(change.bytes, change.count, change.stack, change.before_trace);
    if (allocated > peak_so_far) {
      peak_so_far = allocated;
      result_.categories_at_peak = by_category_;
    }
    if (sample_all) {
      add_sample(i, by_category_);
    } else {
      if (i == bucket * count / buckets) {
        most_allocated = most_reserved = i;
        at_most_allocated = at_most_reserved = by_category_;
      } else {
        if (allocated > line.allocated[most_allocated]) {
          most_allocated = i;
          at_most_allocated = by_category_;
        }
        if (reserved > line.reserved[most_reserved]) {
          most_reserved = i;
          at_most_reserved = by_category_;
        }
      }
      if (i + 1 == bucket_end) {
        if (most_allocated <= most_reserved) {
          add_sample(most_allocated, at_most_allocated);
          if (most_reserved != most_allocated) add_sample(most_reserved, at_most_reserved);
        } else {
          add_sample(most_reserved, at_most_reserved);
          add_sample(most_allocated, at_most_allocated);
        }
        ++bucket;
        bucket_end = (bucket + 1) * count / buckets;
      }
    }
    if (i == next_read) {
      read_state(static_cast<std::int64_t>(i));
      next_read = next_read_after(count);
    }
  }
  const live_set& after_all = feed_ ? feed_->final_state() : in_.start;
  line.frees_of_earlier_blocks = after_all.frees_of_earlier_blocks();
  line.inconsistencies = after_all.inconsistencies();
  return std::move(out_);
}

}  // namespace

forward_pass_result run_forward_pass(const forward_pass_input& input, stack_index& stacks, inspection& result) {
  return forward_pass(input, stacks, result).run();
}

}  // namespace rlmem::detail
