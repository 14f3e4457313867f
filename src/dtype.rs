//! Data types (`ncclDataType_t`, nccl.h §10.2 of the internals fact sheet) and the Rust element
//! types that carry them.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// The element types rnccl reduces and moves. Discriminants are NCCL's `ncclDataType_t` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataType {
    /// `ncclInt8` (`ncclChar`) = 0.
    Int8 = 0,
    /// `ncclUint8` = 1.
    Uint8 = 1,
    /// `ncclInt32` (`ncclInt`) = 2.
    Int32 = 2,
    /// `ncclUint32` = 3.
    Uint32 = 3,
    /// `ncclInt64` = 4.
    Int64 = 4,
    /// `ncclUint64` = 5.
    Uint64 = 5,
    /// `ncclFloat16` (`ncclHalf`) = 6, IEEE 754 binary16.
    Float16 = 6,
    /// `ncclFloat32` (`ncclFloat`) = 7.
    Float32 = 7,
    /// `ncclFloat64` (`ncclDouble`) = 8.
    Float64 = 8,
    /// `ncclBfloat16` = 9.
    Bfloat16 = 9,
    /// `ncclFloat8e4m3` = 10, OCP FP8 E4M3 ([`crate::F8E4M3`]).
    Float8e4m3 = 10,
    /// `ncclFloat8e5m2` = 11, OCP FP8 E5M2 ([`crate::F8E5M2`]).
    Float8e5m2 = 11,
}

