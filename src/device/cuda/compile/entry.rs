//! The names of the kernels the programs of `kernels/` export (`extern "C"`, so a name in the
//! CUBIN is the name in the source): what the module loader asks the driver for, and what the
//! compile tests look for in every CUBIN.

use crate::dtype::DataType;
use crate::redop::Combine;

/// Every way the interpreter combines two elements, one kernel each per data type.
pub(crate) const COMBINES: [Combine; 4] = [Combine::Sum, Combine::Prod, Combine::Max, Combine::Min];

/// The short name kernels use for a data type (the `<type>` of `rnccl_interp_<type>_<op>`, as
/// `RNCCL_INTERP_TYPE` in kernels/interp.cu spells it).
pub(crate) fn type_name(dtype: DataType) -> &'static str {
    match dtype {
        DataType::Int8 => "i8",
        DataType::Uint8 => "u8",
        DataType::Int32 => "i32",
        DataType::Uint32 => "u32",
        DataType::Int64 => "i64",
        DataType::Uint64 => "u64",
        DataType::Float16 => "f16",
        DataType::Float32 => "f32",
        DataType::Float64 => "f64",
        DataType::Bfloat16 => "bf16",
        DataType::Float8e4m3 => "f8e4m3",
        DataType::Float8e5m2 => "f8e5m2",
    }
}

/// The interpreter kernel of `kernels/interp.cu` for `dtype` and `combine`:
/// `rnccl_interp_<type>_<op>`, with the type's [`type_name`] (`f32`, `bf16`...) and the
/// operation as `sum`, `prod`, `max` or `min`.
pub(crate) fn interp_kernel(dtype: DataType, combine: Combine) -> String {
    format!("rnccl_interp_{}_{}", type_name(dtype), op_name(combine))
}

/// The one-shot LL all-reduce of `kernels/ll.cuh` (built into interp.cu's module) for `dtype`
/// and `combine`: `rnccl_ll_allreduce_<type>_<op>`, named as [`interp_kernel`].
pub(crate) fn ll_kernel(dtype: DataType, combine: Combine) -> String {
    format!(
        "rnccl_ll_allreduce_{}_{}",
        type_name(dtype),
        op_name(combine)
    )
}

/// The direct kernel of `kernels/direct.cuh` (built into interp.cu's module: two-shot
/// all-reduce, reduce-scatter and all-gather) for `dtype` and `combine`:
/// `rnccl_direct_<type>_<op>`, named as [`interp_kernel`].
pub(crate) fn direct_kernel(dtype: DataType, combine: Combine) -> String {
    format!("rnccl_direct_{}_{}", type_name(dtype), op_name(combine))
}

/// The value of `RNCCL_COMBINE` that builds `combine`'s kernels (kernels/interp.cu): its place
/// in [`COMBINES`].
pub(crate) fn combine_code(combine: Combine) -> u32 {
    COMBINES.iter().position(|&c| c == combine).unwrap_or(0) as u32
}

fn op_name(combine: Combine) -> &'static str {
    match combine {
        Combine::Sum => "sum",
        Combine::Prod => "prod",
        Combine::Max => "max",
        Combine::Min => "min",
    }
}

/// The first architecture `kernels/interp.cu` builds the FP8 kernels for: sm_90 (Hopper), where
/// NCCL's FP8 reductions start too (they are emulated, slowly to build, on earlier GPUs).
pub(crate) const FP8_MIN_ARCH: u32 = 90;

/// The one-sided kernel (kernels/rma.cuh), in the byte (`uint8`) module only.
pub(crate) const RMA_KERNEL: &str = "rnccl_rma";

/// The result check of `kernels/check.cu` for `dtype`: `rnccl_check_<type>`.
pub(crate) fn check_kernel(dtype: DataType) -> String {
    format!("rnccl_check_{}", type_name(dtype))
}

/// The kernels `program` (a `*.cu` file name of `kernels/`) exports when built for `sm_<arch>`,
/// or `None` for a program this list does not know yet (add it here when adding a program to
/// `kernels/`). The FP8 interpreters exist from sm_90 on ([`FP8_MIN_ARCH`]).
#[cfg(test)]
pub(crate) fn entry_points(program: &str, arch: u32) -> Option<Vec<String>> {
    match program {
        "interp.cu" => Some(
            DataType::ALL
                .iter()
                .filter(|d| d.fp8().is_none() || arch >= FP8_MIN_ARCH)
                .flat_map(|&d| {
                    COMBINES.iter().flat_map(move |&c| {
                        [interp_kernel(d, c), ll_kernel(d, c), direct_kernel(d, c)]
                    })
                })
                .chain([RMA_KERNEL.to_string()])
                .collect(),
        ),
        "check.cu" => Some(DataType::ALL.iter().map(|&d| check_kernel(d)).collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::cuda::compile::sources;

    #[test]
    fn interp_names_follow_the_scheme() {
        assert_eq!(
            interp_kernel(DataType::Float32, Combine::Sum),
            "rnccl_interp_f32_sum"
        );
        assert_eq!(
            interp_kernel(DataType::Bfloat16, Combine::Min),
            "rnccl_interp_bf16_min"
        );
        let src = include_str!("../../../../kernels/interp.cu");
        for t in DataType::ALL {
            let want = format!("RNCCL_INTERP_TYPE({}, ", type_name(t));
            assert!(src.contains(&want), "interp.cu lacks `{want}`");
            let def = format!("RNCCL_DTYPE == {}", t as u32);
            assert!(src.contains(&def), "interp.cu lacks `{def}`");
        }
        let check = include_str!("../../../../kernels/check.cu");
        for t in DataType::ALL {
            let want = format!("RNCCL_CHECK_TYPE({}, ", type_name(t));
            assert!(check.contains(&want), "check.cu lacks `{want}`");
        }
        assert_eq!(check_kernel(DataType::Bfloat16), "rnccl_check_bf16");
        for (i, c) in [Combine::Sum, Combine::Prod, Combine::Max, Combine::Min]
            .into_iter()
            .enumerate()
        {
            assert_eq!(combine_code(c), i as u32);
            let want = format!("RNCCL_COMBINE == {i}");
            assert!(src.contains(&want), "interp.cu lacks `{want}`");
        }
        // Three kernels per type and reduction, and the one-sided kernel of the byte module.
        let all = entry_points("interp.cu", 90).unwrap();
        assert_eq!(all.len(), 3 * DataType::ALL.len() * COMBINES.len() + 1);
        assert!(all.iter().any(|k| k == RMA_KERNEL));
        let before_fp8 = entry_points("interp.cu", 80).unwrap();
        assert_eq!(
            before_fp8.len(),
            3 * (DataType::ALL.len() - 2) * COMBINES.len() + 1
        );
        let mut unique = all.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), all.len());
    }

    #[test]
    fn every_program_has_its_entry_points_listed() {
        for p in sources::programs() {
            assert!(
                entry_points(p.name, 90).is_some_and(|e| !e.is_empty()),
                "kernels/{}: list its kernels in src/device/cuda/compile/entry.rs",
                p.name
            );
        }
        assert_eq!(entry_points("nothing.cu", 90), None);
    }
}
