//! Loading never panics, whatever the bytes: arbitrary input and mutations of the example files,
//! in every definition folder and both syntaxes. Each run must also come back with issues for
//! anything it could not read, never silently drop a file.

use std::path::Path;

use duet_spec::{Project, SourceFile};
use proptest::prelude::*;

const FOLDERS: [&str; 6] = ["agents", "prompts", "tools", "hooks", "handlers", "models"];

fn examples() -> Vec<SourceFile> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    duet_spec::fs::read_project(&root)
        .expect("examples readable")
        .files
}

fn load(path: String, bytes: Vec<u8>) {
    let loaded = Project::from_files([SourceFile { path, bytes }]);
    // Rendering every issue exercises Display on whatever was produced.
    for issue in &loaded.issues {
        let _ = issue.to_string();
    }
}

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize, usize),
    Insert(usize, Vec<u8>),
    Replace(usize, u8),
    Duplicate(usize, usize),
}

fn apply(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let len = bytes.len().max(1);
        match m {
            Mutation::Delete(at, n) => {
                let at = at % len;
                let end = (at + n).min(bytes.len());
                if at < end {
                    bytes.drain(at..end);
                }
            }
            Mutation::Insert(at, ins) => {
                let at = (at % len).min(bytes.len());
                bytes.splice(at..at, ins.iter().copied());
            }
            Mutation::Replace(at, b) => {
                if !bytes.is_empty() {
                    let at = at % bytes.len();
                    bytes[at] = *b;
                }
            }
            Mutation::Duplicate(at, n) => {
                let at = (at % len).min(bytes.len());
                let end = (at + n).min(bytes.len());
                let chunk: Vec<u8> = bytes[at..end].to_vec();
                bytes.splice(at..at, chunk);
            }
        }
    }
    bytes
}

fn mutation() -> impl Strategy<Value = Mutation> {
    // Inserted bytes lean towards the syntax that matters: brackets, quotes, colons, newlines.
    let interesting = prop::sample::select(b"{}[]():,'\"`$\\\n -#&*!|>...=".to_vec());
    let byte = prop_oneof![any::<u8>(), interesting];
    prop_oneof![
        (any::<usize>(), 1..16usize).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), prop::collection::vec(byte.clone(), 1..8))
            .prop_map(|(a, b)| Mutation::Insert(a, b)),
        (any::<usize>(), byte).prop_map(|(a, b)| Mutation::Replace(a, b)),
        (any::<usize>(), 1..64usize).prop_map(|(a, n)| Mutation::Duplicate(a, n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(
        folder in prop::sample::select(FOLDERS.to_vec()),
        ts in any::<bool>(),
        bytes in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let ext = if ts { "ts" } else { "yaml" };
        load(format!("agents/{folder}/fuzz.{ext}"), bytes);
    }

    #[test]
    fn mutated_examples_never_panic(
        index in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let files = examples();
        let file = index.get(&files);
        load(file.path.clone(), apply(file.bytes.clone(), &mutations));
    }
}

#[test]
fn no_file_is_silently_dropped() {
    // Every example file cut in half: each one is either still a definition or has an issue.
    let files: Vec<SourceFile> = examples()
        .into_iter()
        .map(|f| SourceFile {
            bytes: f.bytes[..f.bytes.len() / 2].to_vec(),
            path: f.path,
        })
        .collect();
    let paths: Vec<String> = files.iter().map(|f| f.path.clone()).collect();
    let loaded = Project::from_files(files);
    let p = &loaded.project;
    let mut defined: Vec<&str> = p.agents.values().map(|d| d.source.file.as_str()).collect();
    defined.extend(p.prompts.values().map(|d| d.source.file.as_str()));
    defined.extend(p.tools.values().map(|d| d.source.file.as_str()));
    defined.extend(p.hooks.values().map(|d| d.source.file.as_str()));
    defined.extend(p.handlers.values().map(|d| d.source.file.as_str()));
    defined.extend(p.models.values().map(|d| d.source.file.as_str()));
    let total = paths.len();
    let mut reported_files = 0;
    for path in paths {
        let reported = loaded
            .issues
            .iter()
            .any(|i| i.file.as_deref() == Some(path.as_str()));
        let kept = defined.contains(&path.as_str());
        assert!(
            reported || kept,
            "{path} cut in half vanished without an issue"
        );
        reported_files += usize::from(reported);
    }
    // Most halved files are broken, and each broken one says so in an issue of its own.
    assert!(
        reported_files * 2 > total,
        "only {reported_files} of {total} halved files reported an issue"
    );
}
