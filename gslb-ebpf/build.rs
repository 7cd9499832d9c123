use which::which;

/// Rebuild when bpf-linker changes: it is the linker of this crate's target, so cargo does not
/// see it as an input otherwise.
fn main() {
    if let Ok(bpf_linker) = which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", bpf_linker.display());
    }
}
