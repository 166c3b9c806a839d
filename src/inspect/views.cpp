// SPDX-License-Identifier: MIT
// build_memory_views(): envelopes from inspect()'s timeline, then one replay of the trace for
// the largest allocations, the live memory at the peak and the free-block samples.

#include "analysis.hpp"
#include "frames.hpp"

#include <rlmem/model/allocator_rules.hpp>
#include <rlmem/model/allocator_settings.hpp>
#include <rlmem/model/live_set.hpp>
#include <rlmem/base/saturating.hpp>
#include <rlmem/inspect/views.hpp>

#include <algorithm>
#include <map>
#include <queue>
#include <unordered_map>

namespace rlmem {

using rlmem::saturating_add;
using rlmem::signed_bytes;

namespace {

// Sites of stacks, resolved once per stack; stack 0 is two sites, as inspect() names them.
class site_table {
 public:
  site_table(const snapshot& snap, const std::vector<category_rule>& rules)
      : frames_(snap), categories_(frames_, rules.empty() ? default_category_rules() : rules) {}

  std::uint32_t site(stack_id stack, bool before_trace) {
    std::uint64_t key = stack == 0 ? (before_trace ? 0 : 1) : std::uint64_t{stack} + 1;
    auto [found, added] = index_.try_emplace(key, static_cast<std::uint32_t>(sites_.size()));
    if (added) {
      if (stack != 0) {
        sites_.push_back(detail::resolve_site(frames_, stack));
      } else {
        sites_.push_back({before_trace ? "<allocated before recording began>"
                                       : "<no Python stack: autograd backward or a C++ thread>",
                          "", 0});
      }
    }
    return found->second;
  }

  memory_category category(stack_id stack, bool before_trace) {
    if (stack == 0) return categories_.categorize(stack, before_trace);  // two categories: not cached by stack
    auto [found, added] = category_of_stack_.try_emplace(stack, memory_category::other);
    if (added) found->second = categories_.categorize(stack, before_trace);
    return found->second;
  }

  std::vector<allocation_site> take() { return std::move(sites_); }

  detail::frame_index& frames() noexcept { return frames_; }

 private:
  detail::frame_index frames_;
  detail::category_matcher categories_;
  std::unordered_map<std::uint64_t, std::uint32_t> index_;
  std::unordered_map<stack_id, memory_category> category_of_stack_;
  std::vector<allocation_site> sites_;
};

std::vector<timeline_column> envelope_columns(const timeline& line, std::span<const trace_event> events, std::size_t wanted) {
  std::vector<timeline_column> columns;
  std::size_t count = line.allocated.size();
  if (count == 0 || wanted == 0) return columns;
  std::size_t slices = std::min(wanted, count);
  columns.reserve(slices);
  for (std::size_t c = 0; c < slices; ++c) {
    // Slice c is [c * count / slices, (c + 1) * count / slices): every event in one column.
    std::size_t first = c * count / slices;
    std::size_t last = (c + 1) * count / slices - 1;
    timeline_column column;
    column.first_event = first;
    column.last_event = last;
    column.first_time_us = events[first].time_us;
    column.allocated_min = column.allocated_max = line.allocated[first];
    column.reserved_min = column.reserved_max = line.reserved[first];
    column.unallocated_max = saturating_add(line.reserved[first], -line.allocated[first]);
    for (std::size_t i = first + 1; i <= last; ++i) {
      column.allocated_min = std::min(column.allocated_min, line.allocated[i]);
      column.allocated_max = std::max(column.allocated_max, line.allocated[i]);
      column.reserved_min = std::min(column.reserved_min, line.reserved[i]);
      column.reserved_max = std::max(column.reserved_max, line.reserved[i]);
      column.unallocated_max = std::max(column.unallocated_max, saturating_add(line.reserved[i], -line.allocated[i]));
    }
    columns.push_back(column);
  }
  return columns;
}

// A finished or still-live allocation, before the cut to the largest.
struct band_candidate {
  allocation_band band;
  stack_id stack = 0;
  bool before_trace = false;
};

// Orders candidates so the heap's top is the one to drop first: smallest, then latest.
struct drop_first {
  bool operator()(const band_candidate& a, const band_candidate& b) const {
    return a.band.bytes != b.band.bytes ? a.band.bytes > b.band.bytes : a.band.alloc_event < b.band.alloc_event;
  }
};

class largest_allocations {
 public:
  explicit largest_allocations(std::size_t keep) : keep_(keep) {}
  void offer(const band_candidate& candidate) {
    ++offered_;
    if (keep_ == 0) return;
    if (kept_.size() < keep_) {
      kept_.push(candidate);
    } else if (drop_first{}(candidate, kept_.top())) {
      kept_.pop();
      kept_.push(candidate);
    }
  }
  std::vector<band_candidate> take() {
    std::vector<band_candidate> out;
    out.reserve(kept_.size());
    for (; !kept_.empty(); kept_.pop()) out.push_back(kept_.top());
    return out;
  }
  std::uint64_t offered() const noexcept { return offered_; }

