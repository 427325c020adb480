//! The file system's modules form a graph without a cycle: every `crate::` path in
//! `src/**/*.rs` (a `use` line or a path inside code) is an edge from the top-level module
//! of the file that names it to the top-level module it names. A module's own files
//! (`image.rs` and `image/*.rs`) are one node, so `super::` paths stay inside it; the
//! crate root (`lib.rs`) only declares modules and re-exports, so it is no node.
//!
//! A failure prints the cycle, for example `error -> fsck -> error`. The intended order
//! (leaves first) is in ARCHITECTURE.md and docs/design/24-fs-core.md; nothing may
//! import `fsck`, which checks everything.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `directory`, sorted.
fn rust_files(directory: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![directory.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in fs::read_dir(&folder).expect("source folder readable") {
            let path = entry.expect("directory entry readable").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The top-level module a file belongs to (`image/replay.rs` -> `image`); `None` for
/// the crate root.
fn node_of(source: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(source).expect("file under src");
    let first = relative
        .components()
        .next()
        .expect("non-empty path")
        .as_os_str()
        .to_str()
        .expect("UTF-8 file name");
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib").then(|| name.to_string())
}

/// The text with `//` comments (line and doc comments) removed; a `//` inside a
/// string literal is rare enough in this crate that a line cut short there loses
/// nothing the graph needs.
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(start) => &line[..start],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_identifier_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The identifier starting at `start` (possibly empty).
fn identifier_at(text: &[u8], start: usize) -> String {
    let end = (start..text.len())
        .find(|&index| !is_identifier_byte(text[index]))
        .unwrap_or(text.len());
    String::from_utf8_lossy(&text[start..end]).into_owned()
}

/// The first path segment of each item of the `{...}` group opening at `open`.
fn group_heads(text: &[u8], open: usize) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut expecting_head = true;
    let mut index = open;
    while index < text.len() {
        let byte = text[index];
        match byte {
            b'{' => {
                depth += 1;
                if depth == 1 {
                    expecting_head = true;
                }
            }
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            b',' if depth == 1 => expecting_head = true,
            _ if depth == 1 && expecting_head && is_identifier_byte(byte) => {
                let head = identifier_at(text, index);
                index += head.len();
                heads.push(head);
                expecting_head = false;
                continue;
            }
            _ => {}
        }
        index += 1;
    }
    heads
}

/// The top-level names every `crate::` path in `text` starts with.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let bytes = text.as_bytes();
    let mut names = BTreeSet::new();
    let pattern = "crate::";
    let mut search_from = 0;
    while let Some(found) = text[search_from..].find(pattern) {
        let at = search_from + found;
        search_from = at + pattern.len();
        let preceded_by_identifier =
            at > 0 && (is_identifier_byte(bytes[at - 1]) || bytes[at - 1] == b'$');
        if preceded_by_identifier {
            continue;
        }
        let after = at + pattern.len();
        if bytes.get(after) == Some(&b'{') {
            names.extend(group_heads(bytes, after));
        } else {
            let name = identifier_at(bytes, after);
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

/// Module -> the other modules it names.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = rust_files(&source);
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|file| node_of(&source, file))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules
        .iter()
        .map(|module| (module.clone(), BTreeSet::new()))
        .collect();
    for file in &files {
        let Some(node) = node_of(&source, file) else {
            continue;
        };
        let text = fs::read_to_string(file).expect("source file readable");
        for name in crate_paths(&without_comments(&text)) {
            if name != node && modules.contains(&name) {
                graph.get_mut(&node).expect("node listed").insert(name);
            }
        }
    }
    graph
}

/// A cycle of `graph` as the list of its modules (first repeated at the end), if any.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Unvisited,
        OnPath,
        Done,
    }
    let mut marks: BTreeMap<&str, Mark> = graph
        .keys()
        .map(|module| (module.as_str(), Mark::Unvisited))
        .collect();
    for start in graph.keys() {
        if marks[start.as_str()] != Mark::Unvisited {
            continue;
        }
        let mut path: Vec<&str> = vec![start.as_str()];
        let mut iterators = vec![graph[start].iter()];
        marks.insert(start.as_str(), Mark::OnPath);
        while let Some(edges) = iterators.last_mut() {
            match edges.next() {
                Some(next) => match marks[next.as_str()] {
                    Mark::OnPath => {
                        let from = path
                            .iter()
                            .position(|module| *module == next.as_str())
                            .expect("a module on the path");
                        let mut cycle: Vec<String> = path[from..]
                            .iter()
                            .map(|module| module.to_string())
                            .collect();
                        cycle.push(next.clone());
                        return Some(cycle);
                    }
                    Mark::Unvisited => {
                        marks.insert(next.as_str(), Mark::OnPath);
                        path.push(next.as_str());
                        iterators.push(graph[next].iter());
                    }
                    Mark::Done => {}
                },
                None => {
                    let finished = path.pop().expect("path follows the iterators");
                    marks.insert(finished, Mark::Done);
                    iterators.pop();
                }
            }
        }
    }
    None
}

fn describe(graph: &BTreeMap<String, BTreeSet<String>>) -> String {
    graph
        .iter()
        .map(|(module, names)| {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            format!("  {module} -> {}", names.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_module_graph_has_no_cycle() {
    let graph = module_graph();
    assert!(
        graph.len() >= 10,
        "too few modules found under src:\n{}",
        describe(&graph)
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "module cycle: {}\nthe whole graph:\n{}",
            cycle.join(" -> "),
            describe(&graph)
        );
    }
}

#[test]
fn nothing_imports_fsck() {
    let graph = module_graph();
    let importers: Vec<&str> = graph
        .iter()
        .filter(|(_, names)| names.contains("fsck"))
        .map(|(module, _)| module.as_str())
        .collect();
    assert!(
        importers.is_empty(),
        "fsck checks everything, so nothing may import it; these do: {}",
        importers.join(", ")
    );
}

#[test]
fn the_findings_and_the_state_are_below_the_loader() {
    let graph = module_graph();
    for (module, forbidden) in [
        ("findings", "image"),
        ("state", "image"),
        ("error", "image"),
    ] {
        assert!(
            !graph[module].contains(forbidden),
            "{module} must not import {forbidden}:\n{}",
            describe(&graph)
        );
    }
}

#[test]
fn the_parser_finds_edges_and_cycles() {
    let names = crate_paths(
        "use crate::io::{a, b};\nuse crate::{layout::X, state::{Y, Z}};\nlet x = crate::copy::f();\nmacro $crate::m",
    );
    let expected: BTreeSet<String> = ["copy", "io", "layout", "state"]
        .iter()
        .map(|name| name.to_string())
        .collect();
    assert_eq!(names, expected);
    assert_eq!(without_comments("use a; // crate::x"), "use a; ");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    graph.insert("a".into(), ["b".to_string()].into());
    graph.insert("b".into(), ["c".to_string()].into());
    graph.insert("c".into(), ["a".to_string()].into());
    assert_eq!(
        find_cycle(&graph).map(|cycle| cycle.join(" -> ")),
        Some("a -> b -> c -> a".to_string())
    );
    graph.get_mut("c").expect("c listed").clear();
    assert_eq!(find_cycle(&graph), None);
}
