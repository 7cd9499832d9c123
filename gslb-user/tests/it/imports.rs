//! The library's import rules (issue 28), kept by a test rather than by memory:
//!
//! - only `config/` and `daemon/` (the wiring) import `crate::config`: every other subsystem
//!   takes the `model` or its own settings;
//! - the top-level modules of `gslb-user/src` import each other without a cycle.
//!
//! Test code is left out: a module declared under `#[cfg(test)]` (with every file below it),
//! and any other item under `#[cfg(test)]`. The sources are read from the library's module tree
//! (from `lib.rs`, following `mod NAME;`), so a file no module declares is not read.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// The top-level modules that may import `crate::config`.
const CONFIG_READERS: [&str; 2] = ["config", "daemon"];

#[test]
fn only_config_and_daemon_import_config() {
    let graph = ImportGraph::of_library();
    let offenders: Vec<String> = graph
        .edges
        .iter()
        .filter(|((from, to), _)| to == "config" && !CONFIG_READERS.contains(&from.as_str()))
        .flat_map(|(_, files)| files.iter().cloned())
        .collect();
    assert!(
        offenders.is_empty(),
        "non-test code outside {CONFIG_READERS:?} imports crate::config: {offenders:?}"
    );
}

#[test]
fn no_import_cycle_between_top_level_modules() {
    let graph = ImportGraph::of_library();
    let cycles = graph.cycles();
    let mut report = String::new();
    for cycle in &cycles {
        report.push_str(&format!("\ncycle: {}", cycle.join(" ")));
        for ((from, to), files) in &graph.edges {
            if cycle.contains(from) && cycle.contains(to) {
                let files: Vec<&str> = files.iter().map(String::as_str).collect();
                report.push_str(&format!("\n  {from} -> {to}: {}", files.join(", ")));
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles across folders:{report}");
}

#[test]
fn test_code_is_told_from_the_rest() {
    let code = strip_literals(
        "use crate::a; // crate::b\n/* crate::c /* nested */ crate::d */ let s = \"crate::e {\";\n\
         let c = '{'; fn f<'a>(x: &'a str) {}\n#[cfg(test)]\nfn helper() { crate::f(); }\n\
         #[cfg(test)]\nmod tests;\nuse crate::{g, h::{i, j}};",
    );
    let (kept, test_mods) = without_test_items(&code);
    assert_eq!(test_mods, ["tests"]);
    let mut names = BTreeSet::new();
    crate_imports(&kept, &mut names);
    assert_eq!(names, ["a", "g", "h"].map(String::from).into());
}

/// Edges between top-level modules, each with the files that make it.
struct ImportGraph {
    edges: BTreeMap<(String, String), BTreeSet<String>>,
}

impl ImportGraph {
    fn of_library() -> Self {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut graph = ImportGraph {
            edges: BTreeMap::new(),
        };
        graph.read(&src, &src.join("lib.rs"), &src);
        assert!(
            graph.edges.keys().any(|(from, _)| from == "compile"),
            "the walk found no import from compile: it read the wrong tree"
        );
        graph
    }

    /// Reads `file` (the module whose own files live in `dir`) and the modules it declares.
    fn read(&mut self, src: &Path, file: &Path, dir: &Path) {
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let (kept, test_mods) = without_test_items(&strip_literals(&text));
        let rel = file.strip_prefix(src).unwrap();
        if rel != Path::new("lib.rs") {
            let from = top_level(rel);
            let mut names = BTreeSet::new();
            crate_imports(&kept, &mut names);
            for to in names.into_iter().filter(|to| *to != from) {
                self.edges
                    .entry((from.clone(), to))
                    .or_default()
                    .insert(rel.display().to_string());
            }
        }
        assert!(
            !kept.contains("#[path"),
            "{}: a `#[path]` module outside test code: teach this test to follow it",
            file.display()
        );
        for name in declared_modules(&kept) {
            if test_mods.contains(&name) {
                continue;
            }
            let (child, child_dir) = module_file(dir, &name)
                .unwrap_or_else(|| panic!("{}: no file for `mod {name};`", file.display()));
            self.read(src, &child, &child_dir);
        }
    }

    /// The strongly connected components of more than one module.
    fn cycles(&self) -> Vec<Vec<String>> {
        let nodes: BTreeSet<&String> = self.edges.keys().flat_map(|(a, b)| [a, b]).collect();
        let reach = |start: &String| {
            let mut seen = BTreeSet::new();
            let mut todo = vec![start];
            while let Some(node) = todo.pop() {
                for (from, to) in self.edges.keys() {
                    if from == node && seen.insert(to) {
                        todo.push(to);
                    }
                }
            }
            seen
        };
        let reaches: BTreeMap<&String, BTreeSet<&String>> =
            nodes.iter().map(|n| (*n, reach(n))).collect();
        let mut cycles: BTreeSet<Vec<String>> = BTreeSet::new();
        for node in &nodes {
            let component: Vec<String> = nodes
                .iter()
                .filter(|other| reaches[node].contains(*other) && reaches[*other].contains(*node))
                .map(|n| (*n).clone())
                .collect();
            if component.len() > 1 {
                cycles.insert(component);
            }
        }
        cycles.into_iter().collect()
    }
}

/// `config` for `config.rs`, `config/mod.rs` and `config/tests/x.rs`.
fn top_level(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.strip_suffix(".rs").unwrap_or(&first).to_string()
}

/// `dir/NAME.rs` (its own modules in `dir/NAME/`) or `dir/NAME/mod.rs`.
fn module_file(dir: &Path, name: &str) -> Option<(PathBuf, PathBuf)> {
    let flat = dir.join(format!("{name}.rs"));
    let nested = dir.join(name).join("mod.rs");
    if flat.is_file() {
        Some((flat, dir.join(name)))
    } else if nested.is_file() {
        Some((nested, dir.join(name)))
    } else {
        None
    }
}

/// The code with comments removed and the contents of string and character literals blanked,
/// so that neither a path nor a brace inside them counts.
fn strip_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if let Some(end) = raw_string_end(&chars, i) {
            out.push_str("\"\"");
            i = end;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Where a raw string (`r"…"`, `r#"…"#`, `br"…"`) starting at `i` ends, if one does.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if ident_before || chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|c| **c == '#').count();
    j += hashes;
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    let closing: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    while j < chars.len() {
        if chars[j..].starts_with(&closing) {
            return Some(j + closing.len());
        }
        j += 1;
    }
    Some(chars.len())
}

/// The code without the items under `#[cfg(test)]`, and the names of the modules declared
/// there as files (`#[cfg(test)] mod NAME;`).
fn without_test_items(code: &str) -> (String, Vec<String>) {
    const MARK: &str = "#[cfg(test)]";
    let mut kept = String::new();
    let mut test_mods = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        kept.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        let end = item_end(item);
        let words: Vec<&str> = item[..end]
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ';'))
            .filter(|w| !w.is_empty())
            .collect();
        if let [.., "mod", name] = words.as_slice()
            && let Some(name) = name.strip_suffix(';')
        {
            test_mods.push(name.to_string());
        }
        rest = &item[end..];
    }
    kept.push_str(rest);
    (kept, test_mods)
}