 private:
  std::size_t keep_;
  std::uint64_t offered_ = 0;
  std::priority_queue<band_candidate, std::vector<band_candidate>, drop_first> kept_;
};

// First-fit offsets: each band, in order of allocation, goes at the lowest offset where it
// overlaps no band still live. O(bands x live bands).
void place_bands(std::vector<allocation_band>& bands, std::uint64_t events) {
  auto end_of = [events](const allocation_band& band) {
    return band.free_event < 0 ? static_cast<std::int64_t>(events) : band.free_event;
  };
  std::vector<const allocation_band*> live;  // by offset
  for (allocation_band& band : bands) {
    std::erase_if(live, [&](const allocation_band* other) { return end_of(*other) <= band.alloc_event; });
    std::uint64_t offset = 0;
    auto slot = live.begin();
    for (; slot != live.end(); ++slot) {
      if ((*slot)->offset_bytes >= offset && (*slot)->offset_bytes - offset >= band.bytes) break;
      offset = std::max(offset, saturating_add((*slot)->offset_bytes, (*slot)->bytes));
    }
    band.offset_bytes = offset;
    live.insert(slot, &band);
  }
}

// The live blocks after one event, grouped into a tree by their stacks, outermost frame first.
class stack_tree_builder {
 public:
  stack_tree_builder(const snapshot& snap, site_table& sites) : snap_(snap), sites_(sites) {
    nodes_.push_back({0, 0, stack_node_kind::root, 0, 0, 0, memory_category::other});
    category_bytes_.emplace_back();
  }

  void add(const live_block& held) {
    if (held.pending_free) return;
    memory_category category = sites_.category(held.stack, held.before_trace);
    std::uint32_t node = 0;
    account(node, held.bytes, category);
    if (held.stack == 0) {
      account(child(node, held.before_trace ? stack_node_kind::allocated_before_trace : stack_node_kind::no_python_stack, 0),
              held.bytes, category);
      return;
    }
    std::span<const frame_id> frames = snap_.stack(held.stack);
    detail::frame_index& index = sites_.frames();
    const detail::site_frames found = detail::locate_site_frames(index, frames);
    if (found.user == detail::site_frames::none) {  // no frame of the user's code: the stack as recorded
      for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame) {
        node = child(node, stack_node_kind::frame, *frame);
        account(node, held.bytes, category);
      }
      return;
    }
    // The user's own frames, outermost first, down to the nearest one (resolve_site()'s "your
    // code"), past the torch and library wrappers between them (nn.Module's _call_impl, ...)...
    for (std::size_t i = frames.size(); i-- > found.user;) {
      if (i != found.user && !is_user_code(index, frames[i])) continue;
      node = child(node, stack_node_kind::frame, frames[i]);
      account(node, held.bytes, category);
    }
    if (found.user == 0) return;
    // ...then one node for every frame inside it, named after the frame the site is.
    node = child(node, stack_node_kind::inside_user_code, frames[inside_name(index, frames, found)]);
    account(node, held.bytes, category);
  }

