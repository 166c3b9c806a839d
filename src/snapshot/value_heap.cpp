// SPDX-License-Identifier: MIT
// The snapshot builder's value heap: numbers too wide for a value, open and generic containers
// in reusable slots, the trace-entry ranges of device traces, sealing a container into what its
// shape says (torch_schema.cpp decides which record a dict is), and the held-value budget.

#include "snapshot_builder.hpp"

#include "byte_source.hpp"
#include "held_units.hpp"

#include <algorithm>
#include <string>

namespace rlmem::detail {

namespace {

// Up-front reservations are address space, not memory, but a sparse file's size is no promise:
// reserve for at most this much input and let larger inputs grow geometrically.
constexpr std::uint64_t max_reserved_input_bytes = std::uint64_t{1} << 30;

}  // namespace

void snapshot_builder::reserve_for_input(std::uint64_t bytes) {
  bytes = std::min(bytes, max_reserved_input_bytes);
  // Torch writes 95 to 140 bytes per trace entry; reserve for the densest case, since address
  // space reserved and never touched is not resident.
  events_.reserve(static_cast<std::size_t>(bytes / 64));
}

void snapshot_builder::set_budget(const read_limits& limits, const input_window& input) {
  limits_ = &limits;
  input_ = &input;
  allowance_ = 0;  // the first charge computes it
}

bool snapshot_builder::recheck_budget(std::string_view what) {
  if (limits_ == nullptr) return true;
  std::uint64_t per_unit = std::max<std::uint32_t>(limits_->input_bytes_per_held_value, 1);
  allowance_ = limits_->max_held_values + input_->offset() / per_unit;
  if (held_units_ <= allowance_) return true;
  if (!over_budget_) {
    over_budget_ = true;
    budget_failure_ = {errc::limit_held_values, input_->offset(),
                       std::string(what) + ": " + std::to_string(held_units_) + " units of 8 bytes held, limit " +
                           std::to_string(allowance_) + " (read_limits::max_held_values " +
                           std::to_string(limits_->max_held_values) + " + 1 per " + std::to_string(per_unit) +
                           " input bytes)"};
    if (poll_countdown_ != nullptr) *poll_countdown_ = 1;
  }
  return false;
}

value snapshot_builder::make_integer(std::int64_t number) {
  if (number >= value::inline_min && number <= value::inline_max) {
    return value::make(vkind::integer, static_cast<std::uint64_t>(number));
  }
  wide_integers_.push_back(number);
  return value::make(vkind::big_integer, wide_integers_.size() - 1);
}

value snapshot_builder::make_real(double number) {
  reals_.push_back(number);
  return value::make(vkind::real, reals_.size() - 1);
}

std::uint32_t snapshot_builder::take_container_slot(container_type type) {
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(containers_.size());
    containers_.emplace_back();
  }
  charge(units_of<container>, "open containers");
  containers_[slot].type = type;
  containers_[slot].sealed = false;
  containers_[slot].memo_index = UINT64_MAX;
  containers_[slot].copies = 1;
  containers_[slot].became = {};
  return slot;
}

void snapshot_builder::release_container_slot(std::uint32_t slot) {
  container& released = containers_[slot];
  held_units_ -= units_of<container> + released.items.size() + released.event_count;
  released.items.clear();
  released.event_count = 0;
  if (released.items.capacity() > 64) released.items.shrink_to_fit();  // keep small buffers for reuse only
  // A slot whose generation would wrap is retired, so a stale reference can never match again.
  if (++released.generation < memo_table::payload_limit) free_slots_.push_back(slot);
}

value snapshot_builder::new_container(container_type type) {
  return object_in_slot(take_container_slot(type));
}

value snapshot_builder::make_filled(container_type type, std::span<const value> items) {
  value made = new_container(type);
  container& filled = *container_of(made);
  filled.items.assign(items.begin(), items.end());
  charge(items.size(), "container items");
  filled.sealed = true;  // built whole by one opcode: never open
  return made;
}

snapshot_builder::container* snapshot_builder::container_of(value item) {
  if (item.kind() != vkind::object) return nullptr;
  auto slot = static_cast<std::uint32_t>(item.payload());
  auto generation = static_cast<std::uint32_t>(item.payload() >> 32);
  if (slot >= containers_.size() || containers_[slot].generation != generation) return nullptr;
  return &containers_[slot];
}

const snapshot_builder::container* snapshot_builder::generic_container(value item) {
  container* held = container_of(item);
  if (held != nullptr && held->event_count > 0) write_out_event_range(*held);
  return held;
}

bool snapshot_builder::extends_event_range(const container& list, std::span<const value> items) {
  if (list.type != container_type::list || !list.items.empty() || items.empty()) return false;
  std::uint64_t next = list.event_count > 0 ? std::uint64_t{list.first_event} + list.event_count : items[0].index();
  for (value item : items) {
    if (item.kind() != vkind::event || item.index() != next) return false;
    ++next;
  }
  return next <= UINT32_MAX;
}

