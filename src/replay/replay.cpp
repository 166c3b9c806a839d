// SPDX-License-Identifier: MIT
// The replay driver: rebuilds the allocator's state at trace start, feeds the trace's
// allocations and frees to the model, and compares the model's segment events with the
// recorded ones.

#include <rlmem/allocator_rules.hpp>
#include <rlmem/caching_allocator.hpp>
#include <rlmem/format.hpp>
#include <rlmem/live_set.hpp>
#include <rlmem/replay.hpp>

#include <algorithm>
#include <memory>
#include <memory_resource>
#include <iterator>
#include <unordered_map>
#include <vector>

namespace rlmem {

namespace {

bool is_segment_release(trace_action action) {
  return action == trace_action::segment_free || action == trace_action::segment_unmap;
}

// Recorded segment_free events that no allocation asked for are a torch.cuda.empty_cache() call;
// those of a malloc's slow path come right before its segment_alloc or oom.
bool releases_by_empty_cache(std::span<const trace_event> events, std::size_t first) {
  std::size_t next = first;
  while (next < events.size() && is_segment_release(events[next].action)) ++next;
  return next == events.size() || (events[next].action != trace_action::segment_alloc &&
                                    events[next].action != trace_action::segment_map && events[next].action != trace_action::oom);
}

// "+376.0 MiB" for a segment allocated or mapped, "-20.0 MiB" for one freed or unmapped.
std::string describe_segment_event(bool alloc, std::uint64_t size) {
  return (alloc ? "+" : "-") + format_bytes(static_cast<std::int64_t>(size));
}

// The dump's segments of one device by address: the pool of each reserved range in log time
// (a scan of every segment per range made 30,000 segments a hang).
class dump_segment_pools {
 public:
  dump_segment_pools(const snapshot& snap, std::int64_t device) {
    for (const segment& seg : snap.segments) {
      if (seg.device == device) by_address_.push_back({seg.address, seg.total_size, snap.str(seg.segment_type) == "small"});
    }
    // Stable: of segments that start at one address, the last in the dump wins, as it did.
    std::stable_sort(by_address_.begin(), by_address_.end(), [](const span& a, const span& b) { return a.address < b.address; });
  }

  /// Whether the dump segment holding `address` is a small-pool one; `otherwise` when none holds it.
  bool small_pool_at(std::uint64_t address, bool otherwise) const {
    auto after = std::upper_bound(by_address_.begin(), by_address_.end(), address,
                                  [](std::uint64_t value, const span& s) { return value < s.address; });
    if (after == by_address_.begin()) return otherwise;
    const span& holder = *std::prev(after);
    return address - holder.address < holder.bytes ? holder.small : otherwise;
  }

 private:
  struct span {
    std::uint64_t address;
    std::uint64_t bytes;
    bool small;
  };
  std::vector<span> by_address_;
};

replay_fidelity compare_segment_events(std::span<const trace_event> events, const std::vector<model_segment_event>& made) {
  replay_fidelity fidelity;
  fidelity.applicable = true;
  std::size_t produced = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    bool alloc = events[i].action == trace_action::segment_alloc || events[i].action == trace_action::segment_map;
    if (!alloc && !is_segment_release(events[i].action)) continue;
    ++fidelity.segment_events_expected;
    if (!fidelity.first_mismatch.empty()) continue;
    if (produced < made.size() && made[produced].alloc == alloc && made[produced].size == events[i].size) {
      ++fidelity.segment_events_matched;
      ++produced;
      continue;
    }
    fidelity.first_mismatch = "event " + format_count(i) + ": the recording's segment " + describe_segment_event(alloc, events[i].size) +
                              ", the model's " + (produced < made.size() ? describe_segment_event(made[produced].alloc, made[produced].size) : "none");
  }
  if (fidelity.first_mismatch.empty() && produced < made.size()) {
    fidelity.first_mismatch = "after the recorded segment events the model made one more: " +
                              describe_segment_event(made[produced].alloc, made[produced].size);
  }
  return fidelity;
}

}  // namespace

