// SPDX-License-Identifier: MIT
#pragma once
// A small JSON Schema validator for the keywords the schemas in docs/schema/ use (type, required,
// properties, items, prefixItems, additionalProperties, const, enum, maxItems, $ref, allOf).

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace rlmem::testing {

/// docs/schema/<name>, parsed.
inline nlohmann::json load_schema(const std::string& name) {
  std::ifstream input(std::string(RLMEM_SOURCE_DIR) + "/docs/schema/" + name);
  return nlohmann::json::parse(input);
}

inline bool has_json_type(const nlohmann::json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "integer") return value.is_number_integer();
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  return false;
}

/// Appends to `problems` every place where `value` breaks `schema` (`root` resolves $ref).
inline void validate_json(const nlohmann::json& value, const nlohmann::json& schema, const nlohmann::json& root,
                          const std::string& path, std::vector<std::string>& problems) {
  if (schema.contains("$ref")) {
    std::string ref = schema["$ref"];  // "#/$defs/name"
    validate_json(value, root["$defs"][ref.substr(ref.rfind('/') + 1)], root, path, problems);
    return;
  }
  for (const auto& part : schema.value("allOf", nlohmann::json::array())) validate_json(value, part, root, path, problems);
  if (schema.contains("type")) {
    bool ok = false;
    if (schema["type"].is_array()) {
      for (const auto& type : schema["type"]) ok = ok || has_json_type(value, type);
    } else {
      ok = has_json_type(value, schema["type"]);
    }
    if (!ok) problems.push_back(path + ": expected type " + schema["type"].dump() + ", saw " + value.type_name());
  }
  if (schema.contains("const") && value != schema["const"]) problems.push_back(path + ": expected " + schema["const"].dump());
  if (schema.contains("enum") && std::find(schema["enum"].begin(), schema["enum"].end(), value) == schema["enum"].end()) {
    problems.push_back(path + ": " + value.dump() + " is not one of " + schema["enum"].dump());
  }
  if (value.is_object()) {
    for (const auto& key : schema.value("required", nlohmann::json::array())) {
      if (!value.contains(key)) problems.push_back(path + ": missing required key " + key.dump());
    }
    for (const auto& [key, item] : value.items()) {
      if (schema.contains("properties") && schema["properties"].contains(key)) {
        validate_json(item, schema["properties"][key], root, path + "." + key, problems);
      } else if (schema.contains("additionalProperties") && schema["additionalProperties"].is_object()) {
        validate_json(item, schema["additionalProperties"], root, path + "." + key, problems);
      } else if (schema.contains("additionalProperties") && schema["additionalProperties"] == false) {
        problems.push_back(path + ": unexpected key " + key);
      }
    }
  }
  if (value.is_array()) {
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<std::size_t>()) problems.push_back(path + ": too many items");
    for (std::size_t i = 0; i < value.size(); ++i) {
      std::string at = path + "[" + std::to_string(i) + "]";
      if (schema.contains("prefixItems") && i < schema["prefixItems"].size()) {
        validate_json(value[i], schema["prefixItems"][i], root, at, problems);
      } else if (schema.contains("items")) {
        validate_json(value[i], schema["items"], root, at, problems);
      }
    }
  }
}

/// Every place where `value` breaks docs/schema/<schema_name>.
inline std::vector<std::string> schema_problems(const nlohmann::json& value, const std::string& schema_name) {
  nlohmann::json schema = load_schema(schema_name);
  std::vector<std::string> problems;
  validate_json(value, schema, schema, "$", problems);
  return problems;
}

}  // namespace rlmem::testing
