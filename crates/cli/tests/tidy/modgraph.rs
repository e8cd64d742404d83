//! The module graph of one crate's `src/`, read from its source, and the circles in it.
//!
//! Nodes are files: `lib.rs`/`main.rs` is the crate root, `foo.rs` and `foo/mod.rs` are
//! `crate::foo`, `foo/bar.rs` is `crate::foo::bar`; an inline `mod x { ... }` is folded into its
//! file (paths inside it still resolve from `x`). Edges are the paths in code that start with
//! `crate::`, `super::`, `self::` (or `$crate::` in a macro) or with the name of a child
//! module (`queue::answer(..)` in the file that declares `mod queue`), in `use` trees and
//! inline in expressions, types and attributes; comments, string and char literals and
//! `#[cfg(test)] mod` blocks are not code. A path points to the longest prefix of it that is a
//! module file (`crate::types::Thread` → `crate::types`). A `mod` declaration alone is not an
//! edge (it says where the child lives, not that the parent uses it); a path from a parent to
//! its child is.
//!
//! Two kinds of path are the public surface, not a use, and make no edge:
//! - a re-export (`pub use`, `pub(crate) use`): it publishes an item at another address and
//!   runs none of its code — a facade module re-exporting its children while they use the
//!   facade's shared types is not a circle;
//! - a path into the crate root (`crate::Thing`, `super::Thing` from a top-level module):
//!   `lib.rs` is the crate's public surface, re-exporting what the modules define, so
//!   `crate::Thing` is the item's real home reached through it, not the root depending back
//!   on the module.
//!
//! A name brought in by a glob (`use super::*`) is followed only to the glob's module.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// One circle: the files in it (sorted) and one way around it, each step with the line and
/// the path that makes the arrow.
#[derive(Debug)]
pub(crate) struct Circle {
    pub(crate) files: Vec<String>,
    pub(crate) cycle: Vec<String>,
}

/// Every circle among `files` (`(path under src/, text)` pairs), in file order.
pub(crate) fn circles(files: &[(String, String)]) -> Vec<Circle> {
    let mut modules: BTreeMap<Vec<String>, String> = BTreeMap::new();
    for (file, _) in files {
        if let Some(m) = module_of(file) {
            modules.insert(m, file.clone());
        }
    }
    let mut skipped = BTreeSet::new();
    let mut uses = Vec::new();
    for (file, text) in files {
        let Some(here) = module_of(file) else {
            continue;
        };
        let scan = scan(&code_only(text), &here);
        skipped.extend(scan.test_children.iter().map(|c| {
            let mut m = here.clone();
            m.push(c.clone());
            m
        }));
        uses.push((here, scan.paths));
    }
    modules.retain(|m, _| !skipped.contains(m));
    let names: Vec<&Vec<String>> = modules.keys().collect();
    let index: BTreeMap<&Vec<String>, usize> =
        names.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    // edges[a] = (b, line, path as written)
    let mut edges: Vec<Vec<(usize, usize, String)>> = vec![Vec::new(); names.len()];
    for (here, paths) in &uses {
        let Some(&from) = index.get(here) else {
            continue;
        };
        for (line, segs, scope) in paths {
            let target = resolve(segs, scope, &modules);
            let Some(&to) = index.get(&target) else {
                continue;
            };
            if to != from && !target.is_empty() && !edges[from].iter().any(|e| e.0 == to) {
                edges[from].push((to, *line, segs.join("::")));
            }
        }
    }
    let file = |i: usize| modules[names[i]].clone();
    let mut found = Vec::new();
    for scc in strongly_connected(&edges) {
        if scc.len() < 2 {
            continue;
        }
        let start = scc
            .iter()
            .copied()
            .min_by_key(|&i| file(i))
            .unwrap_or(scc[0]);
        let members: BTreeSet<usize> = scc.iter().copied().collect();
        let path = shortest_cycle(start, &edges, &members);
        let mut cycle = Vec::new();
        for w in path.windows(2) {
            let (_, line, written) = edges[w[0]]
                .iter()
                .find(|e| e.0 == w[1])
                .cloned()
                .unwrap_or_default();
            cycle.push(format!("{}:{line} ({written})", file(w[0])));
        }
        cycle.push(file(start));
        let mut files: Vec<String> = scc.iter().map(|&i| file(i)).collect();
        files.sort();
        found.push(Circle { files, cycle });
    }
    found.sort_by(|a, b| a.files.cmp(&b.files));
    found
}

/// The module a file under `src/` is, or `None` for a file that is not Rust.
fn module_of(file: &str) -> Option<Vec<String>> {
    let stem = file.strip_suffix(".rs")?;
    let mut parts: Vec<String> = stem.split('/').map(str::to_owned).collect();
    match parts.last().map(String::as_str) {
        Some("lib" | "main") if parts.len() == 1 => parts.clear(),
        Some("mod") => {
            parts.pop();
        }
        _ => {}
    }
    Some(parts)
}

