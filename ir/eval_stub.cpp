// TEMPORARY stub, replaced by ir/eval.cpp (the semantics work).
#include "ir/eval.h"
namespace fusejit::ir {
Scalar eval_scalar(Op, DType result, std::span<const Scalar> args) { Scalar s = args.empty() ? Scalar{} : args[0]; s.dtype = result; return s; }
}
