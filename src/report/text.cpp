// SPDX-License-Identifier: MIT
// The text report of `rlmem inspect`: summary, a small chart, the peak table, notes.

#include "prose.hpp"
#include "stack_text.hpp"

#include <rlmem/report/report.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace rlmem {

namespace {

std::string seconds_after(std::int64_t time_us, std::int64_t start_us) {
  return fmt::format("+{:.2f} s", static_cast<double>(time_us - start_us) / 1e6);
}

std::string when(const inspection& result, std::int64_t event, std::int64_t time_us) {
  if (event < 0) return "before the first event";
  if (!result.times_known) return "at event " + format_count(static_cast<std::uint64_t>(event));
  return fmt::format("at event {} ({})", format_count(static_cast<std::uint64_t>(event)), seconds_after(time_us, result.first_time_us));
}

std::string settings_line(const snapshot& snap) {
  std::string line;
  if (const plain_value* conf = snap.setting("PYTORCH_CUDA_ALLOC_CONF"); conf && !conf->text.empty()) {
    line = "PYTORCH_CUDA_ALLOC_CONF=" + printable_text(conf->text);
  }
  if (const plain_value* expandable = snap.setting("expandable_segments"); expandable && expandable->boolean && line.empty()) {
    line = "expandable_segments";
  }
  if (const plain_value* split = snap.setting("max_split_size"); split && split->integer > 0 && line.empty()) {
    line = "max_split_size " + format_bytes(split->integer);
  }
  if (snap.allocator_settings.empty()) return "not recorded (torch older than 2.3)";
  return line.empty() ? "defaults" : line;
}

std::string truncate(std::string text, std::size_t width) {
  if (text.size() <= width) return text;
  return text.substr(0, width > 3 ? width - 3 : 0) + "...";
}

// `count` frames of a stack, the user's code first: from the nearest frame of the user's own code
// (the one resolve_site() and the page's "your code" name) outwards, then one line folding the
// frames inside it (torch's, libraries' and their wrappers'), naming the innermost. A stack with
// no user frame, or allocated by the user's frame itself, prints innermost first as recorded.
void append_stack(std::string& out, const snapshot& snap, stack_id stack, std::size_t count, std::size_t indent,
                  std::size_t width) {
  auto frames = snap.stack(stack);
  if (frames.empty() || count == 0) return;
  auto line = [&](const std::string& text) { out += std::string(indent, ' ') + truncate(printable_text(text), width) + "\n"; };
  std::size_t user = user_frame_position(snap, stack);
  if (user == 0 || user >= frames.size()) {
    for (std::size_t i = 0; i < std::min(count, frames.size()); ++i) line(detail::frame_text(snap, frames[i]));
    return;
  }
  for (std::size_t i = user; i < std::min(user + count, frames.size()); ++i) line(detail::frame_text(snap, frames[i]));
  line(fmt::format("[+{} frame{} inside (torch, libraries), innermost {}]", format_count(user), user == 1 ? "" : "s",
                   detail::frame_text(snap, frames.front())));
}

std::string percent(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? fmt::format("{:.0f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "-";
}

void append_steps_and_leaks(std::string& out, const snapshot& snap, const inspection& result, const text_options& options) {
  if (result.steps.empty()) {
    out += "\nSteps: none found\n";
  } else {
    out += fmt::format("\nSteps: {} (from {})\n", result.steps.size(), printable_text(result.step_method));
    out += fmt::format("  {:>5} {:>14} {:>12} {:>12}\n", "step", "ends at event", "allocated", "reserved");
    for (std::size_t k = 0; k < result.steps.size(); ++k) {
      const step_end& end = result.steps[k];
      out += fmt::format("  {:>5} {:>14} {:>12} {:>12}\n", k + 1, format_count(end.event), format_bytes(end.allocated_bytes),
                         format_bytes(end.reserved_bytes));
    }
  }
  const leak_summary& growth = result.summary_of_leaks;
  std::string step_end_range =
      fmt::format("{} at step {} -> {} at step {}", format_bytes(growth.allocated_from_bytes), growth.from_step,
                  format_bytes(growth.allocated_to_bytes), growth.to_step);
  if (result.leaks.empty()) {
    if (growth.growth_without_named_leak) {
      out += "\n" + detail::wrap(fmt::format("No leak named, yet allocated memory at step ends grew at {} of the {} step ends "
                                             "after step 1: {} (+{} per step). No allocation site grew at every step end "
                                             "up to the last: check the step boundaries (--step-marker) and the sites live "
                                             "at the end.",
                                             growth.step_ends_grown, growth.to_step - growth.from_step, step_end_range,
                                             format_bytes(growth.growth_per_step_bytes)),
                                 0, options.width);
    } else if (result.steps.size() >= 3) {
      out += "\nNo leaks: live memory of every allocation site stops growing after the first step.\n";
    }
    return;
  }
  std::string heading = fmt::format("Leaks: {}", result.leaks.size());
  if (growth.measured && growth.growth_per_step_bytes > 0) {
    heading += fmt::format(", explaining {} of the {}/step growth of allocated memory at step ends ({})",
                           percent(growth.explained_per_step_bytes, growth.growth_per_step_bytes),
                           format_bytes(growth.growth_per_step_bytes), step_end_range);
  } else if (growth.measured) {
    heading += fmt::format("; allocated memory at step ends did not grow ({}): other memory shrank as they grew", step_end_range);
  }
  out += "\n" + detail::wrap(heading, 0, options.width);
  constexpr std::size_t indent = 7;  // under the site, past "  LEAK "
  for (const leak& found : result.leaks) {
    std::string figures = fmt::format("  +{} per step over {} steps (from step {})", format_bytes(found.bytes_per_step),
                                      found.steps, found.first_step);
    std::size_t label_room = options.width > indent + figures.size() + 20 ? options.width - indent - figures.size() : 20;
    out += "  LEAK " + elide_middle(printable_text(found.site.label), label_room) + figures + "\n";
    out += fmt::format("       {} live in {} allocations at the last step end\n", format_bytes(found.live_bytes_at_end),
                       format_count(found.live_count_at_end));
    if (found.lines.size() > 1) {
      std::string lines = "lines";
      for (const leak_line& line : found.lines) {
        std::string name = line.line > 0 ? std::to_string(line.line) : printable_text(line.site.label);
        lines += fmt::format(" {} (+{}/step, {} in {}),", name, format_bytes(line.bytes_per_step),
                             format_bytes(line.live_bytes_at_end), format_count(line.live_count_at_end));
      }
      lines.pop_back();
      out += detail::wrap(lines, indent, options.width);
    }
    if (!found.site.user_frame.empty() && found.site.user_frame != found.site.label) {
      out += std::string(indent, ' ') + truncate("user code: " + printable_text(found.site.user_frame), options.width - indent) + "\n";
    }
    append_stack(out, snap, found.site.stack, std::max<std::size_t>(options.frames, 4), indent, options.width - indent);
  }
}

void append_ooms(std::string& out, const inspection& result, const text_options& options) {
  for (const oom_report& oom : result.ooms) {
    std::string time = result.times_known ? " (" + seconds_after(oom.time_us, result.first_time_us) + ")" : "";
    std::string verdict = oom.verdict == oom_verdict::fragmentation ? "FRAGMENTATION"
                          : oom.verdict == oom_verdict::capacity    ? "CAPACITY"
                                                                    : "FRAGMENTATION if the limit was at least " +
                                                                        format_bytes(oom.fragmentation_from_bytes) + ", CAPACITY below";
    if (oom.request_larger_than_any_gpu) verdict += " (a shape bug: the request is larger than any GPU)";
    if (!oom.proven) verdict += " (not proven by a simulation)";
    out += fmt::format("\nOOM at event {}{}: {}\n", format_count(oom.event), time, verdict);
    out += fmt::format("  requested {}   allocated {}   reserved {} ({} unallocated)\n",
                       format_bytes(static_cast<std::int64_t>(oom.requested_bytes)), format_bytes(oom.allocated_bytes),
                       format_bytes(oom.reserved_bytes), format_bytes(oom.reserved_unallocated_bytes));
    std::string limit = oom.limit_given ? format_bytes(oom.limit_low_bytes) + " (--limit)" : limit_range_text(result.limit);
    out += fmt::format("  limit {}   CUDA free {}   largest free block {}\n", limit,
                       format_bytes(static_cast<std::int64_t>(oom.device_free_bytes)),
                       format_bytes(static_cast<std::int64_t>(oom.largest_free_block_bytes)));
    for (const free_block_summary& pool : oom.free_by_pool) {
      if (pool.free_bytes == 0) continue;
      out += fmt::format("    {} pool, stream {}: {} free, largest block {}\n", pool_name(pool.small_pool),
                         pool.stream == 0 ? std::string("default") : fmt::format("{:#x}", pool.stream),
                         format_bytes(static_cast<std::int64_t>(pool.free_bytes)),
                         format_bytes(static_cast<std::int64_t>(pool.largest_free_bytes)));
    }
    if (oom.proven) {
      out += fmt::format("  simulated under {}{}:\n", format_bytes(result.limit.judged_bytes),
                         result.limit.given ? " (--limit)" : ", the low end of the limit's range");
      for (const oom_proof& proof : oom.proofs) {
        std::string above = !proof.served && proof.serves_from_bytes > 0 ? "; served from a limit of " + format_bytes(proof.serves_from_bytes) : "";
        out += detail::wrap(printable_text(proof.summary + above), 4, options.width);
      }
    }
    out += detail::wrap("why: " + printable_text(oom.explanation), 2, options.width);
    out += detail::wrap("advice: " + printable_text(oom.advice), 2, options.width);
  }
}

void append_fragmentation(std::string& out, const inspection& result) {
  const fragmentation_report& frag = result.fragmentation;
  out += "\nFragmentation (reserved but unallocated)\n";
  out += fmt::format("  worst {} at event {}; at peak reserved {} (largest free block {})\n",
                     format_bytes(frag.max_unallocated_bytes),
                     frag.max_unallocated_event < 0 ? std::string("start") : format_count(static_cast<std::uint64_t>(frag.max_unallocated_event)),
                     format_bytes(frag.unallocated_at_peak_reserved_bytes),
                     format_bytes(static_cast<std::int64_t>(frag.largest_free_block_at_peak_reserved_bytes)));
  out += fmt::format("  at dump {} (largest free block {}); {} segments under 10% used hold {}\n",
                     format_bytes(frag.unallocated_at_end_bytes), format_bytes(static_cast<std::int64_t>(frag.largest_free_block_at_end_bytes)),
                     format_count(frag.mostly_empty_segments), format_bytes(static_cast<std::int64_t>(frag.mostly_empty_segment_bytes)));
}

void append_categories(std::string& out, const inspection& result, std::size_t width) {
  out += fmt::format("\nCategories at peak allocated ({})\n", format_bytes(result.peak_allocated_bytes));
  std::size_t bar_width = width > 60 ? width - 44 : 16;
  for (std::size_t c = 0; c < memory_category_count; ++c) {
    std::int64_t bytes = result.categories_at_peak[c];
    if (bytes == 0) continue;
    auto cells = result.peak_allocated_bytes > 0
                     ? static_cast<std::size_t>(static_cast<double>(bar_width) * static_cast<double>(bytes) / static_cast<double>(result.peak_allocated_bytes) + 0.5)
                     : 0;
    out += fmt::format("  {:<16} {:>10} {:>5}  {}\n", memory_category_name(static_cast<memory_category>(c)), format_bytes(bytes),
                       percent(bytes, result.peak_allocated_bytes), std::string(std::min(cells, bar_width), '#'));
  }
}

// top * part / whole, exact and without overflow for every top up to INT64_MAX (part <= whole):
// with top = q * whole + r, it is q * part + r * part / whole.
std::int64_t row_threshold(std::int64_t top, std::size_t part, std::size_t whole) {
  auto parts = static_cast<std::int64_t>(part);
  auto wholes = static_cast<std::int64_t>(whole);
  return top / wholes * parts + top % wholes * parts / wholes;
}

void append_chart(std::string& out, const inspection& result, std::size_t width) {
  constexpr std::size_t rows = 8;
  std::size_t label_width = 11;
  std::size_t columns = width > label_width + 12 ? width - label_width - 2 : 40;
  auto peaks = timeline_columns(result.memory, columns);
  if (peaks.empty()) return;
  std::int64_t top = std::max<std::int64_t>(1, std::max(result.peak_reserved_bytes, result.peak_allocated_bytes));
  std::size_t per_column = std::max<std::size_t>(1, result.memory.allocated.size() / peaks.size());
  out += "\nTimeline  (# allocated, : reserved but unallocated; one column = " + format_count(per_column) +
         (per_column == 1 ? " event)\n" : " events)\n");
  for (std::size_t row = 0; row < rows; ++row) {
    std::int64_t threshold = row_threshold(top, rows - row, rows);
    std::string label = row == 0 ? format_bytes(top) : (row == rows - 1 ? format_bytes(top / static_cast<std::int64_t>(rows)) : "");
    out += fmt::format("{:>{}} |", label, label_width);
    for (const auto& peak : peaks) {
      out += peak.allocated >= threshold ? '#' : (peak.reserved >= threshold ? ':' : ' ');
    }
    out += '\n';
  }
  out += fmt::format("{:>{}} +{}\n", "", label_width, std::string(peaks.size(), '-'));
  std::string left = "event 0";
  std::string right = "event " + format_count(result.memory.allocated.size());
  std::size_t gap = peaks.size() > left.size() + right.size() ? peaks.size() - left.size() - right.size() : 1;
  out += fmt::format("{:>{}}  {}{}{}\n", "", label_width, left, std::string(gap, ' '), right);
}

}  // namespace

std::string render_inspection_text(const snapshot& snap, const inspection& result, const std::string& source,
                                   const text_options& options) {
  std::string out;
  double seconds = static_cast<double>(result.last_time_us - result.first_time_us) / 1e6;
  std::string duration = result.times_known ? fmt::format(" over {:.2f} s", seconds) : "";
  out += fmt::format("{}  device {}: {} events{}\n", printable_text(source), result.device, format_count(result.events), duration);
  if (result.devices.size() > 1) {
    std::string others;
    for (std::int64_t device : result.devices) others += (others.empty() ? "" : ", ") + std::to_string(device);
    out += fmt::format("  (devices in this file: {}; choose with --device N)\n", others);
  }
  const timeline& line = result.memory;
  auto row = [&](std::string_view name, const std::string& text) { out += fmt::format("  {:<16} {}\n", name, text); };
  out += "\nSummary\n";
  row("peak allocated", fmt::format("{:>10}  {}", format_bytes(result.peak_allocated_bytes),
                                    when(result, result.peak_allocated_event, result.peak_allocated_time_us)));
  row("peak reserved", fmt::format("{:>10}  {}", format_bytes(result.peak_reserved_bytes),
                                   when(result, result.peak_reserved_event, result.peak_reserved_time_us)));
  row("at trace start", fmt::format("{:>10}  allocated, {} reserved ({} blocks from before recording)",
                                    format_bytes(line.allocated_at_start), format_bytes(line.reserved_at_start),
                                    format_count(line.blocks_live_at_start)));
  row("at dump", fmt::format("{:>10}  allocated, {} reserved in {} segments (largest {}{})",
                             format_bytes(result.final_allocated_bytes), format_bytes(result.final_reserved_bytes),
                             format_count(result.segment_count), format_bytes(static_cast<std::int64_t>(result.largest_segment_bytes)),
                             result.expandable_segment_count > 0 ? ", expandable" : ""));
  std::string streams;
  for (std::uint64_t stream : result.streams) streams += (streams.empty() ? "" : ", ") + (stream == 0 ? std::string("default") : fmt::format("{:#x}", stream));
  row("streams", fmt::format("{} ({})", result.streams.size(), streams));
  row("allocator", settings_line(snap));
  std::string actions;
  constexpr std::size_t value_column = 19;  // where row() starts a value
  std::size_t line_length = value_column;
  for (std::size_t action = 0; action < trace_action_count; ++action) {
    if (result.events_by_action[action] == 0) continue;
    std::string item = fmt::format("{} {}", trace_action_name(static_cast<trace_action>(action)), format_count(result.events_by_action[action]));
    if (!actions.empty() && line_length + 2 + item.size() > options.width) {
      actions += "\n" + std::string(value_column, ' ');
      line_length = value_column;
    } else if (!actions.empty()) {
      actions += ", ";
      line_length += 2;
    }
    actions += item;
    line_length += item.size();
  }
  row("events", actions.empty() ? "none" : actions);

  append_chart(out, result, options.width);

  out += fmt::format("\nAt peak allocated ({}): {} sites held memory", format_bytes(result.peak_allocated_bytes),
                     format_count(result.peak_site_count));
  out += result.peak_site_count > result.peak_by_site.size() ? fmt::format(", the top {}\n", result.peak_by_site.size()) : "\n";
  if (!result.peak_by_site.empty()) {
    std::size_t site_width = options.width > 60 ? options.width - 31 : 30;
    out += fmt::format("  {:>10} {:>6} {:>6}  {}\n", "bytes", "share", "count", "site  <- nearest user code");
    std::uint64_t shown = 0;
    for (const site_usage& usage : result.peak_by_site) {
      shown += usage.bytes;
      double share = result.peak_allocated_bytes > 0 ? 100.0 * static_cast<double>(usage.bytes) / static_cast<double>(result.peak_allocated_bytes) : 0.0;
      std::string site = printable_text(usage.site.label);
      std::string user;
      if (!usage.site.user_frame.empty() && usage.site.user_frame != usage.site.label) user = "<- " + printable_text(usage.site.user_frame);
      bool user_fits = !user.empty() && site.size() + 2 + user.size() <= site_width;
      if (user_fits) site += "  " + user;
      out += fmt::format("  {:>10} {:>5.1f}% {:>6}  {}\n", format_bytes(static_cast<std::int64_t>(usage.bytes)), share,
                         format_count(usage.count), truncate(site, site_width));
      if (!user.empty() && !user_fits) out += fmt::format("  {:>26}{}\n", "", truncate(user, site_width));
      if (options.frames > 0) append_stack(out, snap, usage.site.stack, options.frames, 28, site_width);
    }
    auto rest = static_cast<std::int64_t>(result.peak_allocated_bytes) - static_cast<std::int64_t>(shown);
    if (result.peak_site_count > result.peak_by_site.size()) {
      out += fmt::format("  {:>10}               ({} more sites; --top N shows more)\n", format_bytes(rest),
                         format_count(result.peak_site_count - result.peak_by_site.size()));
    }
  }
  append_categories(out, result, options.width);
  append_steps_and_leaks(out, snap, result, options);
  append_ooms(out, result, options);
  append_fragmentation(out, result);
  if (!result.notes.empty()) {
    out += "\nNotes\n";
    for (const std::string& note : result.notes) out += detail::wrap("- " + printable_text(note), 2, options.width);
  }
  return out;
}

}  // namespace rlmem