/// The module `segs` (read in module `scope`) points to: its longest prefix that is a module.
fn resolve(
    segs: &[String],
    scope: &[String],
    modules: &BTreeMap<Vec<String>, String>,
) -> Vec<String> {
    let mut at: Vec<String> = match segs.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        _ => scope.to_vec(),
    };
    for (i, seg) in segs.iter().enumerate() {
        match seg.as_str() {
            "crate" if i == 0 => {}
            "self" => {}
            "super" => {
                at.pop();
            }
            name => {
                at.push(name.to_owned());
                if !modules.contains_key(&at) {
                    at.pop();
                    break;
                }
            }
        }
    }
    // An inline module is folded into its file: walk up to the nearest module file.
    while !at.is_empty() && !modules.contains_key(&at) {
        at.pop();
    }
    at
}

/// Tarjan's algorithm: the strongly connected components of `edges`.
fn strongly_connected(edges: &[Vec<(usize, usize, String)>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a [Vec<(usize, usize, String)>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &(w, _, _) in &s.edges[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                scc.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(scc);
        }
    }
    let n = edges.len();
    let mut s = State {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The shortest way from `start` back to itself inside `members` (breadth first), as the
/// nodes visited, `start` at both ends.
fn shortest_cycle(
    start: usize,
    edges: &[Vec<(usize, usize, String)>],
    members: &BTreeSet<usize>,
) -> Vec<usize> {
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &(w, _, _) in &edges[v] {
            if w == start {
                let mut path = vec![start, v];
                let mut at = v;
                while at != start {
                    at = came_from[&at];
                    path.push(at);
                }
                path.reverse();
                return path;
            }
            if members.contains(&w) && !came_from.contains_key(&w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    vec![start]
}

/// `text` with comments and the insides of string and char literals blanked out (newlines
/// kept, so lines still count).
pub(crate) fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let prev_ident = i > 0 && ident(c[i - 1]);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(&c, i).filter(|_| !prev_ident) {
            // r"..." / r#"..."# (and br, cr): no escapes; ends at `"` and as many `#`.
            let open = c[i..]
                .iter()
                .position(|&ch| ch == '"')
                .map_or(c.len(), |p| i + p);
            out.extend(std::iter::repeat_n(' ', open + 1 - i));
            i = open + 1;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|h| c.get(i + h) == Some(&'#')) {
                    out.extend(std::iter::repeat_n(' ', hashes + 1));
                    i += hashes + 1;
                    break;
                }
                out.push(blank(c[i]));
                i += 1;
            }
        } else if c[i] == '"' {
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' && i + 1 < c.len() {
                    out.push(' ');
                    i += 1;
                }
                out.push(blank(c[i]));
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else if c[i] == '\'' {
            // A char literal is `'x'` or `'\...'` (`b'x'` too); anything else is a lifetime
            // or a label.
            let end = if c.get(i + 1) == Some(&'\\') {
                let from = (i + 3).min(c.len());
                c[from..]
                    .iter()
                    .position(|&ch| ch == '\'')
                    .map(|p| from + p)
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    out.extend(std::iter::repeat_n(' ', end + 1 - i));
                    i = end + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// At `i`, the number of `#`s of a raw string's opening (`r"`, `r#"`, `br##"`, ...), if one
/// opens there.
fn raw_string_start(c: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(c.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = c[j..].iter().take_while(|&&ch| ch == '#').count();
    (c.get(j + hashes) == Some(&'"')).then_some(hashes)
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Sep,
    Punct(char),
}

fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            if !ch.is_ascii_digit() {
                out.push((Tok::Ident(c[start..i].iter().collect()), line));
            }
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::Sep, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

/// What one file's code names: each path (line, segments, the module it is read in), and the
/// children declared `#[cfg(test)] mod x;` (test code, left out of the graph).
struct Scan {
    paths: Vec<(usize, Vec<String>, Vec<String>)>,
    test_children: Vec<String>,
}

fn scan(code: &str, here: &[String]) -> Scan {
    let t = tokens(code);
    let is = |i: usize, tok: &Tok| t.get(i).is_some_and(|(x, _)| x == tok);
    let ident = |i: usize| match t.get(i) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let cfg_test = [
        Tok::Ident("cfg".into()),
        Tok::Punct('('),
        Tok::Ident("test".into()),
        Tok::Punct(')'),
    ];
    let mut out = Scan {
        paths: Vec::new(),
        test_children: Vec::new(),
    };
    // Inline modules open here: (name, brace depth inside them).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    // Whether the item after the attributes just read is test code, and where the attribute
    // being read ends (its paths count too: a derive's arguments name real items).
    let mut test_item = false;
    let mut attribute_end = None;
    // Where the `pub use` being read ends.
    let mut reexport_end = None;
    let mut i = 0;
    while i < t.len() {
        if is(i, &Tok::Punct('#')) && is(i + 1, &Tok::Punct('[')) {
            let close = (i..t.len())
                .find(|&j| is(j, &Tok::Punct(']')))
                .unwrap_or(t.len());
            let body = &t[i + 2..close];
            test_item |= body.len() == cfg_test.len()
                && body.iter().zip(&cfg_test).all(|((a, _), b)| a == b);
            attribute_end = Some(close);
            i += 2;
            continue;
        }
        if attribute_end.is_none_or(|end| i > end) {
            // `mod x {` / `mod x;`, after an optional `pub(...)`.
            let mut j = i;
            if ident(j) == Some("pub") {
                j += 1;
                if is(j, &Tok::Punct('(')) {
                    while j < t.len() && !is(j, &Tok::Punct(')')) {
                        j += 1;
                    }
                    j += 1;
                }
            }
            if ident(j) == Some("mod")
                && let Some(name) = ident(j + 1)
            {
                if is(j + 2, &Tok::Punct('{')) {
                    if test_item {
                        i = matching_brace(&t, j + 2) + 1;
                        test_item = false;
                        continue;
                    }
                    depth += 1;
                    inline.push((name.to_owned(), depth));
                    i = j + 3;
                    continue;
                }
                if test_item {
                    out.test_children.push(name.to_owned());
                }
            }
            test_item = false;
        }
        match &t[i].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(s) if s == "use" && is_public(&t, i) => {
                reexport_end = (i..t.len()).find(|&j| is(j, &Tok::Punct(';')));
            }
            Tok::Ident(_) if is(i + 1, &Tok::Sep) && !(i > 0 && is(i - 1, &Tok::Sep)) => {
                let line = t[i].1;
                let mut found = Vec::new();
                let start = i;
                i = use_tree(&t, i, Vec::new(), &mut found);
                // `pub(in crate::x)` is a visibility, not a use; a re-export is not a use.
                let visibility = start > 0 && ident(start - 1) == Some("in");
                if !visibility && reexport_end.is_none_or(|end| start > end) {
                    let mut scope = here.to_vec();
                    scope.extend(inline.iter().map(|(n, _)| n.clone()));
                    out.paths
                        .extend(found.into_iter().map(|segs| (line, segs, scope.clone())));
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Whether the `use` at `i` has a visibility (`pub`, `pub(crate)`, ...): a re-export.
fn is_public(t: &[(Tok, usize)], i: usize) -> bool {
    let pub_at = |j: usize| matches!(t.get(j), Some((Tok::Ident(p), _)) if p == "pub");
    match i.checked_sub(1).and_then(|j| t.get(j)) {
        Some((Tok::Ident(p), _)) => p == "pub",
        Some((Tok::Punct(')'), _)) => (0..i)
            .rev()
            .find(|&j| t[j].0 == Tok::Punct('('))
            .is_some_and(|j| j > 0 && pub_at(j - 1)),
        _ => false,
    }
}

/// The index of the `}` that closes the `{` at `open`.
fn matching_brace(t: &[(Tok, usize)], open: usize) -> usize {
    let mut depth = 0;
    for (j, (tok, _)) in t.iter().enumerate().skip(open) {
        match tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    t.len()
}

/// Reads the path (or `use` tree) whose first segment is at `i` onto `prefix`, each full path
/// into `out`; returns the index after it.
fn use_tree(
    t: &[(Tok, usize)],
    mut i: usize,
    mut segs: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        let Some((Tok::Ident(s), _)) = t.get(i) else {
            out.push(segs);
            return i;
        };
        segs.push(s.clone());
        i += 1;
        if t.get(i).map(|x| &x.0) != Some(&Tok::Sep) {
            out.push(segs);
            return i;
        }
        i += 1;
        match t.get(i).map(|x| &x.0) {
            Some(Tok::Ident(_)) => {}
            Some(Tok::Punct('{')) => {
                i += 1;
                while let Some((tok, _)) = t.get(i) {
                    match tok {
                        Tok::Punct('}') => return i + 1,
                        Tok::Ident(a) if a == "as" => i += 2,
                        Tok::Ident(_) => i = use_tree(t, i, segs.clone(), out),
                        Tok::Punct('*') => {
                            out.push(segs.clone());
                            i += 1;
                        }
                        _ => i += 1,
                    }
                }
                return i;
            }
            _ => {
                out.push(segs);
                return i;
            }
        }
    }
}
