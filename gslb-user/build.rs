use anyhow::{Context as _, anyhow};
use aya_build::{Package, Toolchain};

/// Builds the XDP program (gslb-ebpf) for the BPF target with the workspace's pinned toolchain;
/// the object lands in OUT_DIR and is embedded by `dataplane`.
fn main() -> anyhow::Result<()> {
    let toolchain = pinned_toolchain()?;
    // The pinned toolchain is a stable release; -Z build-std=core needs this.
    // SAFETY: build scripts are single-threaded at this point.
    unsafe { std::env::set_var("RUSTC_BOOTSTRAP", "1") };
    let metadata_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../gslb-ebpf");
    let root_dir = metadata_dir.to_str().context("non-UTF-8 path")?;
    aya_build::build_ebpf(
        [Package {
            name: "gslb-ebpf",
            root_dir,
            ..Default::default()
        }],
        Toolchain::Custom(&toolchain),
    )
}

/// The channel named in rust-toolchain.toml, so the eBPF crate is built by exactly the toolchain
/// whose LLVM bpf-linker was built against.
fn pinned_toolchain() -> anyhow::Result<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rust-toolchain.toml");
    println!("cargo::rerun-if-changed={}", path.display());
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .find_map(|l| {
            l.trim().strip_prefix("channel").map(|r| {
                r.trim_start_matches([' ', '='])
                    .trim()
                    .trim_matches('"')
                    .to_owned()
            })
        })
        .ok_or_else(|| anyhow!("{}: no channel", path.display()))
}