/// The length of the item at the start of `code` (after its attributes): to its `;` or to the
/// brace that closes its body.
fn item_end(code: &str) -> usize {
    let bytes = code.as_bytes();
    let mut i = 0;
    let mut brackets = 0i32;
    while i < bytes.len() {
        match bytes[i] {
            b'[' | b'(' => brackets += 1,
            b']' | b')' => brackets -= 1,
            b';' if brackets == 0 => return i + 1,
            b'{' if brackets == 0 => {
                let mut depth = 0;
                while i < bytes.len() {
                    match bytes[i] {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                return i + 1;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// The names of `mod NAME;` declarations (modules in files of their own).
fn declared_modules(code: &str) -> Vec<String> {
    let words: Vec<&str> = code.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[0] == "mod")
        .filter_map(|w| w[1].strip_suffix(';'))
        .map(String::from)
        .collect()
}

/// The top-level modules named by `crate::NAME` and `crate::{NAME, …}` paths.
fn crate_imports(code: &str, names: &mut BTreeSet<String>) {
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut word = String::new();
            let mut at_start = true;
            for c in group.chars() {
                if c.is_alphanumeric() || c == '_' {
                    if depth == 0 && at_start {
                        word.push(c);
                    }
                    continue;
                }
                if !word.is_empty() {
                    names.insert(std::mem::take(&mut word));
                    at_start = false;
                }
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => at_start = true,
                    _ => {}
                }
            }
            if !word.is_empty() {
                names.insert(word);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            names.insert(name);
        }
    }
    names.remove("self");
    names.remove("");
}
