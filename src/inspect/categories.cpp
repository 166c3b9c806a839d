// SPDX-License-Identifier: MIT
// Memory categories: one table of rules over stack frames, replaceable from a file.

#include "analysis.hpp"

#include <rlmem/inspect/inspect.hpp>

#include <algorithm>
#include <array>
#include <sstream>

namespace rlmem {

namespace {

constexpr std::array<std::string_view, memory_category_count> category_names = {
    "weights", "optimizer_state", "gradients", "activations", "kv_cache", "logits", "temporaries", "other", "before_recording"};
// The categories a rules file may name: all but before_recording, which only the absence of a
// stack before the first event gives.
constexpr std::size_t rule_category_count = static_cast<std::size_t>(memory_category::before_recording);

std::vector<category_rule> build_default_rules() {
  // "@" rules look at every frame and come first; the others are tried frame by frame from the
  // innermost outwards, so the frame closest to the allocation decides.
  static constexpr std::string_view table = R"(
@kv_cache         cache_utils.py
@kv_cache         past_key_value
@optimizer_state  _init_group
@temporaries      torch/optim/
@weights          modeling_utils.py
@weights          safetensors
@weights          load_state_dict
@weights          deepcopy
@weights          " _apply"
@temporaries      generation/utils.py
gradients         torch/autograd/
gradients         AccumulateGrad
logits            log_softmax
logits            logsumexp
logits            cross_entropy
logits            logprob
logits            log_prob
logits            logits
logits            lm_head
activations       torch/nn/functional.py
activations       " forward"
temporaries       torch/
)";
  // The table above parses (tests/inspect/inspect_errors_test.cpp checks it is not empty).
  auto rules = parse_category_rules(table);
  return rules.ok() ? std::move(rules).value() : std::vector<category_rule>{};
}

}  // namespace

std::string_view memory_category_name(memory_category category) noexcept {
  auto index = static_cast<std::size_t>(category);
  return index < category_names.size() ? category_names[index] : "other";
}

const std::vector<category_rule>& default_category_rules() {
  static const std::vector<category_rule> rules = build_default_rules();
  return rules;
}

result<std::vector<category_rule>, inspect_errc> parse_category_rules(std::string_view text) {
  std::vector<category_rule> parsed;
  std::size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string_view::npos || line[start] == '#') continue;
    line = line.substr(start);
    bool context = line.front() == '@';
    if (context) line.remove_prefix(1);
    std::size_t gap = line.find_first_of(" \t");
    std::string_view name = line.substr(0, gap);
    std::string_view pattern = gap == std::string_view::npos ? std::string_view{} : line.substr(gap);
    pattern.remove_prefix(std::min(pattern.size(), pattern.find_first_not_of(" \t")));
    // Quotes keep leading or trailing spaces: activations " forward" matches the function name.
    if (pattern.size() >= 2 && pattern.front() == '"' && pattern.back() == '"') pattern = pattern.substr(1, pattern.size() - 2);
    std::size_t index = 0;
    while (index < rule_category_count && category_names[index] != name) ++index;
    if (index == rule_category_count && name == category_names[rule_category_count]) {
      return basic_error<inspect_errc>{inspect_errc::category_not_assignable, 0,
                                       "line " + std::to_string(line_number) +
                                           ": before_recording is the category of blocks allocated before recording began; no rule can give it"};
    }
    if (index == rule_category_count) {
      return basic_error<inspect_errc>{inspect_errc::unknown_category, 0,
                                       "line " + std::to_string(line_number) + ": unknown category '" + std::string(name) +
                                           "' (one of weights, optimizer_state, gradients, activations, kv_cache, logits, temporaries, other)"};
    }
    if (pattern.empty()) {
      return basic_error<inspect_errc>{inspect_errc::missing_pattern, 0,
                                       "line " + std::to_string(line_number) + ": a rule needs a pattern after the category"};
    }
    parsed.push_back({static_cast<memory_category>(index), std::string(pattern), context});
  }
  return parsed;
}

}  // namespace rlmem

namespace rlmem::detail {

category_matcher::category_matcher(frame_index& frames, const std::vector<category_rule>& rules)
    : frames_(frames), rules_(rules) {}

const category_matcher::frame_matches& category_matcher::matches_of(frame_id id) {
  if (matches_.empty()) matches_.resize(frames_.snap().frames.size());
  frame_matches& found = matches_[id];
  if (found.known) return found;
  found.known = true;
  frames_.match_text(id, text_);
  for (std::uint32_t index = 0; index < rules_.size(); ++index) {
    const category_rule& rule = rules_[index];
    std::uint32_t& first = rule.any_frame ? found.first_any_frame_rule : found.first_frame_rule;
    if (first == no_rule && text_.find(rule.pattern) != std::string::npos) first = index;
  }
  return found;
}

memory_category category_matcher::categorize(stack_id stack, bool before_trace) {
  auto stack_frames = frames_.snap().stack(stack);
  if (stack_frames.empty()) return before_trace ? memory_category::before_recording : memory_category::gradients;
  // "@" rules in their order against every frame: the earliest rule that any frame matches.
  std::uint32_t any_frame_rule = no_rule;
  for (frame_id id : stack_frames) any_frame_rule = std::min(any_frame_rule, matches_of(id).first_any_frame_rule);
  if (any_frame_rule != no_rule) return rules_[any_frame_rule].category;
  for (frame_id id : stack_frames) {
    if (std::uint32_t rule = matches_of(id).first_frame_rule; rule != no_rule) return rules_[rule].category;
  }
  return memory_category::other;
}

}  // namespace rlmem::detail
