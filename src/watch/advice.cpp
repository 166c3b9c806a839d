// SPDX-License-Identifier: MIT
// The advice of `rlmem watch`: rules over the log's step-end figures and the driver's per-GPU
// memory. Every line quotes the numbers that triggered it; docs/watch.md lists the thresholds.

#include <rlmem/base/format.hpp>
#include <rlmem/watch/watch.hpp>

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

// The figures every log rule reads, from the step-end rules' judgment of the latest step end.
struct log_figures {
  std::int64_t total = 0;
  std::int64_t limit = 0;           ///< the cap judged against: a memory fraction's, else the card
  std::int64_t peak_reserved = 0;
  std::int64_t peak_allocated = 0;
  std::int64_t unallocated = 0;     ///< reserved - allocated at the step end
  std::string peak;                 ///< how to name the peak
  step_judgment judged;
};

log_figures derive(const log_view& log, const steplog_record& r, const advice_thresholds& thresholds) {
  log_figures f;
  f.total = r.device_total;
  f.peak_reserved = std::max(r.reserved, r.step_peak_reserved.value_or(0));
  f.peak_allocated = std::max(r.step_peak_allocated, r.allocated);
  f.unallocated = std::max<std::int64_t>(0, r.reserved - r.allocated);
  f.peak = r.peak_is_per_step ? "the step's peak" : "the peak since the last reset";
  f.judged = judge_step(log.samples, 0, thresholds.rules);
  f.limit = f.judged.limit_bytes;
  return f;
}

// "; at this rate the step peak passes the 80.0 GiB card in about 971 steps", or "".
std::string forecast(const log_figures& f, const steplog_record& r) {
  if (!f.judged.steps_to_limit) return {};
  std::string what = r.limit ? fmt::format("the {} limit", format_bytes(f.limit)) : fmt::format("the {} card", format_bytes(f.total));
  if (*f.judged.steps_to_limit <= 0) return fmt::format("; the step peak is past {} already", what);
  const std::int64_t steps = *f.judged.steps_to_limit;
  return fmt::format("; at this rate the step peak passes {} in about {} {}", what, format_count(static_cast<std::uint64_t>(steps)),
                     steps == 1 ? "step" : "steps");
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
                     format_bytes(std::max<std::int64_t>(0, f.judged.free_at_peak)), f.peak,
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
  if (!f.judged.headroom) return;
  const std::int64_t free_at_peak = std::max<std::int64_t>(0, f.judged.free_at_peak);
  std::string where = r.limit ? fmt::format("the {} limit (a memory fraction of the {} card)", format_bytes(f.limit), format_bytes(f.total))
                              : fmt::format("the {} card", format_bytes(f.total));
  const bool thin = static_cast<double>(f.judged.free_at_peak) < thresholds.rules.headroom_fraction * static_cast<double>(f.limit);
  warnings.push_back(
      {"headroom", advice_level::warning,
       fmt::format("headroom: about {} ({}) of {} stays free at {} (device free {} at the step end, less the {} "
                   "the peak reserved beyond it); {}. Peak allocated {}, peak reserved {}{}",
                   format_bytes(free_at_peak), percent_of(free_at_peak, f.limit), where, f.peak, format_bytes(r.device_free),
                   format_bytes(std::max<std::int64_t>(0, f.peak_reserved - r.reserved)),
                   thin ? fmt::format("under the {:.0f}% margin a longer response or a larger group can OOM", 100.0 * thresholds.rules.headroom_fraction)
                        : fmt::format("the leak fills it within {} steps", thresholds.rules.headroom_steps),
                   format_bytes(f.peak_allocated), format_bytes(f.peak_reserved), forecast(f, r))});
}

