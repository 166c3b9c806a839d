// SPDX-License-Identifier: MIT
// The trace simulation: seeds the caching allocator model with the trace-start live set, picks
// the recorded addresses for new segments, and feeds the trace's events to the model.

#include <rlmem/model/allocator_rules.hpp>
#include <rlmem/base/format.hpp>
#include <rlmem/base/invariants.hpp>
#include <rlmem/model/caching_allocator.hpp>
#include <rlmem/device/fake_device.hpp>
#include <rlmem/model/live_set.hpp>
#include <rlmem/base/saturating.hpp>
#include <rlmem/model/trace_simulation.hpp>

#include <algorithm>
#include <iterator>
#include <memory_resource>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rlmem {

namespace {

bool is_segment_release(trace_action action) {
  return action == trace_action::segment_free || action == trace_action::segment_unmap;
}

// Whether a frame of the event names torch.cuda.empty_cache (Python) or emptyCache (C++).
bool framed_by_empty_cache(const snapshot& snap, const trace_event& event) {
  for (frame_id id : snap.stack(event.stack)) {
    std::string_view name = snap.str(snap.frames[id].name);
    if (name == "empty_cache" || name.find("emptyCache") != std::string_view::npos) return true;
  }
  return false;
}

// Whether the run of segment releases starting at `first` is a torch.cuda.empty_cache() call
// rather than a malloc's slow path (release_cached_blocks after alloc_block failed). Recorded
// frames decide where the trace has them. Without frames: releases no request follows are an
// empty_cache(), releases before a recorded oom the slow path of the failing request (the device
// was full), and releases before a request's segment_alloc or map an empty_cache() when the
// model runs without a limit, since alloc_block cannot fail then and the slow path never
// releases anything.
bool releases_by_empty_cache(const snapshot& snap, std::span<const trace_event> events, std::size_t first, bool limited) {
  if (!snap.stack(events[first].stack).empty()) return framed_by_empty_cache(snap, events[first]);
  std::size_t next = first;
  while (next < events.size() && is_segment_release(events[next].action)) ++next;
  if (next == events.size()) return true;
  if (events[next].action == trace_action::oom) return false;
  bool grows = events[next].action == trace_action::segment_alloc || events[next].action == trace_action::segment_map;
  return !grows || !limited;
}

// The dump's segments of one device by address: the pool of each reserved range in log time
// (a scan of every segment per range made 30,000 segments a hang).
class dump_segment_pools {
 public:
  dump_segment_pools(const snapshot& snap, std::int64_t device) {
    for (const segment& seg : snap.segments) {
      if (seg.device == device) by_address_.push_back({seg.address, seg.total_size, snap.str(seg.segment_type) == pool_name(true)});
    }
    // Stable: of segments that start at one address, the last in the dump wins, as it did.
    std::stable_sort(by_address_.begin(), by_address_.end(), [](const span& a, const span& b) { return a.address < b.address; });
  }

  /// Whether the reserved range [address, address + bytes) at trace start is of the small pool.
  /// A cudaMalloc segment's pool follows from its size (only the small pool's are kSmallBuffer);
  /// the dump names it only where the dump's segment is this range: a segment the trace freed may
  /// share its address with a later one of the other pool, as cudaMalloc hands freed addresses
  /// out again (20 MiB segments freed by an empty_cache() as recording began, 2 MiB small-pool
  /// segments at their addresses by the dump). An expandable reservation keeps its addresses and
  /// its pool, so the dump's run holding the address names it.
  bool small_pool_at(std::uint64_t address, std::uint64_t bytes, bool expandable) const {
    const bool by_size = small_pool_segment(bytes);
    auto after = std::upper_bound(by_address_.begin(), by_address_.end(), address,
                                  [](std::uint64_t value, const span& s) { return value < s.address; });
    if (after == by_address_.begin()) return by_size;
    const span& holder = *std::prev(after);
    if (address - holder.address >= holder.bytes) return by_size;
    if (expandable || (holder.address == address && holder.bytes == bytes)) return holder.small;
    return by_size;
  }