  // The tree cut to the `keep` largest nodes. A node never holds more than its parent, so the
  // largest nodes (ties to the earlier, a parent before its children) include their parents.
  std::vector<stack_node> take(std::size_t keep, std::uint64_t& nodes_before_cut) {
    nodes_before_cut = nodes_.size();
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const category_bytes& bytes = category_bytes_[i];
      nodes_[i].category = static_cast<memory_category>(std::max_element(bytes.begin(), bytes.end()) - bytes.begin());
    }
    if (nodes_.size() <= keep) return std::move(nodes_);
    std::vector<std::uint32_t> order(nodes_.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return nodes_[a].bytes != nodes_[b].bytes ? nodes_[a].bytes > nodes_[b].bytes : a < b;
    });
    order.resize(keep);
    std::sort(order.begin(), order.end());
    std::vector<std::uint32_t> new_index(nodes_.size(), UINT32_MAX);
    std::vector<stack_node> kept;
    kept.reserve(keep);
    for (std::uint32_t old : order) {
      new_index[old] = static_cast<std::uint32_t>(kept.size());
      stack_node node = nodes_[old];
      node.parent = new_index[node.parent];
      kept.push_back(node);
    }
    return kept;
  }

 private:
  // The frame of the user's code that locate_site_frames() would stop at.
  static bool is_user_code(detail::frame_index& index, frame_id frame) {
    return index.is_python(frame) && !index.is_library(frame) && !index.filename(frame).starts_with("<");
  }

  // The frame inside the user's code that names what allocated: the site's frame when it is
  // inside, else the innermost Python frame, else the innermost.
  static std::size_t inside_name(detail::frame_index& index, std::span<const frame_id> frames, const detail::site_frames& found) {
    if (found.site < found.user) return found.site;
    for (std::size_t i = 0; i < found.user; ++i) {
      if (index.is_python(frames[i])) return i;
    }
    return 0;
  }

  std::uint32_t child(std::uint32_t parent, stack_node_kind kind, frame_id frame) {
    const bool has_frame = kind == stack_node_kind::frame || kind == stack_node_kind::inside_user_code;
    std::uint64_t key = (std::uint64_t{parent} << 32) | (has_frame ? frame : UINT32_MAX - static_cast<std::uint32_t>(kind));
    auto& children = kind == stack_node_kind::inside_user_code ? inside_children_ : children_;
    auto [found, added] = children.try_emplace(key, static_cast<std::uint32_t>(nodes_.size()));
    if (added) {
      nodes_.push_back({parent, nodes_[parent].depth + 1, kind, frame, 0, 0, memory_category::other});
      category_bytes_.emplace_back();
    }
    return found->second;
  }
  void account(std::uint32_t node, std::uint64_t bytes, memory_category category) {
    nodes_[node].bytes = saturating_add(nodes_[node].bytes, bytes);
    ++nodes_[node].count;
    std::int64_t& in_category = category_bytes_[node][static_cast<std::size_t>(category)];
    in_category = saturating_add(in_category, signed_bytes(bytes));
  }

  const snapshot& snap_;
  site_table& sites_;
  std::vector<stack_node> nodes_;
  std::vector<category_bytes> category_bytes_;            // by node
  std::unordered_map<std::uint64_t, std::uint32_t> children_;  // (parent, frame or kind) -> node
  std::unordered_map<std::uint64_t, std::uint32_t> inside_children_;  // (parent, frame) -> inside_user_code node
};

free_block_sample measure_free_blocks(const live_set& state, std::int64_t event) {
  free_block_sample sample;
  sample.event = event;
  for (const free_space& space : state.free_spaces()) {
    sample.largest_free_bytes = std::max(sample.largest_free_bytes, space.largest_free_bytes);
    sample.free_bytes = saturating_add(sample.free_bytes, space.free_bytes);
  }
  return sample;
}

