//! Gives the shared library NCCL's soname, so a program linked against NCCL (DT_NEEDED
//! `libnccl.so.2`) loads this one when it is preloaded or found first on the library path.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnccl.so.2");
    println!("cargo:rerun-if-changed=build.rs");
}
