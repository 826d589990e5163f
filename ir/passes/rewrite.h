// The rewrite driver: applies the pattern rules (ir/passes/rules.h) to a graph until nothing
// fires (a fixed point), then removes dead code. Strict mode (the default) applies only rules
// that change no output bit on any input (NaN payloads aside: all NaNs count as equal, since GPU
// arithmetic returns a canonical NaN anyway); fast mode adds value-changing rules.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace fusejit::ir {

struct RewriteOptions {
  // Also apply value-changing rules (reassociation, x*0 -> 0, x*sigmoid(x) -> silu(x), ...).
  bool fast_math = false;
  // Fixed-point iteration cap. Each iteration rebuilds the whole graph; strict rules normally
  // settle in 2-3 iterations. Hitting the cap is reported, never an error.
  int max_iterations = 32;
};

// One firing of one rule: which rule, and where (the rewritten node's name and source location
// in the graph text; "" / {} for unnamed temporaries and API-built graphs).
struct RuleFire {
  std::string rule;
  std::string node_name;
  Loc loc;
  int iteration = 0;  // 0-based fixed-point iteration
};

// The two entries of RewriteResult::counts that are no rule object: common subexpressions merged
// and dead nodes dropped. Neither depends on a shape (a launch at other dims relies on it).
inline constexpr const char* kCseRuleName = "cse";
inline constexpr const char* kDeadCodeRuleName = "dead-code";

struct RuleCount {
  std::string rule;
  int count = 0;
};

struct RewriteResult {
  Graph graph;                     // the rewritten graph (outputs may now be params or constants: see
                                   // ir/plan.h; one that became an input is cast(x, dtype), appended)
  bool fast_math = false;          // the mode that produced `graph`
  std::vector<RuleCount> counts;   // every rule of the mode, in rule order, with its fire count
  std::vector<RuleFire> fires;     // individual fires, in order (at most kMaxRecordedFires kept)
  int iterations = 0;              // fixed-point iterations run (the last one fired nothing unless hit_cap)
  bool hit_cap = false;            // true: rules were still firing after max_iterations
  std::string diagnostic;          // when hit_cap: which rules kept firing
  int total_fires() const;
};

// Only the first fires are recorded one by one (a 100k-node graph may fire 100k times);
// counts are always exact.
inline constexpr size_t kMaxRecordedFires = 10000;

// Rewrites `g` (which must satisfy ir/verify.h) to a fixed point. The input is not modified.
// The result keeps every input and param (in slot order), every output (same names, dtypes and
// shapes) and, in strict mode, every output bit (NaN payloads aside). Throws InternalError only
// on a rule bug.
RewriteResult rewrite(const Graph& g, const RewriteOptions& options = {});

}  // namespace fusejit::ir
