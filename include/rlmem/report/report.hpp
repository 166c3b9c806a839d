// SPDX-License-Identifier: MIT
#pragma once
// Renders analysis results for people (aligned text) and for programs (JSON, schema in
// docs/schema/inspect.schema.json). Renderers return strings; they never print.

#include <rlmem/inspect/compare.hpp>
#include <rlmem/base/format.hpp>
#include <rlmem/inspect/inspect.hpp>
#include <rlmem/plan/plan.hpp>
#include <rlmem/replay/replay.hpp>
#include <rlmem/snapshot/snapshot.hpp>
#include <rlmem/plan/trainer_config.hpp>
#include <rlmem/inspect/views.hpp>
#include <rlmem/watch/watch.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace rlmem {

/// Layout of the text reports.
struct text_options {
  std::size_t frames = 0;  ///< stack frames printed under each peak site
  std::size_t width = 100; ///< columns available
};

/// The human report of `rlmem inspect`. `source` names the file in the heading.
std::string render_inspection_text(const snapshot& snap, const inspection& result, const std::string& source,
                                   const text_options& options = {});

/// The JSON report of `rlmem inspect` (schema_version 3), with the timeline cut to at most
/// `max_timeline_points` points that keep every local peak.
std::string render_inspection_json(const snapshot& snap, const inspection& result, const std::string& source,
                                   std::size_t max_timeline_points = 2000);

/// Whether this build carries the browser assets of the HTML report: false when node and npm
/// were missing when it was configured (render_inspection_html then has nothing to inline).
bool html_report_available() noexcept;

/// `rlmem report`: one self-contained HTML page (uPlot and the page scripts inlined, a
/// Content-Security-Policy that forbids every network request) drawing `result` and `views`.
/// The page carries render_inspection_json(snap, result, source) as it is (the bytes
/// `rlmem inspect --json` prints, '<' escaped as JSON allows) and beside it only the views'
/// own data.
/// Every string from the snapshot travels as JSON data in the page, never as markup.
/// Precondition: html_report_available().
std::string render_inspection_html(const snapshot& snap, const inspection& result, const memory_views& views,
                                   const std::string& source);

/// Rows of each table a diff page lists: the largest changes (a diff keeps every site).
inline constexpr std::size_t max_html_diff_rows = 200;
/// Slices of each rank's timeline on the page of a folder of ranks.
inline constexpr std::size_t html_rank_columns = 400;

/// `rlmem report A B`: render_diff_json's figures as one self-contained page (the totals, then
/// the changed categories and the max_html_diff_rows largest changed sites at the peak and at the
/// end, as bars). Precondition: html_report_available().
std::string render_diff_html(const inspection_diff& diff, const std::string& a_name, const std::string& b_name);

/// `rlmem report DIR`: render_ranks_json's figures as one self-contained page, with each rank's
/// allocated and reserved timeline (the peaks of html_rank_columns slices) side by side.
/// Precondition: html_report_available().
std::string render_ranks_html(const std::vector<rank_result>& ranks, const rank_imbalance& imbalance, const std::string& folder);

/// `rlmem diff A B` for people: totals, then sites and categories that changed most.
std::string render_diff_text(const inspection_diff& diff, const std::string& a_name, const std::string& b_name,
                             std::size_t top, const text_options& options = {});
/// `rlmem diff A B --json` (schema in docs/schema/diff.schema.json).
std::string render_diff_json(const inspection_diff& diff, const std::string& a_name, const std::string& b_name);

/// `rlmem inspect DIR`: one row per rank and the imbalance across ranks.
std::string render_ranks_text(const std::vector<rank_result>& ranks, const rank_imbalance& imbalance,
                              const std::string& folder, const text_options& options = {});
/// `rlmem inspect DIR --json`.
std::string render_ranks_json(const std::vector<rank_result>& ranks, const rank_imbalance& imbalance, const std::string& folder);

