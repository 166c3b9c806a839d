// SPDX-License-Identifier: MIT
#pragma once
// The in-memory model of a PyTorch memory snapshot (torch 2.4 to 2.11): segments, blocks,
// per-device traces, settings and annotations, with strings, frames and stacks interned.

#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rlmem {

using string_id = std::uint32_t;  ///< index into snapshot::strings; 0 is ""
using frame_id = std::uint32_t;   ///< index into snapshot::frames
using stack_id = std::uint32_t;   ///< index into the stack table; 0 is the empty stack

/// One stack frame as torch records it: Python (`file.py`, line) or C++ (`??`, line 0).
struct frame {
  string_id name = 0;      ///< `name`: the Python function's name, or a C++ frame's demangled signature
  string_id filename = 0;  ///< `filename`: the source's path, `??` or a library's basename for C++
  std::int64_t line = 0;   ///< `line`: 0 for C++ frames, -1 when torch wrote an unknown line (2**64 - 1)
  /// Member by member.
  friend bool operator==(const frame&, const frame&) = default;
};

/// What a trace entry records. `unknown` keeps entries from newer torch versions readable.
enum class trace_action : std::uint8_t {
  alloc,           ///< a block handed to the user (size: requested bytes)
  free_requested,  ///< the user freed it (allocated bytes drop here)
  free_completed,  ///< the block is reusable (after record_stream events)
  segment_alloc,   ///< cudaMalloc
  segment_free,    ///< cudaFree
  segment_map,     ///< expandable segment grew (cuMemMap)
  segment_unmap,   ///< expandable segment shrank
  snapshot,        ///< a _snapshot() call
  oom,             ///< the allocator raised OutOfMemoryError; addr holds device_free
  annotate,        ///< torch main: _annotate_memory
  unknown,         ///< an action this version of rlmem does not know (see action_name)
  count_           ///< the number of actions, not one
};
/// Actions, `unknown` included: the length of trace_action_names and of per-action counts.
inline constexpr std::size_t trace_action_count = static_cast<std::size_t>(trace_action::count_);

/// The spelling torch uses, in trace_action order: what the reader parses and every report prints.
inline constexpr std::array<std::string_view, trace_action_count> trace_action_names = {
    "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
    "segment_unmap", "snapshot", "oom", "annotate", "unknown"};

/// trace_action_names' entry for `action` ("free_requested").
std::string_view trace_action_name(trace_action action) noexcept;

/// What trace entries share: the rare combinations of stream, compile context, user metadata
/// and raw action name, kept once in snapshot::event_tags so an entry stays 32 bytes.
struct event_tag {
  std::uint32_t stream = 0;       ///< index into snapshot::streams
  string_id compile_context = 0;  ///< "N/A" or "Torch-Compiled Region: 0/0"
  string_id user_metadata = 0;    ///< the entry's `user_metadata` ("" when torch wrote none)
  string_id action_name = 0;      ///< the raw action string (kept for `unknown`)
  /// Member by member.
  friend bool operator==(const event_tag&, const event_tag&) = default;
};
using event_tag_id = std::uint32_t;  ///< index into snapshot::event_tags; 0 is all zeros
/// Distinct tags a snapshot may hold (trace_event::tag has 24 bits); one more is LIMIT_EVENT_TAGS.
inline constexpr event_tag_id max_event_tags = event_tag_id{1} << 24;

/// One entry of a device trace. Its stream, compile context and metadata: snapshot::tag_of.
struct trace_event {
  std::uint64_t addr = 0;         ///< address; for `oom`, the device_free bytes
  std::uint64_t size = 0;         ///< bytes (requested size for alloc and frees)
  std::int64_t time_us = 0;       ///< wall clock, microseconds since the epoch
  stack_id stack = 0;             ///< frames, innermost first
  event_tag_id tag : 24 = 0;      ///< index into snapshot::event_tags
  trace_action action = trace_action::unknown;  ///< the entry's `action`
  /// Member by member.
  friend bool operator==(const trace_event&, const trace_event&) = default;
};
static_assert(sizeof(trace_event) == 32, "millions of entries: keep them at 32 bytes");

/// A block's `state` at dump time.
enum class block_state : std::uint8_t {
  active_allocated,     ///< held by the user
  /// Freed by the user, not reusable until another stream's work ends (also read from
  /// `active_awaiting_free`).
  active_pending_free,
  inactive,             ///< free: cached by the allocator for reuse
  unknown               ///< no state, or one this version of rlmem does not know
};

/// One block of a segment at dump time.
struct block {
  std::uint64_t address = 0;         ///< `address`; where absent, the segment's plus the sizes of the blocks before it
  std::uint64_t size = 0;            ///< rounded bytes
  std::uint64_t requested_size = 0;  ///< stale on inactive blocks
  stack_id stack = 0;                ///< the allocation's `frames`; 0 when none were recorded
  block_state state = block_state::unknown;  ///< the file's `state`
  /// Member by member.
  friend bool operator==(const block&, const block&) = default;
};

/// torch's name of a caching-allocator pool, as segment_type spells it and every report prints
/// it: "small" (blocks of at most 1 MiB) or "large".
constexpr std::string_view pool_name(bool small_pool) noexcept { return small_pool ? "small" : "large"; }

