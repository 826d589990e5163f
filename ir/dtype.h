// Element types (dtypes) of fusejit tensors and their promotion rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fusejit::ir {

// The dtypes a graph may use. Order matters only for iteration; never compare with <.
enum class DType : uint8_t { Bool, I8, U8, I32, I64, F16, BF16, F32, F64 };

inline constexpr int kNumDTypes = 9;

// Category used by type promotion: bool < integer < floating (PyTorch's "kind" order).
enum class Category : uint8_t { Bool = 0, Int = 1, Float = 2 };

// Name as written in graph text: "bool", "i8", "u8", "i32", "i64", "f16", "bf16", "f32", "f64".
std::string_view dtype_name(DType t);
// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> parse_dtype(std::string_view name);
// The dtype NumPy or PyTorch call `name` ("float32", "bfloat16", "half", "long", "bool_", "fp16"),
// for messages that say how fusejit writes it; nullopt for any other name (also for "float" and
// "int", which mean f64 and i64 in NumPy but f32 and i32 in PyTorch).
std::optional<DType> foreign_dtype(std::string_view name);
// Size of one element in bytes (bool is 1 byte, as in NumPy and PyTorch).
int dtype_size(DType t);
Category dtype_category(DType t);
inline bool is_float(DType t) { return dtype_category(t) == Category::Float; }
inline bool is_int(DType t) { return dtype_category(t) == Category::Int; }
// True for f16 and bf16: stored in 16 bits, computed in f32 and rounded to nearest-even per node.
inline bool is_half(DType t) { return t == DType::F16 || t == DType::BF16; }
// NumPy dtype string for .npy headers, little-endian ("<f4", "|b1", ...). bf16 has no NumPy
// dtype: "bfloat16" (ml_dtypes' name) is returned here, but ir/npy.h writes bf16 tensors as exact
// f32 ("<f4") by default so that plain NumPy reads them (see Bf16Npy).
std::string_view dtype_npy_descr(DType t);

// Promotion of two tensor (strong) dtypes, following torch.result_type for these types:
//   bool with X -> X; integers: i8,u8 -> i32 (fusejit has no i16; PyTorch would give i16),
//   otherwise the wider; int with float -> the float; f16 with bf16 -> f32; floats -> the wider.
DType promote(DType a, DType b);

// Default dtype a weak (literal) value of a category takes when nothing else decides it:
// bool -> bool, int -> i64, float -> f32 (PyTorch's default dtypes).
DType default_dtype(Category c);

}  // namespace fusejit::ir
