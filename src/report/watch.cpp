// SPDX-License-Identifier: MIT
// Renders one refresh of `rlmem watch`: an aligned text frame that fits the width (strings from
// processes and logs escaped, so nothing untrusted reaches the terminal raw) and one JSON line.

#include "prose.hpp"

#include <rlmem/report/report.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>  // localtime_r for the frame's clock

namespace rlmem {

namespace {

using json = nlohmann::ordered_json;

// One column per code point: our own text is ASCII and block characters, and untrusted text is
// escaped to ASCII or kept as valid UTF-8 (East Asian wide characters take two columns; rare in
// command lines and not worth a width table).
std::size_t columns(std::string_view text) {
  std::size_t count = 0;
  for (char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

// The first `width` columns of `text`, cut on a code point boundary.
std::string first_columns(std::string_view text, std::size_t width) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && seen++ == width) return std::string(text.substr(0, i));
  }
  return std::string(text);
}

// `text` cut to `width` columns, "..." marking the cut.
std::string fit(std::string_view text, std::size_t width) {
  if (columns(text) <= width) return std::string(text);
  return width <= 3 ? first_columns(text, width) : first_columns(text, width - 3) + "...";
}

std::string pad(std::string text, std::size_t width) {
  std::size_t used = columns(text);
  if (used < width) text.append(width - used, ' ');
  return text;
}

// Wraps prose to the width, continuation lines indented, the first line starting with `marker`
// (at most `indent` wide) instead; a word longer than a line (a path) is cut across lines rather
// than overflowing.
void append_wrapped(std::string& out, std::string_view marker, const std::string& text, std::size_t width, std::size_t indent) {
  std::string wrapped = detail::wrap(text, indent, width);
  bool first = true;
  std::size_t start = 0;
  while (start < wrapped.size()) {
    std::size_t end = wrapped.find('\n', start);
    std::string line = wrapped.substr(start, end - start);
    start = end == std::string::npos ? wrapped.size() : end + 1;
    if (first) line = std::string(marker) + line.substr(std::min(indent, line.size()));
    first = false;
    while (columns(line) > width) {
      std::string head = first_columns(line, width);
      out += head + "\n";
      line = std::string(indent, ' ') + line.substr(head.size());
    }
    out += line + "\n";
  }
}

// Values scaled to [0, 1] as block characters, the latest at the right.
std::string sparkline(const std::vector<double>& levels) {
  static constexpr std::array<std::string_view, 8> blocks = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::string out;
  for (double level : levels) {
    double clamped = std::clamp(level, 0.0, 1.0);
    out += blocks[static_cast<std::size_t>(clamped * 7.0 + 0.5)];
  }
  return out;
}

std::string clock_text(double time) {
  if (!std::isfinite(time) || std::fabs(time) > 1e15) return "-";  // beyond time_t: no clock to show
  auto seconds = static_cast<std::time_t>(time);
  std::tm local{};
  if (localtime_r(&seconds, &local) == nullptr) return "";
  std::array<char, 32> text{};
  std::size_t length = std::strftime(text.data(), text.size(), "%Y-%m-%d %H:%M:%S", &local);
  return std::string(text.data(), length);
}

std::string bytes(std::uint64_t value) { return format_bytes(static_cast<std::int64_t>(value)); }

std::string share(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? fmt::format("{:.0f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "-";
}

// "4.2 s ago", "12 min ago", "3.1 h ago", "905 days ago".
std::string ago(double seconds) {
  if (seconds < 120) return fmt::format("{:.1f} s ago", seconds);
  if (seconds < 7200) return fmt::format("{:.0f} min ago", seconds / 60);
  if (seconds < 172800) return fmt::format("{:.1f} h ago", seconds / 3600);
  return fmt::format("{:.0f} days ago", seconds / 86400);
}

std::string command_line_text(const gpu_process_view& view) {
  switch (view.command_line.status) {
    case command_line_status::visible: return printable_text(view.command_line.text);
    case command_line_status::no_such_process:
      return "(command line not visible: pid not in this PID namespace, or exited)";
    case command_line_status::not_permitted: return "(command line not readable here: permission denied)";
    case command_line_status::empty: return "(empty command line: exiting, or a kernel thread)";
    case command_line_status::count_: break;
  }
  return "";
}

void append_gpus(std::string& out, const watch_frame& frame, const watch_text_options& options) {
  const std::size_t width = options.width;
  if (!frame.nvml_available) {
    append_wrapped(out, "", "NVML unavailable (" + printable_text(frame.nvml_message) + "): the log alone, without the GPUs' own view",
                   width, 2);
    return;
  }
  if (!frame.nvml_message.empty()) append_wrapped(out, "", "NVML: " + printable_text(frame.nvml_message), width, 2);
  if (frame.gpus.empty()) {
    out += "No GPUs: the driver lists none\n";
    return;
  }
  // Columns: index, name, used / total, free, utilisation, then the history in what is left.
  constexpr std::size_t fixed = 3 + 2 + 2 + 21 + 2 + 10 + 2 + 4;
  std::size_t name_width = 4;
  for (const gpu_view& gpu : frame.gpus) name_width = std::max(name_width, columns(printable_text(gpu.name)));
  name_width = std::min({name_width, std::size_t{28}, width > fixed + 4 ? width - fixed : std::size_t{4}});
  const std::size_t history_width = width > fixed + name_width + 2 + 8 ? width - fixed - name_width - 2 : 0;
  bool any_history = false;
  for (const gpu_view& gpu : frame.gpus) any_history = any_history || gpu.used_history.size() >= 2;
  const bool show_history = any_history && history_width > 0;
  std::string heading = fmt::format("{:>3}  {}  {:>21}  {:>10}  {:>4}", "GPU", pad("name", name_width), "used / total", "free", "util");
  if (show_history) heading += "  " + fit("used, recent refreshes", history_width);
  out += heading + "\n";
  for (const gpu_view& gpu : frame.gpus) {
    std::string used = gpu.memory.total_bytes > 0 ? bytes(gpu.memory.used_bytes) + " / " + bytes(gpu.memory.total_bytes) : "-";
    std::string free = gpu.memory.total_bytes > 0 ? bytes(gpu.memory.free_bytes) : "-";
    std::string util = gpu.utilisation_percent ? fmt::format("{}%", *gpu.utilisation_percent) : "-";
    std::string row = fmt::format("{:>3}  {}  {:>21}  {:>10}  {:>4}", gpu.index, pad(fit(printable_text(gpu.name), name_width), name_width),
                                  used, free, util);
    if (show_history && gpu.memory.total_bytes > 0 && gpu.used_history.size() >= 2) {
      std::size_t shown = std::min(gpu.used_history.size(), history_width);
      std::vector<double> levels;
      for (std::size_t i = gpu.used_history.size() - shown; i < gpu.used_history.size(); ++i) {
        levels.push_back(static_cast<double>(gpu.used_history[i]) / static_cast<double>(gpu.memory.total_bytes));
      }
      row += "  " + sparkline(levels);
    }
    out += fit(row, width) + "\n";
    if (!gpu.error.empty()) out += fit("       driver: " + printable_text(gpu.error), width) + "\n";
    if (gpu.processes.empty() && gpu.error.empty()) out += "       no compute process\n";
    std::size_t listed = std::min(gpu.processes.size(), options.processes_per_gpu);
    for (std::size_t i = 0; i < listed; ++i) {
      const gpu_process_view& view = gpu.processes[i];
      std::string used_by = view.process.used_bytes ? bytes(*view.process.used_bytes) : "n/a";
      out += fit(fmt::format("       pid {:>7}  {:>10}  {}", view.process.pid, used_by, command_line_text(view)), width) + "\n";
    }
    if (gpu.processes.size() > listed) {
      std::uint64_t rest = 0;
      for (std::size_t i = listed; i < gpu.processes.size(); ++i) rest += gpu.processes[i].process.used_bytes.value_or(0);
      out += fit(fmt::format("       ... and {} more holding {}", gpu.processes.size() - listed, bytes(rest)), width) + "\n";
    }
  }
}

std::string state_text(const log_view& log) {
  switch (log.state) {
    case steplog_file_state::waiting:
      return log.latest ? "the file is gone; waiting for it to come back" : "waiting for the file to appear";
    case steplog_file_state::unreadable: return "cannot be read: " + printable_text(log.state_message);
    case steplog_file_state::following: break;
  }
  return "";
}

void append_log(std::string& out, const log_view& log, const watch_frame& frame, const watch_text_options& options) {
  const std::size_t width = options.width;
  const std::size_t label = 17;  // "  alloc retries" and two spaces
  auto row = [&](std::string_view name, const std::string& text) { out += fit(pad("  " + std::string(name), label) + text, width) + "\n"; };
  std::string state = state_text(log);
  out += fit("Log " + printable_text(log.path) + (state.empty() ? "" : ": " + state), width) + "\n";
  if (!log.latest) {
    if (log.state == steplog_file_state::following) row("step", "none yet: no complete line written");
  } else {
    const steplog_record& r = *log.latest;
    const double age = std::max(0.0, frame.time - r.time);
    std::string when = fmt::format("{} (rank {} of {}, device {}), written {}", r.step, r.rank, r.world_size, r.device, ago(age));
    if (r.step_seconds) when += fmt::format(", took {:.1f} s", *r.step_seconds);
    // A job that stopped writing looks exactly like a healthy one otherwise.
    if (age > std::max(60.0, 5.0 * r.step_seconds.value_or(0.0))) when += "; none since: stopped?";
    row("step", when);
    std::string allocated = format_bytes(r.allocated) + " at the step end";
    if (log.allocated_history.size() >= 2) {
      auto [low, high] = std::minmax_element(log.allocated_history.begin(), log.allocated_history.end());
      std::string range = fmt::format("  {} to {} over {} steps", format_bytes(*low), format_bytes(*high), log.allocated_history.size());
      std::size_t room = width > label + columns(allocated) + columns(range) + 2 ? width - label - columns(allocated) - columns(range) - 2 : 0;
      std::size_t shown = std::min(log.allocated_history.size(), room);
      if (shown >= 2) {
        std::vector<double> levels;
        double span = static_cast<double>(*high - *low);
        for (std::size_t i = log.allocated_history.size() - shown; i < log.allocated_history.size(); ++i) {
          levels.push_back(span > 0 ? static_cast<double>(log.allocated_history[i] - *low) / span : 0.5);
        }
        allocated += "  " + sparkline(levels);
      }
      allocated += range;
    }
    row("allocated", allocated);
    row("reserved", fmt::format("{}; {} unallocated ({}), {} inactive_split", format_bytes(r.reserved),
                                format_bytes(std::max<std::int64_t>(0, r.reserved - r.allocated)), share(r.reserved - r.allocated, r.reserved),
                                format_bytes(r.inactive_split)));
    std::string peak = format_bytes(r.step_peak_allocated) + " allocated";
    if (r.step_peak_reserved) peak += ", " + format_bytes(*r.step_peak_reserved) + " reserved";
    if (!r.peak_is_per_step) peak += " (since the last reset, not per step)";
    row("step peak", peak);
    row("device", fmt::format("{} free of {}", format_bytes(r.device_free), format_bytes(r.device_total)));
    std::int64_t recent_retries = r.num_alloc_retries - log.retries_before_window;
    std::int64_t recent_ooms = r.num_ooms - log.ooms_before_window;
    row("alloc retries", fmt::format("{}, {} in the last {} steps", r.num_alloc_retries, recent_retries, log.window_steps));
    row("OOMs", fmt::format("{}, {} in the last {} steps", r.num_ooms, recent_ooms, log.window_steps));
    for (const steplog_runtime_tag& tag : r.runtime_tags) {
      const char* liveness = tag.paused ? "PAUSED" : "live";
      // Pause and resume times last: a narrow screen cuts them first.
      std::string text = fmt::format("{:<10} {:<6} {} allocated, {} mapped", fit(printable_text(tag.name), 10), liveness,
                                     format_bytes(tag.allocated), format_bytes(tag.mapped));
      if (tag.pauses > 0) {
        text += fmt::format(", {} pauses", tag.pauses);
        if (tag.last_pause_seconds && tag.last_resume_seconds) {
          text += fmt::format(", last {:.2f} s + {:.2f} s", *tag.last_pause_seconds, *tag.last_resume_seconds);
        }
      }
      row("rlmem tag", text);
    }
    if (r.runtime_tags_left_out > 0) row("rlmem tag", fmt::format("{} more tags not shown", r.runtime_tags_left_out));
  }
  if (log.lines_skipped > 0) {
    row("skipped", fmt::format("{} {}, the last {}", log.lines_skipped, log.lines_skipped == 1 ? "line" : "lines", printable_text(log.last_skip)));
  }
  std::vector<std::string> notes;
  if (log.series_restarts > 0) notes.push_back(fmt::format("steps went back {}x (the job restarted): this run only", log.series_restarts));
  if (log.reopened > 0) notes.push_back(fmt::format("file truncated or replaced {}x", log.reopened));
  if (log.other_rank_lines > 0) notes.push_back(fmt::format("{} lines of other ranks left out", log.other_rank_lines));
  if (log.pending_bytes > 0) notes.push_back(fmt::format("{} bytes of a line await their newline", log.pending_bytes));
  for (const std::string& note : notes) row("note", note);
  if (!log.alerts.empty()) {
    out += fmt::format("Alerts from the log: {} in this run{}\n", log.alerts_total,
                       log.alerts.size() < log.alerts_total ? fmt::format(", the latest {}", log.alerts.size()) : "");
    for (const steplog_alert_seen& seen : log.alerts) {
      out += fit(fmt::format("  step {:>6}  {:<13} {}", seen.step, fit(printable_text(seen.alert.kind), 13), printable_text(seen.alert.message)), width) +
             "\n";
    }
  }
}

json process_json(const gpu_process_view& view) {
  const bool visible = view.command_line.status == command_line_status::visible;
  return {{"pid", view.process.pid},
          {"used_bytes", view.process.used_bytes ? json(*view.process.used_bytes) : json(nullptr)},
          {"command_line", visible ? json(view.command_line.text) : json(nullptr)},
          {"command_line_status", command_line_status_name(view.command_line.status)}};
}

json runtime_tags_json(const steplog_record& r) {
  json tags = json::array();
  for (const steplog_runtime_tag& tag : r.runtime_tags) {
    tags.push_back({{"name", tag.name},
                    {"paused", tag.paused},
                    {"allocated_bytes", tag.allocated},
                    {"mapped_bytes", tag.mapped},
                    {"pauses", tag.pauses},
                    {"last_pause_seconds", tag.last_pause_seconds ? json(*tag.last_pause_seconds) : json(nullptr)},
                    {"last_resume_seconds", tag.last_resume_seconds ? json(*tag.last_resume_seconds) : json(nullptr)}});
  }
  return tags;
}

json record_json(const steplog_record& r) {
  return {{"step", r.step},
          {"time", r.time},
          {"step_seconds", r.step_seconds ? json(*r.step_seconds) : json(nullptr)},
          {"rank", r.rank},
          {"world_size", r.world_size},
          {"device", r.device},
          {"allocated_bytes", r.allocated},
          {"reserved_bytes", r.reserved},
          {"active_bytes", r.active},
          {"inactive_split_bytes", r.inactive_split},
          {"unallocated_bytes", std::max<std::int64_t>(0, r.reserved - r.allocated)},
          {"step_peak_allocated_bytes", r.step_peak_allocated},
          {"step_peak_reserved_bytes", r.step_peak_reserved ? json(*r.step_peak_reserved) : json(nullptr)},
          {"peak_is_per_step", r.peak_is_per_step},
          {"allocations", r.allocations},
          {"num_alloc_retries", r.num_alloc_retries},
          {"num_ooms", r.num_ooms},
          {"device_free_bytes", r.device_free},
          {"device_total_bytes", r.device_total},
          {"runtime_tags", runtime_tags_json(r)}};
}

json alert_json(const steplog_alert_seen& seen) {
  json out = {{"step", seen.step}, {"time", seen.time}, {"kind", seen.alert.kind}, {"rank", seen.alert.rank}, {"message", seen.alert.message}};
  if (seen.alert.bytes_per_step) out["bytes_per_step"] = *seen.alert.bytes_per_step;
  if (seen.alert.since_step) out["since_step"] = *seen.alert.since_step;
  if (!seen.alert.site.empty()) out["site"] = seen.alert.site;
  if (!seen.alert.snapshot.empty()) out["snapshot"] = seen.alert.snapshot;
  return out;
}

std::string_view state_name(steplog_file_state state) {
  switch (state) {
    case steplog_file_state::waiting: return "waiting";
    case steplog_file_state::following: return "following";
    case steplog_file_state::unreadable: return "unreadable";
  }
  return "unknown";
}

json log_json(const log_view& log) {
  json out = {{"path", log.path},
              {"state", state_name(log.state)},
              {"message", log.state_message.empty() ? json(nullptr) : json(log.state_message)},
              {"lines_parsed", log.lines_parsed},
              {"lines_skipped", log.lines_skipped},
              {"last_skip", log.last_skip.empty() ? json(nullptr) : json(log.last_skip)},
              {"other_rank_lines", log.other_rank_lines},
              {"reopened", log.reopened},
              {"series_restarts", log.series_restarts},
              {"pending_bytes", log.pending_bytes},
              {"steps_kept", log.steps_kept},
              {"latest", log.latest ? record_json(*log.latest) : json(nullptr)}};
  if (log.latest) {
    out["window"] = {{"steps", log.window_steps},
                     {"first_step", log.window_first_step},
                     {"alloc_retries", log.latest->num_alloc_retries - log.retries_before_window},
                     {"ooms", log.latest->num_ooms - log.ooms_before_window},
                     {"allocated_change_bytes", log.latest->allocated - log.allocated_before_window}};
  } else {
    out["window"] = nullptr;
  }
  json alerts = json::array();
  for (const steplog_alert_seen& seen : log.alerts) alerts.push_back(alert_json(seen));
  out["alerts"] = std::move(alerts);
  out["alerts_total"] = log.alerts_total;
  return out;
}

}  // namespace

std::string render_watch_text(const watch_frame& frame, const watch_text_options& options) {
  const std::size_t width = std::max<std::size_t>(options.width, 40);
  watch_text_options fitted = options;
  fitted.width = width;
  std::string out = "rlmem watch  " + clock_text(frame.time);
  if (options.interval_seconds > 0) out += fmt::format("  every {:g} s, Ctrl-C quits", options.interval_seconds);
  out = fit(out, width) + "\n";
  append_gpus(out, frame, fitted);
  if (frame.log) {
    out += "\n";
    append_log(out, *frame.log, frame, fitted);
  }
  if (!frame.advice.empty()) {
    out += "\nAdvice\n";
    for (const watch_advice& advice : frame.advice) {
      append_wrapped(out, advice.level == advice_level::warning ? "  ! " : "  - ", printable_text(advice.text), width, 4);
    }
  }
  return out;
}

std::string render_watch_json(const watch_frame& frame) {
  json out;
  out["schema"] = "rlmem.watch/1";
  out["time"] = frame.time;
  out["nvml"] = {{"available", frame.nvml_available}, {"message", frame.nvml_message.empty() ? json(nullptr) : json(frame.nvml_message)}};
  json gpus = json::array();
  for (const gpu_view& gpu : frame.gpus) {
    json processes = json::array();
    for (const gpu_process_view& view : gpu.processes) processes.push_back(process_json(view));
    gpus.push_back({{"index", gpu.index},
                    {"name", gpu.name},
                    {"total_bytes", gpu.memory.total_bytes},
                    {"used_bytes", gpu.memory.used_bytes},
                    {"free_bytes", gpu.memory.free_bytes},
                    {"utilisation_percent", gpu.utilisation_percent ? json(*gpu.utilisation_percent) : json(nullptr)},
                    {"error", gpu.error.empty() ? json(nullptr) : json(gpu.error)},
                    {"processes", std::move(processes)}});
  }
  out["gpus"] = std::move(gpus);
  out["log"] = frame.log ? log_json(*frame.log) : json(nullptr);
  json advice = json::array();
  for (const watch_advice& one : frame.advice) {
    advice.push_back({{"kind", one.kind}, {"level", one.level == advice_level::warning ? "warning" : "info"}, {"text", one.text}});
  }
  out["advice"] = std::move(advice);
  // One line per refresh, in ASCII: controls and every non-ASCII character are \u-escaped, so
  // untrusted strings cannot reach a terminal that shows the stream raw; bytes that are not UTF-8
  // become U+FFFD.
  return out.dump(-1, ' ', true, json::error_handler_t::replace) + "\n";
}

}  // namespace rlmem