/// What `rlmem replay` prints: the run under one setting, and optionally the smallest capacity
/// and the comparison of settings.
struct replay_report {
  std::string file;             ///< the snapshot's path as given (escaped when printed)
  std::int64_t device = 0;      ///< the CUDA device index whose trace was replayed
  allocator_settings settings;  ///< the caching allocator's settings replayed under (PYTORCH_CUDA_ALLOC_CONF)
  bool settings_recorded = true;  ///< the snapshot's own settings
  allocator_choice allocator;  ///< the policy replayed under
  std::uint64_t capacity_bytes = 0;  ///< the device memory the replay was given; 0: no limit
  replay_result result;              ///< the run under `settings` and `allocator`
  /// --min-capacity: the smallest capacity (to 2 MiB) under which the run completes; 0 when none
  /// does; empty when not asked.
  std::optional<std::uint64_t> min_capacity_bytes;
  std::vector<settings_comparison> comparison;  ///< --compare: the run under each setting; empty when not asked
};

/// `rlmem replay` for people.
std::string render_replay_text(const replay_report& report);
/// `rlmem replay --json` (schema in docs/schema/replay.schema.json).
std::string render_replay_json(const replay_report& report);
/// `rlmem replay --html`: render_replay_json's figures as one self-contained page (the run, and
/// with --compare each setting's peak reserved and smallest capacity as bars over the floor).
/// Precondition: html_report_available().
std::string render_replay_html(const replay_report& report);

/// What `rlmem plan` prints: the model, the knobs, each phase's peak and, with --fit, the search.
struct plan_report {
  model_architecture model;       ///< the model planned
  plan_knobs knobs;               ///< as the command line (and --from) gave them
  plan_result plan;               ///< plan_memory(model, knobs)
  std::optional<fit_result> fit;  ///< --fit's search; empty without --fit
  std::string fit_card;           ///< the --fit argument as given
  std::uint64_t fit_budget_bytes = 0;  ///< the card's memory that --fit names, in bytes
  double fit_margin = 0;          ///< --margin: the fragmentation margin, a fraction of the peak
  double fit_seconds = 0;         ///< wall-clock seconds the search took
  unsigned fit_vary = 0;          ///< search_bit()s of the algorithm knobs --vary opened
  bool fit_all = false;           ///< text: every fitting configuration, not only the shortlist (--all)
  std::size_t width = 100;        ///< columns of the text report
  /// --response-len-max, --response-len-percentiles: the step's peak along the responses' lengths.
  std::optional<length_view> response_lengths;
  std::string response_lengths_card;  ///< the card the fitting length is found on (--fit's, else --card)
  /// --from FILE: the trainer config the knobs came from, each setting's knob and each ignored one.
  std::optional<trainer_config_mapping> from_config;
  std::string from_file;          ///< --from's path as given; "" without --from
  std::uint64_t host_memory_bytes = 0;  ///< --host-memory: a node's host memory (0: not checked)
};

/// `rlmem plan` for people.
std::string render_plan_text(const plan_report& report);
/// `rlmem plan --json` (schema in docs/schema/plan.schema.json).
std::string render_plan_json(const plan_report& report);
/// `rlmem plan --html`: render_plan_json's document as one self-contained page (each phase's
/// peak as bars of its parts; with --fit your config, each knob changed alone, the combinations
/// that fit, every fitting configuration and the best one's command line). Precondition:
/// html_report_available().
std::string render_plan_html(const plan_report& report);

/// The command line that reproduces `knobs` (the search's best configuration, for instance).
std::string knobs_command_line(const plan_knobs& knobs);

/// Layout of `rlmem watch`'s text frame.
struct watch_text_options {
  std::size_t width = 100;             ///< columns available (at least 40)
  std::size_t processes_per_gpu = 4;   ///< more are summed on one line
  double interval_seconds = 0;         ///< shown in the heading; 0 for a single report (--once)
};

/// One refresh of `rlmem watch` for people. Every line fits `width` columns (one per code point);
/// command lines, log messages and paths are escaped so they cannot write terminal controls.
std::string render_watch_text(const watch_frame& frame, const watch_text_options& options = {});
/// One refresh of `rlmem watch --json`: one line, schema in docs/schema/watch.schema.json.
std::string render_watch_json(const watch_frame& frame);

}  // namespace rlmem