replay_result replay(const snapshot& snap, const replay_options& options) {
  replay_result result;
  std::int64_t device = options.device >= 0 ? options.device : default_device(snap);
  const device_trace* trace = snap.trace_for(device);
  std::span<const trace_event> events = trace ? snap.events_of(*trace) : std::span<const trace_event>{};
  allocator_settings recorded = settings_of(snap);
  allocator_settings settings = options.settings.value_or(recorded);

  bool expandable_trace = std::any_of(snap.segments.begin(), snap.segments.end(), [&](const segment& seg) {
    return seg.device == device && seg.is_expandable;
  }) || std::any_of(events.begin(), events.end(), [](const trace_event& e) { return e.action == trace_action::segment_map; });
  if (expandable_trace && !settings.expandable_segments) {
    result.unsupported = "the trace was recorded with expandable segments; its reserved ranges cannot be replayed as cudaMalloc segments";
    return result;
  }
  if (events.empty()) {
    result.unsupported = "the snapshot has no trace for this device";
    return result;
  }

  // New segments take the addresses the recording got, while the model asks for the same sizes.
  std::vector<const trace_event*> recorded_segments;
  std::vector<std::uint64_t> recorded_maps;
  for (const trace_event& event : events) {
    if (event.action == trace_action::segment_alloc) recorded_segments.push_back(&event);
    if (event.action == trace_action::segment_map) recorded_maps.push_back(event.addr);
  }
  std::size_t next_recorded = 0;
  std::uint64_t synthetic_address = std::uint64_t{1} << 56;
  auto address_for = [&](std::uint64_t size) {
    if (next_recorded < recorded_segments.size() && recorded_segments[next_recorded]->size == size) {
      return recorded_segments[next_recorded++]->addr;
    }
    std::uint64_t address = synthetic_address;
    synthetic_address += size;
    return address;
  };
  std::unique_ptr<allocator_policy> policy =
      std::make_unique<caching_allocator_model>(settings, options.capacity_bytes, address_for, std::move(recorded_maps));
  allocator_policy& model = *policy;

  // The state at trace start, as the recording's settings made it: each reserved range with its
  // live blocks, gaps free.
  live_set start = live_set::at_trace_start(snap, device, events, recorded);
  std::pmr::unsynchronized_pool_resource live_nodes;
  std::pmr::unordered_map<std::uint64_t, model_block*> live(&live_nodes);
  live.reserve(1u << 12);
  auto held = start.blocks().begin();
  const dump_segment_pools pools(snap, device);
  for (const auto& [address, range] : start.mapped()) {
    if (range.bytes == 0 || address + range.bytes < address) {
      result.unsupported = "a segment's size runs past the end of the address space";
      return result;
    }
    std::vector<model_block> blocks;
    for (; held != start.blocks().end() && held->first < address + range.bytes; ++held) {
      if (held->first < address || held->first + held->second.bytes > address + range.bytes) {
        result.unsupported = "the trace contradicts the dump-time segments (a block outside its segment)";
        return result;
      }
      model_block block;
      block.ptr = held->first;
      block.size = held->second.bytes;
      block.allocated = !held->second.pending_free;
      blocks.push_back(block);
    }
    // The pool: as the dump names the segment, else by size.
    bool small = pools.small_pool_at(address, small_pool_segment(range.bytes));
    std::vector<model_block*> made = model.add_existing_segment(address, range.bytes, range.stream, blocks, small, expandable_trace);
    for (model_block* block : made) live[block->ptr] = block;
  }
  // Live blocks above every reserved range have no segment to hold them either (found by the
  // differential check of the live set against the model: they were dropped, and the model's
  // allocated bytes fell short of the live set's).
  if (held != start.blocks().end()) {
    result.unsupported = "the trace contradicts the dump-time segments (a block outside its segment)";
    return result;
  }
  model.close_existing_reservations();
  if (options.on_event) options.on_event(0, model, nullptr);

  result.peak_allocated_bytes = model.allocated_bytes();
  result.peak_reserved_bytes = model.reserved_bytes();
  for (std::size_t i = 0; i < events.size(); ++i) {
    const trace_event& event = events[i];
    const model_block* allocated = nullptr;
    switch (event.action) {
      case trace_action::alloc:
      case trace_action::oom: {
        // A recorded oom is a request the recording could not serve: ask the model too, on a
        // device no larger than what the recording had (its reserved bytes plus CUDA's free).
        if (event.action == trace_action::oom) model.set_device_bytes(static_cast<std::uint64_t>(model.reserved_bytes()) + event.addr);
        model_block* block = model.allocate(event.size, snap.streams[snap.tag_of(event).stream]);
        if (block == nullptr) {
          result.oom = replay_oom{i, round_request(event.size, settings), model.allocated_bytes(), model.reserved_bytes()};
          break;
        }
        if (event.action == trace_action::alloc) {
          live[event.addr] = block;
          allocated = block;
        } else {
          result.recording_ended_in_oom = true;
          model.free_completed(block);
        }
        break;
      }
      case trace_action::free_requested:
        if (auto found = live.find(event.addr); found != live.end()) model.free_requested(found->second);
        break;
      case trace_action::free_completed:
        if (auto found = live.find(event.addr); found != live.end()) {
          model.free_completed(found->second);
          live.erase(found);
        }
        break;
      case trace_action::segment_free:
      case trace_action::segment_unmap:
        if ((i == 0 || !is_segment_release(events[i - 1].action)) && releases_by_empty_cache(events, i)) model.empty_cache();
        break;
      default:
        break;
    }
    if (result.oom) break;
    ++result.events_replayed;
    if (options.on_event) options.on_event(result.events_replayed, model, allocated);
    result.peak_allocated_bytes = std::max(result.peak_allocated_bytes, model.allocated_bytes());
    result.peak_reserved_bytes = std::max(result.peak_reserved_bytes, model.reserved_bytes());
  }
  result.completed = !result.oom.has_value();
  if (settings.expandable_segments != expandable_trace && start.mapped().size() > 0) {
    result.notes.push_back("memory allocated before recording began stays in the " + std::string(expandable_trace ? "expandable" : "cudaMalloc") +
                           " segments it was recorded in; a run made with these settings from the start would place it differently");
  }
  result.segments = model.segments();
  result.num_alloc_retries = model.alloc_retries();
  if (settings == recorded) result.fidelity = compare_segment_events(events.first(result.events_replayed), model.segment_events());
  return result;
}

