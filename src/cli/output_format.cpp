// SPDX-License-Identifier: MIT
// --format, --json, --html and -o/--output: one set of options for every command's output.

#include "output_format.hpp"

#include "output.hpp"

#include <map>
#include <vector>

namespace rlmem::cli {

void add_output_options(CLI::App& command, output_choice& choice, const output_offer& offer) {
  std::map<std::string, output_format> formats{{"text", output_format::text}, {"json", output_format::json}};
  if (!offer.html_help.empty()) formats.emplace("html", output_format::html);
  std::string names = offer.html_help.empty() ? "text, json" : "text, json, html";
  CLI::Option* format = command.add_option_function<std::string>(
      "--format", [&choice, formats](const std::string& name) { choice.format = formats.at(name); },
      "What to write: " + names + " (default: text)");
  std::vector<std::string> allowed;
  for (const auto& [name, ignored] : formats) allowed.push_back(name);
  format->check(CLI::IsMember(allowed))->type_name("FORMAT");
  CLI::Option* json = command.add_flag_callback("--json", [&choice] { choice.format = output_format::json; }, offer.json_help);
  json->excludes(format);
  CLI::Option* html = nullptr;
  if (!offer.html_help.empty()) {
    html = command.add_option_function<std::string>(
        "--html",
        [&choice](const std::string& path) {
          choice.format = output_format::html;
          choice.path = path;
        },
        offer.html_help);
    html->type_name("FILE")->excludes(format)->excludes(json);
  }
  if (offer.to_file) {
    CLI::Option* output = command.add_option("-o,--output", choice.path, "Write to this file instead of standard output ('-': standard output)");
    output->type_name("FILE");
    if (html != nullptr) output->excludes(html);
  }
}

int write_output(const output_choice& choice, std::string_view text) {
  return choice.path == "-" ? write_report(text) : write_whole_file(choice.path, text);
}

bool output_available(const output_choice& choice) { return choice.format != output_format::html || html_pages_available(); }

}  // namespace rlmem::cli