void advise_leak(const log_view& log, const steplog_record& r, const log_figures& f, std::vector<watch_advice>& warnings,
                 std::vector<watch_advice>& infos) {
  const growth_verdict& leak = f.judged.leak;
  const std::optional<steplog_alert_seen>& alerted = log.latest_leak;
  if (leak.growing) {
    const step_sample& before = log.samples[leak.first - 1];
    // Growth seen step by step, or a trend through noise that hides single steps.
    std::string how = 2 * leak.events > leak.steps || leak.period > 1
                          ? fmt::format("{} of the {} step ends since rose above the {} scatter", leak.events, leak.steps,
                                        format_bytes(leak.noise_bytes))
                          : fmt::format("a trend over {} step ends through {} of scatter", leak.steps, format_bytes(leak.noise_bytes));
    std::string text = fmt::format("leak: step-end allocated grows {}/step since step {}: {}, {} -> {} allocated",
                                   format_bytes(leak.bytes_per_step), log.samples[leak.first].step, how,
                                   format_bytes(before.allocated), format_bytes(r.allocated));
    if (alerted && !alerted->alert.cleared) text += fmt::format(" (the monitor's alert at step {})", alerted->step);
    text += forecast(f, r);
    if (alerted && !alerted->alert.site.empty()) {
      text += ". Site: " + alerted->alert.site + (alerted->alert.snapshot.empty() ? "" : " (named by " + alerted->alert.snapshot + ")");
    } else {
      text += ". StepMonitor(record_on_leak=3) names the allocation site";
    }
    warnings.push_back({"leak", advice_level::warning, std::move(text)});
    return;
  }
  if (!alerted) return;
  if (alerted->alert.cleared) {
    infos.push_back({"leak", advice_level::info, fmt::format("leak: the monitor cleared its alert at step {}", alerted->step)});
    return;
  }
  const step_sample& oldest = log.samples.front();
  infos.push_back({"leak", advice_level::info,
                   fmt::format("leak: the alert of step {} (+{}/step since step {}) no longer shows: step-end allocated is {} at step {}, "
                               "{} at step {}",
                               alerted->step, format_bytes(alerted->alert.bytes_per_step.value_or(0)),
                               alerted->alert.since_step.value_or(alerted->step), format_bytes(r.allocated), r.step,
                               format_bytes(oldest.allocated), oldest.step)});
}

void advise_fragmentation(const log_view& log, const steplog_record& r, const log_figures& f, std::vector<watch_advice>& warnings) {
  if (!f.judged.fragmented) return;
  warnings.push_back(
      {"fragmentation", advice_level::warning,
       fmt::format("fragmentation: {} reserved is {} ({}) more than the largest step peak of the last {} needed ({} "
                   "allocated); reserved but unallocated at the step end is {} ({} of reserved), {} of it in free pieces "
                   "of split blocks (inactive_split). Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so freed "
                   "memory joins into blocks that fit; rlmem replay --compare on a snapshot measures the saving",
                   format_bytes(r.reserved), format_bytes(f.judged.unused_reserved), percent_of(f.judged.unused_reserved, r.reserved),
                   plural(static_cast<std::int64_t>(std::max<std::size_t>(log.steps_kept, 1)), "step", "steps"),
                   format_bytes(f.judged.peak_allocated_seen), format_bytes(f.unallocated), percent_of(f.unallocated, r.reserved),
                   format_bytes(r.inactive_split))});
}

void advise_log(const log_view& log, const advice_thresholds& thresholds, std::vector<watch_advice>& warnings,
                std::vector<watch_advice>& infos) {
  if (!log.latest) return;
  const steplog_record& r = *log.latest;
  const log_figures f = derive(log, r, thresholds);
  std::size_t warnings_before = warnings.size();
  advise_oom(log, r, warnings, infos);
  advise_retries(log, r, f, warnings, infos);
  advise_headroom(r, f, thresholds, warnings);
  advise_leak(log, r, f, warnings, infos);
  advise_fragmentation(log, r, f, warnings);
  if (warnings.size() != warnings_before) return;
  infos.push_back({"fine", advice_level::info,
                   fmt::format("fine: the job's peak reserved {} is {} of the {} card with {} free at {}; no alloc retries or OOMs in the "
                               "last {}; reserved but unallocated {} ({} of reserved)",
                               format_bytes(f.peak_reserved), percent_of(f.peak_reserved, f.total), format_bytes(f.total),
                               format_bytes(std::max<std::int64_t>(0, f.judged.free_at_peak)), f.peak, plural(static_cast<std::int64_t>(log.window_steps), "step", "steps"),
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
    if (static_cast<double>(used) >= (1.0 - thresholds.rules.headroom_fraction) * static_cast<double>(total)) {
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
