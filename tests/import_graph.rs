//! No crate of the workspace has import cycles between its files.
//!
//! Between crates the compiler keeps the layers (a crate can only use the
//! crates it depends on, and Cargo refuses a cycle of crates); inside one
//! crate it allows any file to use any other. So each crate's `src/` is
//! checked here: the check reads every file under it, finds the paths it names —
//! `use crate::…`, `use super::…`, `use self::…`, paths written inline
//! (`super::server::ACCEPT_RETRY_DELAY`, `crate::time::now_ms()`), and
//! paths through a child module a file declares (`mod read;` then
//! `read::LogRead`) — and draws an edge from the file to the file that
//! defines what the path names. It fails listing every cycle with the
//! names that tie each edge.
//!
//! How modules count, as in Rust: `a/mod.rs` (or `a.rs` beside a folder
//! `a/`) is module `a`, and `a/b.rs` its child `a::b`.
//!
//! - A module's own files are its parts: a child naming what an ancestor
//!   module defines (`impl super::TaskState`, `super::HANDOVER_MAX`) draws
//!   no edge, since Rust gives a child its ancestors' private items and a
//!   folder's `mod.rs` is the core its parts are written around. Every
//!   other edge counts: a part using a sibling, a module using another
//!   folder, a parent using its parts. So two siblings tied to each other,
//!   directly or through other folders, are a cycle, as are two folders
//!   that import each other.
//!
//! - A `pub use` in a file that declares child modules (`mod.rs`, `lib.rs`,
//!   `partition_log.rs`) is the module's face, not a dependency: it draws no
//!   edge, and a path through it is followed to the file that defines the
//!   item. Otherwise every child importing `super::Error` would tie itself
//!   to every sibling the parent re-exports, and every folder would be one
//!   cycle; a check that always fails says nothing. What a parent uses
//!   itself (a private `use`, a path in its own code) is an edge like any
//!   other.
//! - `use super::*` names no item: it is read as naming the parent's file.
//! - Code under `#[cfg(test)]` (test modules, inline or `mod tests;`) is not
//!   read: tests may reach anything.
//! - `src/main.rs` is a crate of its own; its `strata::…` paths are read as
//!   the library's `crate::…`.
//!
//! Names a path cannot be matched to a definition (a macro's output, a
//! re-export through a glob that cannot be followed) count as the module's
//! own file, which can only add edges, never hide one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// One source file, read.
#[derive(Default)]
struct File {
    /// Paths the file depends on, each with the module it was written in.
    uses: Vec<(Module, Vec<String>)>,
    /// `pub use` items: exported name → (module written in, source path).
    reexports: BTreeMap<String, (Module, Vec<String>)>,
    /// `pub use path::*` sources, with the module they were written in.
    glob_reexports: Vec<(Module, Vec<String>)>,
    /// Names the file defines (fn, struct, enum, trait, type, const, static).
    defines: BTreeSet<String>,
}

/// The parsed tree: every module (a file or an inline `mod x { … }`) and
/// the file it lives in.
struct Tree {
    modules: BTreeMap<Module, String>,
    /// Module of each file, keyed by file name.
    files: BTreeMap<String, (Module, File)>,
}

/// Module path of a file relative to `src/`: `log/partition_log/read.rs` is
/// `log::partition_log::read`, `broker/mod.rs` is `broker`, `lib.rs` the root.
fn module_of(relative: &str) -> Module {
    let trimmed = relative.trim_end_matches(".rs");
    let mut segments: Module = trimmed.split('/').map(str::to_string).collect();
    if matches!(
        segments.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        segments.pop();
    }
    segments
}

