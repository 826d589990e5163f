// Checks on the CPU path shared by the tests: a graph's fused and unfused programs, compiled by
// the host compiler, must agree with the reference evaluator bit for bit (NaN payloads aside).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "jit/cpu_runner.h"

namespace fusejit::testing {

// Exact byte equality, except that two NaNs are equal whatever their sign and payload (the
// contract, same_bits: x86 makes a fresh NaN negative, folding makes it positive). On a mismatch,
// a description of the first differing element (value and bits) in `why`.
bool identical(const ir::Tensor& a, const ir::Tensor& b, std::string& why);
// How many identical() calls so far found outputs equal only up to NaN sign/payload bits.
int nan_payload_only_count();

// A graph with its fused and unfused CPU programs and the inputs to check them on.
struct Case {
  std::string label;
  ir::Graph graph;
  std::vector<ir::Tensor> inputs;
  std::vector<ir::Scalar> params;
  jit::CpuProgram fused, unfused;
  // false: compile_all and check_case leave the unfused program out (a test whose subject the
  // unfused kernels do not add to, and whose compile time they would multiply).
  bool with_unfused = true;
};

// Plans `g` fused and unfused and generates both programs' kernels (nothing compiled yet). Inputs
// and params are random_inputs / random_params of `seed` unless the caller replaces them.
Case make_case(std::string label, ir::Graph g, uint64_t seed, const jit::CodegenOptions& opts = {});

// Compiles every case's two programs (one if !with_unfused), split into `parts` host modules compiled
// concurrently. With `unfused_opts`, the unfused programs of each part are a module of their own
// compiled with those options (e.g. -O0 where the fused programs already check the product's -O2).
void compile_all(std::vector<Case>& cases, const jit::HostCompileOptions& opts = {}, int parts = 2,
                 const std::optional<jit::HostCompileOptions>& unfused_opts = std::nullopt);

// Runs both programs (the fused one if !with_unfused) and the reference; every output must be identical (each difference is a
// failed CHECK naming the case and output). Returns the number of differing outputs.
int check_case(const Case& c, const jit::CpuRunOptions& run = {});

}  // namespace fusejit::testing
