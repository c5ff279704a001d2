/* SPDX-License-Identifier: Apache-2.0
 * planner/core: the binary float formats of the element types, from f64 down
 * to f4E2M1FN, as LLVM's APFloat defines them (fltSemantics: precision,
 * exponent range, which of infinity, NaN, negative zero and zero a format
 * has). One place converts a double to a format's bits (rounded to nearest,
 * ties to even, once) and back, for the MLIR reader, its printer and the
 * interpreter alike. */
#ifndef SP_FLOAT_H
#define SP_FLOAT_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_ir.h"

/* Whether e is a real binary float type (bf16, f16, f32, f64, the f8, f6 and
 * f4 types); complex types are not. */
bool sp_float_is(sp_elem e);

/* Storage bits of one value of float type e (4 for f4E2M1FN). */
unsigned sp_float_bits(sp_elem e);

/* Significand bits of e, the implicit one included (24 for f32). */
int sp_float_precision(sp_elem e);

/* v rounded once to e's nearest value, as APFloat converts: ties to even;
 * past the largest finite value infinity where e has one, else NaN where e
 * has one (the FN and FNUZ types), else the largest finite value (f4, f6);
 * -0 is +0 where e has no negative zero; zero is e's least value where e has
 * no zero (f8E8M0FNU). Returns the bit pattern. */
uint64_t sp_float_encode(sp_elem e, double v);

/* The value of bit pattern b of e, exactly (NaN for e's NaN patterns). */
double sp_float_decode(sp_elem e, uint64_t b);

/* v rounded to e: sp_float_decode(e, sp_float_encode(e, v)). */
double sp_float_round(sp_elem e, double v);

/* e's largest finite value. */
double sp_float_max(sp_elem e);

#endif