 private:
  struct span {
    std::uint64_t address;
    std::uint64_t bytes;
    bool small;
  };
  std::vector<span> by_address_;
};

}  // namespace

fake_device_options simulated_device_options() {
  fake_device_options gpu;
  gpu.total_bytes = std::uint64_t{1} << 40;
  gpu.granularity = std::uint64_t{2} << 20;
  gpu.address_base = std::uint64_t{1} << 56;
  gpu.address_space_bytes = std::uint64_t{1} << 56;
  return gpu;
}

std::optional<recorded_limit> infer_recorded_limit(const snapshot& snap, std::int64_t device) {
  const device_trace* trace = snap.trace_for(device);
  if (trace == nullptr) return std::nullopt;
  std::span<const trace_event> events = snap.events_of(*trace);
  allocator_settings recorded = settings_of(snap);
  recorded_limit limit;
  limit.garbage_collection = recorded.garbage_collection_threshold > 0;
  limit.high_bytes = UINT64_MAX;
  bool refused = false;
  auto refusal = [&](std::size_t event, std::uint64_t bound) {
    if (!refused) limit.first_evidence_event = event;
    refused = true;
    if (bound < limit.high_bytes) {
      limit.high_bytes = bound;
      limit.high_event = event;
    }
  };
  std::int64_t reserved = reserved_at_trace_start(snap, device, events);
  std::int64_t peak = reserved;
  std::uint64_t allowed = 0;  // reserved plus an allocation size that alloc_block let through
  // Reserved before the run of maps now open; none open when unset. (Two plain values rather than
  // an optional: GCC 12 reports the optional's payload as maybe uninitialised without LTO.)
  bool maps_open = false;
  std::uint64_t reserved_before_maps = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const trace_event& event = events[i];
    auto reserved_now = static_cast<std::uint64_t>(std::max<std::int64_t>(reserved, 0));
    bool run_starts = is_segment_release(event.action) && (i == 0 || !is_segment_release(events[i - 1].action));
    if (run_starts && !snap.stack(event.stack).empty() && !framed_by_empty_cache(snap, event)) {
      std::size_t next = i;
      while (next < events.size() && is_segment_release(events[next].action)) ++next;
      bool grows = next < events.size() && (events[next].action == trace_action::segment_alloc || events[next].action == trace_action::segment_map);
      if (limit.garbage_collection) {
        refusal(i, static_cast<std::uint64_t>(static_cast<double>(reserved_now) / recorded.garbage_collection_threshold));
      } else if (grows) {
        refusal(i, reserved_now + events[next].size);
      }
    }
    // event.addr of an oom is CUDA's free memory: room on the device means the limit refused.
    std::uint64_t needed = segment_size_for(round_request(event.size, recorded));
    if (event.action == trace_action::oom && event.addr >= needed) refusal(i, reserved_now + needed);
    // alloc_block checks reserved plus the whole allocation size against the limit, though an
    // expandable segment maps only what its free tail lacks: a map proves that much room.
    if (event.action == trace_action::segment_map && (i == 0 || events[i - 1].action != trace_action::segment_map)) {
      reserved_before_maps = reserved_now;
      maps_open = true;
    }
    if (event.action == trace_action::alloc && maps_open) {
      allowed = std::max(allowed, reserved_before_maps + needed);
      maps_open = false;
    }
    reserved = saturating_add(reserved, reserved_delta(event));
    peak = std::max(peak, reserved);
  }
  limit.low_bytes = std::max(static_cast<std::uint64_t>(std::max<std::int64_t>(peak, 0)), allowed);
  if (!refused || limit.low_bytes >= limit.high_bytes) return std::nullopt;
  return limit;
}

