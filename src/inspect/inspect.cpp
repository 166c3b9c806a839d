// SPDX-License-Identifier: MIT
// inspect(): one backward walk to the state at trace start, one forward pass for the timeline
// and what was live at step ends, OOMs, samples and the end (the live set's half of it on
// another core: live_feed), and a partial replay up to the peaks to see what was live there.

#include "analysis.hpp"
#include "frames.hpp"
#include "live_feed.hpp"

#include <rlmem/model/allocator_rules.hpp>
#include <rlmem/base/format.hpp>
#include <rlmem/inspect/inspect.hpp>
#include <rlmem/model/live_set.hpp>
#include <rlmem/base/saturating.hpp>
#include <rlmem/model/trace_simulation.hpp>
#include <rlmem/base/usable_cores.hpp>

#include <algorithm>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>

namespace rlmem {

namespace {

// Events and segments of each device in the snapshot, by device ordinal.
struct device_data {
  std::uint64_t events = 0;
  std::uint64_t segments = 0;
};
std::map<std::int64_t, device_data> data_by_device(const snapshot& snap) {
  std::map<std::int64_t, device_data> data;
  for (const device_trace& trace : snap.device_traces) data[trace.device].events += trace.event_count;
  for (const segment& seg : snap.segments) ++data[seg.device].segments;
  return data;
}

// The most the limit can have been at an oom event: the request needed the reserved memory then
// plus a new segment, one byte more than that (or plus what CUDA had free, if less).
std::int64_t limit_high_at(const trace_event& oom, std::int64_t reserved, const allocator_settings& recorded) {
  std::uint64_t segment = segment_size_for(round_request(oom.size, recorded));
  return segment <= oom.addr ? saturating_add(reserved, signed_bytes(segment) - 1) : saturating_add(reserved, signed_bytes(oom.addr));
}

std::string human_count(std::uint64_t count, std::string_view noun) {
  return format_count(count) + " " + std::string(noun) + (count == 1 ? "" : "s");
}

// Sites and categories of stacks, resolved once per stack over one index of frames.
class stack_index {
 public:
  stack_index(const snapshot& snap, const std::vector<category_rule>& rules)
      : frames_(snap), categories_(frames_, rules), site_of_stack_(snap.stack_offsets.size(), unknown),
        category_of_stack_(snap.stack_offsets.size(), unknown) {}

  // Stack 0 means two things: made before recording began, or made where torch saw no Python
  // frames (the autograd engine's backward threads); they get separate sites.
  std::uint32_t site(stack_id stack, bool before_trace) {
    if (stack == 0) return before_trace ? special_site(before_site_, "<allocated before recording began>")
                                        : special_site(no_stack_site_, "<no Python stack: autograd backward or a C++ thread>");
    std::uint32_t& cached = site_of_stack_[stack];
    if (cached == unknown) {
      allocation_site resolved = detail::resolve_site(frames_, stack);
      auto [found, inserted] = site_by_label_.try_emplace(resolved.label, static_cast<std::uint32_t>(sites_.size()));
      if (inserted) sites_.push_back({std::move(resolved.label), "", 0});
      cached = found->second;
    }
    return cached;
  }
  const allocation_site& site_info(std::uint32_t id) const { return sites_[id]; }
  // The site a label names, among those resolved from stacks (not the two special ones).
  std::optional<std::uint32_t> site_named(const std::string& label) const {
    auto found = site_by_label_.find(label);
    if (found == site_by_label_.end()) return std::nullopt;
    return found->second;
  }
  std::size_t site_count() const { return sites_.size(); }

  // The site `id` as a report shows it: with `stack` as its representative and that stack's
  // nearest user frame.
  allocation_site describe(std::uint32_t id, stack_id stack) {
    allocation_site site = sites_[id];
    site.stack = stack;
    if (stack != 0) site.user_frame = detail::resolve_site(frames_, stack).user_frame;
    return site;
  }

  memory_category category(stack_id stack, bool before_trace) {
    if (stack == 0) return categories_.categorize(stack, before_trace);  // two categories: not cached by stack
    std::uint32_t& cached = category_of_stack_[stack];
    if (cached == unknown) cached = static_cast<std::uint32_t>(categories_.categorize(stack, before_trace));
    return static_cast<memory_category>(cached);
  }

  detail::frame_index& frames() { return frames_; }

