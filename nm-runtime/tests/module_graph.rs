//! The crate's modules depend on each other one way: no import cycle among `src/*.rs` (the
//! structure issue broke a six-module and a three-module cycle; this keeps them broken). The
//! graph is read from the `crate::` paths on code lines, comments stripped, as a reviewer
//! would read the `use` lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module name → the crate modules its code names through `crate::…`.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if path.extension().is_some_and(|e| e == "rs") && name != "lib" {
            files.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
    let names: BTreeSet<String> = files.keys().cloned().collect();
    let mut graph = BTreeMap::new();
    for (module, text) in &files {
        let mut uses = BTreeSet::new();
        // comments stripped line by line; a `use crate::{…}` group may span lines
        let code: Vec<&str> = text
            .lines()
            .map(|l| l.split("//").next().unwrap())
            .collect();
        let code = code.join("\n");
        {
            let mut rest = code.as_str();
            while let Some(at) = rest.find("crate::") {
                rest = &rest[at + "crate::".len()..];
                // `crate::a::…` names one module; `crate::{a, b::…}` several
                let (names_here, single) = match rest.strip_prefix('{') {
                    Some(inner) => (&inner[..inner.find('}').unwrap_or(inner.len())], false),
                    None => (rest, true),
                };
                let words = names_here
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty());
                for word in words.take(if single { 1 } else { usize::MAX }) {
                    if names.contains(word) && word != module {
                        uses.insert(word.to_string());
                    }
                }
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

/// A cycle through `from`, if any: depth-first search back to `from`.
fn cycle_through(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        target: &str,
        at: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in &graph[at] {
            if next == target {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, target, next, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![from.to_string()];
    let mut seen = BTreeSet::new();
    walk(graph, from, from, &mut path, &mut seen).then_some(path)
}

#[test]
fn no_module_imports_itself_through_another() {
    let graph = graph();
    assert!(graph.len() > 10, "read the crate's modules: {graph:?}");
    for module in graph.keys() {
        if let Some(cycle) = cycle_through(&graph, module) {
            panic!("import cycle: {} -> {module}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_leaf_modules_use_no_other_module() {
    let graph = graph();
    for leaf in ["sys", "setup", "cgroups", "metrics"] {
        assert!(graph[leaf].is_empty(), "{leaf} uses {:?}", graph[leaf]);
    }
    // the graph is read, not empty: the runtime uses most modules
    assert!(
        graph["runtime"].len() >= 5,
        "runtime uses {:?}",
        graph["runtime"]
    );
}
