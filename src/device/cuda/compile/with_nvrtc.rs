//! Tests that run the real NVRTC on every program of `kernels/`. Without libnvrtc and CUDA's
//! headers they print why they were skipped and pass, except under `CI=true`, where they fail:
//! CI must compile the kernels (`.ci/run` fetches NVRTC for that).

use super::cache::{self, Found};
use super::disk::DiskCache;
use super::entry::entry_points;
use super::nvrtc;
use super::sources::{self, Source};
use crate::error::Error;

/// The architectures compiled for: A100 and H100.
const ARCHS: [u32; 2] = [80, 90];

/// Whether `every_program_compiles_to_a_cubin_with_its_kernels` compiles `program` whole (every
/// data type and reduction): every program but the interpreter, whose whole build takes NVRTC
/// minutes per architecture on one core. Its kernels are compiled a module per data type
/// instead: for the newest architecture every type with every reduction, unoptimised (`-G`,
/// [`nvrtc::compile_unoptimized`]: the same front end and kernels, a quarter of the time;
/// optimised, these two tests took 4 of CI's minutes), split over two tests that run side by
/// side (`interp_modules_of_*_types_compile`); and optimised, exactly as the loader builds
/// them, three modules of one type and one reduction, one of them for the older architecture
/// (`a_module_holds_its_types_kernels_for_its_reduction`), since the interpreter differs between
/// architectures only in the FP8 types that sm_90 adds (`__CUDA_ARCH__ >= 900` in interp.cu,
/// which `entry_points` follows).
fn compiled_whole(program: &Source) -> bool {
    program.name != "interp.cu"
}

/// Whether NVRTC and CUDA's headers are here; if not, fails under CI, else says why it skips.
fn nvrtc_here(test: &str) -> bool {
    let Err(e) = nvrtc::options(ARCHS[0], &[]) else {
        return true;
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: CI must compile the kernels, but: {e}"
    );
    eprintln!("{test}: skipped, NVRTC cannot run here: {e}");
    false
}

