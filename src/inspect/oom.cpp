// SPDX-License-Identifier: MIT
// OOM verdicts: fragmentation when a real allocator setting, simulated over the whole trace
// under the judged limit, serves the request (and the run after it); capacity otherwise, with
// what the run lacked. What follows from the numbers and the simulations is said in words.

#include "analysis.hpp"

#include <rlmem/base/format.hpp>
#include <rlmem/base/saturating.hpp>

#include <algorithm>

namespace rlmem::detail {

namespace {

std::string describe_request(std::uint64_t event, std::uint64_t bytes) {
  return "event " + format_count(event) + ", " + format_bytes(signed_bytes(bytes));
}

// The figure of a failed proof that belongs to this OOM: what reserved would have had to reach.
bool failed_here(const oom_proof& proof, std::uint64_t event) { return proof.tried && !proof.served && proof.failed_event == event; }

// The proof that comes closest to serving the request: failing at it with the least reserved
// needed, else the first one tried.
const oom_proof* closest_failure(const oom_report& report) {
  const oom_proof* closest = nullptr;
  for (const oom_proof& proof : report.proofs) {
    if (!failed_here(proof, report.event)) continue;
    if (closest == nullptr || proof.reserved_needed_bytes < closest->reserved_needed_bytes) closest = &proof;
  }
  if (closest != nullptr) return closest;
  for (const oom_proof& proof : report.proofs) {
    if (proof.tried) return &proof;
  }
  return nullptr;
}

// "{setting}: PYTORCH_CUDA_ALLOC_CONF=..." as a user would apply it.
std::string how_to_apply(const oom_proof& proof) {
  if (proof.remedy == oom_remedy::empty_cache) return "call torch.cuda." + proof.setting;
  return "set PYTORCH_CUDA_ALLOC_CONF=" + proof.setting;
}

// One line of what a setting's simulation did for the OOM at `oom_event`.
std::string describe_proof(const oom_proof& proof, std::uint64_t oom_event, bool last_request) {
  std::string with = "with " + proof.setting;
  std::string of_limit = " of " + format_bytes(proof.limit_bytes);
  if (!proof.tried) return proof.setting + ": not tried (" + proof.not_tried + ")";
  if (proof.served) {
    return with + (last_request ? " the request is served (the recording ends with it: what the job asked after it is unknown)"
                                : " the request is served and so is the run after it") +
           "; reserved would reach " + format_bytes(proof.reserved_reached_bytes) + of_limit;
  }
  if (proof.failed_event == oom_event) {
    return with + " the request fails too: reserved would have to reach " + format_bytes(proof.reserved_needed_bytes) + of_limit + ", " +
           format_bytes(saturating_add(proof.reserved_needed_bytes, -proof.limit_bytes)) + " over";
  }
  std::string when = proof.failed_event < oom_event ? " an earlier request fails (" : " the request is served but a later one fails (";
  return with + when + describe_request(proof.failed_event, proof.failed_requested_bytes) + ") with " +
         format_bytes(proof.reserved_reached_bytes) + of_limit + " reserved";
}

}  // namespace

void judge_oom(oom_report& report, const oom_limit& limit) {
  // Requests up to 2^63 are data (a 36 TiB request is a bug to diagnose, not bad input): the
  // sums hold at the int64 range rather than overflow.
  const std::int64_t requested = signed_bytes(report.requested_bytes);
  const std::int64_t need = saturating_add(report.allocated_bytes, requested);
  const std::int64_t judged = limit.judged_bytes;
  const std::string limit_text = format_bytes(judged) + (limit.given ? " limit given" : " limit the recording proves");
  const std::string live = "live tensors (" + format_bytes(report.allocated_bytes) + ") plus the request (" + format_bytes(requested) + ")";
  const std::string request_site = report.request_site.label.empty() ? "" : " at " + report.request_site.label;
  report.request_larger_than_any_gpu = report.requested_bytes > largest_gpu_memory_bytes;
  report.proven = std::any_of(report.proofs.begin(), report.proofs.end(), [](const oom_proof& p) { return p.tried; });

  std::vector<const oom_proof*> serving;
  for (oom_proof& proof : report.proofs) {
    proof.summary = describe_proof(proof, report.event, report.last_request_recorded);
    if (proof.tried && proof.served) serving.push_back(&proof);
  }
  const oom_proof* closest = closest_failure(report);
  bool fragmentation = report.request_larger_than_any_gpu ? false : report.proven ? !serving.empty() : need <= report.limit_low_bytes;
  report.verdict = fragmentation ? oom_verdict::fragmentation : oom_verdict::capacity;
  if (!serving.empty()) {
    report.proof = serving.front()->summary;
  } else if (closest != nullptr) {
    report.proof = closest->summary;
  } else {
    std::string why = report.proofs.empty() ? std::string("no simulation was run") : report.proofs.front().not_tried;
    report.proof = "not proven by a simulation (" + why + "): the verdict follows from the numbers alone";
  }

  if (report.request_larger_than_any_gpu) {
    report.short_by_bytes = saturating_add(need, -judged);
    report.explanation = "the request alone (" + format_bytes(requested) + request_site +
                         ") is larger than any GPU's memory (288 GB on the largest cards): a tensor's shape is wrong, not the memory budget";
    report.advice = "check the shape of the tensor made" + (request_site.empty() ? std::string(" by this request") : request_site) +
                    ": a wrong dimension, an unintended broadcast or outer product; a smaller micro-batch or sequence length will not fix it";
    return;
  }
  // Served nowhere at the judged limit (the range's low end), but somewhere above it: the
  // verdict is stated for both parts of the range, the capacity figures below being the low part's.
  const oom_proof* first_serving = nullptr;
  if (!fragmentation && !report.request_larger_than_any_gpu) {
    for (const oom_proof& proof : report.proofs) {
      if (proof.serves_from_bytes > 0 && (first_serving == nullptr || proof.serves_from_bytes < first_serving->serves_from_bytes)) {
        first_serving = &proof;
      }
    }
  }
  if (fragmentation) {
    report.short_by_bytes = 0;
    std::string served_by;
    for (std::size_t k = 0; k < serving.size(); ++k) {
      served_by += (k == 0 ? "" : k + 1 == serving.size() ? " and " : ", ") + serving[k]->setting;
    }
    served_by += serving.size() == 1 ? " serves it" : " each serve it";
    report.explanation = live + " need " + format_bytes(need) + " of the " + limit_text + ", but " +
                         format_bytes(report.reserved_unallocated_bytes) + " reserved and unallocated is split into free blocks of at most " +
                         format_bytes(signed_bytes(report.largest_free_block_bytes)) + " and a new " +
                         format_bytes(signed_bytes(report.segment_bytes)) + " segment would pass the limit; " +
                         (report.proven ? "simulated under that limit, " + served_by
                                        : std::string("the trace could not be simulated to prove a setting serves it"));
    if (!report.proven) {
      report.advice = "try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (free space then joins into one block)";
      return;
    }
    report.advice.clear();
    for (const oom_proof* proof : serving) report.advice += (report.advice.empty() ? "" : "; or ") + how_to_apply(*proof);
    return;
  }

  // Capacity: what the run lacked, from the live bytes, or from the closest setting's figure
  // when the bytes alone fit but no setting packs them.
  std::int64_t over = saturating_add(need, -judged);
  std::string tried = report.proven ? "; no setting tried serves it" : "";
  if (over > 0 || closest == nullptr || !failed_here(*closest, report.event)) {
    report.short_by_bytes = std::max<std::int64_t>(over, 0);
    report.explanation = live + " need " + format_bytes(need) +
                         (over > 0 ? ", " + format_bytes(over) + " more than the " + limit_text
                                   : " of the " + limit_text) +
                         tried;
  } else {
    report.short_by_bytes = saturating_add(closest->reserved_needed_bytes, -judged);
    report.explanation = live + " need " + format_bytes(need) + " of the " + limit_text + " (" +
                         format_bytes(saturating_add(judged, -need)) + " to spare), but no setting tried packs them into it: the closest, " +
                         closest->setting + ", would have to reserve " + format_bytes(closest->reserved_needed_bytes) + ", " +
                         format_bytes(report.short_by_bytes) + " more";
  }
  std::string site = report.largest_site.label.empty() ? "the largest allocation site" : report.largest_site.label;
  std::string holder = " (the largest holder is " + site + " with " + format_bytes(signed_bytes(report.largest_site_bytes)) + ")";
  report.advice = (report.short_by_bytes > 0 ? "shrink what is live by at least " + format_bytes(report.short_by_bytes) : std::string("shrink what is live")) +
                  holder + ": a smaller micro-batch or sequence length, activation checkpointing, or a limit of at least " +
                  format_bytes(saturating_add(judged, report.short_by_bytes)) + " on a larger card";
  if (first_serving == nullptr) {
    if (std::any_of(report.proofs.begin(), report.proofs.end(), [](const oom_proof& p) { return p.serves_from_bytes < 0; })) {
      report.explanation += " (under the limit's low end; the search above it ran out of passes for this OOM: pass --limit)";
    }
    return;
  }

  report.verdict = oom_verdict::depends_on_limit;
  report.fragmentation_from_bytes = first_serving->serves_from_bytes;
  const std::string from = format_bytes(first_serving->serves_from_bytes);
  std::vector<const oom_proof*> above;
  for (const oom_proof& proof : report.proofs) {
    if (proof.serves_from_bytes > 0) above.push_back(&proof);
  }
  std::sort(above.begin(), above.end(), [](const oom_proof* a, const oom_proof* b) { return a->serves_from_bytes < b->serves_from_bytes; });
  std::string thresholds;
  for (const oom_proof* proof : above) {
    thresholds += (thresholds.empty() ? "" : ", ") + proof->setting + " from " + format_bytes(proof->serves_from_bytes);
  }
  report.proof = "under " + format_bytes(judged) + " no setting tried serves the request; above it: " + thresholds;
  report.explanation = "the recording shows a limit of " + limit_range_text(limit) + ": FRAGMENTATION if it was at least " + from + " (" +
                       first_serving->setting + (report.last_request_recorded ? " serves the request there" : " serves the request and the run after it there") +
                       "), CAPACITY below (" +
                       report.explanation + ")";
  report.advice = "pass --limit (the memory fraction times the device's memory, or the device total if no fraction was set) for "
                  "one verdict; if the limit was at least " + from + ": " + how_to_apply(*first_serving) + "; below it: " + report.advice;
}

}  // namespace rlmem::detail

namespace rlmem {

std::string limit_range_text(const oom_limit& limit) {
  if (limit.given) return format_bytes(limit.judged_bytes) + " (given)";
  if (limit.proven_high_bytes == INT64_MAX) return "at least " + format_bytes(limit.proven_low_bytes);
  return format_byte_range(static_cast<std::uint64_t>(limit.proven_low_bytes), static_cast<std::uint64_t>(limit.proven_high_bytes));
}

std::string_view oom_verdict_name(oom_verdict verdict) noexcept {
  switch (verdict) {
    case oom_verdict::fragmentation: return "fragmentation";
    case oom_verdict::capacity: return "capacity";
    case oom_verdict::depends_on_limit: return "depends_on_limit";
  }
  return "unknown";
}

}  // namespace rlmem