 private:
  static constexpr std::uint32_t unknown = UINT32_MAX;
  std::uint32_t special_site(std::uint32_t& id, const char* label) {
    if (id == unknown) {
      id = static_cast<std::uint32_t>(sites_.size());
      sites_.push_back({label, "", 0});
    }
    return id;
  }
  detail::frame_index frames_;
  detail::category_matcher categories_;
  std::vector<std::uint32_t> site_of_stack_;
  std::vector<std::uint32_t> category_of_stack_;
  std::vector<allocation_site> sites_;
  std::unordered_map<std::string, std::uint32_t> site_by_label_;
  std::uint32_t before_site_ = unknown;
  std::uint32_t no_stack_site_ = unknown;
};

struct site_total {
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
  std::uint64_t largest = 0;
  stack_id largest_stack = 0;
};

// Live bytes by site id, from a walk of the live blocks in address order (for the peak, the
// last step end and the end only).
std::vector<site_total> totals_by_site(std::span<const live_block> blocks, stack_index& stacks) {
  std::vector<site_total> totals;
  for (const live_block& held : blocks) {
    if (held.pending_free) continue;
    std::uint32_t id = stacks.site(held.stack, held.before_trace);
    if (id >= totals.size()) totals.resize(id + 1);
    site_total& total = totals[id];
    total.bytes = saturating_add(total.bytes, held.bytes);
    ++total.count;
    if (held.bytes > total.largest) {
      total.largest = held.bytes;
      total.largest_stack = held.stack;
    }
  }
  return totals;
}

// Site totals as usages, largest first, each with the stack of its largest allocation.
std::vector<site_usage> usage_by_site(const std::vector<site_total>& totals, stack_index& stacks) {
  std::vector<site_usage> usages;
  for (std::uint32_t id = 0; id < totals.size(); ++id) {
    if (totals[id].count == 0) continue;
    usages.push_back({stacks.describe(id, totals[id].largest_stack), totals[id].bytes, totals[id].count});
  }
  std::sort(usages.begin(), usages.end(), [](const site_usage& a, const site_usage& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.site.label < b.site.label;
  });
  return usages;
}

// Live bytes of every site, kept up to date event by event (O(1) per change), and the sparse
// series of their figures at step ends: a site is written at a step end only when it changed.
class site_tracker {
 public:
  void change(std::uint32_t site, std::int64_t bytes, std::int32_t count, stack_id stack) {
    if (site >= live_.size()) {
      live_.resize(site + 1);
      series_.resize(site + 1);
    }
    live_site& live = live_[site];
    live.bytes = saturating_add(live.bytes, bytes);
    live.count += count;
    if (bytes > 0 && static_cast<std::uint64_t>(bytes) > live.largest_made) {
      live.largest_made = static_cast<std::uint64_t>(bytes);
      live.largest_stack = stack;
    }
    if (!live.touched) {
      live.touched = true;
      touched_.push_back(site);
    }
  }

  // Writes the figures of the sites changed since the last step end; O(those sites).
  void end_step() {
    for (std::uint32_t site : touched_) {
      live_site& live = live_[site];
      live.touched = false;
      detail::site_series& one = series_[site];
      auto count = static_cast<std::uint64_t>(std::max<std::int64_t>(live.count, 0));
      bool same = one.steps.empty() ? live.bytes == 0 && count == 0 : one.bytes.back() == live.bytes && one.counts.back() == count;
      if (same) continue;
      one.steps.push_back(step_ends_);
      one.bytes.push_back(live.bytes);
      one.counts.push_back(count);
    }
    touched_.clear();
    ++step_ends_;
  }

  // The site holding the most live bytes now (O(sites)), or false when none holds any.
  bool largest(std::uint32_t& site, std::uint64_t& bytes) const {
    bytes = 0;
    for (std::uint32_t id = 0; id < live_.size(); ++id) {
      if (live_[id].bytes > 0 && static_cast<std::uint64_t>(live_[id].bytes) > bytes) {
        bytes = static_cast<std::uint64_t>(live_[id].bytes);
        site = id;
      }
    }
    return bytes > 0;
  }
  stack_id representative_stack(std::uint32_t site) const { return site < live_.size() ? live_[site].largest_stack : 0; }

  std::vector<detail::site_series>& series() { return series_; }
  std::size_t step_ends() const { return step_ends_; }

