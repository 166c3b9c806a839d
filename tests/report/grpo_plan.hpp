// SPDX-License-Identifier: MIT
#pragma once
// The plan report the report tests render: a GRPO step (8 prompts x 8, 512 + 512 tokens,
// micro-batch 16, a reference copy) fitted to an H100, with the buffers given.

#include <rlmem/report/report.hpp>

#include <string>
#include <vector>

namespace rlmem::testing {

inline plan_report grpo_plan_fitted_to_h100(const std::string& model, const std::vector<resident_buffer>& buffers = {}) {
  plan_report report;
  report.model = *find_preset(model);
  report.knobs.phase = plan_phase::grpo_step;
  report.knobs.prompts = 8;
  report.knobs.group = 8;
  report.knobs.prompt_len = 512;
  report.knobs.new_tokens = 512;
  report.knobs.micro_batch = 16;
  report.knobs.reference = reference_kind::copy;
  report.knobs.buffers = buffers;
  report.plan = plan_memory(report.model, report.knobs);
  fit_options options;
  options.budget_bytes = gpu_memory_bytes("h100-80g");
  report.fit = fit_configuration(report.model, report.knobs, options);
  report.fit_card = "h100-80g";
  report.fit_budget_bytes = options.budget_bytes;
  report.fit_margin = options.fragmentation_margin;
  return report;
}

}  // namespace rlmem::testing