// A segment while its map is made: its pieces keep their stacks until the cuts, so only the
// pieces drawn name sites.
struct segment_draft {
  segment_layout layout;
  std::vector<segment_piece> pieces;
  std::vector<std::pair<stack_id, bool>> stacks;  // by piece: (stack, before_trace) of blocks
};

// The largest `keep` of `items` (ties to the first), back in their order; `bytes_of` sizes one.
template <typename T, typename Size>
std::vector<std::size_t> largest_in_order(const std::vector<T>& items, std::size_t keep, Size bytes_of) {
  std::vector<std::size_t> order(items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (order.size() > keep) {
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), [&](std::size_t a, std::size_t b) {
      return bytes_of(items[a]) != bytes_of(items[b]) ? bytes_of(items[a]) > bytes_of(items[b]) : a < b;
    });
    order.resize(keep);
    std::sort(order.begin(), order.end());
  }
  return order;
}

segment_draft draft_segment(const live_set& state, std::uint64_t start, const live_set::mapped_range& range, bool expandable) {
  segment_draft draft;
  segment_layout& seg = draft.layout;
  seg.address = start;
  seg.bytes = range.bytes;
  seg.stream = range.stream;
  seg.small_pool = !expandable && small_pool_segment(range.bytes);
  std::uint64_t end = saturating_add(start, range.bytes);
  auto gap = [&](std::uint64_t from, std::uint64_t to) {
    if (to <= from) return;
    draft.pieces.push_back({from - start, to - from, true, false, 0, memory_category::other});
    draft.stacks.emplace_back(0, false);
    ++seg.gaps;
    seg.free_bytes = saturating_add(seg.free_bytes, to - from);
    seg.largest_free_bytes = std::max(seg.largest_free_bytes, to - from);
  };
  // Gaps as live_set::free_spaces() measures them: between live blocks, pending frees live.
  std::uint64_t cursor = start;
  for (auto held = state.blocks().lower_bound(start); held != state.blocks().end() && held->first < end; ++held) {
    gap(cursor, held->first);
    std::uint64_t bytes = std::min(held->second.bytes, end - held->first);
    draft.pieces.push_back({held->first - start, bytes, false, held->second.pending_free, 0, memory_category::other});
    draft.stacks.emplace_back(held->second.stack, held->second.before_trace);
    ++seg.blocks;
    seg.block_bytes = saturating_add(seg.block_bytes, bytes);
    cursor = std::max(cursor, saturating_add(held->first, held->second.bytes));
  }
  gap(cursor, end);
  return draft;
}

