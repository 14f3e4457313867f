//! The two 8-bit floating-point formats of nccl.h 2.24+ (`ncclFloat8e4m3`, `ncclFloat8e5m2`), as
//! CUDA's `cuda_fp8.h` defines them (the OCP 8-bit floating-point specification, v1.0):
//!
//! | format | sign, exponent, mantissa bits | bias | largest finite | infinity | NaN |
//! |---|---|---|---|---|---|
//! | E4M3 | 1, 4, 3 | 7 | 448 | none | `S.1111.111` |
//! | E5M2 | 1, 5, 2 | 15 | 57344 | `S.11111.00` | `S.11111.xx`, xx ≠ 0 |
//!
//! Conversions to FP8 round to nearest, ties to even, and saturate (CUDA's `__NV_SATFINITE`,
//! which NCCL's kernels use): a value beyond the largest finite one, infinity included, becomes
//! the largest finite value of its sign; NaN stays NaN (`0x7f`, as `__nv_cvt_float_to_fp8`
//! returns).
//!
//! NCCL reduces FP8 pairwise through half precision (`src/device/reduce_kernel.h`:
//! `__nv_fp8_e4m3(__hadd(__half(x), __half(y)))`): each step is computed exactly, rounded to
//! binary16, then rounded to FP8. [`Fp8Format::round_step`] is that rounding.

use std::sync::OnceLock;

use half::f16;

/// Which FP8 format; the formats' constants and conversions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fp8Format {
    /// `__nv_fp8_e4m3`.
    E4M3,
    /// `__nv_fp8_e5m2`.
    E5M2,
}

impl Fp8Format {
    const fn mantissa_bits(self) -> i32 {
        match self {
            Fp8Format::E4M3 => 3,
            Fp8Format::E5M2 => 2,
        }
    }

    const fn bias(self) -> i32 {
        match self {
            Fp8Format::E4M3 => 7,
            Fp8Format::E5M2 => 15,
        }
    }

    /// The largest finite value's encoding (positive sign).
    const fn max_bits(self) -> u8 {
        match self {
            Fp8Format::E4M3 => 0x7e,
            Fp8Format::E5M2 => 0x7b,
        }
    }

    /// The largest finite value, as [`Fp8Format::max_bits`] encodes it (the table above).
    const fn max_finite(self) -> f64 {
        match self {
            Fp8Format::E4M3 => 448.0,
            Fp8Format::E5M2 => 57344.0,
        }
    }

    /// Whether `bits` encodes NaN.
    const fn is_nan(self, bits: u8) -> bool {
        match self {
            Fp8Format::E4M3 => bits & 0x7f == 0x7f,
            Fp8Format::E5M2 => bits & 0x7f > 0x7c,
        }
    }

    /// The value `bits` encodes, exactly (every FP8 value is an f32).
    pub(crate) fn decode(self, bits: u8) -> f32 {
        let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
        if self.is_nan(bits) {
            return f32::NAN;
        }
        let m = self.mantissa_bits();
        let exp = i32::from((bits & 0x7f) >> m);
        let frac = i32::from(bits) & ((1 << m) - 1);
        if self == Fp8Format::E5M2 && exp == 0x1f {
            return sign * f32::INFINITY;
        }
        let v = if exp == 0 {
            // Subnormal: frac × 2^(1 - bias - m).
            frac as f32 * (2f32).powi(1 - self.bias() - m)
        } else {
            ((1 << m) + frac) as f32 * (2f32).powi(exp - self.bias() - m)
        };
        sign * v
    }