/// The source with comments, string and char literals blanked out, so that
/// doc links and messages draw no edges.
fn strip(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &source[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            let mut depth = 0;
            let mut j = i;
            while j < bytes.len() {
                if source[j..].starts_with("/*") {
                    depth += 1;
                    j += 2;
                } else if source[j..].starts_with("*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            i = j;
            out.push(' ');
        } else if let Some(hashes) = raw_string_hashes(rest) {
            let open = 2 + hashes.len();
            let close = format!("\"{hashes}");
            let end = rest[open..]
                .find(&close)
                .map_or(rest.len(), |e| open + e + close.len());
            i += end;
            out.push_str("\"\"");
        } else if bytes[i] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            i = j + 1;
            out.push_str("\"\"");
        } else if bytes[i] == b'\'' {
            // A char literal ('a', '\n', '\u{1F600}') or a lifetime ('a).
            let literal_end = if rest[1..].starts_with('\\') {
                rest[2..].find('\'').map(|e| e + 3)
            } else {
                rest[1..].chars().next().and_then(|c| {
                    let after = 1 + c.len_utf8();
                    rest[after..].starts_with('\'').then_some(after + 1)
                })
            };
            match literal_end {
                Some(end) => {
                    i += end;
                    out.push_str("' '");
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `Some(hashes)` when `text` opens a raw string (`r"`, `r#"`, `br##"`).
fn raw_string_hashes(text: &str) -> Option<String> {
    let text = text.strip_prefix('b').unwrap_or(text);
    let after_r = text.strip_prefix('r')?;
    let hashes: String = after_r.chars().take_while(|&c| c == '#').collect();
    after_r[hashes.len()..].starts_with('"').then_some(hashes)
}

fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            let mut end = start + c.len_utf8();
            while let Some(&(at, next)) = chars.peek() {
                if next.is_alphanumeric() || next == '_' {
                    end = at + next.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(code[start..end].to_string());
        } else if c == ':' && chars.peek().is_some_and(|&(_, n)| n == ':') {
            chars.next();
            out.push("::".into());
        } else {
            out.push(c.to_string());
        }
    }
    out
}

/// Index just past the item that starts at `at`: through its `;`, or its
/// brace block, whichever closes it.
fn skip_item(tokens: &[String], mut at: usize) -> usize {
    // Attributes in front of the item.
    while tokens.get(at).is_some_and(|t| t == "#") {
        at = skip_group(tokens, at + 1);
    }
    while at < tokens.len() {
        match tokens[at].as_str() {
            ";" => return at + 1,
            "{" => return skip_group(tokens, at),
            "(" | "[" => at = skip_group(tokens, at),
            _ => at += 1,
        }
    }
    at
}

/// Index just past the bracketed group opening at `at`.
fn skip_group(tokens: &[String], at: usize) -> usize {
    let mut depth = 0usize;
    let mut i = at;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "{" | "(" | "[" => depth += 1,
            "}" | ")" | "]" => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Whether the attribute group at `at` (the `[` after `#`) is `cfg(test)`.
fn is_cfg_test(tokens: &[String], at: usize) -> bool {
    let end = skip_group(tokens, at);
    let inner: Vec<&str> = tokens[at..end].iter().map(String::as_str).collect();
    inner == ["[", "cfg", "(", "test", ")", "]"]
}

/// Expands the use tree starting at `at` into whole paths; returns them and
/// the index after the tree.
fn use_tree(tokens: &[String], mut at: usize, prefix: &[String]) -> (Vec<Vec<String>>, usize) {
    let mut path = prefix.to_vec();
    let mut out = Vec::new();
    loop {
        match tokens.get(at).map(String::as_str) {
            Some("{") => {
                at += 1;
                while tokens.get(at).is_some_and(|t| t != "}") {
                    let (inner, next) = use_tree(tokens, at, &path);
                    out.extend(inner);
                    at = next;
                    if tokens.get(at).is_some_and(|t| t == ",") {
                        at += 1;
                    }
                }
                return (out, at + 1);
            }
            Some("*") => {
                path.push("*".into());
                out.push(path);
                return (out, at + 1);
            }
            Some("::") => at += 1,
            Some("as") => at += 2,
            Some("," | "}" | ";") | None => {
                out.push(path);
                return (out, at);
            }
            Some("self") if !path.is_empty() => at += 1,
            Some(segment) => {
                path.push(segment.to_string());
                at += 1;
            }
        }
    }
}

const DEFINING_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "trait", "type", "const", "static", "union",
];

/// Reads one file: its uses, re-exports, definitions and inline modules.
fn read_file(source: &str, module: &Module, is_main: bool) -> (File, Vec<Module>, Vec<String>) {
    let tokens = tokens(&strip(source));
    let mut file = File::default();
    let mut inline_modules = Vec::new();
    let mut test_children = Vec::new();
    let mut children: BTreeSet<String> = BTreeSet::new();
    for window in tokens.windows(3) {
        if window[0] == "mod" && window[2] == ";" {
            children.insert(window[1].clone());
        }
    }
    let has_children = !children.is_empty();
    // (module, brace depth at which it closes)
    let mut scopes: Vec<(Module, usize)> = vec![(module.clone(), 0)];
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let current = scopes.last().unwrap().0.clone();
        let token = tokens[i].as_str();
        match token {
            "#" if tokens.get(i + 1).is_some_and(|t| t == "[") && is_cfg_test(&tokens, i + 1) => {
                let item = skip_group(&tokens, i + 1);
                let mut j = item;
                while tokens.get(j).is_some_and(|t| t == "#") {
                    j = skip_group(&tokens, j + 1);
                }
                if tokens.get(j).is_some_and(|t| t == "mod")
                    && tokens.get(j + 2).is_some_and(|t| t == ";")
                {
                    let mut child = current.clone();
                    child.push(tokens[j + 1].clone());
                    test_children.push(child.join("::"));
                }
                i = skip_item(&tokens, j);
                continue;
            }
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if scopes.len() > 1 && scopes.last().unwrap().1 == depth {
                    scopes.pop();
                }
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t == "{") => {
                let mut inner = current.clone();
                inner.push(tokens[i + 1].clone());
                inline_modules.push(inner.clone());
                scopes.push((inner, depth));
                depth += 1;
                i += 3;
                continue;
            }
            // Not `impl Trait + use<'a>`, precise capturing.
            "use" if tokens.get(i + 1).is_none_or(|t| t != "<") => {
                let public = i > 0 && (tokens[i - 1] == "pub" || tokens[i - 1] == ")");
                let (paths, next) = use_tree(&tokens, i + 1, &[]);
                for path in paths {
                    let reexport = public && has_children;
                    if reexport {
                        if path.last().is_some_and(|s| s == "*") {
                            file.glob_reexports
                                .push((current.clone(), path[..path.len() - 1].to_vec()));
                        } else if let Some(name) = path.last() {
                            file.reexports
                                .insert(name.clone(), (current.clone(), path.clone()));
                        }
                    } else {
                        file.uses.push((current.clone(), path));
                    }
                }
                i = next.max(i + 1);
                continue;
            }
            _ if DEFINING_KEYWORDS.contains(&token) => {
                if let Some(name) = tokens.get(i + 1) {
                    file.defines.insert(name.clone());
                }
            }
            _ => {}
        }
        // An inline path: crate::…, super::…, self::…, strata::… in main,
        // or child::… through a declared child module.
        let starts_path = tokens.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || tokens[i - 1] != "::")
            && (matches!(token, "crate" | "super" | "self")
                || (is_main && token == "strata")
                || children.contains(token));
        if starts_path {
            let mut path = vec![token.to_string()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|t| t == "::")
                && tokens
                    .get(j + 1)
                    .is_some_and(|t| t.chars().all(|c| c.is_alphanumeric() || c == '_'))
            {
                path.push(tokens[j + 1].clone());
                j += 2;
            }
            file.uses.push((current.clone(), path));
            i = j;
            continue;
        }
        i += 1;
    }
    (file, inline_modules, test_children)
}

impl Tree {
    /// Reads `files` (path relative to `src/` → source).
    fn new(sources: &BTreeMap<String, String>) -> Self {
        let mut modules = BTreeMap::new();
        let mut files = BTreeMap::new();
        let mut test_only = BTreeSet::new();
        for (name, source) in sources {
            let module = module_of(name);
            let is_main = name == "main.rs";
            let (file, inline, tests) = read_file(source, &module, is_main);
            if !is_main {
                modules.insert(module.clone(), name.clone());
                for inner in inline {
                    modules.insert(inner, name.clone());
                }
            }
            test_only.extend(tests);
            files.insert(name.clone(), (module, file));
        }
        files.retain(|name, (module, _)| {
            name == "main.rs" || !test_only.contains(&module.join("::"))
        });
        modules.retain(|module, _| !test_only.contains(&module.join("::")));
        Self { modules, files }
    }

    /// The file that defines what `path`, written in module `from`, names.
    fn resolve(&self, from: &Module, path: &[String], hops: usize) -> Option<String> {
        if hops > 16 {
            return None;
        }
        let mut base: Module = from.clone();
        let mut rest = path;
        match rest.first().map(String::as_str) {
            Some("crate" | "strata") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            Some(_) => {}
            None => return None,
        }
        for segment in rest {
            let mut deeper = base.clone();
            deeper.push(segment.clone());
            if self.modules.contains_key(&deeper) {
                base = deeper;
                continue;
            }
            if segment == "*" {
                break;
            }
            return self.resolve_item(&base, segment, hops);
        }
        self.modules.get(&base).cloned()
    }

    /// The file that defines `item` of `module`, following re-exports.
    fn resolve_item(&self, module: &Module, item: &str, hops: usize) -> Option<String> {
        let file_name = self.modules.get(module)?;
        let (_, file) = &self.files[file_name];
        if let Some((written_in, source)) = file.reexports.get(item) {
            return self.resolve(written_in, source, hops + 1);
        }
        if !file.defines.contains(item) {
            for (written_in, source) in &file.glob_reexports {
                let mut candidate = source.clone();
                candidate.push(item.to_string());
                if let Some(found) = self.resolve(written_in, &candidate, hops + 1)
                    && self
                        .files
                        .get(&found)
                        .is_some_and(|(_, f)| f.defines.contains(item))
                {
                    return Some(found);
                }
            }
        }
        Some(file_name.clone())
    }

    /// Edges file → file, each with the paths that draw it.
    fn edges(&self) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
        let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for (name, (module, file)) in &self.files {
            for (written_in, path) in &file.uses {
                let Some(target) = self.resolve(written_in, path, 0) else {
                    continue;
                };
                let is_ancestor = self.files.get(&target).is_some_and(|(target_module, _)| {
                    target_module.len() < module.len() && module.starts_with(target_module)
                });
                if &target != name && !is_ancestor {
                    edges
                        .entry(name.clone())
                        .or_default()
                        .entry(target)
                        .or_default()
                        .insert(path.join("::"));
                }
            }
        }
        edges
    }
}

