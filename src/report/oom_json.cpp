// SPDX-License-Identifier: MIT
// The OOM verdicts as JSON, for `rlmem inspect --json` and the page of `rlmem report` alike.

#include "oom_json.hpp"

namespace rlmem::detail {

namespace {

using json = nlohmann::ordered_json;

std::string_view remedy_name(oom_remedy remedy) {
  switch (remedy) {
    case oom_remedy::expandable_segments: return "expandable_segments";
    case oom_remedy::empty_cache: return "empty_cache";
    case oom_remedy::max_split_size: return "max_split_size";
    case oom_remedy::count_: break;
  }
  return "unknown";
}

// Each setting an OOM verdict tried and what its simulation did; figures that do not apply are null.
json proofs_json(const std::vector<oom_proof>& proofs) {
  json out = json::array();
  for (const oom_proof& proof : proofs) {
    bool failed = proof.tried && !proof.served;
    out.push_back({{"remedy", remedy_name(proof.remedy)},
                   {"setting", proof.setting},
                   {"tried", proof.tried},
                   {"not_tried", proof.tried ? json(nullptr) : json(proof.not_tried)},
                   {"served", proof.served},
                   {"failed_event_index", failed ? json(proof.failed_event) : json(nullptr)},
                   {"failed_requested_bytes", failed ? json(proof.failed_requested_bytes) : json(nullptr)},
                   {"reserved_reached_bytes", proof.tried ? json(proof.reserved_reached_bytes) : json(nullptr)},
                   {"reserved_needed_bytes", proof.reserved_needed_bytes > 0 ? json(proof.reserved_needed_bytes) : json(nullptr)},
                   {"limit_bytes", proof.limit_bytes},
                   {"serves_from_bytes", proof.serves_from_bytes > 0 ? json(proof.serves_from_bytes) : json(nullptr)},
                   {"summary", proof.summary}});
  }
  return out;
}

// The verdict over the limit's range, low to high: one part, or capacity then fragmentation.
json verdict_by_limit(const oom_report& oom) {
  if (oom.verdict != oom_verdict::depends_on_limit) {
    return json::array({{{"from_bytes", oom.limit_low_bytes}, {"to_bytes", oom.limit_high_bytes}, {"verdict", oom_verdict_name(oom.verdict)}}});
  }
  return json::array({{{"from_bytes", oom.limit_low_bytes},
                        {"to_bytes", oom.fragmentation_from_bytes - 1},
                        {"verdict", oom_verdict_name(oom_verdict::capacity)}},
                       {{"from_bytes", oom.fragmentation_from_bytes},
                        {"to_bytes", oom.limit_high_bytes},
                        {"verdict", oom_verdict_name(oom_verdict::fragmentation)}}});
}

}  // namespace

json ooms_json(const inspection& result) {
  json ooms = json::array();
  for (const oom_report& oom : result.ooms) {
    json pools = json::array();
    for (const free_block_summary& pool : oom.free_by_pool) {
      pools.push_back({{"pool", pool_name(pool.small_pool)}, {"stream", pool.stream},
                       {"largest_free_bytes", pool.largest_free_bytes}, {"free_bytes", pool.free_bytes}});
    }
    ooms.push_back({{"event_index", oom.event},
                    {"time_us", result.times_known ? json(oom.time_us) : json(nullptr)},
                    {"requested_bytes", oom.requested_bytes},
                    {"segment_bytes", oom.segment_bytes},
                    {"allocated_bytes", oom.allocated_bytes},
                    {"reserved_bytes", oom.reserved_bytes},
                    {"reserved_unallocated_bytes", oom.reserved_unallocated_bytes},
                    {"device_free_bytes", oom.device_free_bytes},
                    {"limit_low_bytes", oom.limit_low_bytes},
                    {"limit_high_bytes", oom.limit_high_bytes},
                    {"limit_given", oom.limit_given},
                    {"largest_free_block_bytes", oom.largest_free_block_bytes},
                    {"free_by_pool", pools},
                    {"largest_site", {{"site", oom.largest_site.label}, {"bytes", oom.largest_site_bytes}}},
                    {"request_site", oom.request_site.label},
                    {"verdict", oom_verdict_name(oom.verdict)},
                    {"fragmentation_from_bytes", oom.verdict == oom_verdict::depends_on_limit ? json(oom.fragmentation_from_bytes) : json(nullptr)},
                    {"verdict_by_limit", verdict_by_limit(oom)},
                    {"proven", oom.proven},
                    {"proofs", proofs_json(oom.proofs)},
                    {"proof", oom.proof},
                    {"request_larger_than_any_gpu", oom.request_larger_than_any_gpu},
                    {"short_by_bytes", oom.short_by_bytes},
                    {"explanation", oom.explanation},
                    {"advice", oom.advice}});
  }
  return ooms;
}

json oom_limit_json(const inspection& result) {
  if (result.ooms.empty()) return nullptr;
  return {{"proven_low_bytes", result.limit.proven_low_bytes},
          {"proven_high_bytes", result.limit.proven_high_bytes},
          {"proven_high_event", result.limit.proven_high_event},
          {"judged_bytes", result.limit.judged_bytes},
          {"given", result.limit.given}};
}

}  // namespace rlmem::detail
