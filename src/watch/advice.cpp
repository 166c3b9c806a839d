// SPDX-License-Identifier: MIT
// The advice of `rlmem watch`: rules over the log's step-end figures and the driver's per-GPU
// memory. Every line quotes the numbers that triggered it; docs/watch.md lists the thresholds.

#include <rlmem/format.hpp>
#include <rlmem/watch.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace rlmem {

namespace {

std::string percent_of(std::int64_t part, std::int64_t whole) {
  if (whole <= 0) return "-";
  double share = 100.0 * static_cast<double>(part) / static_cast<double>(whole);
  // Near the edges a whole percent hides what matters (95% vs 99.6%).
  return share < 10.0 || share > 90.0 ? fmt::format("{:.1f}%", share) : fmt::format("{:.0f}%", share);
}

std::string plural(std::int64_t count, const char* one, const char* many) {
  return fmt::format("{} {}", count, count == 1 ? one : many);
}

// The figures every log rule reads, derived once from the latest step end.
struct log_figures {
  std::int64_t total = 0;
  std::int64_t peak_reserved = 0;
  std::int64_t peak_allocated = 0;
  std::int64_t unallocated = 0;   ///< reserved - allocated at the step end
  std::int64_t largest_need = 0;  ///< the largest step peak allocated in the kept steps
  std::int64_t held = 0;          ///< reserved beyond that: what no step needed
  std::int64_t free_at_peak = 0;  ///< what stayed free on the device at the peak
  std::string peak;               ///< how to name the peak
};

log_figures derive(const log_view& log, const steplog_record& r) {
  log_figures f;
  f.total = r.device_total;
  f.peak_reserved = std::max(r.reserved, r.step_peak_reserved.value_or(0));
  f.peak_allocated = std::max(r.step_peak_allocated, r.allocated);
  f.unallocated = std::max<std::int64_t>(0, r.reserved - r.allocated);
  // Reserved only shrinks on empty_cache() or an alloc retry, so against the largest step peak
  // of the series, not this step's: a short step after a long one is no fragmentation.
  f.largest_need = std::max(f.peak_allocated, log.max_step_peak_allocated);
  f.held = std::max<std::int64_t>(0, f.peak_reserved - f.largest_need);
  // device_free is measured at the step end; what the peak reserved beyond the step end came out
  // of it. Without step_peak_reserved, the peak reserved at least its allocation.
  std::int64_t extra = r.step_peak_reserved ? f.peak_reserved - r.reserved : std::max<std::int64_t>(0, f.peak_allocated - r.reserved);
  f.free_at_peak = std::max<std::int64_t>(0, r.device_free - extra);
  f.peak = r.peak_is_per_step ? "the step's peak" : "the peak since the last reset";
  return f;
}

void advise_oom(const log_view& log, const steplog_record& r, std::vector<watch_advice>& warnings, std::vector<watch_advice>& infos) {
  std::int64_t recent = r.num_ooms - log.ooms_before_window;
  std::string snapshot;
  for (const steplog_alert_seen& seen : log.alerts) {
    if (seen.alert.kind == "oom" && !seen.alert.snapshot.empty()) snapshot = seen.alert.snapshot;
  }
  std::string next = snapshot.empty() ? "rlmem.record() dumps a snapshot at the next one, and rlmem inspect on it says whether "
                                        "it was fragmentation or capacity"
                                      : "rlmem inspect " + snapshot + " says whether it was fragmentation or capacity";
  if (recent > 0 && log.window_steps > 0) {
    warnings.push_back({"oom", advice_level::warning,
                        fmt::format("oom: {} in the last {} ({} since the process started); the job caught them and went on. {}",
                                    plural(recent, "out-of-memory error", "out-of-memory errors"),
                                    plural(static_cast<std::int64_t>(log.window_steps), "step", "steps"), r.num_ooms, next)});
  } else if (r.num_ooms > 0) {
    infos.push_back({"oom", advice_level::info,
                     fmt::format("oom: {} before the last {}, none since. {}", plural(r.num_ooms, "out-of-memory error", "out-of-memory errors"),
                                 plural(static_cast<std::int64_t>(log.window_steps), "step", "steps"), next)});
  }
}

void advise_retries(const log_view& log, const steplog_record& r, const log_figures& f, std::vector<watch_advice>& warnings,
                    std::vector<watch_advice>& infos) {
  std::int64_t recent = r.num_alloc_retries - log.retries_before_window;
  if (recent > 0 && log.window_steps > 0) {
    warnings.push_back(
        {"alloc_retries", advice_level::warning,
         fmt::format("alloc_retries: rose by {} over the last {} (to {}): cudaMalloc failed and the allocator freed its cache to "
                     "retry, which happens only when the device is nearly full; peak reserved {} is {} of the {} card, {} free "
                     "at {}. Each retry synchronises the device: lower the micro-batch or the group size{}",
                     recent, plural(static_cast<std::int64_t>(log.window_steps), "step", "steps"), r.num_alloc_retries,
                     format_bytes(f.peak_reserved), percent_of(f.peak_reserved, f.total), format_bytes(f.total),
                     format_bytes(f.free_at_peak), f.peak,
                     f.unallocated > 0 ? fmt::format(", or set expandable_segments:True to reuse the {} reserved but unallocated",
                                                     format_bytes(f.unallocated))
                                       : std::string())});
  } else if (r.num_alloc_retries > 0) {
    infos.push_back({"alloc_retries", advice_level::info,
                     log.window_steps == 0
                         ? fmt::format("alloc_retries: {} before the first step end in the log; the next steps show whether "
                                       "they still rise", r.num_alloc_retries)
                         : fmt::format("alloc_retries: {} earlier in the run, none in the last {}", r.num_alloc_retries,
                                       plural(static_cast<std::int64_t>(log.window_steps), "step", "steps"))});
  }
}

void advise_headroom(const steplog_record& r, const log_figures& f, const advice_thresholds& thresholds,
                     std::vector<watch_advice>& warnings) {
  if (f.total <= 0 || static_cast<double>(f.free_at_peak) >= thresholds.headroom_fraction * static_cast<double>(f.total)) return;
  warnings.push_back(
      {"headroom", advice_level::warning,
       fmt::format("headroom: about {} ({}) of the {} card stays free at {} (device free {} at the step end, less the {} "
                   "the peak reserved beyond it); under the {:.0f}% margin a longer response or a larger group can OOM. "
                   "Peak allocated {}, peak reserved {}",
                   format_bytes(f.free_at_peak), percent_of(f.free_at_peak, f.total), format_bytes(f.total), f.peak,
                   format_bytes(r.device_free), format_bytes(std::max<std::int64_t>(0, r.device_free - f.free_at_peak)),
                   100.0 * thresholds.headroom_fraction, format_bytes(f.peak_allocated), format_bytes(f.peak_reserved))});
}

// Steps of measured growth after which it, not the alert's rate, predicts the time left.
constexpr std::int64_t measured_rate_steps = 4;

void advise_leak(const log_view& log, const steplog_record& r, const log_figures& f, std::vector<watch_advice>& warnings,
                 std::vector<watch_advice>& infos) {
  if (!log.latest_leak) return;
  const steplog_alert_seen& seen = *log.latest_leak;
  std::int64_t since = seen.alert.since_step.value_or(seen.step);
  // Measured growth: from the last step end before the growth began (or the oldest kept) to now.
  std::size_t base = 0;
  for (std::size_t i = 0; i < log.step_history.size(); ++i) {
    if (log.step_history[i] < since) base = i;
  }
  std::int64_t steps = log.step_history.empty() ? 0 : r.step - log.step_history[base];
  std::int64_t grown = log.allocated_history.empty() ? 0 : r.allocated - log.allocated_history[base];
  std::int64_t per_step = seen.alert.bytes_per_step.value_or(steps > 0 ? grown / steps : 0);
  if (steps > 0 && grown <= 0) {
    infos.push_back({"leak", advice_level::info,
                     fmt::format("leak: the alert of step {} (+{}/step since step {}) no longer shows: step-end allocated is {} "
                                 "at step {}, {} at step {}",
                                 seen.step, format_bytes(per_step), since, format_bytes(r.allocated), r.step,
                                 format_bytes(log.allocated_history[base]), log.step_history[base])});
    return;
  }
  std::string text = fmt::format("leak: allocated grows {}/step since step {} (the monitor's alert at step {})", format_bytes(per_step),
                                 since, seen.step);
  if (steps > 0) {
    text += fmt::format("; step-end allocated rose {} from step {} to step {} ({}/step)", format_bytes(grown), r.step - steps, r.step,
                        format_bytes(grown / steps));
  }
  // The alert's rate comes from the monitor's window when it fired; once more steps have passed,
  // the growth measured since the leak began says more.
  const bool measured = steps >= measured_rate_steps;
  const std::int64_t rate = measured ? grown / steps : per_step;
  if (rate > 0 && f.total > 0) {
    text += fmt::format("; at {} the {} free at {} is gone in about {}", measured ? "the measured rate" : "that rate",
                        format_bytes(f.free_at_peak), f.peak, plural(f.free_at_peak / rate, "step", "steps"));
  }
  if (!seen.alert.site.empty()) {
    text += ". Site: " + seen.alert.site + (seen.alert.snapshot.empty() ? "" : " (named by " + seen.alert.snapshot + ")");
  } else {
    text += ". rlmem.record() for a few steps lets the monitor name the allocation site";
  }
  warnings.push_back({"leak", advice_level::warning, std::move(text)});
}

void advise_fragmentation(const log_view& log, const steplog_record& r, const log_figures& f, const advice_thresholds& thresholds,
                          std::vector<watch_advice>& warnings) {
  if (f.held < thresholds.fragmentation_min_bytes ||
      static_cast<double>(f.held) < thresholds.fragmentation_fraction * static_cast<double>(f.peak_reserved)) {
    return;
  }
  warnings.push_back(
      {"fragmentation", advice_level::warning,
       fmt::format("fragmentation: {} reserved is {} ({}) more than the largest step peak of the last {} needed ({} "
                   "allocated); reserved but unallocated at the step end is {} ({} of reserved), {} of it in free pieces "
                   "of split blocks (inactive_split). Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so freed "
                   "memory joins into blocks that fit; rlmem replay --compare on a snapshot measures the saving",
                   format_bytes(f.peak_reserved), format_bytes(f.held), percent_of(f.held, f.peak_reserved),
                   plural(static_cast<std::int64_t>(std::max<std::size_t>(log.steps_kept, 1)), "step", "steps"),
                   format_bytes(f.largest_need), format_bytes(f.unallocated), percent_of(f.unallocated, r.reserved),
                   format_bytes(r.inactive_split))});
}

void advise_log(const log_view& log, const advice_thresholds& thresholds, std::vector<watch_advice>& warnings,
                std::vector<watch_advice>& infos) {
  if (!log.latest) return;
  const steplog_record& r = *log.latest;
  const log_figures f = derive(log, r);
  std::size_t warnings_before = warnings.size();
  advise_oom(log, r, warnings, infos);
  advise_retries(log, r, f, warnings, infos);
  advise_headroom(r, f, thresholds, warnings);
  advise_leak(log, r, f, warnings, infos);
  advise_fragmentation(log, r, f, thresholds, warnings);
  if (warnings.size() != warnings_before) return;
  infos.push_back({"fine", advice_level::info,
                   fmt::format("fine: the job's peak reserved {} is {} of the {} card with {} free at {}; no alloc retries or OOMs in the "
                               "last {}; reserved but unallocated {} ({} of reserved)",
                               format_bytes(f.peak_reserved), percent_of(f.peak_reserved, f.total), format_bytes(f.total),
                               format_bytes(f.free_at_peak), f.peak, plural(static_cast<std::int64_t>(log.window_steps), "step", "steps"),
                               format_bytes(f.unallocated), percent_of(f.unallocated, r.reserved))});
  if (f.total > 0 && static_cast<double>(f.peak_reserved) < thresholds.under_use_fraction * static_cast<double>(f.total)) {
    infos.push_back({"under_use", advice_level::info,
                     fmt::format("under_use: about {} of the card is unused at {}; rlmem plan --fit sizes a larger micro-batch, "
                                 "group or response length for it",
                                 format_bytes(f.total - f.peak_reserved), f.peak)});
  }
}

void advise_gpus(const watch_frame& frame, const advice_thresholds& thresholds, std::vector<watch_advice>& warnings,
                 std::vector<watch_advice>& infos) {
  if (!frame.nvml_available || frame.gpus.empty()) return;
  std::size_t warnings_before = warnings.size();
  std::string idle;
  const gpu_view* fullest = nullptr;
  for (const gpu_view& gpu : frame.gpus) {
    const std::int64_t total = static_cast<std::int64_t>(gpu.memory.total_bytes);
    const std::int64_t used = static_cast<std::int64_t>(gpu.memory.used_bytes);
    if (total <= 0) continue;  // the driver did not answer for its memory
    auto share = [](const gpu_view& one) {
      return static_cast<double>(one.memory.used_bytes) / static_cast<double>(one.memory.total_bytes);
    };
    if (fullest == nullptr || share(gpu) > share(*fullest)) fullest = &gpu;
    if (static_cast<double>(used) >= (1.0 - thresholds.headroom_fraction) * static_cast<double>(total)) {
      std::string holder;
      if (!gpu.processes.empty() && gpu.processes.front().process.used_bytes) {
        holder = fmt::format("; pid {} holds {}", gpu.processes.front().process.pid,
                             format_bytes(static_cast<std::int64_t>(*gpu.processes.front().process.used_bytes)));
      }
      warnings.push_back({"gpu_full", advice_level::warning,
                          fmt::format("gpu_full: GPU {} has {} of {} in use ({}), {} free: whatever asks for more next gets "
                                      "an OOM{}",
                                      gpu.index, format_bytes(used), format_bytes(total), percent_of(used, total),
                                      format_bytes(static_cast<std::int64_t>(gpu.memory.free_bytes)), holder)});
    } else if (gpu.processes.empty()) {
      idle += (idle.empty() ? "" : ", ") + std::to_string(gpu.index);
    } else if (!frame.log && static_cast<double>(used) < thresholds.under_use_fraction * static_cast<double>(total)) {
      // With a log, its own rule judges the job's use more precisely.
      infos.push_back({"under_use", advice_level::info,
                       fmt::format("under_use: GPU {} has {} of {} in use ({}) by {}: room for a larger batch; rlmem plan "
                                   "--fit sizes one for this card",
                                   gpu.index, format_bytes(used), format_bytes(total), percent_of(used, total),
                                   plural(static_cast<std::int64_t>(gpu.processes.size()), "process", "processes"))});
    }
  }
  if (!idle.empty()) {
    infos.push_back({"idle", advice_level::info, fmt::format("idle: no compute process on GPU {}", idle)});
  }
  if (warnings.size() == warnings_before && fullest != nullptr) {
    infos.push_back({"fine", advice_level::info,
                     fmt::format("fine: the fullest GPU, {}, has {} of {} in use ({}), {} free",
                                 fullest->index, format_bytes(static_cast<std::int64_t>(fullest->memory.used_bytes)),
                                 format_bytes(static_cast<std::int64_t>(fullest->memory.total_bytes)),
                                 percent_of(static_cast<std::int64_t>(fullest->memory.used_bytes),
                                            static_cast<std::int64_t>(fullest->memory.total_bytes)),
                                 format_bytes(static_cast<std::int64_t>(fullest->memory.free_bytes)))});
  }
}

}  // namespace

std::vector<watch_advice> advise(const watch_frame& frame, const advice_thresholds& thresholds) {
  std::vector<watch_advice> warnings;
  std::vector<watch_advice> infos;
  if (frame.log) advise_log(*frame.log, thresholds, warnings, infos);
  advise_gpus(frame, thresholds, warnings, infos);
  warnings.insert(warnings.end(), std::make_move_iterator(infos.begin()), std::make_move_iterator(infos.end()));
  return warnings;
}

}  // namespace rlmem