/// Strongly connected components of more than one file (Tarjan's).
fn cycles(edges: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        let n = state.index.len();
        state.index.insert(node, n);
        state.low.insert(node, n);
        state.stack.push(node);
        state.on_stack.insert(node);
        if let Some(targets) = state.edges.get(node) {
            for target in targets.keys() {
                let target = target.as_str();
                if !state.index.contains_key(target) {
                    visit(state, target);
                    let low = state.low[target].min(state.low[node]);
                    state.low.insert(node, low);
                } else if state.on_stack.contains(target) {
                    let low = state.index[target].min(state.low[node]);
                    state.low.insert(node, low);
                }
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.push(top.to_string());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found.sort();
    state.found
}

/// Each cycle with the edges inside it and the paths that draw them, the
/// files named under `src` (a crate's source folder).
fn describe(tree: &Tree, src: &str) -> Vec<String> {
    let edges = tree.edges();
    cycles(&edges)
        .into_iter()
        .map(|component| {
            let mut text = format!("cycle of {} files:", component.len());
            for from in &component {
                for (to, paths) in &edges[from] {
                    if component.contains(to) {
                        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
                        text.push_str(&format!(
                            "\n  {src}/{from} -> {src}/{to}: {}",
                            paths.join(", ")
                        ));
                    }
                }
            }
            text
        })
        .collect()
}

fn read_sources(root: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                let source = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
                out.insert(relative, source);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Every crate's source folder: the `strata` crate's, the layers' under
/// `crates/`, and the operators'.
fn crate_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = vec![root.join("src"), root.join("operators/src")];
    let crates = std::fs::read_dir(root.join("crates")).expect("reading crates/");
    sources.extend(crates.map(|entry| entry.unwrap().path().join("src")));
    sources.sort();
    sources
}

#[test]
fn no_crate_has_import_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut files = 0;
    for src in crate_sources() {
        let tree = Tree::new(&read_sources(&src));
        files += tree.files.len();
        let label = src
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        found.extend(describe(&tree, &label));
    }
    assert!(files > 300, "read only {files} files");
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

fn tree_of(files: &[(&str, &str)]) -> Tree {
    Tree::new(
        &files
            .iter()
            .map(|(n, s)| (n.to_string(), s.to_string()))
            .collect(),
    )
}

#[test]
fn two_files_importing_each_other_are_a_cycle() {
    let tree = tree_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;"),
        ("b.rs", "pub struct B;\nfn f() { let _ = crate::a::A; }"),
    ]);
    assert_eq!(
        describe(&tree, "src"),
        [
            "cycle of 2 files:\n  src/a.rs -> src/b.rs: crate::b::B\n  src/b.rs -> src/a.rs: crate::a::A"
        ]
    );
}

