// SPDX-License-Identifier: MIT
#pragma once
// Level-of-detail views of one device's trace for `rlmem report`: what a page can draw at any
// trace size (min/max envelopes per pixel column, the largest allocations as bands, the live
// memory at the peak as a tree of stacks, free-block samples), never the raw trace.

#include <rlmem/inspect/inspect.hpp>
#include <rlmem/snapshot/snapshot.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rlmem {

/// How much detail the views keep. Every figure bounds the size of the page, whatever the trace.
struct view_options {
  std::size_t columns = 2000;            ///< envelope columns: about one per pixel of a wide chart
  std::size_t bands = 1000;              ///< largest allocations kept for the active-memory view
  std::size_t free_block_samples = 256;  ///< moments at which the largest free block is measured
  std::size_t max_tree_nodes = 4000;     ///< nodes of the peak's stack tree, largest kept
  std::size_t max_map_segments = 48;     ///< segments drawn in one segment map, largest kept
  std::size_t max_segment_pieces = 64;   ///< blocks and gaps drawn in one segment, largest kept
  std::size_t max_oom_maps = 16;         ///< OOMs with a segment map, the first ones
};

/// One slice of consecutive events: the extremes of the timeline inside it. Every event is in
/// exactly one column, so the maxima over columns are the trace's peaks.
struct timeline_column {
  std::uint64_t first_event = 0;         ///< index in the device's trace
  std::uint64_t last_event = 0;          ///< inclusive
  std::int64_t first_time_us = 0;        ///< of first_event (0 when the trace has no times)
  std::int64_t allocated_min = 0;        ///< the least allocated bytes after an event of the column
  std::int64_t allocated_max = 0;        ///< the most allocated bytes after an event of the column
  std::int64_t reserved_min = 0;         ///< the least reserved bytes after an event of the column
  std::int64_t reserved_max = 0;         ///< the most reserved bytes after an event of the column
  std::int64_t unallocated_max = 0;      ///< reserved - allocated, worst in the column
  /// The largest allocation made in the column: what a hover shows. -1 when none was made.
  std::int64_t largest_alloc_event = -1;
  std::uint64_t largest_alloc_bytes = 0; ///< its rounded size
  std::uint32_t largest_alloc_site = 0;  ///< index into memory_views::sites
};

/// The free space of the reserved ranges after one event.
struct free_block_sample {
  std::int64_t event = -1;               ///< -1: before the first event
  std::uint64_t largest_free_bytes = 0;  ///< the largest gap between live blocks (pending frees live)
  std::uint64_t free_bytes = 0;          ///< gaps between live blocks, summed
};

/// One allocation's life, drawn as a band of its size.
struct allocation_band {
  std::int64_t alloc_event = -1;         ///< -1: live before the trace began
  std::int64_t free_event = -1;          ///< the user's free (free_requested); -1: live at the end
  std::uint64_t bytes = 0;               ///< rounded as the allocator rounds
  /// Where the band is drawn: the lowest offset at which no other kept band overlaps it during
  /// its life (first fit in order of allocation), so bands never cover one another.
  std::uint64_t offset_bytes = 0;
  std::uint32_t site = 0;                ///< index into memory_views::sites
  memory_category category = memory_category::other;  ///< of its stack, by the rules the views were built with
};

/// What one node of the peak's stack tree stands for.
enum class stack_node_kind : std::uint8_t {
  root,                     ///< everything live at the peak
  frame,                    ///< a stack frame (`frame` is set)
  allocated_before_trace,   ///< blocks with no stack made before recording began
  no_python_stack,          ///< blocks with no stack made during the trace (autograd threads)
  /// Every frame inside the nearest frame of the user's code (torch's, libraries'), folded into
  /// one node; `frame` names it: the site's frame (resolve_site()), else the innermost Python one.
  inside_user_code,
};

/// A node of the tree of live memory at the peak, by stack from the outermost frame inwards: the
/// user's own frames first (the torch and library wrappers between them left out), then one
/// inside_user_code node below the nearest; a stack with no frame of the user's code as recorded.
/// Nodes come parents first; node 0 is the root.
struct stack_node {
  std::uint32_t parent = 0;              ///< the root is its own parent
  std::uint32_t depth = 0;               ///< the root is 0
  stack_node_kind kind = stack_node_kind::frame;  ///< what the node stands for
  frame_id frame = 0;                    ///< for `frame` and `inside_user_code` nodes; else 0
  std::uint64_t bytes = 0;               ///< live bytes under the node, pending frees excluded
  std::uint64_t count = 0;               ///< live blocks under the node
  memory_category category = memory_category::other;  ///< the category holding most of its bytes
};