// The range's entries as items (already paid for: extend charged them as items).
void snapshot_builder::write_out_event_range(container& list) {
  std::vector<value> written;
  written.reserve(list.event_count + list.items.size());
  for (std::uint32_t i = 0; i < list.event_count; ++i) written.push_back(value::make(vkind::event, list.first_event + i));
  written.insert(written.end(), list.items.begin(), list.items.end());
  list.items = std::move(written);
  list.event_count = 0;
}

bool snapshot_builder::consume_object(value& item, error& failure) {
  container* held = container_of(item);
  if (held == nullptr) {
    // Its slot was reused: the pickle reaches a record through a copy it made after the record
    // was complete (a second memo entry), which torch's pickler never writes.
    failure = {errc::container_reused, 0, "a container used again after it became a record"};
    return false;
  }
  auto slot = static_cast<std::uint32_t>(item.payload());
  if (held->became.kind() != vkind::none) {
    item = held->became;  // a copy of one already consumed
    if (--held->copies == 0) release_container_slot(slot);
    return true;
  }
  if (held->sealed) return true;
  return seal(slot, item, failure);
}

std::uint32_t snapshot_builder::memo_code(value item, std::uint64_t index) {
  std::uint32_t code = memo_table::code_for(item);
  if (item.kind() != vkind::object || code == memo_table::escaped) return code;
  container* held = container_of(item);
  if (held == nullptr || held->memo_index != UINT64_MAX) return memo_table::escaped;
  held->memo_index = index;
  return code;
}

bool snapshot_builder::extend(value& target, std::span<const value> items, error& failure) {
  if (target.kind() == vkind::event) {
    failure = {errc::container_reused, 0, "a trace entry changed after it was read"};
    return false;
  }
  if (target.kind() != vkind::object) {
    failure = {errc::type_mismatch, 0, std::string("cannot add items to ") + kind_name(target.kind())};
    return false;
  }
  container* into = container_of(target);
  if (into == nullptr) {
    failure = {errc::container_reused, 0, "container changed after it became a record"};
    return false;
  }
  if (into->type == container_type::tuple) {
    failure = {errc::type_mismatch, 0, "cannot add items to a tuple"};
    return false;
  }
  if (extends_event_range(*into, items)) {
    if (into->event_count == 0) into->first_event = items[0].index();
    into->event_count += static_cast<std::uint32_t>(items.size());
  } else {
    if (into->event_count > 0) write_out_event_range(*into);
    into->items.insert(into->items.end(), items.begin(), items.end());
  }
  if (!charge(items.size(), "container items")) {
    failure = budget_failure_;
    return false;
  }
  if (into->type == container_type::dict && is_trace_entry(items)) return consume_object(target, failure);
  return true;
}

bool snapshot_builder::seal(std::uint32_t slot, value& sealed, error& failure) {
  container& sealing = containers_[slot];
  sealing.sealed = true;
  value converted = sealed;
  bool ok = true;
  if (sealing.type == container_type::list) {
    ok = seal_list(sealing, converted);
  } else if (sealing.type == container_type::dict) {
    ok = seal_dict(sealing, converted, failure);
  }
  if (!ok) return false;
  if (converted.kind() == vkind::event && sealing.copies > 1) {
    failure = {errc::container_reused, 0, "a trace entry referenced twice"};
    return false;
  }
  if (converted.kind() != vkind::object) {
    std::uint64_t memo_index = sealing.memo_index;
    if (memo_ != nullptr && memo_index < memo_->size() && memo_->code(memo_index) == memo_table::code_for(sealed)) {
      memo_->store(memo_index, memo_table::code_for(converted), converted);
    }
    sealing.became = converted;
    if (--sealing.copies == 0) release_container_slot(slot);
  }
  sealed = converted;
  return true;
}

bool snapshot_builder::seal_list(container& list, value& sealed) {
  if (list.event_count > 0) return true;  // a device trace: a generic list
  if (list.items.empty()) {
    sealed = value::make(vkind::empty_list, 0);
    return true;
  }
  for (value item : list.items) {
    if (item.kind() != vkind::frame) return true;  // a generic list
  }
  sealed = value::make(vkind::stack, intern_stack(list.items));
  return true;
}

bool snapshot_builder::get_integer(value item, std::int64_t& out) const {
  if (item.kind() == vkind::integer) {
    out = item.inline_integer();
    return true;
  }
  if (item.kind() == vkind::big_integer) {
    out = wide_integers_[item.index()];
    return true;
  }
  return false;
}

bool snapshot_builder::get_string(value item, std::string_view& out) const {
  if (item.kind() != vkind::string) return false;
  out = string_storage_[item.index()];
  return true;
}

}  // namespace rlmem::detail