#[test]
fn a_parent_re_export_is_followed_to_the_file_that_defines_the_item() {
    let tree = tree_of(&[
        ("lib.rs", "pub mod x;\n"),
        (
            "x/mod.rs",
            "mod error;\nmod reader;\npub use error::Error;\npub use reader::Reader;\n",
        ),
        ("x/error.rs", "pub enum Error {}"),
        ("x/reader.rs", "use super::Error;\npub struct Reader;"),
    ]);
    assert!(describe(&tree, "src").is_empty());
    let edges = tree.edges();
    assert_eq!(
        edges["x/reader.rs"].keys().collect::<Vec<_>>(),
        ["x/error.rs"]
    );
}

#[test]
fn a_child_using_its_parent_is_part_of_the_parent() {
    let tree = tree_of(&[
        ("lib.rs", "pub mod x;\n"),
        (
            "x/mod.rs",
            "mod child;\npub struct Config;\npub fn run() { child::go() }\n",
        ),
        ("x/child.rs", "use super::Config;\npub fn go() {}"),
    ]);
    assert!(describe(&tree, "src").is_empty());
    assert_eq!(
        tree.edges()["x/mod.rs"].keys().collect::<Vec<_>>(),
        ["x/child.rs"]
    );
    assert!(!tree.edges().contains_key("x/child.rs"));
}

