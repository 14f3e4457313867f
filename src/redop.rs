//! Reduction operations (`ncclRedOp_t` plus `ncclRedOpCreatePreMulSum`).
//!
//! NCCL lowers `Avg` to a sum followed by a division for integers (`SumPostDiv`) and to a sum of
//! inputs pre-multiplied by `1/nranks` for floating point (`PreMulSum`); rnccl does the same, so
//! results match NCCL's rounding.

use std::fmt;
use std::str::FromStr;

use crate::dtype::DataType;
use crate::error::Error;

/// A scalar for [`RedOp::PreMulSum`], converted to the operation's data type when used
/// (`as` conversion: integers wrap, floats round to nearest).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    Uint(u64),
    /// A floating-point value.
    Float(f64),
    /// One element of the operation's data type in GPU memory at this device address, read by
    /// the kernel when the collective runs, so a value written before it on the stream (or
    /// between replays of a CUDA graph) is the one used (`ncclScalarDevice`). GPU communicators
    /// only: a host communicator returns [`Error::InvalidUsage`] for it.
    Device(u64),
}

impl Scalar {
    /// The scalar as f64 (for floating-point data types); 1 for [`Scalar::Device`], whose value
    /// only the kernel reads.
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Int(v) => v as f64,
            Scalar::Uint(v) => v as f64,
            Scalar::Float(v) => v,
            Scalar::Device(_) => 1.0,
        }
    }

    /// The scalar as a wrapping 64-bit integer (for integer data types); 1 for
    /// [`Scalar::Device`].
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::Int(v) => v,
            Scalar::Uint(v) => v as i64,
            Scalar::Float(v) => v as i64,
            Scalar::Device(_) => 1,
        }
    }

    /// The device address of a [`Scalar::Device`], else `None`.
    pub fn device_address(self) -> Option<u64> {
        match self {
            Scalar::Device(at) => Some(at),
            _ => None,
        }
    }
}

/// A reduction operation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RedOp {
    /// `ncclSum`: wrapping for integers.
    Sum,
    /// `ncclProd`: wrapping for integers.
    Prod,
    /// `ncclMax`.
    Max,
    /// `ncclMin`.
    Min,
    /// `ncclAvg`: sum divided by nranks (integer division, truncating, for integer types).
    Avg,
    /// `ncclRedOpCreatePreMulSum`: the sum of every input multiplied by the scalar first.
    PreMulSum(Scalar),
}

impl RedOp {
    /// The five predefined operations, in NCCL's enum order (PreMulSum is created per use).
    pub const BUILTIN: [RedOp; 5] = [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg];

    /// The name nccl-tests prints in its `redop` column (`sum prod max min avg mulsum`).
    pub fn name(&self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Max => "max",
            RedOp::Min => "min",
            RedOp::Avg => "avg",
            RedOp::PreMulSum(_) => "mulsum",
        }
    }

    /// The operation the reduction kernels apply for `dtype` on a communicator of `nranks`:
    /// what to do to each local input before combining (`pre`), how to combine (`combine`), and
    /// what to do to the final value (`post`).
    pub fn lower(&self, dtype: DataType, nranks: usize) -> Lowered {
        match *self {
            RedOp::Sum => Lowered::plain(Combine::Sum),
            RedOp::Prod => Lowered::plain(Combine::Prod),
            RedOp::Max => Lowered::plain(Combine::Max),
            RedOp::Min => Lowered::plain(Combine::Min),
            RedOp::Avg if dtype.is_float() => Lowered {
                pre: Some(Scalar::Float(1.0 / nranks as f64)),
                combine: Combine::Sum,
                post_div: None,
            },
            RedOp::Avg => Lowered {
                pre: None,
                combine: Combine::Sum,
                post_div: Some(nranks as u64),
            },
            RedOp::PreMulSum(s) => Lowered {
                pre: Some(s),
                combine: Combine::Sum,
                post_div: None,
            },
        }
    }
}

impl fmt::Display for RedOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for RedOp {
    /// Serialises as the nccl-tests name (`sum`, `mulsum`…).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl FromStr for RedOp {
    type Err = Error;

    /// Parses `sum prod max min avg` (case-insensitive). `mulsum`/`premulsum` parse to
    /// `PreMulSum` with scalar 1 (nccl-tests' convention picks its own scalar: see the bench).
    fn from_str(s: &str) -> Result<Self, Error> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "sum" => RedOp::Sum,
            "prod" => RedOp::Prod,
            "max" => RedOp::Max,
            "min" => RedOp::Min,
            "avg" => RedOp::Avg,
            "mulsum" | "premulsum" => RedOp::PreMulSum(Scalar::Int(1)),
            _ => {
                return Err(Error::invalid_arg(format!(
                    "unknown reduction operation '{s}': use one of sum prod max min avg mulsum"
                )));
            }
        })
    }
}

/// How two values are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Combine {
    /// a + b (wrapping for integers).
    Sum,
    /// a * b (wrapping for integers).
    Prod,
    /// max(a, b); NaN-propagating like CUDA's fmax is not: NCCL uses `a > b ? a : b`.
    Max,
    /// min(a, b) as `a < b ? a : b`.
    Min,
}

/// A reduction lowered to what the kernels do (see [`RedOp::lower`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lowered {
    /// Multiply every local input element by this before combining.
    pub pre: Option<Scalar>,
    /// The binary operation.
    pub combine: Combine,
    /// Divide the final value by this (integer `Avg`).
    pub post_div: Option<u64>,
}

impl Lowered {
    fn plain(combine: Combine) -> Lowered {
        Lowered {
            pre: None,
            combine,
            post_div: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avg_lowers_like_nccl() {
        let f = RedOp::Avg.lower(DataType::Float32, 4);
        assert_eq!(f.pre, Some(Scalar::Float(0.25)));
        assert_eq!(f.post_div, None);
        let i = RedOp::Avg.lower(DataType::Int32, 4);
        assert_eq!(i.pre, None);
        assert_eq!(i.post_div, Some(4));
    }

    #[test]
    fn parse_names() {
        for op in RedOp::BUILTIN {
            assert_eq!(op.name().parse::<RedOp>().unwrap(), op);
        }
        assert!(
            "xor"
                .parse::<RedOp>()
                .unwrap_err()
                .to_string()
                .contains("xor")
        );
    }
}