segment_map take_segment_map(const live_set& state, std::int64_t event, bool expandable, site_table& sites,
                             const view_options& options) {
  segment_map map;
  map.event = event;
  std::vector<segment_draft> drafts;
  drafts.reserve(state.mapped().size());
  std::map<std::pair<bool, std::uint64_t>, pool_layout> pools;  // (small, stream)
  for (const auto& [start, range] : state.mapped()) {
    drafts.push_back(draft_segment(state, start, range, expandable));
    const segment_layout& seg = drafts.back().layout;
    pool_layout& pool = pools[{seg.small_pool, seg.stream}];
    pool.small_pool = seg.small_pool;
    pool.stream = seg.stream;
    ++pool.segments;
    pool.bytes = saturating_add(pool.bytes, seg.bytes);
    pool.block_bytes = saturating_add(pool.block_bytes, seg.block_bytes);
    pool.free_bytes = saturating_add(pool.free_bytes, seg.free_bytes);
    pool.largest_free_bytes = std::max(pool.largest_free_bytes, seg.largest_free_bytes);
  }
  for (auto& [key, pool] : pools) map.pools.push_back(pool);

  std::vector<std::size_t> kept = largest_in_order(drafts, options.max_map_segments, [](const segment_draft& d) { return d.layout.bytes; });
  std::vector<bool> drawn(drafts.size(), false);
  for (std::size_t k : kept) drawn[k] = true;
  for (std::size_t d = 0; d < drafts.size(); ++d) {
    if (drawn[d]) continue;
    const segment_layout& seg = drafts[d].layout;
    ++map.segments_left_out;
    map.bytes_left_out = saturating_add(map.bytes_left_out, seg.bytes);
    map.free_bytes_left_out = saturating_add(map.free_bytes_left_out, seg.free_bytes);
    map.largest_free_left_out = std::max(map.largest_free_left_out, seg.largest_free_bytes);
  }
  map.segments.reserve(kept.size());
  for (std::size_t k : kept) {
    segment_draft& draft = drafts[k];
    segment_layout seg = std::move(draft.layout);
    std::vector<std::size_t> pieces = largest_in_order(draft.pieces, options.max_segment_pieces, [](const segment_piece& p) { return p.bytes; });
    seg.pieces_left_out = draft.pieces.size() - pieces.size();
    for (const segment_piece& piece : draft.pieces) seg.bytes_left_out = saturating_add(seg.bytes_left_out, piece.bytes);
    for (std::size_t p : pieces) {
      segment_piece piece = draft.pieces[p];
      if (!piece.free) {
        auto [stack, before_trace] = draft.stacks[p];
        piece.site = sites.site(stack, before_trace);
        piece.category = sites.category(stack, before_trace);
      }
      seg.bytes_left_out -= piece.bytes;
      seg.pieces.push_back(piece);
    }
    map.segments.push_back(std::move(seg));
  }
  return map;
}

}  // namespace