#[test]
fn siblings_importing_each_other_are_a_cycle_beside_their_parent() {
    let tree = tree_of(&[
        ("lib.rs", "pub mod x;\n"),
        ("x/mod.rs", "mod a;\nmod b;\npub struct Config;\n"),
        (
            "x/a.rs",
            "use super::Config;\nuse super::b::B;\npub struct A;",
        ),
        ("x/b.rs", "use super::a::A;\npub struct B;"),
    ]);
    assert_eq!(
        describe(&tree, "src"),
        [
            "cycle of 2 files:\n  src/x/a.rs -> src/x/b.rs: super::b::B\n  src/x/b.rs -> src/x/a.rs: super::a::A"
        ]
    );
}

#[test]
fn a_folder_importing_a_folder_that_imports_it_is_a_cycle() {
    let tree = tree_of(&[
        ("lib.rs", "pub mod x;\npub mod y;\n"),
        ("x/mod.rs", "mod a;\n"),
        ("x/a.rs", "use crate::y::Y;\npub struct A;"),
        ("y/mod.rs", "use crate::x::a::A;\npub struct Y;"),
    ]);
    assert_eq!(describe(&tree, "src").len(), 1);
}

#[test]
fn comments_strings_and_test_modules_draw_no_edges() {
    let tree = tree_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;"),
        (
            "b.rs",
            "//! See [`crate::a::A`].\npub struct B;\nconst S: &str = \"crate::a::A\";\n\
             #[cfg(test)]\nmod tests { use crate::a::A; }\n",
        ),
    ]);
    assert!(describe(&tree, "src").is_empty());
}

#[test]
fn precise_capturing_is_read_as_no_use_and_the_paths_after_it_still_count() {
    let tree = tree_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "pub struct A;\npub fn starts() -> impl Iterator<Item = i64> + use<> { 0..1 }\n\
             fn f() { let _ = crate::b::B; }",
        ),
        ("b.rs", "use crate::a::A;\npub struct B;"),
    ]);
    assert_eq!(describe(&tree, "src").len(), 1);
}