trace_simulation simulate_trace(const snapshot& snap, const trace_simulation_options& options, const simulation_observer& observe) {
  trace_simulation result;
  std::int64_t device = options.device >= 0 ? options.device : default_device(snap);
  result.device = device;
  const device_trace* trace = snap.trace_for(device);
  std::span<const trace_event> events = trace ? snap.events_of(*trace) : std::span<const trace_event>{};
  allocator_settings recorded = settings_of(snap);
  allocator_settings settings = options.settings.value_or(recorded);
  result.settings = settings;

  bool expandable_trace = std::any_of(snap.segments.begin(), snap.segments.end(), [&](const segment& seg) {
    return seg.device == device && seg.is_expandable;
  }) || std::any_of(events.begin(), events.end(), [](const trace_event& e) { return e.action == trace_action::segment_map; });
  result.expandable_trace = expandable_trace;
  const bool own_placement = places_existing_memory_itself(options.allocator);
  if (expandable_trace && !settings.expandable_segments && !own_placement) {
    result.unsupported = "the trace was recorded with expandable segments; its reserved ranges cannot be replayed as cudaMalloc segments";
    return result;
  }
  if (events.empty()) {
    result.unsupported = "the snapshot has no trace for this device";
    return result;
  }

  // New segments ask for the addresses the recording got, while the model asks for the same sizes.
  recorded_addresses recorded_places;
  for (const trace_event& event : events) {
    if (event.action == trace_action::segment_alloc) recorded_places.segments.push_back({true, event.addr, event.size});
    if (event.action == trace_action::segment_map) recorded_places.maps.push_back(event.addr);
  }
  // The policy that decides, torch's native allocator or the rlmem policy, over the fake device:
  // no host pages and no log, so the simulation's memory follows the trace, not the simulated GPU.
  fake_device simulated_gpu(simulated_device_options());
  std::unique_ptr<allocator_policy> chosen =
      make_allocator(options.allocator, {simulated_gpu, settings, options.capacity_bytes, std::move(recorded_places)});
  allocator_policy& model = *chosen;

  // The state at trace start, as the recording's settings made it: each reserved range with its
  // live blocks, gaps free.
  live_set start = live_set::at_trace_start(snap, device, events, recorded);
  RLMEM_CHECK_INVARIANTS(start);
  std::pmr::unsynchronized_pool_resource live_nodes;
  std::pmr::unordered_map<std::uint64_t, model_block*> live(&live_nodes);
  live.reserve(1u << 12);
  // A what-if from cudaMalloc segments to expandable ones: a run made with expandable segments
  // from the start would have packed the memory allocated before recording into its
  // reservations, not kept it in the recording's segments with their free gaps.
  // The rlmem policy places it its own way, always.
  const bool repack = own_placement || (settings.expandable_segments && !expandable_trace);
  auto held = start.blocks().begin();
  const dump_segment_pools pools(snap, device);
  std::uint64_t repacked_bytes = 0;
  std::uint64_t dropped_cache_bytes = 0;
  for (const auto& [address, range] : start.mapped()) {
    if (range.bytes == 0 || address + range.bytes < address) {
      result.unsupported = "a segment's size runs past the end of the address space";
      return result;
    }
    std::vector<model_block> blocks;
    std::uint64_t held_bytes = 0;
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
      held_bytes += block.size;
    }
    if (repack) {
      // Asked for again in address order, the order a bump allocator would have given them.
      for (const model_block& block : blocks) {
        model_block* placed = model.allocate(block.size, range.stream);
        if (placed == nullptr) {
          result.unsupported = "the memory allocated before recording does not fit under the limit with these settings";
          return result;
        }
        if (!block.allocated) model.free_requested(placed);
        live[block.ptr] = placed;
      }
      repacked_bytes += held_bytes;
      dropped_cache_bytes += range.bytes - held_bytes;
      continue;
    }
    // The pool: as the dump names this segment, else by size.
    bool small = pools.small_pool_at(address, range.bytes, expandable_trace);
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
  RLMEM_CHECK_INVARIANTS(model);
  if (!model.fault().empty()) {
    result.unsupported = "the simulated device cannot hold the memory at trace start as the recording placed it (" + model.fault() + ")";
    return result;
  }
  // The maps that placed it are the trace-start state, not events of the trace.
  const std::size_t setup_segment_events = model.segment_events().size();
  if (repack && !start.mapped().empty()) {
    std::string placed = own_placement ? "is placed by the " + std::string(allocator_name(options.allocator)) + " policy in address order"
                                       : "is packed into expandable segments in address order, as a run with them from the start would place it";
    result.notes.push_back("memory allocated before recording (" + format_bytes(static_cast<std::int64_t>(repacked_bytes)) + ") " +
                           placed + "; the recording's cached free space at trace start (" +
                           format_bytes(static_cast<std::int64_t>(dropped_cache_bytes)) + ") is not carried over");
  }
  if (observe) observe(simulation_step{0, model, simulated_gpu, nullptr, {}});
  bool limited = options.capacity_bytes > 0;

  result.peak_allocated_bytes = model.allocated_bytes();
  result.peak_reserved_bytes = model.reserved_bytes();
  auto next_empty_cache = options.empty_cache_before.begin();
  for (std::size_t i = 0; i < events.size(); ++i) {
    const trace_event& event = events[i];
    const model_block* allocated = nullptr;
    bool ended = false;
    std::size_t segment_events_before = model.segment_events().size();
    for (; next_empty_cache != options.empty_cache_before.end() && *next_empty_cache <= i; ++next_empty_cache) {
      if (*next_empty_cache == i) model.empty_cache();
    }
    switch (event.action) {
      case trace_action::alloc:
      case trace_action::oom: {
        // A recorded oom is a request the recording could not serve: ask the model too, on a
        // device no larger than what the recording had (what it holds plus CUDA's free).
        if (event.action == trace_action::oom) simulated_gpu.set_free_bytes(event.addr);
        model_block* block = model.allocate(event.size, snap.streams[snap.tag_of(event).stream]);
        if (block == nullptr) {
          bool recorded_oom = event.action == trace_action::oom;
          result.ooms.push_back({i, round_request(event.size, settings), model.allocated_bytes(), model.reserved_bytes(), recorded_oom});
          ended = !recorded_oom;
          break;
        }
        if (event.action == trace_action::alloc) {
          live[event.addr] = block;
          allocated = block;
        } else {
          result.served_a_recorded_oom = true;
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
        if ((i == 0 || !is_segment_release(events[i - 1].action)) && releases_by_empty_cache(snap, events, i, limited)) {
          model.empty_cache();
        }
        break;
      default:
        break;
    }
    RLMEM_CHECK_INVARIANTS(model);
    if (ended) break;
    ++result.events_applied;
    if (observe) {
      std::span<const model_segment_event> made(model.segment_events());
      observe(simulation_step{result.events_applied, model, simulated_gpu, allocated, made.subspan(segment_events_before)});
    }
    result.peak_allocated_bytes = std::max(result.peak_allocated_bytes, model.allocated_bytes());
    result.peak_reserved_bytes = std::max(result.peak_reserved_bytes, model.reserved_bytes());
  }
  if (!model.fault().empty()) {  // a device call the policy got wrong: nothing of the run can be trusted
    trace_simulation refused;
    refused.device = result.device;
    refused.settings = result.settings;
    refused.expandable_trace = result.expandable_trace;
    refused.unsupported = "the simulated device refused a call (" + model.fault() + ")";
    return refused;
  }
  result.segments = model.segments();
  result.alloc_retries = model.alloc_retries();
  result.segment_events.assign(model.segment_events().begin() + static_cast<std::ptrdiff_t>(setup_segment_events), model.segment_events().end());
  return result;
}

}  // namespace rlmem
