//! Writes the seed corpora of the fuzz targets, `corpus/<target>/` under the directory given
//! (`cargo xtask fuzz --seeds` runs it for fuzz/corpus, replacing what was there). Each file's
//! name says where it came from:
//!
//! - `dig-…`, `kdig-…`, `delv-…`: a query as the tool sent it (the flags in the name), captured
//!   by a server this program runs on 127.0.0.1 that answers with the responder of
//!   examples/demo.toml (so a tool that retries over TCP after a truncated answer, or validates
//!   with further queries, sends those too). `.udp`: one datagram's payload; `.tcp`: the bytes
//!   of one TCP connection (length-prefixed messages). A tool that is not installed is skipped
//!   with a warning.
//! - `hostile-<class>`: the costliest message of each class (`gslb_tests::hostile`).
//! - `example-<file>`: a file of examples/ as it is.
//! - Other names: made here with the module's own encoder or as a real program writes them (the
//!   comment at each says which).
//!
//! Each target reads its input as its own comment says (a choice byte first for some); the
//! seeds are written in that form.

mod capture;
mod dns;
mod mep;
mod text;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

/// The largest seed of a target (`-max_len`).
const MAX_LEN: usize = 65_535;

/// Seeds by target, then file name.
#[derive(Default)]
struct Corpus(BTreeMap<&'static str, BTreeMap<String, Vec<u8>>>);

impl Corpus {
    fn add(&mut self, target: &'static str, name: impl Into<String>, bytes: Vec<u8>) {
        let name = name.into();
        assert!(
            bytes.len() <= MAX_LEN,
            "{target}/{name}: {} bytes",
            bytes.len()
        );
        let old = self
            .0
            .entry(target)
            .or_default()
            .insert(name.clone(), bytes);
        assert!(old.is_none(), "{target}/{name} twice");
    }
}

fn main() {
    let out = PathBuf::from(std::env::args().nth(1).expect("usage: seeds DIR"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut corpus = Corpus::default();
    let captured = capture::capture(&root);
    dns::seeds(&mut corpus, &captured);
    text::config_seeds(&mut corpus, &root);
    text::zone_file_seeds(&mut corpus, &root);
    text::location_seeds(&mut corpus, &root);
    text::prometheus_seeds(&mut corpus);
    text::http_seeds(&mut corpus);
    mep::seeds(&mut corpus);
    let mut total = (0, 0);
    for (target, files) in &corpus.0 {
        let dir = out.join(target);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).expect("removing the old seeds");
        }
        std::fs::create_dir_all(&dir).expect("the corpus directory");
        for (name, bytes) in files {
            std::fs::write(dir.join(name), bytes).expect("writing a seed");
        }
        let bytes: usize = files.values().map(Vec::len).sum();
        println!("{target}: {} seeds, {bytes} bytes", files.len());
        total = (total.0 + files.len(), total.1 + bytes);
    }
    println!("{} seeds, {} bytes in {}", total.0, total.1, out.display());
}