/// Whether `cubin` holds `name` as a whole string (NUL before and after, as in an ELF string
/// table), not just as a prefix of a longer name.
fn names(cubin: &[u8], name: &str) -> bool {
    let needle = [b"\0", name.as_bytes(), b"\0"].concat();
    cubin.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn every_program_compiles_to_a_cubin_with_its_kernels() {
    if !nvrtc_here("every_program_compiles_to_a_cubin_with_its_kernels") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let disk = DiskCache::new(tmp.path().to_path_buf());
    for program in sources::programs().filter(|p| compiled_whole(p)) {
        for arch in ARCHS {
            let expected = entry_points(program.name, arch).unwrap();
            let what = format!("kernels/{} for sm_{arch}", program.name);
            let cubin = cache::cubin(program, arch, &[], Some(tmp.path())).unwrap();
            assert!(
                cubin.len() > 4 && cubin.starts_with(b"\x7fELF"),
                "{what}: not an ELF"
            );
            let missing: Vec<&String> = expected.iter().filter(|k| !names(&cubin, k)).collect();
            assert!(missing.is_empty(), "{what} lacks kernels {missing:?}");
            assert!(!names(&cubin, "rnccl_interp_no_such_kernel"));

            // The CUBIN was stored; a later process finds it there and compiles nothing.
            let key = cache::key_of(program, arch, &[]).unwrap();
            assert!(
                disk.path(program.name, arch, key).is_file(),
                "{what}: not cached"
            );
            let mut compiles = 0;
            let (again, found) =
                cache::lookup_or_build(Some(&disk), program.name, arch, key, || {
                    compiles += 1;
                    nvrtc::compile(program, arch, &[])
                })
                .unwrap();
            assert_eq!((found, compiles), (Found::Disk, 0), "{what}");
            assert_eq!(again, cubin);
            // And this process keeps it.
            assert_eq!(cache::cubin(program, arch, &[], None).unwrap(), cubin);
        }
    }
}

/// The interpreter's module of each data type whose place in `DataType::ALL` has parity
/// `parity`, built unoptimised for the newest architecture with every reduction (`RNCCL_DTYPE`
/// alone), holds the kernels the loader looks up in it.
fn interp_modules_compile(parity: usize) {
    use crate::device::cuda::compile::entry::{
        COMBINES, FP8_MIN_ARCH, RMA_KERNEL, direct_kernel, interp_kernel, ll_kernel,
    };
    use crate::dtype::DataType;
    let test = format!("interp_modules_of_parity_{parity}_types_compile");
    if !nvrtc_here(&test) {
        return;
    }
    let arch = ARCHS[ARCHS.len() - 1];
    assert!(
        arch >= FP8_MIN_ARCH,
        "the newest architecture builds every type"
    );
    let program = sources::programs().find(|p| p.name == "interp.cu").unwrap();
    for &dtype in DataType::ALL.iter().skip(parity).step_by(2) {
        let defines = [format!("RNCCL_DTYPE={}", dtype as u32)];
        let cubin = nvrtc::compile_unoptimized(program, arch, &defines).unwrap();
        let mut expected: Vec<String> = COMBINES
            .iter()
            .flat_map(|&c| {
                [
                    interp_kernel(dtype, c),
                    ll_kernel(dtype, c),
                    direct_kernel(dtype, c),
                ]
            })
            .collect();
        if dtype == DataType::Uint8 {
            expected.push(RMA_KERNEL.to_string());
        }
        let missing: Vec<&String> = expected.iter().filter(|k| !names(&cubin, k)).collect();
        assert!(
            missing.is_empty(),
            "{dtype} for sm_{arch} lacks kernels {missing:?}"
        );
    }
}

#[test]
fn interp_modules_of_even_types_compile() {
    interp_modules_compile(0);
}

#[test]
fn interp_modules_of_odd_types_compile() {
    interp_modules_compile(1);
}

#[test]
fn second_compile_hits_the_disk_cache() {
    if !nvrtc_here("second_compile_hits_the_disk_cache") {
        return;
    }
    let program = sources::programs().next().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let disk = DiskCache::new(tmp.path().join("kernels"));
    let key = cache::key_of(program, 90, &[]).unwrap();
    let mut compiles = 0;
    let mut build = || {
        cache::lookup_or_build(Some(&disk), program.name, 90, key, || {
            compiles += 1;
            nvrtc::compile(program, 90, &[])
        })
        .unwrap()
    };
    let (first, how_first) = build();
    let (second, how_second) = build();
    assert_eq!((how_first, how_second), (Found::Compiled, Found::Disk));
    assert_eq!(first, second);
    assert_eq!(compiles, 1);
}

#[test]
fn compile_error_returns_nvrtcs_log() {
    if !nvrtc_here("compile_error_returns_nvrtcs_log") {
        return;
    }
    let broken = Source {
        name: "broken.cu",
        text: "#include \"reduce.cuh\"\n__global__ void k() { no_such_function(); }\n",
    };
    let err = nvrtc::compile(&broken, 90, &[]).unwrap_err();
    let Error::Cuda(msg) = &err else {
        panic!("expected Error::Cuda, got {err:?}");
    };
    assert!(msg.contains("kernels/broken.cu for sm_90"), "{msg}");
    assert!(msg.contains("NVRTC_ERROR_COMPILATION"), "{msg}");
    assert!(
        msg.contains("no_such_function"),
        "the log is in the error: {msg}"
    );
    assert!(
        msg.contains("broken.cu(2)"),
        "the log names the line: {msg}"
    );

    let unknown = nvrtc::compile(sources::programs().next().unwrap(), 1, &[]).unwrap_err();
    assert!(unknown.to_string().contains("sm_1"), "{unknown}");
}

/// The device ABI's layouts (`crate::device::cuda::abi`) hold in the kernels' headers: every
/// struct's size, every field's offset, every code.
#[test]
fn the_device_abi_matches_the_kernel_headers() {
    if !nvrtc_here("the_device_abi_matches_the_kernel_headers") {
        return;
    }
    let text = crate::device::cuda::abi::layout_asserts();
    let layout = Source {
        name: "abi_layout.cu",
        text: Box::leak(text.into_boxed_str()),
    };
    if let Err(e) = nvrtc::compile(&layout, 90, &[]) {
        panic!("the Rust and CUDA layouts differ: {e}");
    }
}

/// A module built for one data type and one reduction (`module_defines`,
/// what the loader compiles) holds exactly the kernels the loader looks up in it: that type's
/// interpreter, LL and direct kernels for that reduction, and the one-sided kernel in the byte
/// module for sums alone. One of the modules is built for each architecture of `ARCHS`.
#[test]
fn a_module_holds_its_types_kernels_for_its_reduction() {
    use crate::device::cuda::compile::entry::{
        COMBINES, RMA_KERNEL, direct_kernel, interp_kernel, ll_kernel,
    };
    use crate::device::cuda::module::module_defines;
    use crate::dtype::DataType;
    use crate::redop::Combine;
    if !nvrtc_here("a_module_holds_its_types_kernels_for_its_reduction") {
        return;
    }
    let program = sources::programs().find(|p| p.name == "interp.cu").unwrap();
    for (dtype, combine, arch) in [
        (DataType::Uint8, Combine::Sum, 90),
        (DataType::Int64, Combine::Max, ARCHS[0]),
        (DataType::Bfloat16, Combine::Min, 90),
    ] {
        let cubin = nvrtc::compile(program, arch, &module_defines(dtype, combine)).unwrap();
        for c in COMBINES {
            for k in [
                interp_kernel(dtype, c),
                ll_kernel(dtype, c),
                direct_kernel(dtype, c),
            ] {
                assert_eq!(names(&cubin, &k), c == combine, "{dtype} {combine:?}: {k}");
            }
        }
        let other = if dtype == DataType::Uint8 {
            DataType::Int8
        } else {
            DataType::Uint8
        };
        assert!(!names(&cubin, &interp_kernel(other, combine)));
        assert_eq!(
            names(&cubin, RMA_KERNEL),
            (dtype, combine) == (DataType::Uint8, Combine::Sum),
            "{dtype} {combine:?}: {RMA_KERNEL}"
        );
    }
}
