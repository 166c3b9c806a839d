// SPDX-License-Identifier: MIT
#pragma once
// Turns the pickle machine's containers into snapshot records as soon as each one is complete,
// so a snapshot never exists as a generic object tree: frames, stacks and strings are interned
// on the fly and trace entries become 32-byte records. Its definitions are in three files:
// value_heap.cpp (values, containers, sealing, the budget), interning.cpp (strings, stacks,
// streams, tags) and torch_schema.cpp (torch's keys, records and top level).

#include "memo_table.hpp"
#include "value.hpp"

#include <rlmem/base/error.hpp>
#include <rlmem/snapshot/snapshot.hpp>
#include <rlmem/snapshot/snapshot_reader.hpp>

#include <array>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rlmem::detail {

class input_window;

enum class container_type : std::uint8_t { list, tuple, dict, set };

class snapshot_builder {
 public:
  snapshot_builder();

  value make_integer(std::int64_t number);
  value make_real(double number);
  value make_string(std::string_view text, bool is_bytes);
  /// A new, open container; the returned value has kind `object`: its container slot in the
  /// low 32 bits, and above them the slot's generation, which changes when the slot is reused.
  value new_container(container_type type);

  /// Seals `item` on its way into a parent (or out as the root): a complete container becomes
  /// a record (frame, stack, event, block, segment) or stays a generic container.
  /// Returns false with `failure` set when a container's content is not what its shape says.
  bool consume(value& item, error& failure) {
    return item.kind() != vkind::object || consume_object(item, failure);
  }
  /// Appends already consumed items to the open container `target`. Dicts take key/value pairs.
  /// A dict given an 'action' key is a trace entry and is sealed at once (`target` becomes the
  /// record): torch writes each entry with one SETITEMS, so for its files this only moves the
  /// sealing earlier, while the entry is still in cache rather than 1000 entries later at the
  /// trace list's APPENDS. An entry changed or referenced again afterwards is refused.
  bool extend(value& target, std::span<const value> items, error& failure);
  /// A sealed tuple, list, dict or frozenset made of already consumed items.
  value make_filled(container_type type, std::span<const value> items);

  /// Lets the builder replace memo entries of containers that become records, so later memo
  /// lookups yield the record directly. IMPORTANT: `memo` must outlive the builder's use.
  void track_memo(memo_table& memo) { memo_ = &memo; }
  /// The memo code to store `item` under at memo `index`. The first memo entry of a container
  /// is the one the builder rewrites when it becomes a record; any other is escaped, keeping
  /// the generation that tells a stale reference.
  std::uint32_t memo_code(value item, std::uint64_t index);
  /// Counts one more copy of `item` (a memo lookup, DUP): a container that became a record
  /// keeps its slot until every copy was consumed.
  void note_copied(value item) {
    if (container* held = container_of(item)) ++held->copies;
  }
  /// The object value of the container now in `slot` (a memo entry's object code).
  value object_in_slot(std::uint32_t slot) const {
    return value::make(vkind::object, (std::uint64_t{containers_[slot].generation} << 32) | slot);
  }

  /// Sizes record buffers for a pickle of about `bytes` bytes (0: unknown), so they do not
  /// regrow and copy while reading. Untouched reservations cost no resident memory; they are
  /// capped, since a sparse file's size is no promise of content.
  void reserve_for_input(std::uint64_t bytes);

  /// Counts what the builder holds, in 8-byte units, against read_limits::max_held_values plus
  /// one unit per read_limits::input_bytes_per_held_value bytes `input` has read.
  /// IMPORTANT: `limits` and `input` must outlive the builder's use.
  void set_budget(const read_limits& limits, const input_window& input);
  /// While set, a charge that goes over the budget sets `*countdown` to 1, so the machine
  /// stops at the next opcode. The machine sets it for its lifetime and clears it (nullptr).
  void poll_on_budget(std::uint32_t* countdown) { poll_countdown_ = countdown; }
  /// Set once a charge went over the budget: the LIMIT_HELD_VALUES error to report.
  const error* budget_failure() const { return over_budget_ ? &budget_failure_ : nullptr; }
  /// Charges `units` for memory the caller keeps on the builder's behalf (the memo).
  bool charge(std::uint64_t units, std::string_view what) {
    held_units_ += units;
    return held_units_ <= allowance_ || recheck_budget(what);
  }

  /// True when key/value `pairs` make a trace entry (they hold the key 'action').
  bool is_trace_entry(std::span<const value> pairs) const;
  /// The record of a trace entry from its key/value pairs (already consumed values), as if a
  /// dict of them had been sealed: for readers that skip the dict (the trace-entry shortcut).
  bool make_event(std::span<const value> pairs, value& sealed, error& failure);
  /// The record of a non-empty list holding only frames, as if it had been sealed.
  /// The trace entries' storage so far and its capacity, for page_prefaulter.
  const trace_event* events_data() const { return events_.data(); }
  std::size_t events_size() const { return events_.size(); }
  std::size_t events_capacity() const { return events_.capacity(); }
  value make_stack(std::span<const value> frames) { return value::make(vkind::stack, intern_stack(frames)); }

