// SPDX-License-Identifier: MIT
// The snapshot builder's interning: each distinct string, stack of frames, stream and trace
// entry tag is stored once and named by a small id, so millions of trace entries repeating a few
// thousand of them cost an id each.

#include "snapshot_builder.hpp"

#include "held_units.hpp"

#include <cstring>
#include <string>

namespace rlmem::detail {

std::size_t snapshot_builder::event_tag_hash::operator()(const event_tag& tag) const noexcept {
  std::uint64_t h = (std::uint64_t{tag.stream} << 32) ^ tag.compile_context;
  h = (h ^ ((std::uint64_t{tag.user_metadata} << 32) | tag.action_name)) * 0x9e3779b97f4a7c15ULL;
  return static_cast<std::size_t>(h ^ (h >> 29));
}

std::size_t snapshot_builder::frame_key_hash::operator()(const frame& f) const noexcept {
  std::uint64_t h = (std::uint64_t{f.name} << 32) ^ f.filename;
  h ^= static_cast<std::uint64_t>(f.line) * 0x9e3779b97f4a7c15ULL;
  return static_cast<std::size_t>(h ^ (h >> 29));
}

value snapshot_builder::make_string(std::string_view text, bool is_bytes) {
  vkind kind = is_bytes ? vkind::bytes : vkind::string;
  short_string_slot* slot = nullptr;
  if (text.size() <= sizeof(short_string_slot::text)) {
    unsigned hash = static_cast<unsigned>(text.size()) * 31u;
    if (!text.empty()) hash += static_cast<unsigned char>(text.front()) * 7u + static_cast<unsigned char>(text.back()) * 131u + static_cast<unsigned char>(text[text.size() / 2]);
    slot = &short_strings_[hash & 0xffu];
    if (slot->length == text.size() && std::memcmp(slot->text, text.data(), text.size()) == 0) return value::make(kind, slot->id);
  }
  auto found = string_ids_.find(text);
  string_id id;
  if (found != string_ids_.end()) {
    id = found->second;
  } else {
    id = static_cast<string_id>(string_storage_.size());
    const std::string& stored = string_storage_.emplace_back(text);
    string_ids_.emplace(stored, id);
    charge(units_of<std::string> + hash_node_units + 1 + text.size() / 8, "interned strings");
  }
  if (slot != nullptr) {
    slot->length = static_cast<std::uint8_t>(text.size());
    if (!text.empty()) std::memcpy(slot->text, text.data(), text.size());
    slot->id = id;
  }
  return value::make(kind, id);
}

stack_id snapshot_builder::intern_stack(std::span<const value> frames) {
  std::uint64_t hash = 1469598103934665603ULL;
  for (value item : frames) hash = (hash ^ item.payload()) * 1099511628211ULL;
  auto equal = [&](stack_id id) {
    std::uint32_t begin = stack_offsets_[id];
    std::uint32_t end = stack_offsets_[id + 1];
    if (end - begin != frames.size()) return false;
    for (std::size_t i = 0; i < frames.size(); ++i) {
      if (stack_frames_[begin + i] != frames[i].index()) return false;
    }
    return true;
  };
  auto head = stack_by_hash_.find(hash);
  if (head != stack_by_hash_.end()) {
    for (stack_id id = head->second; id != 0; id = stack_next_[id]) {
      if (equal(id)) return id;
    }
  }
  auto id = static_cast<stack_id>(stack_offsets_.size() - 1);
  charge(frames.size() / 2 + hash_node_units + 2, "stacks");
  for (value item : frames) stack_frames_.push_back(item.index());
  stack_offsets_.push_back(static_cast<std::uint32_t>(stack_frames_.size()));
  stack_next_.resize(id + 1, 0);
  if (head != stack_by_hash_.end()) {
    stack_next_[id] = head->second;
    head->second = id;
  } else {
    stack_by_hash_.emplace(hash, id);
  }
  return id;
}

std::uint32_t snapshot_builder::intern_stream(std::uint64_t raw_stream) {
  if (raw_stream == last_raw_stream_ && !streams_.empty()) return last_stream_id_;
  auto [found, inserted] = stream_ids_.try_emplace(raw_stream, static_cast<std::uint32_t>(streams_.size()));
  if (inserted) streams_.push_back(raw_stream);
  last_raw_stream_ = raw_stream;
  last_stream_id_ = found->second;
  return found->second;
}

bool snapshot_builder::intern_event_tag(const event_tag& tag, event_tag_id& id, error& failure) {
  cached_tag& cached = recent_tags_[event_tag_hash{}(tag) % recent_tags_.size()];
  if (tag == cached.tag) {
    id = cached.id;
    return true;
  }
  auto [found, inserted] = event_tag_ids_.try_emplace(tag, static_cast<event_tag_id>(event_tags_.size()));
  if (inserted) {
    if (event_tags_.size() >= max_event_tags) {
      event_tag_ids_.erase(found);
      failure = {errc::limit_event_tags, 0, std::to_string(max_event_tags) + " combinations"};
      return false;
    }
    event_tags_.push_back(tag);
    charge(units_of<event_tag>, "trace entry tags");
  }
  cached = {tag, found->second};
  id = found->second;
  return true;
}

}  // namespace rlmem::detail