    /// `x` rounded to this format: nearest, ties to even, saturating to the largest finite value
    /// (CUDA's `__nv_cvt_float_to_fp8(x, __NV_SATFINITE, …)`).
    pub(crate) fn encode(self, x: f32) -> u8 {
        if x.is_nan() {
            return 0x7f;
        }
        let sign: u8 = if x.is_sign_negative() { 0x80 } else { 0 };
        let a = f64::from(x.abs());
        if a >= self.max_finite() {
            // Past the largest finite value (infinity included), saturated.
            return sign | self.max_bits();
        }
        let m = self.mantissa_bits();
        let emin = 1 - self.bias();
        // The exponent of `a`'s leading bit, at least the smallest normal one (subnormals share
        // its quantum), read from the f64's exponent field (every nonzero f32 is a normal f64).
        let e = if a == 0.0 {
            emin
        } else {
            (((a.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(emin)
        };
        // `a` in units of the quantum 2^(e - m) (exact in f64: scaling by a power of two, built
        // from its exponent field; -16 <= m - e <= 16), rounded to an integer, ties to even: adding
        // and taking away 2^52 leaves no fraction bits in an f64, and the addition rounds as
        // IEEE 754 arithmetic does, to nearest even (exact for 0 <= x < 2^51; here x < 2^(m+2)).
        // Per conversion this is a multiply and two adds, where `powi` and `round_ties_even`
        // (libm's __powidf2 and rint on baseline x86-64) made this function 57% of coll_matrix's
        // 16 MiB test under perf.
        const ROUND: f64 = (1u64 << 52) as f64;
        let scale = f64::from_bits(((1023 + m - e) as u64) << 52);
        let units = ((a * scale + ROUND) - ROUND) as u32;
        // With the implicit leading bit inside `units` (2^m ≤ units ≤ 2^(m+1) for normals), the
        // encoding is ((e - emin) << m) + units for subnormals and normals alike, and a rounding
        // that carried to 2^(m+1) lands on the next binade's first value.
        let bits = (((e - emin) as u32) << m) + units;
        debug_assert!(bits <= u32::from(self.max_bits()));
        let bits = bits as u8;
        sign | bits
    }

    /// One reduction step's rounding: `exact` (the step's result computed in f32, which is exact
    /// or correctly rounded for the sum, product, min and max of two FP8 values) rounded to
    /// binary16, then to this format, as NCCL's `__nv_fp8_e4m3(__hadd(...))` does. A binary16
    /// overflow to infinity saturates like any other out-of-range value.
    pub(crate) fn round_step(self, exact: f32) -> u8 {
        self.tables().from_half[usize::from(f16::from_f32(exact).to_bits())]
    }

    /// The value of `bits`, from a table (as [`Fp8Format::decode`]).
    pub(crate) fn value(self, bits: u8) -> f32 {
        self.tables().value[usize::from(bits)]
    }

    /// The format's conversion tables, built on first use.
    fn tables(self) -> &'static Tables {
        static E4M3: OnceLock<Tables> = OnceLock::new();
        static E5M2: OnceLock<Tables> = OnceLock::new();
        let cell = match self {
            Fp8Format::E4M3 => &E4M3,
            Fp8Format::E5M2 => &E5M2,
        };
        cell.get_or_init(|| Tables {
            value: std::array::from_fn(|b| self.decode(b as u8)),
            from_half: (0..=u16::MAX)
                .map(|h| self.encode(f16::from_bits(h).to_f32()))
                .collect(),
        })
    }
}

/// Lookup tables of one format: every code's value, and every binary16 value rounded to it.
struct Tables {
    value: [f32; 256],
    /// Indexed by binary16 bits (65536 entries).
    from_half: Vec<u8>,
}

macro_rules! fp8_type {
    ($(#[$doc:meta])* $name:ident, $format:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub struct $name(u8);

        impl $name {
            /// The element whose encoding is `bits`.
            pub const fn from_bits(bits: u8) -> Self {
                Self(bits)
            }

            /// The element's encoding.
            pub const fn to_bits(self) -> u8 {
                self.0
            }

            /// `x` rounded to nearest (ties to even), saturated to the largest finite value
            /// (CUDA's `__NV_SATFINITE`); NaN stays NaN.
            pub fn from_f32(x: f32) -> Self {
                Self($format.encode(x))
            }

            /// The element's value, exactly.
            pub fn to_f32(self) -> f32 {
                $format.value(self.0)
            }

            /// The element as its one byte (as the integer types' `to_ne_bytes`).
            pub const fn to_ne_bytes(self) -> [u8; 1] {
                [self.0]
            }

            /// The element whose byte is `b[0]`.
            pub const fn from_ne_bytes(b: [u8; 1]) -> Self {
                Self(b[0])
            }
        }

        // SAFETY: a `repr(transparent)` byte, valid for every bit pattern, as the GPU's
        // `__nv_fp8_*` type is: copying it to and from device memory byte for byte is sound.
        unsafe impl cudarc::driver::DeviceRepr for $name {}
        // SAFETY: the all-zero byte is the element +0.
        unsafe impl cudarc::driver::ValidAsZeroBits for $name {}
    };
}

fp8_type!(
    /// An `ncclFloat8e4m3` element (CUDA's `__nv_fp8_e4m3`): 4 exponent bits, 3 mantissa bits,
    /// largest finite value 448, no infinity.
    F8E4M3,
    Fp8Format::E4M3
);
fp8_type!(
    /// An `ncclFloat8e5m2` element (CUDA's `__nv_fp8_e5m2`): 5 exponent bits, 2 mantissa bits,
    /// largest finite value 57344, with infinities.
    F8E5M2,
    Fp8Format::E5M2
);

#[cfg(test)]
mod tests {
    use super::*;

    const FORMATS: [Fp8Format; 2] = [Fp8Format::E4M3, Fp8Format::E5M2];

    #[test]
    fn constants_are_the_formats_of_cuda_fp8() {
        let e4 = Fp8Format::E4M3;
        let e5 = Fp8Format::E5M2;
        assert_eq!(e4.decode(0x7e), 448.0);
        assert_eq!(e5.decode(0x7b), 57344.0);
        for f in FORMATS {
            assert_eq!(f64::from(f.decode(f.max_bits())), f.max_finite(), "{f:?}");
        }
        assert_eq!(e4.decode(0x38), 1.0);
        assert_eq!(e5.decode(0x3c), 1.0);
        // Smallest subnormals: 2^-9 and 2^-16.
        assert_eq!(e4.decode(0x01), 2f32.powi(-9));
        assert_eq!(e5.decode(0x01), 2f32.powi(-16));
        assert!(e4.decode(0x7f).is_nan() && e4.decode(0xff).is_nan());
        assert_eq!(e5.decode(0x7c), f32::INFINITY);
        assert_eq!(e5.decode(0xfc), f32::NEG_INFINITY);
        assert!(e5.decode(0x7d).is_nan());
        assert_eq!(e4.decode(0xb8), -1.0);
    }

    #[test]
    fn every_finite_code_round_trips() {
        for f in FORMATS {
            for b in 0..=255u8 {
                let v = f.decode(b);
                if v.is_finite() {
                    assert_eq!(f.encode(v), b, "{f:?} {b:#04x} = {v}");
                    assert_eq!(f.value(b), v);
                }
            }
        }
    }

    #[test]
    fn halfway_values_round_to_the_even_code_and_others_to_the_nearest() {
        for f in FORMATS {
            for b in 0..0x7au8 {
                let (lo, hi) = (f.decode(b), f.decode(b + 1));
                let mid = (lo + hi) / 2.0;
                let even = if b % 2 == 0 { b } else { b + 1 };
                assert_eq!(f.encode(mid), even, "{f:?} between {lo} and {hi}");
                assert_eq!(f.encode(-mid), 0x80 | even);
                let quarter = (hi - lo) / 4.0;
                assert_eq!(f.encode(lo + quarter), b, "{f:?} just above {lo}");
                assert_eq!(f.encode(hi - quarter), b + 1, "{f:?} just below {hi}");
            }
        }
    }

    /// `encode` against a search of the format's codes: the nearest finite value, the even code
    /// on a tie, the largest finite value past it; for positive f32s from 0 past the largest
    /// finite value, every 257th bit pattern (every one of them read the same when checked once),
    /// and their negatives.
    #[test]
    fn encode_rounds_to_the_nearest_code() {
        for f in FORMATS {
            let codes: Vec<(u8, f64)> = (0..=f.max_bits())
                .map(|b| (b, f64::from(f.decode(b))))
                .collect();
            let nearest = |a: f64| -> u8 {
                let i = codes.partition_point(|&(_, v)| v <= a);
                if i == codes.len() {
                    return f.max_bits();
                }
                let ((lb, lo), (hb, hi)) = (codes[i - 1], codes[i]);
                match (a - lo).partial_cmp(&(hi - a)).unwrap() {
                    std::cmp::Ordering::Less => lb,
                    std::cmp::Ordering::Greater => hb,
                    std::cmp::Ordering::Equal if lb % 2 == 0 => lb,
                    std::cmp::Ordering::Equal => hb,
                }
            };
            let end = (f.max_finite() as f32 * 1.5).to_bits();
            for bits in (0..end).step_by(257) {
                let x = f32::from_bits(bits);
                let want = nearest(f64::from(x));
                assert_eq!(f.encode(x), want, "{f:?} {x:e}");
                assert_eq!(f.encode(-x), 0x80 | want, "{f:?} {:e}", -x);
            }
        }
    }

    #[test]
    fn out_of_range_saturates_and_nan_stays_nan() {
        assert_eq!(Fp8Format::E4M3.encode(1000.0), 0x7e);
        assert_eq!(Fp8Format::E4M3.encode(f32::NEG_INFINITY), 0xfe);
        assert_eq!(Fp8Format::E5M2.encode(f32::INFINITY), 0x7b);
        assert_eq!(Fp8Format::E5M2.encode(1e9), 0x7b);
        assert_eq!(Fp8Format::E4M3.encode(f32::NAN), 0x7f);
        assert_eq!(Fp8Format::E5M2.encode(f32::NAN), 0x7f);
        // Below half the smallest subnormal: zero, with its sign.
        assert_eq!(Fp8Format::E4M3.encode(2f32.powi(-11)), 0x00);
        assert_eq!(Fp8Format::E4M3.encode(-2f32.powi(-11)), 0x80);
    }

    #[test]
    fn a_step_rounds_through_half_precision() {
        // E5M2's largest value doubled overflows binary16 (65504): the step saturates.
        let e5 = Fp8Format::E5M2;
        assert_eq!(e5.round_step(57344.0 * 2.0), 0x7b);
        // 1 + 2^-3 is between E5M2's 1 and 1.25: the tie goes to the even code (1).
        assert_eq!(e5.value(e5.round_step(1.125)), 1.0);
        // Direct and half-precision rounding agree on values binary16 holds exactly.
        for h in [0.3f32, 7.75, 200.0, 0.001] {
            let x = f16::from_f32(h).to_f32();
            assert_eq!(Fp8Format::E4M3.round_step(x), Fp8Format::E4M3.encode(x));
        }
    }

    #[test]
    fn public_types_convert() {
        assert_eq!(F8E4M3::from_f32(3.0).to_f32(), 3.0);
        assert_eq!(F8E5M2::from_f32(-0.5).to_bits(), 0xb8);
        assert_eq!(F8E4M3::from_bits(0x38).to_f32(), 1.0);
    }
}
