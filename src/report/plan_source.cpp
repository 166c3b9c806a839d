// SPDX-License-Identifier: MIT
// The config file behind `rlmem plan --from FILE`: each setting and the knob it set, or why not.

#include "plan_source.hpp"

#include "prose.hpp"

#include <rlmem/base/format.hpp>

#include <fmt/format.h>

namespace rlmem::detail {

namespace {

// "gradient_checkpointing true -> --grad-ckpt"; an off switch reads "-> no --grad-ckpt".
std::string knob_text(const mapped_setting& setting) {
  if (setting.flag_value == "on") return setting.flag;
  if (setting.flag_value == "off") return "no " + setting.flag;
  return setting.flag + " " + setting.flag_value;
}

// A line of its own with a hanging indent: continuation lines under the key.
std::string hanging(const std::string& text, std::size_t width) {
  std::string lines = wrap(text, 4, width);
  return lines.replace(0, 4, "  ");
}

}  // namespace

void append_config_source(std::string& out, const plan_report& report) {
  if (!report.from_config) return;
  const trainer_config_mapping& mapping = *report.from_config;
  const std::string file = printable_text(report.from_file);
  out += "\n" + wrap(fmt::format("from {} ({}; keys it leaves out take the defaults of {}):", file, to_string(mapping.format),
                                 mapping.defaults_from),
                     0, report.width);
  for (const mapped_setting& setting : mapping.mapped) {
    std::string line = fmt::format("{} {}{} -> {}", printable_text(setting.key), printable_text(setting.value),
                                   setting.from_default ? " (default)" : "", printable_text(knob_text(setting)));
    if (!setting.note.empty()) line += " (" + printable_text(setting.note) + ")";
    if (setting.overridden) line += "; the command line's " + setting.flag + " wins";
    out += hanging(line, report.width);
  }
  if (mapping.ignored.empty()) return;
  out += wrap(fmt::format("ignored from {}:", file), 0, report.width);
  for (const ignored_setting& setting : mapping.ignored) {
    out += hanging(fmt::format("{} {}: {}", printable_text(setting.key), printable_text(setting.value), printable_text(setting.reason)),
                   report.width);
  }
}

nlohmann::json config_source_json(const plan_report& report) {
  const trainer_config_mapping& mapping = *report.from_config;
  nlohmann::json mapped = nlohmann::json::array();
  for (const mapped_setting& setting : mapping.mapped) {
    mapped.push_back({{"key", setting.key},
                      {"value", setting.value},
                      {"flag", setting.flag},
                      {"to", setting.flag_value},
                      {"note", setting.note},
                      {"default", setting.from_default},
                      {"overridden", setting.overridden}});
  }
  nlohmann::json ignored = nlohmann::json::array();
  for (const ignored_setting& setting : mapping.ignored) {
    ignored.push_back({{"key", setting.key}, {"value", setting.value}, {"reason", setting.reason}});
  }
  return {{"file", report.from_file},
          {"format", to_string(mapping.format)},
          {"defaults_from", mapping.defaults_from},
          {"mapped", mapped},
          {"ignored", ignored}};
}

}  // namespace rlmem::detail