impl DataType {
    /// Every data type, in NCCL's enum order.
    pub const ALL: [DataType; 12] = [
        DataType::Int8,
        DataType::Uint8,
        DataType::Int32,
        DataType::Uint32,
        DataType::Int64,
        DataType::Uint64,
        DataType::Float16,
        DataType::Float32,
        DataType::Float64,
        DataType::Bfloat16,
        DataType::Float8e4m3,
        DataType::Float8e5m2,
    ];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DataType::Int8 | DataType::Uint8 | DataType::Float8e4m3 | DataType::Float8e5m2 => 1,
            DataType::Float16 | DataType::Bfloat16 => 2,
            DataType::Int32 | DataType::Uint32 | DataType::Float32 => 4,
            DataType::Int64 | DataType::Uint64 | DataType::Float64 => 8,
        }
    }

    /// True for the floating-point types.
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            DataType::Float16
                | DataType::Bfloat16
                | DataType::Float32
                | DataType::Float64
                | DataType::Float8e4m3
                | DataType::Float8e5m2
        )
    }

    /// The FP8 format of `ncclFloat8e4m3` and `ncclFloat8e5m2`, else `None`.
    pub(crate) const fn fp8(self) -> Option<crate::fp8::Fp8Format> {
        match self {
            DataType::Float8e4m3 => Some(crate::fp8::Fp8Format::E4M3),
            DataType::Float8e5m2 => Some(crate::fp8::Fp8Format::E5M2),
            _ => None,
        }
    }

    /// The name nccl-tests prints in its `type` column (`int8`, `half`, `float`, `double`, `bfloat16`…).
    pub const fn nccl_tests_name(self) -> &'static str {
        match self {
            DataType::Int8 => "int8",
            DataType::Uint8 => "uint8",
            DataType::Int32 => "int32",
            DataType::Uint32 => "uint32",
            DataType::Int64 => "int64",
            DataType::Uint64 => "uint64",
            DataType::Float16 => "half",
            DataType::Float32 => "float",
            DataType::Float64 => "double",
            DataType::Bfloat16 => "bfloat16",
            DataType::Float8e4m3 => "f8e4m3",
            DataType::Float8e5m2 => "f8e5m2",
        }
    }

    /// rnccl's canonical name (`float32`, `bfloat16`…).
    pub const fn name(self) -> &'static str {
        match self {
            DataType::Int8 => "int8",
            DataType::Uint8 => "uint8",
            DataType::Int32 => "int32",
            DataType::Uint32 => "uint32",
            DataType::Int64 => "int64",
            DataType::Uint64 => "uint64",
            DataType::Float16 => "float16",
            DataType::Float32 => "float32",
            DataType::Float64 => "float64",
            DataType::Bfloat16 => "bfloat16",
            DataType::Float8e4m3 => "float8e4m3",
            DataType::Float8e5m2 => "float8e5m2",
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DataType {
    type Err = Error;

    /// Accepts rnccl's names, nccl-tests' names and NCCL's aliases (`char`, `int`, `half`, `float`,
    /// `double`, `bf16`, `fp16`, `fp32`, `fp64`), case-insensitively.
    fn from_str(s: &str) -> Result<Self, Error> {
        let t = match s.to_ascii_lowercase().as_str() {
            "int8" | "char" | "i8" => DataType::Int8,
            "uint8" | "u8" => DataType::Uint8,
            "int32" | "int" | "i32" => DataType::Int32,
            "uint32" | "u32" => DataType::Uint32,
            "int64" | "i64" => DataType::Int64,
            "uint64" | "u64" => DataType::Uint64,
            "float16" | "half" | "fp16" | "f16" => DataType::Float16,
            "float32" | "float" | "fp32" | "f32" => DataType::Float32,
            "float64" | "double" | "fp64" | "f64" => DataType::Float64,
            "bfloat16" | "bf16" => DataType::Bfloat16,
            "float8e4m3" | "f8e4m3" | "fp8e4m3" | "e4m3" => DataType::Float8e4m3,
            "float8e5m2" | "f8e5m2" | "fp8e5m2" | "e5m2" => DataType::Float8e5m2,
            _ => {
                return Err(Error::invalid_arg(format!(
                    "unknown data type '{s}': use one of int8 uint8 int32 uint32 int64 uint64 \
                     float16 (half) float32 (float) float64 (double) bfloat16 float8e4m3 \
                     (f8e4m3) float8e5m2 (f8e5m2)"
                )));
            }
        };
        Ok(t)
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is one NCCL element. Implemented for `i8 u8 i32 u32 i64 u64 f32 f64`,
/// `half::f16`, `half::bf16` and [`crate::F8E4M3`], [`crate::F8E5M2`]; sealed.
pub trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The NCCL data type of `Self`.
    const DTYPE: DataType;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t { const DTYPE: DataType = DataType::$d; }
    )*};
}
element!(i8 => Int8, u8 => Uint8, i32 => Int32, u32 => Uint32, i64 => Int64, u64 => Uint64,
         half::f16 => Float16, f32 => Float32, f64 => Float64, half::bf16 => Bfloat16,
         crate::fp8::F8E4M3 => Float8e4m3, crate::fp8::F8E5M2 => Float8e5m2);

/// Views a slice of elements as bytes.
pub(crate) fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: every Element is a plain-old-data type without padding or invalid bit patterns.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}

/// Views a mutable slice of elements as bytes.
pub(crate) fn as_bytes_mut<T: Element>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; every byte pattern is a valid element.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), std::mem::size_of_val(s)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases_parse() {
        for t in DataType::ALL {
            assert_eq!(t.name().parse::<DataType>().unwrap(), t);
            assert_eq!(t.nccl_tests_name().parse::<DataType>().unwrap(), t);
        }
        assert_eq!("BF16".parse::<DataType>().unwrap(), DataType::Bfloat16);
        let e = "float128".parse::<DataType>().unwrap_err().to_string();
        assert!(e.contains("float128") && e.contains("bfloat16"), "{e}");
    }

    #[test]
    fn sizes_match_rust_types() {
        assert_eq!(DataType::Float16.size(), std::mem::size_of::<half::f16>());
        assert_eq!(<half::bf16 as Element>::DTYPE, DataType::Bfloat16);
        assert_eq!(DataType::Uint64.size(), 8);
    }
}