/// A live block or a free gap of one segment in a segment map.
struct segment_piece {
  std::uint64_t offset_bytes = 0;        ///< from the segment's start
  std::uint64_t bytes = 0;               ///< a block's rounded size (cut at the range's end), or the gap's
  bool free = false;                     ///< a gap between live blocks
  bool pending_free = false;             ///< a block freed by the user, not yet reusable (another stream)
  std::uint32_t site = 0;                ///< blocks: index into memory_views::sites
  memory_category category = memory_category::other;  ///< blocks
};

/// One reserved range (a segment, or a mapped run of an expandable one) and what fills it.
struct segment_layout {
  std::uint64_t address = 0;             ///< where the range starts
  std::uint64_t bytes = 0;               ///< reserved (or mapped) bytes of the range
  std::uint64_t stream = 0;              ///< raw cudaStream_t
  bool small_pool = false;               ///< a 2 MiB segment of requests up to 1 MiB
  std::uint64_t blocks = 0;              ///< live blocks, pending frees included
  std::uint64_t block_bytes = 0;         ///< their bytes
  std::uint64_t gaps = 0;                ///< free gaps between them
  std::uint64_t free_bytes = 0;          ///< the gaps' bytes
  std::uint64_t largest_free_bytes = 0;  ///< the largest gap
  /// The largest max_segment_pieces blocks and gaps, by offset; the others are counted below.
  std::vector<segment_piece> pieces;
  std::uint64_t pieces_left_out = 0;     ///< blocks and gaps not in `pieces`
  std::uint64_t bytes_left_out = 0;      ///< their bytes
};

/// The reserved ranges of one pool (small or large) and stream, summed.
struct pool_layout {
  bool small_pool = false;               ///< the small pool: 2 MiB segments of requests up to 1 MiB
  std::uint64_t stream = 0;              ///< raw cudaStream_t
  std::uint64_t segments = 0;            ///< reserved ranges
  std::uint64_t bytes = 0;               ///< their reserved (or mapped) bytes
  std::uint64_t block_bytes = 0;         ///< bytes of their live blocks, pending frees included
  std::uint64_t free_bytes = 0;          ///< bytes of their free gaps
  std::uint64_t largest_free_bytes = 0;  ///< the largest gap in any of them
};

/// The segments, their blocks and free gaps after one event: the peak of reserved or an OOM.
/// IMPORTANT: free gaps count pending frees as live, as the allocator cannot reuse them yet
/// (live_set::free_spaces()), so a map's largest free block is inspect's at the same event.
struct segment_map {
  std::int64_t event = -1;               ///< -1: before the first event
  std::vector<pool_layout> pools;        ///< every segment, by pool then stream
  std::vector<segment_layout> segments;  ///< the largest max_map_segments, by address
  std::uint64_t segments_left_out = 0;   ///< and the others, summed
  std::uint64_t bytes_left_out = 0;      ///< their reserved (or mapped) bytes
  std::uint64_t free_bytes_left_out = 0; ///< their free gaps' bytes
  std::uint64_t largest_free_left_out = 0;  ///< the largest gap among them
};

/// Everything `rlmem report` draws besides the inspection itself.
struct memory_views {
  std::uint64_t events = 0;                    ///< in the device's trace
  std::vector<timeline_column> columns;        ///< at most view_options::columns; empty without events
  std::vector<free_block_sample> free_blocks;  ///< by event, the peak of reserved included
  std::vector<allocation_band> bands;          ///< by alloc_event
  std::uint64_t allocations = 0;               ///< allocations the bands were chosen from
  std::int64_t tree_event = -1;                ///< the event the tree is taken after (the peak)
  std::vector<stack_node> peak_tree;           ///< at most view_options::max_tree_nodes
  std::uint64_t peak_tree_nodes_before_cut = 0;  ///< nodes the tree had before the cut to max_tree_nodes
  /// After the peak of reserved (inspection::peak_reserved_event)...
  segment_map peak_segments;
  /// ...and after each of the first max_oom_maps OOMs, in the order of inspection::ooms.
  std::vector<segment_map> oom_segments;
  std::vector<allocation_site> sites;          ///< what bands, columns and pieces refer to, each with its stack
};

/// Builds the views of `result.device` from one pass over its trace. `result` is inspect()'s
/// output for the same snapshot, whose timeline gives the envelopes and whose peak event gives
/// the tree; `rules` are the category rules it was run with (empty: the built-in ones).
/// O(events x log(live blocks) + (samples + maps) x (live blocks + segments) + nodes x log(nodes)).
memory_views build_memory_views(const snapshot& snap, const inspection& result, const std::vector<category_rule>& rules,
                                const view_options& options = {});

}  // namespace rlmem
