// SPDX-License-Identifier: MIT
// OOM verdicts: did live data plus the request fit under the limit (fragmentation) or not
// (capacity), and what follows from the numbers.

#include "analysis.hpp"

#include <rlmem/format.hpp>
#include <rlmem/saturating.hpp>

#include <algorithm>

namespace rlmem::detail {

void judge_oom(oom_report& report, bool expandable_segments) {
  // Requests up to 2^63 are data (a 36 TiB request is a bug to diagnose, not bad input): the
  // sums hold at the int64 range rather than overflow.
  const std::int64_t requested = signed_bytes(report.requested_bytes);
  std::int64_t need = saturating_add(report.allocated_bytes, requested);
  std::string limit_text = report.limit_given ? format_bytes(report.limit_low_bytes)
                           : report.limit_low_bytes == report.limit_high_bytes
                               ? format_bytes(report.limit_low_bytes)
                               : "between " + format_bytes(report.limit_low_bytes) + " and " + format_bytes(report.limit_high_bytes);
  if (need <= report.limit_low_bytes) {
    report.verdict = oom_verdict::fragmentation;
    report.explanation = "live tensors (" + format_bytes(report.allocated_bytes) + ") plus the request (" +
                         format_bytes(requested) + ") fit under the limit (" + limit_text +
                         "), but " + format_bytes(report.reserved_unallocated_bytes) +
                         " reserved and unallocated is split into free blocks of at most " +
                         format_bytes(signed_bytes(report.largest_free_block_bytes)) + ", and a new " +
                         format_bytes(signed_bytes(report.segment_bytes)) + " segment would pass the limit";
    report.advice = expandable_segments
                        ? "already on expandable segments: allocate the " + format_bytes(requested) +
                              " buffer once and reuse it, or call torch.cuda.empty_cache() before the step that makes it"
                        : "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (free space then joins into one block); "
                          "or call torch.cuda.empty_cache() before the step that makes this request";
  } else {
    report.verdict = oom_verdict::capacity;
    std::int64_t short_by = saturating_add(need, -std::max<std::int64_t>(report.limit_high_bytes, -INT64_MAX));
    report.explanation = "live tensors (" + format_bytes(report.allocated_bytes) + ") plus the request (" +
                         format_bytes(requested) + ") need " + format_bytes(need) +
                         ", more than the limit (" + limit_text + ")";
    std::string site = report.largest_site.label.empty() ? "the largest allocation site" : report.largest_site.label;
    report.advice = "shrink what is live by at least " + format_bytes(std::max<std::int64_t>(short_by, 0)) +
                    " (the largest holder is " + site + " with " +
                    format_bytes(signed_bytes(report.largest_site_bytes)) +
                    "): a smaller micro-batch or sequence length, activation checkpointing, or a card with at least " +
                    format_bytes(need) + " free";
  }
}

}  // namespace rlmem::detail
