// Whether this test build runs under sanitizers (FUSEJIT_SANITIZE: cmake/sanitize.cmake defines
// FUSEJIT_SANITIZED for the tests), and what the tests do differently there.
#pragma once

#include <cstdint>

namespace fusejit::testing {

#ifdef FUSEJIT_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// Step of the exhaustive sweeps over every f16/bf16 bit pattern: 1 in a plain build; 7 under
// ASan + UBSan, which slow scalar evaluation ~40x. The sanitizers look for memory errors and
// undefined behaviour, which do not hang on the value of one bit pattern; a prime step still
// visits every sign, exponent and a spread of mantissas, and the plain suite proves every value.
inline constexpr uint32_t kSweepStep = kSanitized ? 7 : 1;

}  // namespace fusejit::testing
