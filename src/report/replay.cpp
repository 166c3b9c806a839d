// SPDX-License-Identifier: MIT
// Renders `rlmem replay`: the run, its fidelity to the recording, and the settings table.

#include "prose.hpp"
#include "replay_json.hpp"

#include <rlmem/report/report.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace rlmem {

namespace {

using json = nlohmann::ordered_json;

std::string settings_text(const allocator_settings& settings) {
  std::string conf = to_alloc_conf(settings);
  return conf.empty() ? "defaults" : conf;
}

std::string capacity_text(std::uint64_t bytes) { return bytes == 0 ? "no limit" : format_bytes(static_cast<std::int64_t>(bytes)); }

json result_json(const replay_result& result) {
  json out;
  out["completed"] = result.completed;
  out["oom"] = result.oom ? json{{"event_index", result.oom->event},
                                 {"requested_bytes", result.oom->requested_bytes},
                                 {"allocated_bytes", result.oom->allocated_bytes},
                                 {"reserved_bytes", result.oom->reserved_bytes},
                                 {"recorded", result.oom->recorded}}
                          : json(nullptr);
  out["peak_allocated_bytes"] = result.peak_allocated_bytes;
  out["peak_reserved_bytes"] = result.peak_reserved_bytes;
  out["segments"] = result.segments;
  out["num_alloc_retries"] = result.num_alloc_retries;
  out["events_replayed"] = result.events_replayed;
  out["inferred_limit"] = result.inferred_limit ? json{{"low_bytes", result.inferred_limit->low_bytes},
                                                      {"high_bytes", result.inferred_limit->high_bytes},
                                                      {"first_evidence_event", result.inferred_limit->first_evidence_event},
                                                      {"garbage_collection", result.inferred_limit->garbage_collection},
                                                      {"replayed_under_bytes", result.inferred_limit->replay_bytes()}}
                                                : json(nullptr);
  out["recording_ended_in_oom"] = result.recording_ended_in_oom;
  out["notes"] = result.notes;
  return out;
}

// The floor of a comparison: the smallest peak allocated of its rows, which is the program's
// demand: the rlmem policy counts each request rounded to 512 bytes as torch rounds it, and no
// allocator holds the live requests in less. Torch also counts the remainder of a block it
// served whole (too small to split) as allocated, so the recorded settings' row, the trace's
// peak allocated as torch and `rlmem inspect` count it, can be above the floor: a policy that
// splits those blocks reserves less than it, never less than the floor.
struct floor_figures {
  std::int64_t demand_bytes = 0;
  std::int64_t torch_allocated_bytes = 0;  ///< the recorded settings' row; 0 when not modelled
};
floor_figures comparison_floor(const std::vector<settings_comparison>& rows) {
  floor_figures floor{rows.front().floor_bytes, 0};
  for (const settings_comparison& row : rows) {
    if (row.result.unsupported.empty() && row.floor_bytes > 0) floor.demand_bytes = std::min(floor.demand_bytes, row.floor_bytes);
  }
  const settings_comparison& recorded = rows.front();
  if (recorded.label == "recorded" && recorded.result.unsupported.empty()) floor.torch_allocated_bytes = recorded.floor_bytes;
  return floor;
}

// A run's peak allocated, said to stop at its OOM when the replay stopped there.
std::string peak_allocated_text(const replay_result& result) {
  std::string text = format_bytes(result.peak_allocated_bytes);
  if (result.oom && !result.oom->recorded) text += " (up to its OOM)";
  return text;
}

}  // namespace