  /// Builds the snapshot from the consumed root value.
  bool finish(value root, snapshot& out, error& failure);

 private:
  struct container {
    container_type type = container_type::list;
    bool sealed = false;
    std::uint64_t memo_index = UINT64_MAX;  // where the pickle memoized it, if it did
    std::uint32_t generation = 0;           // bumped each time the slot is released
    std::uint32_t copies = 1;               // its values on the stack not consumed yet
    value became;                           // the record it became, for copies consumed later
    // A list whose items so far are trace entries read one after another (a device trace,
    // millions long) holds them as this range, not as items: `items` is then empty. Readers
    // other than finish() see them as items (generic_container turns the range back).
    std::uint32_t first_event = 0;
    std::uint32_t event_count = 0;
    std::vector<value> items;
  };
  struct frame_key_hash {
    std::size_t operator()(const frame& f) const noexcept;
  };

  bool recheck_budget(std::string_view what);
  bool consume_object(value& item, error& failure);
  std::uint32_t take_container_slot(container_type type);
  void release_container_slot(std::uint32_t slot);
  // The container `item` refers to, or nullptr when it is no object or a stale one (its
  // container became a record and the slot was reused); its items include a range of trace
  // entries it held, now written out.
  const container* generic_container(value item);
  // The same, with such a range left as it is.
  container* container_of(value item);
  static bool extends_event_range(const container& list, std::span<const value> items);
  void write_out_event_range(container& list);

  bool seal(std::uint32_t slot, value& sealed, error& failure);  // `sealed` holds the object on entry
  bool seal_list(container& list, value& sealed);
  bool seal_dict(container& dict, value& sealed, error& failure);
  bool make_frame(std::span<const value> pairs, value& sealed, error& failure);
  bool make_block(std::span<const value> pairs, value& sealed, error& failure);
  bool make_segment(std::span<const value> pairs, value& sealed, error& failure);
  bool make_annotation(std::span<const value> pairs, value& sealed, error& failure);
  bool to_plain(value item, plain_value& out, int depth, error& failure);

  bool get_integer(value item, std::int64_t& out) const;
  bool get_string(value item, std::string_view& out) const;
  stack_id intern_stack(std::span<const value> frames);
  std::uint32_t intern_stream(std::uint64_t raw_stream);
  bool intern_event_tag(const event_tag& tag, event_tag_id& id, error& failure);

  // Interned strings; the views in string_ids_ point into string_storage_ (a deque: stable).
  std::deque<std::string> string_storage_;
  std::unordered_map<std::string_view, string_id> string_ids_;
  // A direct-mapped cache in front of string_ids_ for short strings: torch writes the same
  // action and key names as fresh strings in every trace entry.
  struct short_string_slot {
    std::uint8_t length = 0xff;  // 0xff: empty
    char text[23] = {};
    string_id id = 0;
  };
  std::array<short_string_slot, 256> short_strings_{};
  std::vector<std::int64_t> wide_integers_;
  std::vector<double> reals_;

  // The held-value budget (see set_budget). allowance_ is refreshed from the input offset only
  // when a charge passes it, so a charge is an add and a compare.
  const read_limits* limits_ = nullptr;
  const input_window* input_ = nullptr;
  std::uint32_t* poll_countdown_ = nullptr;
  std::uint64_t held_units_ = 0;
  std::uint64_t allowance_ = UINT64_MAX;
  bool over_budget_ = false;
  error budget_failure_;

  memo_table* memo_ = nullptr;
  // Open and generic containers. A slot is reused once its container became a record and every
  // copy of it was consumed, so the table stays as small as the number of containers open at
  // once plus the generic ones.
  std::vector<container> containers_;
  std::vector<std::uint32_t> free_slots_;

  std::vector<frame> frames_;
  std::unordered_map<frame, frame_id, frame_key_hash> frame_ids_;
  std::vector<frame_id> stack_frames_;
  std::vector<std::uint32_t> stack_offsets_;
  std::unordered_map<std::uint64_t, stack_id> stack_by_hash_;  // head of a collision chain
  std::vector<stack_id> stack_next_;                           // next stack with the same hash

  std::vector<trace_event> events_;
  std::vector<block> blocks_;
  std::vector<segment> segments_;
  std::vector<annotation> annotations_;
  std::vector<std::uint64_t> streams_;
  std::unordered_map<std::uint64_t, std::uint32_t> stream_ids_;
  struct event_tag_hash {
    std::size_t operator()(const event_tag& tag) const noexcept;
  };
  std::vector<event_tag> event_tags_;
  std::unordered_map<event_tag, event_tag_id, event_tag_hash> event_tag_ids_;
  // A direct-mapped cache in front of event_tag_ids_: a trace holds a handful of tags (one per
  // action name, mostly), and a hash map lookup per entry costs more than the rest of its tag.
  struct cached_tag {
    event_tag tag;
    event_tag_id id = 0;
  };
  std::array<cached_tag, 16> recent_tags_{};  // all slots start as tag 0, which is correct
  std::uint64_t last_raw_stream_ = 0;          // streams come in long runs
  std::uint32_t last_stream_id_ = 0;
};

}  // namespace rlmem::detail
