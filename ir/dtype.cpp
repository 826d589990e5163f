#include "ir/dtype.h"

#include <array>

namespace fusejit::ir {
namespace {
struct Info {
  std::string_view name;
  int size;
  Category cat;
  std::string_view npy;
};
constexpr std::array<Info, kNumDTypes> kInfo{{
    {"bool", 1, Category::Bool, "|b1"},
    {"i8", 1, Category::Int, "|i1"},
    {"u8", 1, Category::Int, "|u1"},
    {"i32", 4, Category::Int, "<i4"},
    {"i64", 8, Category::Int, "<i8"},
    {"f16", 2, Category::Float, "<f2"},
    {"bf16", 2, Category::Float, "bfloat16"},
    {"f32", 4, Category::Float, "<f4"},
    {"f64", 8, Category::Float, "<f8"},
}};
const Info& info(DType t) { return kInfo[static_cast<int>(t)]; }
}  // namespace

std::string_view dtype_name(DType t) { return info(t).name; }
int dtype_size(DType t) { return info(t).size; }
Category dtype_category(DType t) { return info(t).cat; }
std::string_view dtype_npy_descr(DType t) { return info(t).npy; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kInfo[i].name == name) return static_cast<DType>(i);
  return std::nullopt;
}

std::optional<DType> foreign_dtype(std::string_view name) {
  static constexpr std::pair<std::string_view, DType> kNames[] = {
      {"bool_", DType::Bool},    {"int8", DType::I8},     {"uint8", DType::U8},     {"int32", DType::I32},
      {"int64", DType::I64},   {"long", DType::I64},     {"float16", DType::F16},
      {"half", DType::F16},      {"fp16", DType::F16},    {"bfloat16", DType::BF16}, {"float32", DType::F32},
      {"fp32", DType::F32},    {"float64", DType::F64},  {"double", DType::F64},
      {"fp64", DType::F64},      {"torch.float32", DType::F32}, {"torch.bfloat16", DType::BF16},
      {"torch.float16", DType::F16},
  };
  for (const auto& [n, t] : kNames)
    if (n == name) return t;
  return std::nullopt;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  Category ca = dtype_category(a), cb = dtype_category(b);
  if (ca != cb) return ca > cb ? a : b;  // the higher category wins outright
  if (ca == Category::Int) {
    if ((a == DType::I8 && b == DType::U8) || (a == DType::U8 && b == DType::I8)) return DType::I32;
    auto rank = [](DType t) { return t == DType::I64 ? 3 : t == DType::I32 ? 2 : 1; };
    return rank(a) >= rank(b) ? a : b;
  }
  // Float: f16 with bf16 -> f32; otherwise the wider.
  if (is_half(a) && is_half(b)) return DType::F32;
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

DType default_dtype(Category c) {
  switch (c) {
    case Category::Bool: return DType::Bool;
    case Category::Int: return DType::I64;
    case Category::Float: return DType::F32;
  }
  return DType::F32;
}

}  // namespace fusejit::ir