/// The workspace crates a `Cargo.toml` depends on (its `[dependencies]`,
/// not dev-dependencies), without the `strata-` prefix.
fn strata_dependencies(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest)
        .unwrap_or_else(|e| panic!("reading {}: {e}", manifest.display()));
    let mut section = "";
    let mut found = BTreeSet::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[dependencies]"
            && let Some(name) = line.strip_prefix("strata-")
        {
            let name = name.split([' ', '=']).next().unwrap_or_default();
            found.insert(name.to_string());
        }
    }
    found
}

/// README's table of crates: each crate's name (without `strata-`) and the
/// crates its "depends on" column names.
fn readme_crate_table(readme: &str) -> BTreeMap<String, BTreeSet<String>> {
    let section = readme
        .split("## Crates\n")
        .nth(1)
        .expect("README has a ## Crates section");
    let mut table = BTreeMap::new();
    for row in section.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let [_, name, depends, _, _] = cells[..] else {
            continue;
        };
        let Some(name) = name.strip_prefix('`').and_then(|n| n.strip_suffix('`')) else {
            continue;
        };
        let name = name.strip_prefix("strata-").unwrap_or(name).to_string();
        let depends = (depends.split(','))
            .filter_map(|d| d.split_whitespace().next())
            .map(str::to_string)
            .collect();
        table.insert(name, depends);
    }
    table
}

#[test]
fn the_readme_crate_table_is_what_the_manifests_say() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let table = readme_crate_table(&readme);
    let mut manifests = BTreeMap::new();
    manifests.insert(
        "strata".to_string(),
        strata_dependencies(&root.join("Cargo.toml")),
    );
    manifests.insert(
        "operators".to_string(),
        strata_dependencies(&root.join("operators/Cargo.toml")),
    );
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        manifests.insert(name, strata_dependencies(&dir.join("Cargo.toml")));
    }
    assert_eq!(
        table, manifests,
        "README's ## Crates table (left) against the Cargo.toml files (right)"
    );
}

/// ARCHITECTURE.md's codemap, one section per top-level entry: the entry's
/// first word (`crates/log/src/`, `examples/`) → the section's text.
fn codemap_sections(architecture: &str) -> BTreeMap<String, String> {
    let codemap = architecture
        .split("## Codemap\n")
        .nth(1)
        .expect("ARCHITECTURE.md has a ## Codemap section");
    let codemap = codemap.split("\n## ").next().unwrap_or_default();
    let mut sections: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in codemap.lines() {
        let heading = line
            .split_whitespace()
            .next()
            .filter(|_| !line.starts_with(' '));
        if let Some(word) = heading.filter(|w| w.ends_with('/') || w.ends_with(".rs")) {
            current = Some(word.to_string());
        }
        if let Some(section) = &current {
            let text = sections.entry(section.clone()).or_default();
            text.push_str(line);
            text.push('\n');
        }
    }
    sections
}

/// Whether `name` appears in `text` as a whole word (not inside a longer
/// name: `read.rs` is not named by `thread.rs`).
fn names(text: &str, name: &str) -> bool {
    let part = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(part) && !after.is_some_and(part)
    })
}

#[test]
fn the_codemap_names_every_source_file_of_every_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let sections = codemap_sections(&architecture);
    let mut missing = Vec::new();
    for src in crate_sources() {
        let label = format!("{}/", src.strip_prefix(root).unwrap().display());
        let Some(section) = sections.get(&label) else {
            missing.push(format!("{label} (no section)"));
            continue;
        };
        for relative in read_sources(&src).into_keys() {
            let path = Path::new(&relative);
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            let name = match file.as_str() {
                "lib.rs" | "main.rs" if path.parent() == Some(Path::new("")) => continue,
                "mod.rs" => format!("{}/", path.parent().unwrap().file_name().unwrap().display()),
                _ => file,
            };
            if !names(section, &name) {
                missing.push(format!("{label}{relative}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's codemap does not name:\n  {}",
        missing.join("\n  ")
    );
}