memory_views build_memory_views(const snapshot& snap, const inspection& result, const std::vector<category_rule>& rules,
                                const view_options& options) {
  memory_views views;
  const device_trace* trace = snap.trace_for(result.device);
  std::span<const trace_event> events = trace ? snap.events_of(*trace) : std::span<const trace_event>{};
  views.events = events.size();
  views.columns = envelope_columns(result.memory, events, options.columns);
  site_table sites(snap, rules);

  // Moments to measure free blocks at: the end of each of free_block_samples slices, the state
  // before the first event and the peak of reserved.
  std::vector<std::int64_t> sample_events{-1, result.peak_reserved_event};
  std::size_t slices = std::min(options.free_block_samples, events.size());
  for (std::size_t s = 0; s < slices; ++s) sample_events.push_back(static_cast<std::int64_t>((s + 1) * events.size() / slices) - 1);
  std::sort(sample_events.begin(), sample_events.end());
  sample_events.erase(std::unique(sample_events.begin(), sample_events.end()), sample_events.end());
  auto next_sample = sample_events.begin();

  // Segment maps: after the peak of reserved (slot -1) and after each of the first OOMs (slot k).
  std::vector<std::pair<std::int64_t, std::int64_t>> map_moments{{result.peak_reserved_event, -1}};
  for (std::size_t k = 0; k < std::min(result.ooms.size(), options.max_oom_maps); ++k) {
    map_moments.emplace_back(static_cast<std::int64_t>(result.ooms[k].event), static_cast<std::int64_t>(k));
  }
  std::sort(map_moments.begin(), map_moments.end());
  auto next_map = map_moments.begin();
  views.oom_segments.resize(map_moments.size() - 1);
  const allocator_settings recorded = settings_of(snap);
  bool expandable = result.expandable_segment_count > 0 || recorded.expandable_segments;

  live_set state = live_set::at_trace_start(snap, result.device, events, recorded);
  stack_tree_builder tree(snap, sites);
  views.tree_event = result.peak_allocated_event;
  auto take_tree = [&] {
    for (const auto& [address, held] : state.blocks()) tree.add(held);
  };
  if (views.tree_event < 0) take_tree();
  if (next_sample != sample_events.end() && *next_sample < 0) views.free_blocks.push_back(measure_free_blocks(state, *next_sample++));
  auto take_maps = [&](std::int64_t index) {
    for (; next_map != map_moments.end() && next_map->first == index; ++next_map) {
      segment_map map = take_segment_map(state, index, expandable, sites, options);
      (next_map->second < 0 ? views.peak_segments : views.oom_segments[static_cast<std::size_t>(next_map->second)]) = std::move(map);
    }
  };
  take_maps(-1);

  largest_allocations largest(options.bands);
  std::unordered_map<std::uint64_t, std::int64_t> alloc_event_at;  // address -> event of its live allocation
  alloc_event_at.reserve(state.blocks().size() * 2 + 1024);
  for (const auto& [address, held] : state.blocks()) {
    if (!held.pending_free) alloc_event_at.emplace(address, -1);
  }
  std::size_t column = 0;
  // Stacks of each column's largest allocation, resolved to sites once the pass is over.
  std::vector<stack_id> column_stacks(views.columns.size(), 0);
  for (std::size_t i = 0; i < events.size(); ++i) {
    const trace_event& event = events[i];
    auto index = static_cast<std::int64_t>(i);
    allocation_change change = state.apply(event);
    if (change.replaced_bytes != 0) {
      // An alloc over a live block: the old one's life ends here.
      band_candidate ended{{alloc_event_at[event.addr], index, static_cast<std::uint64_t>(-change.replaced_bytes), 0, 0,
                            memory_category::other},
                           change.replaced_stack, change.replaced_before_trace};
      largest.offer(ended);
    }
    if (event.action == trace_action::alloc) {
      alloc_event_at[event.addr] = index;
      while (column + 1 < views.columns.size() && views.columns[column].last_event < i) ++column;
      timeline_column& in = views.columns[column];
      auto bytes = static_cast<std::uint64_t>(change.bytes);
      if (in.largest_alloc_event < 0 || bytes > in.largest_alloc_bytes) {
        in.largest_alloc_event = index;
        in.largest_alloc_bytes = bytes;
        column_stacks[column] = event.stack;
      }
    } else if (change.count < 0) {
      auto found = alloc_event_at.find(event.addr);
      std::int64_t made = found == alloc_event_at.end() ? -1 : found->second;
      if (found != alloc_event_at.end()) alloc_event_at.erase(found);
      largest.offer({{made, index, static_cast<std::uint64_t>(-change.bytes), 0, 0, memory_category::other}, change.stack,
                     change.before_trace});
    }
    if (index == views.tree_event) take_tree();
    take_maps(index);
    if (next_sample != sample_events.end() && *next_sample == index) views.free_blocks.push_back(measure_free_blocks(state, *next_sample++));
  }
  for (const auto& [address, held] : state.blocks()) {
    if (held.pending_free) continue;
    auto found = alloc_event_at.find(address);
    largest.offer({{found == alloc_event_at.end() ? -1 : found->second, -1, held.bytes, 0, 0, memory_category::other},
                   held.stack, held.before_trace});
  }

  for (std::size_t c = 0; c < views.columns.size(); ++c) {
    if (views.columns[c].largest_alloc_event >= 0) views.columns[c].largest_alloc_site = sites.site(column_stacks[c], false);
  }
  views.allocations = largest.offered();
  std::vector<band_candidate> kept = largest.take();
  std::sort(kept.begin(), kept.end(), [](const band_candidate& a, const band_candidate& b) {
    return a.band.alloc_event != b.band.alloc_event ? a.band.alloc_event < b.band.alloc_event : a.band.bytes > b.band.bytes;
  });
  views.bands.reserve(kept.size());
  for (band_candidate& candidate : kept) {
    candidate.band.site = sites.site(candidate.stack, candidate.before_trace);
    candidate.band.category = sites.category(candidate.stack, candidate.before_trace);
    views.bands.push_back(candidate.band);
  }
  place_bands(views.bands, views.events);
  views.peak_tree = tree.take(std::max<std::size_t>(options.max_tree_nodes, 1), views.peak_tree_nodes_before_cut);
  views.sites = sites.take();
  return views;
}

}  // namespace rlmem