std::string render_replay_text(const replay_report& report) {
  const replay_result& result = report.result;
  std::string out = fmt::format("{}  device {}\n", printable_text(report.file), report.device);
  const rlmem_policy_options* rlmem = std::get_if<rlmem_policy_options>(&report.allocator);
  std::string under = rlmem != nullptr ? fmt::format("the rlmem policy, free pages {} (what-if)",
                                                     rlmem->release_free_pages ? "released at once" : "cached until needed")
                                    : fmt::format("{} ({})", settings_text(report.settings), report.settings_recorded ? "as recorded" : "what-if");
  out += detail::wrap(fmt::format("replayed under {}, capacity {}", under, capacity_text(report.capacity_bytes)), 2, 100) + "\n";
  // A labelled row; long values wrap under the value column (2 + 16 + 1 = 19).
  auto row = [&](std::string_view name, const std::string& text) {
    std::string wrapped = detail::wrap(text, 19, 100);
    out += fmt::format("  {:<16} ", name) + wrapped.substr(std::min<std::size_t>(19, wrapped.size()));
  };
  if (result.inferred_limit) {
    const recorded_limit& limit = *result.inferred_limit;
    row("limit", fmt::format("{} inferred: the recording shows a limit of {} (it refused to grow at event {}{}); "
                             "replayed under {}; --capacity overrides",
                             format_bytes(static_cast<std::int64_t>(limit.replay_bytes())),
                             format_byte_range(limit.low_bytes, limit.high_bytes - 1),
                             format_count(limit.high_event), limit.garbage_collection ? ", the garbage collector's releases" : "",
                             limit.garbage_collection ? "the top of that range" : "its peak reserved"));
  }
  if (result.oom) {
    std::string failed = fmt::format("OOM at event {} asking for {} (allocated {}, reserved {})", format_count(result.oom->event),
                                     format_bytes(static_cast<std::int64_t>(result.oom->requested_bytes)),
                                     format_bytes(result.oom->allocated_bytes), format_bytes(result.oom->reserved_bytes));
    if (result.oom->recorded) {
      failed += fmt::format(", as the recording did; the program went on and so did the replay, {} events", format_count(result.events_replayed));
    }
    row("result", failed);
  } else {
    row("result", fmt::format("completed, {} events", format_count(result.events_replayed)));
  }
  row("peak allocated", peak_allocated_text(result));
  row("peak reserved", format_bytes(result.peak_reserved_bytes));
  row("segments", format_count(result.segments) + " at the end");
  row("alloc retries", format_count(result.num_alloc_retries) + " (num_alloc_retries: cache flushed to make room)");
  if (result.recording_ended_in_oom) row("note", "the recording ran out of memory where this replay did not");
  if (result.fidelity.applicable) {
    std::string fidelity = fmt::format("{} of {} recorded segment events reproduced", format_count(result.fidelity.segment_events_matched),
                                       format_count(result.fidelity.segment_events_expected));
    row("fidelity", fidelity);
    if (!result.fidelity.first_mismatch.empty()) {
      row("", "first divergence: " + result.fidelity.first_mismatch);
      row("", "(the model follows the recording only under the same settings and memory limit)");
    }
  }
  for (const std::string& note : result.notes) row("note", note);
  if (report.min_capacity_bytes) {
    row("min capacity", *report.min_capacity_bytes == 0 ? "does not complete at any capacity"
                                                         : format_bytes(static_cast<std::int64_t>(*report.min_capacity_bytes)) +
                                                               " (smallest limit, to 2 MiB, under which it completes)");
  }
  if (!report.comparison.empty()) {
    // The label column fits the longest label, up to what leaves the three figures within 100
    // columns (2 + 56 + 3 x 14); a longer label is cut with "..." at its end.
    constexpr std::size_t widest_label = 56;
    auto label_of = [](const settings_comparison& compared) {
      return printable_text(compared.label == "recorded" ? "recorded: " + settings_text(compared.settings) : compared.label);
    };
    std::size_t width = 30;
    for (const settings_comparison& compared : report.comparison) width = std::max(width, std::min(label_of(compared).size(), widest_label));
    auto fitted = [&](std::string label) {
      return label.size() <= width ? label : label.substr(0, width - 3) + "...";
    };
    out += fmt::format("\n  {:<{}} {:>13} {:>13} {:>13}\n", "settings", width, "peak reserved", "min capacity",
                       report.capacity_bytes ? "at capacity" : "");
    for (const settings_comparison& compared : report.comparison) {
      std::string label = fitted(label_of(compared));
      if (!compared.result.unsupported.empty()) {
        out += fmt::format("  {:<{}} {}\n", label, width, "not modelled yet");
        continue;
      }
      out += fmt::format("  {:<{}} {:>13} {:>13} {:>13}\n", label, width, format_bytes(compared.result.peak_reserved_bytes),
                         format_bytes(static_cast<std::int64_t>(compared.min_capacity_bytes)),
                         report.capacity_bytes ? (compared.result.completed ? "completes" : "OOM") : "");
    }
    floor_figures floor = comparison_floor(report.comparison);
    out += fmt::format("  {:<{}} {:>13} {:>13}\n", "floor (peak of the requests)", width, "", format_bytes(floor.demand_bytes));
    if (floor.torch_allocated_bytes > floor.demand_bytes) {
      out += detail::wrap(fmt::format("the floor is the requests live at once, rounded to 512 B; torch's peak allocated, {}, also "
                                      "counts the remainders of blocks it served whole, so a policy can reserve less than that",
                                      format_bytes(floor.torch_allocated_bytes)),
                          4, 100);
    }
  }
  return out;
}

json detail::replay_json(const replay_report& report) {
  json out;
  out["schema_version"] = 1;
  out["command"] = "replay";
  out["file"] = report.file;
  out["device"] = report.device;
  out["alloc_conf"] = to_alloc_conf(report.settings);
  const rlmem_policy_options* rlmem = std::get_if<rlmem_policy_options>(&report.allocator);
  out["settings_recorded"] = report.settings_recorded && rlmem == nullptr;
  out["allocator"] = allocator_name(report.allocator);
  if (rlmem != nullptr) out["release_free_pages"] = rlmem->release_free_pages;
  out["capacity_bytes"] = report.capacity_bytes;
  json totals = result_json(report.result);  // a named json: items() must not outlive it
  for (auto& [key, item] : totals.items()) out[key] = item;
  const replay_fidelity& fidelity = report.result.fidelity;
  out["fidelity"] = fidelity.applicable ? json{{"segment_events_expected", fidelity.segment_events_expected},
                                              {"segment_events_matched", fidelity.segment_events_matched},
                                              {"first_mismatch", fidelity.first_mismatch.empty() ? json(nullptr) : json(fidelity.first_mismatch)}}
                                        : json(nullptr);
  if (report.min_capacity_bytes) out["min_capacity_bytes"] = *report.min_capacity_bytes;
  if (!report.comparison.empty()) {
    json rows = json::array();
    for (const settings_comparison& compared : report.comparison) {
      json row = {{"label", compared.label}, {"alloc_conf", to_alloc_conf(compared.settings)}};
      if (!compared.result.unsupported.empty()) {
        row["unsupported"] = compared.result.unsupported;
      } else {
        json compared_totals = result_json(compared.result);
        for (auto& [key, item] : compared_totals.items()) row[key] = item;
        row["min_capacity_bytes"] = compared.min_capacity_bytes;
      }
      rows.push_back(std::move(row));
    }
    out["compare"] = rows;
    floor_figures floor = comparison_floor(report.comparison);
    out["floor_bytes"] = floor.demand_bytes;
    out["torch_peak_allocated_bytes"] = floor.torch_allocated_bytes > 0 ? json(floor.torch_allocated_bytes) : json(nullptr);
  }
  return out;
}

std::string render_replay_json(const replay_report& report) {
  return detail::replay_json(report).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace rlmem