std::uint64_t min_capacity(const snapshot& snap, const replay_options& options) {
  constexpr std::uint64_t step = std::uint64_t{2} << 20;
  replay_options unlimited = options;
  unlimited.capacity_bytes = 0;
  replay_result free_run = replay(snap, unlimited);
  if (!free_run.completed) return 0;
  // The answer lies between the live data's peak and what the unlimited run reserved.
  std::uint64_t low = static_cast<std::uint64_t>(free_run.peak_allocated_bytes) / step;  // does not complete below
  std::uint64_t high = (static_cast<std::uint64_t>(free_run.peak_reserved_bytes) + step - 1) / step;  // completes
  while (high - low > 1) {
    std::uint64_t middle = low + (high - low) / 2;
    replay_options capped = options;
    capped.capacity_bytes = middle * step;
    if (replay(snap, capped).completed) {
      high = middle;
    } else {
      low = middle;
    }
  }
  return high * step;
}

std::vector<settings_comparison> compare_settings(const snapshot& snap, const replay_options& options) {
  allocator_settings recorded = options.settings.value_or(settings_of(snap));
  std::vector<settings_comparison> rows;
  auto add = [&](std::string label, const allocator_settings& settings) {
    replay_options run = options;
    run.settings = settings;
    settings_comparison row{std::move(label), settings, replay(snap, run), 0};
    if (row.result.unsupported.empty()) row.min_capacity_bytes = min_capacity(snap, run);
    rows.push_back(std::move(row));
  };
  add("recorded", recorded);
  allocator_settings expandable = recorded;
  expandable.expandable_segments = true;
  if (!recorded.expandable_segments) add("expandable_segments:True", expandable);
  for (std::uint64_t megabytes : {64, 128, 256, 512}) {
    allocator_settings split = recorded;
    split.expandable_segments = false;
    split.max_split_size = megabytes << 20;
    if (split != recorded) add("max_split_size_mb:" + std::to_string(megabytes), split);
  }
  return rows;
}

}  // namespace rlmem
