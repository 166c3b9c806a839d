// SPDX-License-Identifier: MIT
// The JSON report of `rlmem inspect`; docs/schema/inspect.schema.json describes it.

#include "oom_json.hpp"
#include "stack_text.hpp"

#include <rlmem/report/report.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <span>

namespace rlmem {

namespace {

using json = nlohmann::ordered_json;

json to_json(const plain_value& item) {
  switch (item.type) {
    case plain_value::kind::none: return nullptr;
    case plain_value::kind::boolean: return item.boolean;
    case plain_value::kind::integer: return item.integer;
    case plain_value::kind::real: return item.real;
    case plain_value::kind::text: return item.text;
    case plain_value::kind::list: {
      json list = json::array();
      for (const auto& element : item.items) list.push_back(to_json(element));
      return list;
    }
    case plain_value::kind::dict: {
      json dict = json::object();
      for (std::size_t i = 0; i < item.items.size(); ++i) dict[item.keys[i]] = to_json(item.items[i]);
      return dict;
    }
  }
  return nullptr;
}

json stack_json(const snapshot& snap, stack_id stack) {
  json frames = json::array();
  std::span<const frame_id> all = snap.stack(stack);
  std::size_t shown = std::min(all.size(), detail::max_json_stack_frames);
  for (frame_id id : all.first(shown)) frames.push_back(detail::frame_text(snap, id));
  if (shown < all.size()) frames.push_back(fmt::format("... {} more frames", all.size() - shown));
  return frames;
}

json live_blocks_json(const leak& found) {
  json blocks = json::array();
  for (const auto& [address, size] : found.live_blocks) blocks.push_back({{"address", address}, {"size", size}});
  return blocks;
}

json event_or_null(std::int64_t event) { return event < 0 ? json(nullptr) : json(event); }

// A time as torch recorded it, or null when the trace carries no times.
json time_or_null(const inspection& result, std::int64_t time_us) { return result.times_known ? json(time_us) : json(nullptr); }

}  // namespace

std::string render_inspection_json(const snapshot& snap, const inspection& result, const std::string& source,
                                   std::size_t max_timeline_points) {
  const timeline& line = result.memory;
  json out;
  out["schema_version"] = 3;
  out["command"] = "inspect";
  out["file"] = source;
  out["device"] = result.device;
  out["devices"] = result.devices;

  json& summary = out["summary"];
  summary["events"] = result.events;
  json by_action = json::object();
  for (std::size_t action = 0; action < trace_action_count; ++action) {
    if (result.events_by_action[action] > 0) by_action[std::string(trace_action_name(static_cast<trace_action>(action)))] = result.events_by_action[action];
  }
  summary["events_by_action"] = by_action;
  summary["times_known"] = result.times_known;
  summary["first_time_us"] = time_or_null(result, result.first_time_us);
  summary["last_time_us"] = time_or_null(result, result.last_time_us);
  summary["peak_allocated_bytes"] = result.peak_allocated_bytes;
  summary["peak_allocated_event"] = event_or_null(result.peak_allocated_event);
  summary["peak_allocated_time_us"] = time_or_null(result, result.peak_allocated_time_us);
  summary["peak_reserved_bytes"] = result.peak_reserved_bytes;
  summary["peak_reserved_event"] = event_or_null(result.peak_reserved_event);
  summary["peak_reserved_time_us"] = time_or_null(result, result.peak_reserved_time_us);
  summary["allocated_at_trace_start_bytes"] = line.allocated_at_start;
  summary["reserved_at_trace_start_bytes"] = line.reserved_at_start;
  summary["blocks_live_at_trace_start"] = line.blocks_live_at_start;
  summary["frees_of_blocks_from_before_trace"] = line.frees_of_earlier_blocks;
  summary["final_allocated_bytes"] = result.final_allocated_bytes;
  summary["final_active_bytes"] = result.final_active_bytes;
  summary["final_reserved_bytes"] = result.final_reserved_bytes;
  summary["segments"] = result.segment_count;
  summary["largest_segment_bytes"] = result.largest_segment_bytes;
  summary["expandable_segments"] = result.expandable_segment_count;
  summary["streams"] = result.streams;

  json settings = json::object();
  for (const auto& [key, item] : snap.allocator_settings) settings[key] = to_json(item);
  out["allocator_settings"] = settings;

  json& peak = out["peak"];
  peak["event"] = event_or_null(result.peak_allocated_event);
  peak["allocated_bytes"] = result.peak_allocated_bytes;
  peak["site_count"] = result.peak_site_count;
  json sites = json::array();
  for (const site_usage& usage : result.peak_by_site) {
    sites.push_back({{"site", usage.site.label},
                     {"user_frame", usage.site.user_frame.empty() ? json(nullptr) : json(usage.site.user_frame)},
                     {"bytes", usage.bytes},
                     {"count", usage.count},
                     {"stack", stack_json(snap, usage.site.stack)}});
  }
  peak["by_site"] = sites;

  json& steps = out["steps"];
  steps["method"] = result.step_method.empty() ? json(nullptr) : json(result.step_method);
  steps["count"] = result.steps.size();
  json step_ends = json::array();
  for (std::size_t k = 0; k < result.steps.size(); ++k) {
    const step_end& end = result.steps[k];
    step_ends.push_back({{"step", k + 1}, {"event", end.event}, {"time_us", time_or_null(result, end.time_us)},
                         {"allocated_bytes", end.allocated_bytes}, {"reserved_bytes", end.reserved_bytes}});
  }
  steps["ends"] = step_ends;

  json leaks = json::array();
  for (const leak& found : result.leaks) {
    json lines = json::array();
    for (const leak_line& one : found.lines) {
      lines.push_back({{"site", one.site.label},
                       {"line", one.line > 0 ? json(one.line) : json(nullptr)},
                       {"user_frame", one.site.user_frame.empty() ? json(nullptr) : json(one.site.user_frame)},
                       {"bytes_per_step", one.bytes_per_step},
                       {"live_bytes_at_end", one.live_bytes_at_end},
                       {"live_count_at_end", one.live_count_at_end}});
    }
    leaks.push_back({{"site", found.site.label},
                     {"user_frame", found.site.user_frame.empty() ? json(nullptr) : json(found.site.user_frame)},
                     {"stack", stack_json(snap, found.site.stack)},
                     {"bytes_per_step", found.bytes_per_step},
                     {"steps", found.steps},
                     {"first_step", found.first_step},
                     {"live_bytes_at_end", found.live_bytes_at_end},
                     {"live_count_at_end", found.live_count_at_end},
                     {"bytes_at_step_end", found.bytes_at_step_end},
                     {"lines", lines},
                     {"live_blocks", live_blocks_json(found)},
                     {"live_blocks_left_out", found.live_blocks_left_out}});
  }
  out["leaks"] = leaks;
  const leak_summary& growth = result.summary_of_leaks;
  if (growth.measured) {
    bool grew = growth.growth_per_step_bytes > 0;
    out["leak_summary"] = {
        {"from_step", growth.from_step},
        {"to_step", growth.to_step},
        {"allocated_from_bytes", growth.allocated_from_bytes},
        {"allocated_to_bytes", growth.allocated_to_bytes},
        {"growth_per_step_bytes", growth.growth_per_step_bytes},
        {"step_ends_grown", growth.step_ends_grown},
        {"explained_per_step_bytes", growth.explained_per_step_bytes},
        {"explained_fraction", grew ? json(static_cast<double>(growth.explained_per_step_bytes) /
                                           static_cast<double>(growth.growth_per_step_bytes))
                                    : json(nullptr)},
        {"growth_without_named_leak", growth.growth_without_named_leak}};
  } else {
    out["leak_summary"] = nullptr;
  }

  out["oom"] = detail::ooms_json(result);
  out["oom_limit"] = detail::oom_limit_json(result);

  const fragmentation_report& frag = result.fragmentation;
  out["fragmentation"] = {{"max_unallocated_bytes", frag.max_unallocated_bytes},
                          {"max_unallocated_event", event_or_null(frag.max_unallocated_event)},
                          {"unallocated_at_peak_reserved_bytes", frag.unallocated_at_peak_reserved_bytes},
                          {"largest_free_block_at_peak_reserved_bytes", frag.largest_free_block_at_peak_reserved_bytes},
                          {"unallocated_at_end_bytes", frag.unallocated_at_end_bytes},
                          {"largest_free_block_at_end_bytes", frag.largest_free_block_at_end_bytes},
                          {"mostly_empty_segments", frag.mostly_empty_segments},
                          {"mostly_empty_segment_bytes", frag.mostly_empty_segment_bytes}};

  json category_columns = json::array({"event"});
  json at_peak = json::object();
  for (std::size_t c = 0; c < memory_category_count; ++c) {
    std::string name(memory_category_name(static_cast<memory_category>(c)));
    category_columns.push_back(name);
    at_peak[name] = result.categories_at_peak[c];
  }
  json category_points = json::array();
  for (std::size_t i = 0; i < result.categories.events.size(); ++i) {
    json point = json::array({result.categories.events[i]});
    for (std::int64_t bytes : result.categories.bytes[i]) point.push_back(bytes);
    category_points.push_back(std::move(point));
  }
  out["categories"] = {{"at_peak", at_peak}, {"timeline", {{"columns", category_columns}, {"points", category_points}}}};

  json points = json::array();
  for (std::size_t index : timeline_points(line, max_timeline_points / 2)) {
    points.push_back({index, line.allocated[index], line.reserved[index]});
  }
  out["timeline"] = {{"columns", {"event", "allocated_bytes", "reserved_bytes"}},
                     {"total_events", line.allocated.size()},
                     {"points", points}};
  out["notes"] = result.notes;
  // Frame strings come from the file: replace invalid UTF-8 rather than fail on it.
  return out.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace rlmem