 private:
  struct live_site {
    std::int64_t bytes = 0;
    std::int64_t count = 0;
    std::uint64_t largest_made = 0;  // the largest allocation made at the site
    stack_id largest_stack = 0;
    bool touched = false;            // changed since the last step end
  };
  std::vector<live_site> live_;
  std::vector<detail::site_series> series_;
  std::vector<std::uint32_t> touched_;
  std::uint32_t step_ends_ = 0;
};

// "device 1 (most data: 10,432 events, 12 segments); also in the file: device 0 (1 event, 0 segments)".
std::string device_choice_note(std::int64_t chosen, const std::map<std::int64_t, device_data>& data) {
  auto describe = [](const device_data& one) {
    return human_count(one.events, "event") + ", " + human_count(one.segments, "segment");
  };
  std::string others;
  for (const auto& [device, one] : data) {
    if (device == chosen) continue;
    others += (others.empty() ? "" : "; ") + ("device " + std::to_string(device) + " (" + describe(one) + ")");
  }
  auto found = data.find(chosen);
  return "reporting device " + std::to_string(chosen) + ", the one with the most data (" +
         (found == data.end() ? std::string("none") : describe(found->second)) + "); also in the file: " + others +
         ": choose with --device N";
}

}  // namespace

inspection inspect(const snapshot& snap, const inspect_options& options) {
  inspection result;
  result.device = options.device >= 0 ? options.device : default_device(snap);
  const std::map<std::int64_t, device_data> data = data_by_device(snap);
  for (const auto& [device, one] : data) {
    if (one.events > 0 || one.segments > 0) result.devices.push_back(device);
  }
  if (options.device < 0 && result.devices.size() > 1) result.notes.push_back(device_choice_note(result.device, data));

  const device_trace* trace = snap.trace_for(result.device);
  std::span<const trace_event> events = trace ? snap.events_of(*trace) : std::span<const trace_event>{};
  result.events = events.size();
  // The state at trace start (a walk of every event and of the dump) on a second core, while
  // this one does everything else that does not need the timeline: the counts, the stacks'
  // sites and categories, the step ends, the OOMs to report. Both only read the snapshot.
  const allocator_settings recorded = settings_of(snap);
  std::future<std::pair<live_set, std::int64_t>> at_start = std::async(std::launch::async, [&snap, device = result.device, events, &recorded] {
    return std::pair<live_set, std::int64_t>(live_set::at_trace_start(snap, device, events, recorded),
                                             reserved_at_trace_start(snap, device, events));
  });
  // The timeline's two arrays (16 bytes an event, fresh pages the kernel faults in and zeroes)
  // on a third thread, beside those two.
  std::future<void> timeline_storage = std::async(std::launch::async, [&line = result.memory, count = events.size()] {
    line.allocated.resize(count);
    line.reserved.resize(count);
  });
  std::vector<bool> stream_used(snap.streams.size(), false);
  for (const trace_event& event : events) {
    ++result.events_by_action[static_cast<std::size_t>(event.action)];
    stream_used[snap.tag_of(event).stream] = true;
    result.times_known = result.times_known || event.time_us != 0;
  }
  for (std::size_t i = 0; i < stream_used.size(); ++i) {
    if (stream_used[i]) result.streams.push_back(snap.streams[i]);
  }
  if (!events.empty()) {
    result.first_time_us = events.front().time_us;
    result.last_time_us = events.back().time_us;
  }
  bool expandable = false;
  for (const segment& seg : snap.segments) {
    if (seg.device != result.device) continue;
    ++result.segment_count;
    result.final_reserved_bytes = saturating_add(result.final_reserved_bytes, signed_bytes(seg.total_size));
    result.final_allocated_bytes = saturating_add(result.final_allocated_bytes, signed_bytes(seg.allocated_size));
    result.final_active_bytes = saturating_add(result.final_active_bytes, signed_bytes(seg.active_size));
    result.largest_segment_bytes = std::max(result.largest_segment_bytes, seg.total_size);
    expandable = expandable || seg.is_expandable;
    if (seg.is_expandable) ++result.expandable_segment_count;
    // allocated * 10 < total, without the product (sizes go up to 2^63).
    if (seg.allocated_size < seg.total_size / 10 + (seg.total_size % 10 != 0 ? 1 : 0)) {
      ++result.fragmentation.mostly_empty_segments;
      result.fragmentation.mostly_empty_segment_bytes = saturating_add(result.fragmentation.mostly_empty_segment_bytes, seg.total_size);
    }
    result.streams.push_back(seg.stream);
  }
  std::sort(result.streams.begin(), result.streams.end());
  result.streams.erase(std::unique(result.streams.begin(), result.streams.end()), result.streams.end());
  expandable = expandable || recorded.expandable_segments;

  const std::vector<category_rule>& rules = options.category_rules.empty() ? default_category_rules() : options.category_rules;
  stack_index stacks(snap, rules);
  detail::step_search steps = detail::find_step_ends(stacks.frames(), result.device, events, options.step_marker);
  result.step_method = steps.method;
  std::vector<std::uint64_t> step_ends = steps.ends;
  std::sort(step_ends.begin(), step_ends.end());
  // Full OOM forensics walk every live block and range: for the first and the last OOMs only.
  std::uint64_t oom_count = result.events_by_action[static_cast<std::size_t>(trace_action::oom)];
  std::uint64_t ooms_first = std::min<std::uint64_t>(oom_count, options.max_oom_reports / 2 + options.max_oom_reports % 2);
  std::uint64_t ooms_last = std::min<std::uint64_t>(oom_count - ooms_first, options.max_oom_reports / 2);
  detail::oom_simulation_plan plan;
  for (std::size_t i = 0, seen = 0; i < events.size(); ++i) {
    if (events[i].action != trace_action::oom) continue;
    plan.oom_events.push_back(i);
    plan.reported.push_back(seen < ooms_first || seen >= oom_count - ooms_last);
    ++seen;
  }

  // One forward pass: the timeline, and categories and site totals following every change,
  // read at the step ends, the OOMs and the end as it reaches them. The timeline's samples (the
  // highest points of each of 1000 buckets, as timeline_points chooses them) and its peak are
  // only known once their bucket or the trace is over: the categories are kept at the highest
  // point so far, and what the peaks need of the live blocks is read by a second, partial
  // replay up to the later peak.
  // Named variables, not a structured binding: lambdas below capture them, which clang 14
  // (the fuzz build) refuses for bindings.
  const std::pair<live_set, std::int64_t> started = at_start.get();
  const live_set& start = started.first;
  const std::int64_t reserved_at_start = started.second;
  timeline_storage.get();
  timeline& line = result.memory;
  line.device = result.device;
  line.allocated_at_start = start.allocated_bytes();
  line.blocks_live_at_start = start.blocks().size();
  line.reserved_at_start = reserved_at_start;
  fragmentation_report& frag = result.fragmentation;
  std::int64_t last_event = static_cast<std::int64_t>(events.size()) - 1;

  // The live set goes through the events on another core, a few chunks ahead of this pass, and
  // keeps what read_state needs of it: the live blocks at the last step end, the free spaces
  // at the reported OOMs, both after the last event.
  std::vector<std::size_t> moments;
  if (!step_ends.empty()) moments.push_back(step_ends.back());
  for (std::size_t k = 0; k < plan.oom_events.size(); ++k) {
    if (plan.reported[k]) moments.push_back(plan.oom_events[k]);
  }
  if (last_event >= 0) moments.push_back(static_cast<std::size_t>(last_event));
  std::optional<detail::live_feed> feed;
  if (last_event >= 0) {
    feed.emplace(start, events, line.reserved_at_start, line.allocated, line.reserved, std::move(moments), several_cores_usable());
  }
  std::optional<detail::live_moment> at_trace_start_moment;
  auto moment_after = [&](std::int64_t index) -> const detail::live_moment& {
    if (index >= 0) return feed->moment(static_cast<std::size_t>(index));
    if (!at_trace_start_moment) at_trace_start_moment = detail::live_moment{start.free_spaces(), detail::live_blocks_of(start)};
    return *at_trace_start_moment;
  };
  site_tracker sites;
  category_bytes by_category{};
  auto account = [&](std::int64_t bytes, std::int32_t count, stack_id stack, bool before_trace) {
    std::int64_t& in_category = by_category[static_cast<std::size_t>(stacks.category(stack, before_trace))];
    in_category = saturating_add(in_category, bytes);
    sites.change(stacks.site(stack, before_trace), bytes, count, stack);
  };
  for (const auto& [address, held] : start.blocks()) {
    if (!held.pending_free) account(signed_bytes(held.bytes), 1, held.stack, held.before_trace);
  }
  std::vector<site_total> at_last_step_end;
  std::size_t next_step_end = 0;
  std::size_t next_oom = 0;
  std::vector<std::size_t> reports_of_oom;  // index into plan.oom_events of each oom report
  // What is read of the state after event `index` (-1: at trace start), in the order the kinds
  // were always read in: step end, OOM, end.
  auto read_state = [&](std::int64_t index) {
    auto step_end = [&] {
      sites.end_step();
      // Leaks show the largest allocation live at the last step end: one walk of the blocks.
      if (sites.step_ends() == steps.ends.size() + 1) at_last_step_end = totals_by_site(moment_after(index).blocks, stacks);
    };
    if (index < 0) step_end();  // the series of step ends starts at the trace start
    while (next_step_end < step_ends.size() && static_cast<std::int64_t>(step_ends[next_step_end]) == index) {
      step_end();
      ++next_step_end;
    }
    if (next_oom < plan.oom_events.size() && static_cast<std::int64_t>(plan.oom_events[next_oom]) == index) {
      if (plan.reported[next_oom]) {
        const trace_event& event = events[static_cast<std::size_t>(index)];
        oom_report report;
        report.event = static_cast<std::uint64_t>(index);
        report.time_us = event.time_us;
        report.requested_bytes = round_request(event.size, recorded);
        report.segment_bytes = segment_size_for(report.requested_bytes);
        report.allocated_bytes = line.allocated[static_cast<std::size_t>(index)];
        report.reserved_bytes = line.reserved[static_cast<std::size_t>(index)];
        report.reserved_unallocated_bytes = saturating_add(report.reserved_bytes, -report.allocated_bytes);
        report.device_free_bytes = event.addr;
        report.limit_given = options.limit_bytes > 0;
        std::map<std::pair<bool, std::uint64_t>, std::size_t> pool_index;  // (small, stream) -> free_by_pool
        for (const auto& space : moment_after(index).spaces) {
          report.largest_free_block_bytes = std::max(report.largest_free_block_bytes, space.largest_free_bytes);
          bool small = !expandable && small_pool_segment(space.segment_bytes);
          auto [slot, added] = pool_index.try_emplace({small, space.stream}, report.free_by_pool.size());
          if (added) report.free_by_pool.push_back({small, space.stream, 0, 0});
          free_block_summary* pool = &report.free_by_pool[slot->second];
          pool->largest_free_bytes = std::max(pool->largest_free_bytes, space.largest_free_bytes);
          pool->free_bytes = saturating_add(pool->free_bytes, space.free_bytes);
        }
        std::uint32_t largest_site = 0;
        if (sites.largest(largest_site, report.largest_site_bytes)) {
          report.largest_site = stacks.site_info(largest_site);
          report.largest_site.stack = sites.representative_stack(largest_site);
        }
        if (event.stack != 0) report.request_site = stacks.describe(stacks.site(event.stack, false), event.stack);
        result.ooms.push_back(std::move(report));
        reports_of_oom.push_back(next_oom);
      }
      ++next_oom;
    }
    if (index == last_event) {
      result.categories_at_end = by_category;
      const detail::live_moment& end = moment_after(index);
      result.end_by_site = usage_by_site(totals_by_site(end.blocks, stacks), stacks);
      std::uint64_t largest = 0;
      for (const auto& space : end.spaces) largest = std::max(largest, space.largest_free_bytes);
      frag.largest_free_block_at_end_bytes = largest;
    }
  };

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
  auto add_sample = [&](std::size_t index, const category_bytes& bytes) {
    result.categories.events.push_back(index);
    result.categories.bytes.push_back(bytes);
  };
  // The categories at the first highest allocated point so far (the peak, once the pass is over).
  std::int64_t peak_so_far = line.allocated_at_start;
  result.categories_at_peak = by_category;

  read_state(-1);
  // The next event read_state has something to read at.
  auto next_read_after = [&] {
    std::size_t next = count - 1;
    if (next_step_end < step_ends.size()) next = std::min<std::size_t>(next, step_ends[next_step_end]);
    if (next_oom < plan.oom_events.size()) next = std::min<std::size_t>(next, plan.oom_events[next_oom]);
    return next;
  };
  std::size_t next_read = next_read_after();
  for (std::size_t i = 0; i < count; ++i) {
    const allocation_change& change = feed->change(i);
    std::int64_t allocated = line.allocated[i];
    std::int64_t reserved = line.reserved[i];
    if (change.replaced_bytes != 0) account(change.replaced_bytes, -1, change.replaced_stack, change.replaced_before_trace);
    if (change.bytes != 0) account(change.bytes, change.count, change.stack, change.before_trace);
    if (allocated > peak_so_far) {
      peak_so_far = allocated;
      result.categories_at_peak = by_category;
    }
    if (sample_all) {
      add_sample(i, by_category);
    } else {
      if (i == bucket * count / buckets) {
        most_allocated = most_reserved = i;
        at_most_allocated = at_most_reserved = by_category;
      } else {
        if (allocated > line.allocated[most_allocated]) {
          most_allocated = i;
          at_most_allocated = by_category;
        }
        if (reserved > line.reserved[most_reserved]) {
          most_reserved = i;
          at_most_reserved = by_category;
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
      next_read = next_read_after();
    }
  }
  const live_set& after_all = feed ? feed->final_state() : start;
  line.frees_of_earlier_blocks = after_all.frees_of_earlier_blocks();
  line.inconsistencies = after_all.inconsistencies();

  result.peak_allocated_bytes = line.allocated_at_start;
  result.peak_reserved_bytes = line.reserved_at_start;
  frag.max_unallocated_bytes = saturating_add(line.reserved_at_start, -line.allocated_at_start);
  for (std::size_t i = 0; i < line.allocated.size(); ++i) {
    if (line.allocated[i] > result.peak_allocated_bytes) {
      result.peak_allocated_bytes = line.allocated[i];
      result.peak_allocated_event = static_cast<std::int64_t>(i);
    }
    if (line.reserved[i] > result.peak_reserved_bytes) {
      result.peak_reserved_bytes = line.reserved[i];
      result.peak_reserved_event = static_cast<std::int64_t>(i);
    }
    if (std::int64_t unallocated = saturating_add(line.reserved[i], -line.allocated[i]); unallocated > frag.max_unallocated_bytes) {
      frag.max_unallocated_bytes = unallocated;
      frag.max_unallocated_event = static_cast<std::int64_t>(i);
    }
  }
  auto allocated_after = [&](std::int64_t event) { return event < 0 ? line.allocated_at_start : line.allocated[static_cast<std::size_t>(event)]; };
  auto reserved_after = [&](std::int64_t event) { return event < 0 ? line.reserved_at_start : line.reserved[static_cast<std::size_t>(event)]; };
  if (result.peak_allocated_event >= 0) result.peak_allocated_time_us = events[static_cast<std::size_t>(result.peak_allocated_event)].time_us;
  if (result.peak_reserved_event >= 0) result.peak_reserved_time_us = events[static_cast<std::size_t>(result.peak_reserved_event)].time_us;
  frag.unallocated_at_peak_reserved_bytes = saturating_add(result.peak_reserved_bytes, -allocated_after(result.peak_reserved_event));
  frag.unallocated_at_end_bytes = saturating_add(reserved_after(last_event), -allocated_after(last_event));

  // The live blocks at the peaks: replayed again from the trace start to the later peak. No
  // site is new there (every live block's site was named when it was counted), so reading them
  // now names the sites in the same order as reading them during the pass would.
  {
    live_set at_peak = start;
    std::int64_t until = std::max(result.peak_allocated_event, result.peak_reserved_event);
    for (std::int64_t position = -1;; ++position) {
      if (position >= 0) at_peak.apply(events[static_cast<std::size_t>(position)]);
      if (position == result.peak_allocated_event) {
        result.peak_by_site = usage_by_site(totals_by_site(detail::live_blocks_of(at_peak), stacks), stacks);
      }
      if (position == result.peak_reserved_event) {
        std::uint64_t largest = 0;
        for (const auto& space : at_peak.free_spaces()) largest = std::max(largest, space.largest_free_bytes);
        frag.largest_free_block_at_peak_reserved_bytes = largest;
      }
      if (position >= until) break;
    }
  }

  // The limit the OOMs prove, and the verdicts' simulations under it.
  oom_limit& limit = result.limit;
  limit.proven_low_bytes = result.peak_reserved_bytes;
  for (std::uint64_t event : plan.oom_events) {
    std::int64_t high = limit_high_at(events[event], reserved_after(static_cast<std::int64_t>(event)), recorded);
    if (high < limit.proven_high_bytes) {
      limit.proven_high_bytes = high;
      limit.proven_high_event = event;
    }
  }
  // The OOMs' own bounds, narrowed by every other refusal the recording shows (a cache flushed
  // before a segment grew): the one range inspect and replay both state.
  if (!plan.oom_events.empty()) {
    if (std::optional<recorded_limit> shown = infer_recorded_limit(snap, result.device)) {
      limit.proven_low_bytes = std::max(limit.proven_low_bytes, static_cast<std::int64_t>(std::min<std::uint64_t>(shown->low_bytes, INT64_MAX)));
      auto below = static_cast<std::int64_t>(std::min<std::uint64_t>(shown->high_bytes - 1, INT64_MAX));
      if (below < limit.proven_high_bytes && below >= limit.proven_low_bytes) {
        limit.proven_high_bytes = below;
        limit.proven_high_event = shown->high_event;
      }
    }
  }
  limit.given = options.limit_bytes > 0;
  limit.judged_bytes = limit.given ? options.limit_bytes : limit.proven_low_bytes;
  if (!plan.oom_events.empty()) {
    plan.step_ends = steps.ends;
    plan.limit_bytes = limit.judged_bytes;
    plan.search_high_bytes =
        limit.given || limit.proven_high_bytes == INT64_MAX || options.limit_search_passes == 0 ? 0 : limit.proven_high_bytes;
    plan.search_passes = options.limit_search_passes;
    plan.expandable_trace = expandable;
    std::vector<std::vector<oom_proof>> proofs = detail::prove_ooms(snap, result.device, events, plan);
    for (std::size_t report = 0; report < result.ooms.size(); ++report) {
      oom_report& judged = result.ooms[report];
      judged.proofs = std::move(proofs[reports_of_oom[report]]);
      std::size_t k = reports_of_oom[report];
      std::size_t window_end = k + 1 < plan.oom_events.size() ? plan.oom_events[k + 1] : events.size();
      judged.last_request_recorded = std::none_of(events.begin() + static_cast<std::ptrdiff_t>(judged.event) + 1,
                                                  events.begin() + static_cast<std::ptrdiff_t>(window_end),
                                                  [](const trace_event& e) { return e.action == trace_action::alloc; });
      // Every OOM states the one range the whole recording shows.
      judged.limit_low_bytes = limit.given ? options.limit_bytes : limit.proven_low_bytes;
      judged.limit_high_bytes = limit.given ? options.limit_bytes : limit.proven_high_bytes;
      detail::judge_oom(judged, limit);
      if (!judged.request_larger_than_any_gpu && judged.device_free_bytes >= judged.segment_bytes) {
        judged.explanation += "; CUDA had " + format_bytes(judged.device_free_bytes) +
                              " free, room for the request: a memory fraction (set_per_process_memory_fraction) capped this process, "
                              "not the card";
      }
    }
  }
  result.peak_site_count = result.peak_by_site.size();
  if (result.peak_by_site.size() > options.top) result.peak_by_site.resize(options.top);

  for (std::uint64_t end : steps.ends) {
    auto at = static_cast<std::int64_t>(end);
    result.steps.push_back({end, events[end].time_us, allocated_after(at), reserved_after(at)});
  }
  std::vector<detail::site_series>& series = sites.series();
  for (std::uint32_t id = 0; id < series.size(); ++id) {
    if (series[id].steps.empty()) continue;
    series[id].site = stacks.site_info(id);
    series[id].site.stack = id < at_last_step_end.size() && at_last_step_end[id].count > 0 ? at_last_step_end[id].largest_stack
                                                                                          : sites.representative_stack(id);
  }
  std::size_t leaks_found = 0;
  result.leaks = detail::detect_leaks(stacks.frames(), series, sites.step_ends(), options.max_leaks, leaks_found);
  result.summary_of_leaks = detail::summarize_leaks(result.steps, result.leaks);
  // The blocks each leak holds at dump time: the segments' live blocks whose site is one of its
  // lines. O(blocks + leak lines).
  if (!result.leaks.empty()) {
    std::unordered_map<std::uint32_t, std::size_t> leak_of_site;
    for (std::size_t index = 0; index < result.leaks.size(); ++index) {
      for (const leak_line& covered : result.leaks[index].lines) {
        if (std::optional<std::uint32_t> id = stacks.site_named(covered.site.label)) leak_of_site.emplace(*id, index);
      }
    }
    for (const segment& held : snap.segments) {
      if (held.device != result.device) continue;
      for (const block& one : std::span(snap.blocks).subspan(held.first_block, held.block_count)) {
        if (one.state != block_state::active_allocated || one.stack == 0) continue;
        auto owner = leak_of_site.find(stacks.site(one.stack, false));
        if (owner != leak_of_site.end()) result.leaks[owner->second].live_blocks.emplace_back(one.address, one.size);
      }
    }
    for (leak& found : result.leaks) {
      std::sort(found.live_blocks.begin(), found.live_blocks.end(),
                [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
      if (found.live_blocks.size() > max_leak_blocks) {
        found.live_blocks_left_out = found.live_blocks.size() - max_leak_blocks;
        found.live_blocks.resize(max_leak_blocks);
      }
    }
  }

  if (!steps.problem.empty()) result.notes.push_back(steps.problem);
  if (result.steps.size() < 3 && !events.empty()) {
    result.notes.push_back(result.steps.empty()
                               ? "no training steps found (no ProfilerStep or optimizer annotations, no optimizer frames): pass "
                                 "--step-marker REGEX naming a frame that allocates at the start of each step"
                               : "only " + human_count(result.steps.size(), "step") + " found: leaks need 3 or more to be told from one-time growth");
  }
  if (leaks_found > result.leaks.size()) {
    result.notes.push_back(human_count(leaks_found, "leak") + " found: the " + format_count(result.leaks.size()) +
                           " growing fastest are listed");
  }
  if (oom_count > result.ooms.size()) {
    result.notes.push_back(human_count(oom_count, "oom event") + ": forensics for the first " + format_count(ooms_first) +
                           " and the last " + format_count(ooms_last) + " only");
  }
  if (!events.empty() && !result.times_known) {
    result.notes.push_back("the trace records no times (no time_us: torch 2.1 or older): durations and times are not shown");
  }
  if (line.blocks_live_at_start > 0) {
    result.notes.push_back("the trace starts with " + human_count(line.blocks_live_at_start, "block") +
                           " already allocated: recording began after they were made, or the ring buffer "
                           "(max_entries) dropped the events that made them");
  }
  if (line.frees_of_earlier_blocks > 0) {
    result.notes.push_back(human_count(line.frees_of_earlier_blocks, "free") + " in the trace release blocks allocated before it began");
  }
  if (const plain_value* overflowed = snap.setting("trace_alloc_overflowed"); overflowed && overflowed->boolean) {
    result.notes.push_back("torch reports the trace ring buffer overflowed: the oldest events are missing");
  }
  if (line.inconsistencies > 0) {
    result.notes.push_back(human_count(line.inconsistencies, "event") + " contradict the dump-time segments (allocated figures may be off)");
  }
  if (!trace || events.empty()) {
    result.notes.push_back(snap.segments.empty() && snap.device_traces.empty()
                               ? "the snapshot is empty: no segments and no trace were recorded"
                               : "no trace events for this device: record with torch.cuda.memory._record_memory_history() to get a timeline");
  }
  return result;
}

bool inspect_checked(const snapshot& snap, const inspect_options& options, inspection& out, std::string& problem) {
  if (problem = check_inspect_options(options); !problem.empty()) return false;
  if (!options.step_marker.empty() && !detail::compile_step_marker(options.step_marker, problem)) {
    problem = "step marker '" + elide_middle(options.step_marker, 80) + "' is not a valid regular expression (" + problem + ")";
    return false;
  }
  out = inspect(snap, options);
  if (options.device >= 0 && std::find(out.devices.begin(), out.devices.end(), options.device) == out.devices.end()) {
    std::string known;
    for (std::int64_t device : out.devices) known += (known.empty() ? "" : ", ") + std::to_string(device);
    problem = "has no device " + std::to_string(options.device) + " (devices: " + (known.empty() ? "none" : known) + ")";
    return false;
  }
  auto exact = [](std::int64_t bytes) { return format_count(static_cast<std::uint64_t>(bytes)) + " B"; };
  if (options.limit_bytes > 0 && options.limit_bytes < out.limit.proven_low_bytes) {
    problem = "--limit " + exact(options.limit_bytes) + " is below the " + exact(out.limit.proven_low_bytes) +
              " the recording reserved, so its limit was at least that";
    return false;
  }
  if (options.limit_bytes > 0 && options.limit_bytes > out.limit.proven_high_bytes) {
    problem = "--limit " + exact(options.limit_bytes) + " is above the " + exact(out.limit.proven_high_bytes) +
              " the recording shows the limit was at most (at event " + format_count(out.limit.proven_high_event) +
              " it refused memory that would have fit under it)";
    return false;
  }
  return true;
}

}  // namespace rlmem