/// One cudaMalloc'd (or expandable) segment at dump time.
struct segment {
  std::int64_t device = 0;       ///< CUDA device ordinal
  std::uint64_t address = 0;     ///< virtual address of its start
  std::uint64_t total_size = 0;  ///< reserved bytes (mapped bytes when expandable)
  std::uint64_t allocated_size = 0;  ///< bytes of its active_allocated blocks
  std::uint64_t active_size = 0;     ///< allocated and pending-free bytes
  std::uint64_t requested_size = 0;  ///< unrounded bytes its users asked for
  std::uint64_t stream = 0;      ///< the raw cudaStream_t value; 0 is the default stream
  string_id segment_type = 0;    ///< "large" or "small" (pool_name)
  /// segment_pool_id[0]; (0, 0) is the default pool, anything else a MemPool or a CUDA graph's pool.
  std::int64_t pool_id_first = 0;
  std::int64_t pool_id_second = 0;  ///< segment_pool_id[1]
  bool is_expandable = false;    ///< an expandable segment (expandable_segments:True)
  stack_id stack = 0;            ///< `frames` of the segment's creation; 0 when none were recorded
  std::uint32_t first_block = 0;  ///< index into snapshot::blocks
  std::uint32_t block_count = 0;  ///< its blocks, from first_block on, in address order
  /// Member by member.
  friend bool operator==(const segment&, const segment&) = default;
};

/// A `record_function` range edge from external_annotations.
struct annotation {
  std::string stage;  ///< "START" or "END"
  std::string name;   ///< "ProfilerStep#3", "Optimizer.step#AdamW.step", ...
  std::int64_t device = 0;   ///< CUDA device ordinal
  std::int64_t time_us = 0;  ///< microseconds since the epoch
  /// Member by member.
  friend bool operator==(const annotation&, const annotation&) = default;
};

/// Small generic data (allocator settings): what a Python literal can hold.
struct plain_value {
  /// Which member holds the value.
  enum class kind : std::uint8_t {
    none,     ///< Python's None
    boolean,  ///< `boolean`
    integer,  ///< `integer`
    real,     ///< `real`
    text,     ///< `text`: a str or bytes, or "<kind>" for a value no other kind holds
    list,     ///< `items`
    dict      ///< `keys` and `items`
  };
  kind type = kind::none;    ///< which member below holds the value
  bool boolean = false;      ///< when type is boolean
  std::int64_t integer = 0;  ///< when type is integer
  double real = 0.0;         ///< when type is real
  std::string text;          ///< when type is text
  std::vector<std::string> keys;    ///< dict keys, parallel to items
  std::vector<plain_value> items;   ///< list items or dict values
  /// Equal when read from the same data: reals compare by their bits, so a NaN equals itself.
  friend bool operator==(const plain_value& a, const plain_value& b) {
    return a.type == b.type && a.boolean == b.boolean && a.integer == b.integer &&
           std::bit_cast<std::uint64_t>(a.real) == std::bit_cast<std::uint64_t>(b.real) && a.text == b.text &&
           a.keys == b.keys && a.items == b.items;
  }
};

/// The events one device recorded, a range of snapshot::events.
struct device_trace {
  std::int64_t device = 0;        ///< CUDA device ordinal: the list's index in torch's device_traces
  std::uint32_t first_event = 0;  ///< index into snapshot::events
  std::uint32_t event_count = 0;  ///< its events, from first_event on, in recording order
  /// Member by member.
  friend bool operator==(const device_trace&, const device_trace&) = default;
};

/// A whole snapshot. Owns every string, frame and stack the records refer to.
struct snapshot {
  std::vector<segment> segments;              ///< at dump time, every device's, in the file's order
  std::vector<block> blocks;                  ///< every segment's, each segment's a range (segment::first_block)
  std::vector<trace_event> events;            ///< all devices, in device_traces order
  std::vector<device_trace> device_traces;    ///< one per device ordinal that has a list
  std::vector<std::uint64_t> streams;         ///< raw stream values that trace events use
  std::vector<event_tag> event_tags{event_tag{}};  ///< what events share; event_tags[0] is all zeros
  std::vector<std::pair<std::string, plain_value>> allocator_settings;  ///< key and value, in the file's order
  std::vector<annotation> annotations;        ///< external_annotations, in the file's order
  bool had_legacy_list_format = false;        ///< the file held a bare list of segments

  std::vector<std::string> strings;           ///< interned; strings[0] == ""
  std::vector<frame> frames;                  ///< interned: each distinct frame once
  std::vector<frame_id> stack_frames;         ///< all stacks, concatenated
  std::vector<std::uint32_t> stack_offsets;   ///< stack i is [offsets[i], offsets[i+1])

  /// strings[id]; `id` must be one of this snapshot's.
  std::string_view str(string_id id) const { return strings[id]; }
  /// What `event`, one of this snapshot's, shares with others: stream, compile context, metadata.
  const event_tag& tag_of(const trace_event& event) const { return event_tags[event.tag]; }
  /// The frames of stack `id`, innermost first; empty for 0. `id` must be one of this snapshot's.
  std::span<const frame_id> stack(stack_id id) const {
    return {stack_frames.data() + stack_offsets[id], stack_offsets[id + 1] - stack_offsets[id]};
  }
  /// The blocks of `seg`, one of this snapshot's segments, in address order.
  std::span<const block> blocks_of(const segment& seg) const {
    return {blocks.data() + seg.first_block, seg.block_count};
  }
  /// The events of `trace`, one of this snapshot's, in recording order.
  std::span<const trace_event> events_of(const device_trace& trace) const {
    return {events.data() + trace.first_event, trace.event_count};
  }
  /// The trace of `device`, or nullptr when the snapshot has none for it.
  const device_trace* trace_for(std::int64_t device) const;
  /// The allocator setting `key`, or nullptr.
  const plain_value* setting(std::string_view key) const;
  /// Member by member.
  friend bool operator==(const snapshot&, const snapshot&) = default;
};

/// The device a report covers by default: the one with the most trace events, then the most
/// segments, then the lowest ordinal (a device with one stray event loses to one with the data).
std::int64_t default_device(const snapshot& snap);

}  // namespace rlmem
