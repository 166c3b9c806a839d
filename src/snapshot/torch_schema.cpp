// SPDX-License-Identifier: MIT
// Torch's snapshot schema: the keys and names the reader knows (interned first, so they compare
// as integers), which dict is which record (trace entry, frame, block, segment, annotation),
// each record's fields, and the snapshot's top level. A new torch snapshot version is a change
// here (and a recording in testdata/snapshots/).

#include "snapshot_builder.hpp"

#include "held_units.hpp"

#include <array>
#include <string>
#include <type_traits>

namespace rlmem::detail {

namespace {

// Strings interned first, so their ids are these constants and keys compare as integers.
enum known : string_id {
  s_empty,
  s_action, s_addr, s_device_free, s_size, s_stream, s_time_us, s_compile_context,
  s_user_metadata, s_frames, s_name, s_filename, s_line, s_address, s_requested_size, s_state,
  s_device, s_total_size, s_allocated_size, s_active_size, s_segment_type, s_segment_pool_id,
  s_is_expandable, s_blocks, s_stage, s_segments, s_device_traces, s_allocator_settings,
  s_external_annotations,
  // trace actions, in trace_action order
  s_alloc, s_free_requested, s_free_completed, s_segment_alloc, s_segment_free, s_segment_map,
  s_segment_unmap, s_snapshot, s_oom, s_annotate,
  // block states
  s_active_allocated, s_active_pending_free, s_active_awaiting_free, s_inactive,
  s_known_count
};

constexpr std::array<std::string_view, s_known_count> known_strings = {
    "", "action", "addr", "device_free", "size", "stream", "time_us", "compile_context",
    "user_metadata", "frames", "name", "filename", "line", "address", "requested_size", "state",
    "device", "total_size", "allocated_size", "active_size", "segment_type", "segment_pool_id",
    "is_expandable", "blocks", "stage", "segments", "device_traces", "allocator_settings",
    "external_annotations",
    "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
    "segment_unmap", "snapshot", "oom", "annotate",
    "active_allocated", "active_pending_free", "active_awaiting_free", "inactive"};
static_assert(s_external_annotations < 64, "keys must fit the 64-bit key mask");
static_assert(s_annotate - s_alloc + 1 == static_cast<int>(trace_action::unknown));
// The actions are parsed by the names reports print them with (trace_action_names).
static_assert([] {
  for (std::size_t k = 0; k < trace_action_count - 1; ++k) {
    if (known_strings[s_alloc + k] != trace_action_names[k]) return false;
  }
  return true;
}());

constexpr std::uint64_t bit(known key) { return std::uint64_t{1} << key; }
// Marks a block read without an 'address' key (torch before 2.1); its segment fills it in.
constexpr std::uint64_t missing_address = UINT64_MAX;

// The key mask of a dict: one bit per known key it holds.
std::uint64_t key_mask(std::span<const value> pairs) {
  std::uint64_t mask = 0;
  for (std::size_t i = 0; i < pairs.size(); i += 2) {
    value key = pairs[i];
    if (key.kind() == vkind::string && key.payload() < 64) mask |= std::uint64_t{1} << key.payload();
  }
  return mask;
}

bool fail(error& failure, std::string_view record, std::string_view key, std::string_view expected, vkind seen) {
  failure = {errc::not_a_snapshot, 0,
             std::string(record) + " key '" + std::string(key) + "' is " + kind_name(seen) + ", expected " +
                 std::string(expected)};
  return false;
}

// Sizes are unsigned in the allocator, but no allocator hands out 2^63 bytes or more: such a
// size (read as a negative int64) is corrupt data, refused rather than shown as a lie.
bool check_size(std::int64_t number, std::string_view record, std::size_t index, std::string_view key, error& failure) {
  if (number >= 0) return true;
  // The 64-bit pattern is all that is kept: say both readings of it.
  std::string seen = std::to_string(number) + " (" + std::to_string(static_cast<std::uint64_t>(number)) + " as unsigned)";
  failure = {errc::invalid_size, 0, std::string(record) + " " + std::to_string(index) + " '" + std::string(key) + "' is " + seen};
  return false;
}

}  // namespace

snapshot_builder::snapshot_builder() {
  for (std::string_view text : known_strings) make_string(text, false);
  stack_offsets_.push_back(0);
  stack_offsets_.push_back(0);  // stack 0: the empty stack
  intern_stream(0);             // stream 0: the default stream, for entries without the key
  event_tags_.emplace_back();   // tag 0: default stream, no context, no metadata
  event_tag_ids_.emplace(event_tags_.front(), 0);
}

bool snapshot_builder::is_trace_entry(std::span<const value> pairs) const { return (key_mask(pairs) & bit(s_action)) != 0; }

bool snapshot_builder::seal_dict(container& dict, value& sealed, error& failure) {
  if (dict.items.size() % 2 != 0) {
    failure = {errc::type_mismatch, 0, "dict with a key and no value"};
    return false;
  }
  std::uint64_t mask = key_mask(dict.items);
  if (is_trace_entry(dict.items)) return make_event(dict.items, sealed, failure);
  if ((mask & (bit(s_name) | bit(s_filename) | bit(s_line))) == (bit(s_name) | bit(s_filename) | bit(s_line))) {
    return make_frame(dict.items, sealed, failure);
  }
  if ((mask & (bit(s_total_size) | bit(s_blocks))) == (bit(s_total_size) | bit(s_blocks))) {
    return make_segment(dict.items, sealed, failure);
  }
  if ((mask & (bit(s_state) | bit(s_size))) == (bit(s_state) | bit(s_size))) {
    return make_block(dict.items, sealed, failure);
  }
  if ((mask & (bit(s_stage) | bit(s_name))) == (bit(s_stage) | bit(s_name))) {
    return make_annotation(dict.items, sealed, failure);
  }
  return true;  // a generic dict
}

bool snapshot_builder::make_event(std::span<const value> pairs, value& sealed, error& failure) {
  trace_event event;
  event_tag tag;
  for (std::size_t i = 0; i < pairs.size(); i += 2) {
    value key = pairs[i];
    value item = pairs[i + 1];
    if (key.kind() != vkind::string) continue;
    std::int64_t number = 0;
    auto need_integer = [&](std::string_view name) {
      return get_integer(item, number) || fail(failure, "trace entry", name, "an int", item.kind());
    };
    switch (key.index()) {
      case s_action:
        if (item.kind() != vkind::string) return fail(failure, "trace entry", "action", "a str", item.kind());
        tag.action_name = item.index();
        event.action = (item.index() >= s_alloc && item.index() <= s_annotate)
                           ? static_cast<trace_action>(item.index() - s_alloc)
                           : trace_action::unknown;
        break;
      case s_addr:
      case s_device_free:
        if (!need_integer("addr")) return false;
        event.addr = static_cast<std::uint64_t>(number);
        break;
      case s_size:
        if (!need_integer("size") || !check_size(number, "trace entry", events_.size(), "size", failure)) return false;
        event.size = static_cast<std::uint64_t>(number);
        break;
      case s_stream:
        if (!need_integer("stream")) return false;
        tag.stream = intern_stream(static_cast<std::uint64_t>(number));
        break;
      case s_time_us:
        if (!need_integer("time_us")) return false;
        event.time_us = number;
        break;
      case s_compile_context:
        if (item.kind() == vkind::string) tag.compile_context = item.index();
        break;
      case s_user_metadata:
        if (item.kind() == vkind::string) tag.user_metadata = item.index();
        break;
      case s_frames:
        if (item.kind() == vkind::stack) {
          event.stack = item.index();
        } else if (item.kind() != vkind::empty_list && item.kind() != vkind::none) {
          return fail(failure, "trace entry", "frames", "a list of frames", item.kind());
        }
        break;
      default:
        break;  // keys from newer torch versions are ignored
    }
  }
  event_tag_id tag_id = 0;
  if (!intern_event_tag(tag, tag_id, failure)) return false;
  event.tag = tag_id & (max_event_tags - 1);  // intern_event_tag keeps ids below max_event_tags
  events_.push_back(event);
  charge(units_of<trace_event>, "trace entries");
  sealed = value::make(vkind::event, events_.size() - 1);
  return true;
}

bool snapshot_builder::make_frame(std::span<const value> pairs, value& sealed, error& failure) {
  frame made;
  for (std::size_t i = 0; i < pairs.size(); i += 2) {
    value key = pairs[i];
    value item = pairs[i + 1];
    if (key.kind() != vkind::string) continue;
    if (key.index() == s_name || key.index() == s_filename) {
      if (item.kind() != vkind::string) return fail(failure, "frame", known_strings[key.index()], "a str", item.kind());
      (key.index() == s_name ? made.name : made.filename) = item.index();
    } else if (key.index() == s_line) {
      if (!get_integer(item, made.line)) return fail(failure, "frame", "line", "an int", item.kind());
    }
  }
  auto [found, inserted] = frame_ids_.try_emplace(made, static_cast<frame_id>(frames_.size()));
  if (inserted) {
    frames_.push_back(made);
    charge(units_of<frame> + hash_node_units + 1, "frames");
  }
  sealed = value::make(vkind::frame, found->second);
  return true;
}

bool snapshot_builder::make_block(std::span<const value> pairs, value& sealed, error& failure) {
  block made;
  made.address = missing_address;
  for (std::size_t i = 0; i < pairs.size(); i += 2) {
    value key = pairs[i];
    value item = pairs[i + 1];
    if (key.kind() != vkind::string) continue;
    std::int64_t number = 0;
    switch (key.index()) {
      case s_address:
      case s_size:
      case s_requested_size:
        if (!get_integer(item, number)) return fail(failure, "block", known_strings[key.index()], "an int", item.kind());
        if (key.index() == s_address) {
          made.address = static_cast<std::uint64_t>(number);
        } else {
          if (!check_size(number, "block", blocks_.size(), known_strings[key.index()], failure)) return false;
          (key.index() == s_size ? made.size : made.requested_size) = static_cast<std::uint64_t>(number);
        }
        break;
      case s_state:
        if (item.kind() != vkind::string) return fail(failure, "block", "state", "a str", item.kind());
        switch (item.index()) {
          case s_active_allocated: made.state = block_state::active_allocated; break;
          case s_active_pending_free:
          case s_active_awaiting_free: made.state = block_state::active_pending_free; break;
          case s_inactive: made.state = block_state::inactive; break;
          default: made.state = block_state::unknown; break;
        }
        break;
      case s_frames:
        if (item.kind() == vkind::stack) made.stack = item.index();
        break;
      default:
        break;
    }
  }
  blocks_.push_back(made);
  charge(units_of<block>, "blocks");
  sealed = value::make(vkind::block, blocks_.size() - 1);
  return true;
}

bool snapshot_builder::make_segment(std::span<const value> pairs, value& sealed, error& failure) {
  segment made;
  const container* block_list = nullptr;
  for (std::size_t i = 0; i < pairs.size(); i += 2) {
    value key = pairs[i];
    value item = pairs[i + 1];
    if (key.kind() != vkind::string) continue;
    std::int64_t number = 0;
    auto integer_field = [&](auto& field) {
      if (!get_integer(item, number)) return fail(failure, "segment", known_strings[key.index()], "an int", item.kind());
      field = static_cast<std::remove_reference_t<decltype(field)>>(number);
      return true;
    };
    auto size_field = [&](std::uint64_t& field) {
      return integer_field(field) && check_size(number, "segment", segments_.size(), known_strings[key.index()], failure);
    };
    switch (key.index()) {
      case s_device: if (!integer_field(made.device)) return false; break;
      case s_address: if (!integer_field(made.address)) return false; break;
      case s_total_size: if (!size_field(made.total_size)) return false; break;
      case s_allocated_size: if (!size_field(made.allocated_size)) return false; break;
      case s_active_size: if (!size_field(made.active_size)) return false; break;
      case s_requested_size: if (!size_field(made.requested_size)) return false; break;
      case s_stream: if (!integer_field(made.stream)) return false; break;
      case s_segment_type:
        if (item.kind() == vkind::string) made.segment_type = item.index();
        break;
      case s_is_expandable:
        made.is_expandable = item.kind() == vkind::boolean && item.payload() != 0;
        break;
      case s_frames:
        if (item.kind() == vkind::stack) made.stack = item.index();
        break;
      case s_segment_pool_id:
        if (const container* pool = generic_container(item); pool != nullptr && pool->items.size() == 2) {
          get_integer(pool->items[0], made.pool_id_first);
          get_integer(pool->items[1], made.pool_id_second);
        }
        break;
      case s_blocks:
        if (item.kind() == vkind::empty_list) break;
        block_list = generic_container(item);
        if (block_list == nullptr) return fail(failure, "segment", "blocks", "a list of blocks", item.kind());
        break;
      default:
        break;
    }
  }
  if (block_list != nullptr && !block_list->items.empty()) {
    // Blocks are usually sealed right before their segment, so they already form a range.
    bool contiguous = true;
    for (std::size_t i = 0; i < block_list->items.size(); ++i) {
      value item = block_list->items[i];
      if (item.kind() != vkind::block) {
        failure = {errc::not_a_snapshot, 0, std::string("segment blocks hold ") + kind_name(item.kind())};
        return false;
      }
      if (item.index() != block_list->items[0].index() + i) contiguous = false;
    }
    if (contiguous) {
      made.first_block = block_list->items[0].index();
    } else {
      // A block list that is not a range (blocks shared or repeated): each segment gets its own
      // copies, paid for from the budget before they are made.
      if (!charge(units_of<block> * block_list->items.size(), "blocks copied for a shared block list")) {
        failure = budget_failure_;
        return false;
      }
      made.first_block = static_cast<std::uint32_t>(blocks_.size());
      for (value item : block_list->items) {
        block copy = blocks_[item.index()];  // push_back may move blocks_
        blocks_.push_back(copy);
      }
    }
    made.block_count = static_cast<std::uint32_t>(block_list->items.size());
    std::uint64_t next_address = made.address;
    for (std::uint32_t i = 0; i < made.block_count; ++i) {
      block& owned = blocks_[made.first_block + i];
      if (owned.address == missing_address) owned.address = next_address;
      next_address = owned.address + owned.size;
    }
  }
  segments_.push_back(made);
  charge(units_of<segment>, "segments");
  sealed = value::make(vkind::segment, segments_.size() - 1);
  return true;
}

bool snapshot_builder::make_annotation(std::span<const value> pairs, value& sealed, error&) {
  annotation made;
  for (std::size_t i = 0; i < pairs.size(); i += 2) {
    value key = pairs[i];
    value item = pairs[i + 1];
    std::string_view text;
    if (key.kind() != vkind::string) continue;
    if (key.index() == s_stage && get_string(item, text)) made.stage = text;
    if (key.index() == s_name && get_string(item, text)) made.name = text;
    if (key.index() == s_device) get_integer(item, made.device);
    if (key.index() == s_time_us) get_integer(item, made.time_us);
  }
  charge(units_of<annotation> + (made.stage.size() + made.name.size()) / 8, "annotations");
  annotations_.push_back(std::move(made));
  sealed = value::make(vkind::annotation, annotations_.size() - 1);
  return true;
}

bool snapshot_builder::to_plain(value item, plain_value& out, int depth, error& failure) {
  // Settings shared in the pickle (a dict referenced twice) are copied once per reference:
  // every copy is paid for, so a dict DAG cannot expand without bound.
  if (!charge(units_of<plain_value>, "allocator_settings values (copied per reference)")) {
    failure = budget_failure_;
    return false;
  }
  if (depth > 32) {
    failure = {errc::not_a_snapshot, 0, "allocator_settings nested more than 32 levels"};
    return false;
  }
  switch (item.kind()) {
    case vkind::none: out.type = plain_value::kind::none; return true;
    case vkind::boolean: out.type = plain_value::kind::boolean; out.boolean = item.payload() != 0; return true;
    case vkind::integer:
    case vkind::big_integer: out.type = plain_value::kind::integer; get_integer(item, out.integer); return true;
    case vkind::real: out.type = plain_value::kind::real; out.real = reals_[item.index()]; return true;
    case vkind::string:
    case vkind::bytes: out.type = plain_value::kind::text; out.text = string_storage_[item.index()]; return true;
    case vkind::empty_list: out.type = plain_value::kind::list; return true;
    default: break;
  }
  const container* source = generic_container(item);
  if (source == nullptr) {
    out.type = plain_value::kind::text;
    out.text = std::string("<") + kind_name(item.kind()) + ">";
    return true;
  }
  bool is_dict = source->type == container_type::dict;
  out.type = is_dict ? plain_value::kind::dict : plain_value::kind::list;
  std::size_t step = is_dict ? 2 : 1;
  for (std::size_t i = 0; i < source->items.size(); i += step) {
    if (is_dict) {
      std::string_view key;
      out.keys.emplace_back(get_string(source->items[i], key) ? std::string(key) : std::string("<key>"));
      charge(units_of<std::string> + key.size() / 8, "allocator_settings keys");
    }
    out.items.emplace_back();
    if (!to_plain(source->items[i + step - 1], out.items.back(), depth + 1, failure)) return false;
  }
  return true;
}

bool snapshot_builder::finish(value root, snapshot& out, error& failure) {
  const container* top = generic_container(root);
  value segments_value = value::make(vkind::none, 0);
  value traces_value = value::make(vkind::none, 0);
  value settings_value = value::make(vkind::none, 0);
  value annotations_value = value::make(vkind::none, 0);
  if (top != nullptr && top->type == container_type::dict) {
    for (std::size_t i = 0; i < top->items.size(); i += 2) {
      value key = top->items[i];
      if (key.kind() != vkind::string) continue;
      switch (key.index()) {
        case s_segments: segments_value = top->items[i + 1]; break;
        case s_device_traces: traces_value = top->items[i + 1]; break;
        case s_allocator_settings: settings_value = top->items[i + 1]; break;
        case s_external_annotations: annotations_value = top->items[i + 1]; break;
        default: break;
      }
    }
    if (segments_value.kind() == vkind::none && traces_value.kind() == vkind::none) {
      failure = {errc::not_a_snapshot, 0, "a dict without 'segments' or 'device_traces'"};
      return false;
    }
  } else if ((top != nullptr && top->type == container_type::list) || root.kind() == vkind::empty_list) {
    segments_value = root;  // the legacy format: a bare list of segments
    out.had_legacy_list_format = true;
  } else {
    failure = {errc::not_a_snapshot, 0, std::string("the pickle holds ") + kind_name(root.kind()) + ", not a dict"};
    return false;
  }

  auto items_of = [&](value list, std::string_view what, std::span<const value>& items) {
    if (list.kind() == vkind::none || list.kind() == vkind::empty_list) return true;
    const container* held = generic_container(list);
    if (held == nullptr || held->type == container_type::dict) {
      failure = {errc::not_a_snapshot, 0, std::string(what) + " is " + kind_name(list.kind()) + ", expected a list"};
      return false;
    }
    items = held->items;
    return true;
  };

  auto over_budget = [&] {
    failure = budget_failure_;
    return false;
  };
  std::span<const value> segment_items;
  if (!items_of(segments_value, "'segments'", segment_items)) return false;
  if (!charge(units_of<segment> * segment_items.size(), "segments copied into the snapshot")) return over_budget();
  out.segments.reserve(segment_items.size());
  for (value item : segment_items) {
    if (item.kind() != vkind::segment) {
      failure = {errc::not_a_snapshot, 0, std::string("'segments' holds ") + kind_name(item.kind())};
      return false;
    }
    out.segments.push_back(segments_[item.index()]);
  }

  std::span<const value> trace_lists;
  if (!items_of(traces_value, "'device_traces'", trace_lists)) return false;
  // Each device's list is normally a range of the entries read (see container::event_count),
  // in pickle order; otherwise its items are copied into device order.
  struct listed {
    std::uint32_t first_event = 0;
    std::uint32_t event_count = 0;
    std::span<const value> items;
    std::uint64_t size() const { return event_count + items.size(); }
  };
  bool in_order = true;
  std::uint32_t expected = 0;
  std::vector<listed> per_device(trace_lists.size());
  std::uint64_t listed_events = 0;
  for (std::size_t device = 0; device < trace_lists.size(); ++device) {
    const container* range = container_of(trace_lists[device]);
    if (range != nullptr && range->event_count > 0) {
      per_device[device].first_event = range->first_event;
      per_device[device].event_count = range->event_count;
    } else if (!items_of(trace_lists[device], "a device trace", per_device[device].items)) {
      return false;
    }
    listed_events += per_device[device].size();
  }
  // More entries listed than were ever read: the lists repeat entries (or whole lists) and
  // would be copied per reference. Pay for the copies before walking them.
  if (listed_events > events_.size() &&
      !charge(units_of<trace_event> * listed_events, "trace entries copied for repeated device traces")) {
    return over_budget();
  }
  for (std::size_t device = 0; device < per_device.size(); ++device) {
    if (per_device[device].first_event != expected) in_order = false;
    expected += per_device[device].event_count;
    for (value item : per_device[device].items) {
      if (item.kind() != vkind::event) {
        failure = {errc::not_a_snapshot, 0, "device_traces[" + std::to_string(device) + "] holds " + kind_name(item.kind())};
        return false;
      }
      if (item.index() != expected++) in_order = false;
    }
  }
  std::vector<trace_event> ordered;
  if (!in_order) {
    if (listed_events <= events_.size() && !charge(units_of<trace_event> * expected, "trace entries put in device order")) {
      return over_budget();
    }
    ordered.reserve(expected);
    for (const listed& list : per_device) {
      for (std::uint32_t i = 0; i < list.event_count; ++i) ordered.push_back(events_[list.first_event + i]);
      for (value item : list.items) ordered.push_back(events_[item.index()]);
    }
  } else {
    events_.resize(expected);
    ordered = std::move(events_);
  }
  std::uint32_t first = 0;
  for (std::size_t device = 0; device < per_device.size(); ++device) {
    auto count = static_cast<std::uint32_t>(per_device[device].size());
    out.device_traces.push_back({static_cast<std::int64_t>(device), first, count});
    first += count;
  }
  out.events = std::move(ordered);

  if (const container* settings = generic_container(settings_value); settings && settings->type == container_type::dict) {
    for (std::size_t i = 0; i + 1 < settings->items.size(); i += 2) {
      std::string_view key;
      if (!get_string(settings->items[i], key)) continue;
      plain_value converted;
      if (!to_plain(settings->items[i + 1], converted, 0, failure)) return false;
      out.allocator_settings.emplace_back(std::string(key), std::move(converted));
    }
  }
  std::span<const value> annotation_items;
  if (generic_container(annotations_value) != nullptr && items_of(annotations_value, "", annotation_items)) {
    for (value item : annotation_items) {
      if (item.kind() == vkind::annotation) out.annotations.push_back(std::move(annotations_[item.index()]));
    }
  }

  out.blocks = std::move(blocks_);
  out.streams = std::move(streams_);
  out.event_tags = std::move(event_tags_);
  out.frames = std::move(frames_);
  out.stack_frames = std::move(stack_frames_);
  out.stack_offsets = std::move(stack_offsets_);
  string_ids_.clear();
  out.strings.reserve(string_storage_.size());
  for (auto& text : string_storage_) out.strings.push_back(std::move(text));
  string_storage_.clear();
  return true;
}

}  // namespace rlmem::detail
