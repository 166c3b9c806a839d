// SPDX-License-Identifier: MIT
// One refresh of `rlmem watch`: sample every GPU through the seam, read what the log gained,
// keep the short histories, and compute the advice.

#include <rlmem/watch/watch.hpp>

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace rlmem {

namespace {

// Appends "what: message" to a device's error line.
void note_failure(std::string& error, const char* what, const gpu_status& status) {
  if (status.ok()) return;
  error += (error.empty() ? "" : "; ") + std::string(what) + ": " + status.message;
}

log_view view_of(const steplog_follower& follower, const watch_options& options) {
  log_view view;
  view.path = follower.path();
  view.state = follower.state();
  view.state_message = follower.state_message();
  view.lines_parsed = follower.lines_parsed();
  view.lines_skipped = follower.lines_skipped();
  view.last_skip = follower.last_skip();
  view.other_rank_lines = follower.other_rank_lines();
  view.reopened = follower.reopened();
  view.series_restarts = follower.series_restarts();
  view.pending_bytes = follower.pending_bytes();
  summarise_steps(follower.records(), follower.alerts(), options.thresholds.window_steps, options.alerts_shown, view);
  return view;
}

}  // namespace

void summarise_steps(const std::deque<steplog_record>& records, const std::deque<steplog_alert_seen>& alerts,
                     std::size_t window_steps, std::size_t alerts_shown, log_view& view) {
  view.steps_kept = records.size();
  view.allocated_history.clear();
  view.step_history.clear();
  view.max_step_peak_allocated = 0;
  view.latest.reset();
  view.samples.clear();
  for (const steplog_record& r : records) {
    view.samples.push_back({r.step, r.allocated, r.reserved, r.inactive_split, r.step_peak_allocated, r.step_peak_reserved.value_or(-1),
                            r.allocations, r.num_alloc_retries, r.num_ooms, r.device_free, r.device_total, r.limit.value_or(0)});
  }
  if (!records.empty()) {
    view.latest = records.back();
    view.allocated_history.reserve(records.size());
    view.step_history.reserve(records.size());
    for (const steplog_record& record : records) {
      view.allocated_history.push_back(record.allocated);
      view.step_history.push_back(record.step);
      view.max_step_peak_allocated = std::max(view.max_step_peak_allocated, record.step_peak_allocated);
    }
    // The window's base is the step end before it, so the differences cover window_steps steps.
    std::size_t last = records.size() - 1;
    std::size_t base = last - std::min(window_steps, last);
    view.window_steps = last - base;
    view.window_first_step = records[base].step;
    view.retries_before_window = records[base].num_alloc_retries;
    view.ooms_before_window = records[base].num_ooms;
    view.allocated_before_window = records[base].allocated;
  }
  view.alerts_total = alerts.size();
  std::size_t shown = std::min(alerts_shown, alerts.size());
  view.alerts.assign(alerts.end() - static_cast<std::ptrdiff_t>(shown), alerts.end());
  view.latest_leak.reset();
  for (auto it = alerts.rbegin(); it != alerts.rend(); ++it) {
    if (it->alert.kind == "leak") {
      view.latest_leak = *it;
      break;
    }
  }
}

struct watch_session::impl {
  impl(std::unique_ptr<gpu_source> gpus, std::string nvml_message, watch_options options)
      : gpus_(std::move(gpus)), nvml_message_(std::move(nvml_message)), options_(std::move(options)) {
    if (!options_.log_path.empty()) log_ = std::make_unique<steplog_follower>(options_.log_path, options_.log_limits);
  }

  watch_frame refresh(double now);

  std::unique_ptr<gpu_source> gpus_;
  std::string nvml_message_;
  watch_options options_;
  std::unique_ptr<steplog_follower> log_;
  std::vector<std::deque<std::uint64_t>> used_history_;  ///< per device index
};

watch_session::watch_session(std::unique_ptr<gpu_source> gpus, std::string nvml_message, watch_options options)
    : impl_(std::make_unique<impl>(std::move(gpus), std::move(nvml_message), std::move(options))) {}

watch_session::~watch_session() = default;
watch_session::watch_session(watch_session&&) noexcept = default;
watch_session& watch_session::operator=(watch_session&&) noexcept = default;

watch_frame watch_session::refresh(double now) { return impl_->refresh(now); }

watch_frame watch_session::impl::refresh(double now) {
  watch_frame frame;
  frame.time = now;
  frame.nvml_available = gpus_ != nullptr;
  if (!gpus_) frame.nvml_message = nvml_message_;
  std::uint32_t count = 0;
  if (gpus_) {
    gpu_status status = gpus_->device_count(count);
    if (status.ok()) {
      used_history_.resize(count);
    } else {
      frame.nvml_message = "listing devices failed: " + status.message;  // the histories wait for the next refresh
    }
  }
  for (std::uint32_t index = 0; index < count; ++index) {
    gpu_view view;
    view.index = index;
    note_failure(view.error, "name", gpus_->device_name(index, view.name));
    gpu_status memory = gpus_->device_memory(index, view.memory);
    note_failure(view.error, "memory", memory);
    note_failure(view.error, "utilisation", gpus_->device_utilisation(index, view.utilisation_percent));
    std::vector<gpu_process> processes;
    note_failure(view.error, "processes", gpus_->device_processes(index, processes));
    for (const gpu_process& process : processes) {
      view.processes.push_back({process, read_command_line(process.pid, options_.proc_root)});
    }
    std::stable_sort(view.processes.begin(), view.processes.end(), [](const gpu_process_view& a, const gpu_process_view& b) {
      return a.process.used_bytes.value_or(0) > b.process.used_bytes.value_or(0);
    });
    std::deque<std::uint64_t>& history = used_history_[index];
    if (memory.ok()) {
      history.push_back(view.memory.used_bytes);
      while (history.size() > options_.gpu_history) history.pop_front();
    }
    view.used_history.assign(history.begin(), history.end());
    frame.gpus.push_back(std::move(view));
  }
  if (log_) {
    log_->poll();
    frame.log = view_of(*log_, options_);
  }
  frame.advice = advise(frame, options_.thresholds);
  return frame;
}

}  // namespace rlmem
