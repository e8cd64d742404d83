//! Reading a project folder: entries that are not regular files are reported and skipped without
//! being opened, a file's size is checked from its metadata before it is read, and the rest of
//! the project is still loaded.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use duet_spec::{Code, Loaded, MAX_FILE_BYTES, SkipReason};

fn scratch(tag: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "spec-fs-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    for kind in ["agents", "prompts", "tools", "models"] {
        std::fs::create_dir_all(dir.join("agents").join(kind)).expect("scratch folders");
    }
    let write = |path: &str, text: &str| std::fs::write(dir.join(path), text).expect("write");
    write(
        "agents/agents/chat.yaml",
        "name: chat\nsideA: { prompt: chat }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/chat.yaml",
        "name: chat\ntoolDescription: d\nmodel: m\nprompt: p\ntools: [linked]\n",
    );
    write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: hi\n",
    );
    dir
}

/// Loads `dir` on another thread, so a load that hangs fails the test instead of hanging it.
fn load_within(dir: &Path, limit: Duration) -> Loaded {
    let (tx, rx) = mpsc::channel();
    let dir = dir.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(duet_spec::load(&dir).map_err(|e| e.to_string()));
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(loaded)) => loaded,
        Ok(Err(e)) => panic!("the project did not load: {e}"),
        Err(_) => panic!("loading did not finish within {limit:?}"),
    }
}

fn codes(loaded: &Loaded) -> Vec<(String, Code)> {
    loaded
        .issues
        .iter()
        .map(|i| (i.file.clone().unwrap_or_default(), i.code))
        .collect()
}

#[cfg(unix)]
#[test]
fn entries_that_are_not_files_are_skipped_unopened_and_the_rest_loads() {
    use std::os::unix::fs::symlink;
    let dir = scratch("not-files");
    // A named pipe: opening it would wait for a writer forever.
    let fifo = dir.join("agents/agents/pipe.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    // A socket.
    let _socket = std::os::unix::net::UnixListener::bind(dir.join("agents/tools/sock.yaml"))
        .expect("a socket");
    // A symbolic link to a folder, one to nothing, and one to a regular file (followed).
    std::fs::create_dir_all(dir.join("elsewhere/tools")).expect("folder");
    symlink(dir.join("elsewhere"), dir.join("agents/tools/folder.yaml")).expect("link");
    symlink(
        dir.join("missing.yaml"),
        dir.join("agents/tools/dangling.yaml"),
    )
    .expect("link");
    std::fs::write(
        dir.join("elsewhere/linked.yaml"),
        "description: Linked in.\nresult: ok\n",
    )
    .expect("write");
    symlink(
        dir.join("elsewhere/linked.yaml"),
        dir.join("agents/tools/linked.yaml"),
    )
    .expect("link");

    let loaded = load_within(&dir, Duration::from_secs(20));
    assert_eq!(
        codes(&loaded),
        [
            ("agents/agents/pipe.yaml".to_owned(), Code::NotAFile),
            ("agents/tools/dangling.yaml".to_owned(), Code::NotAFile),
            ("agents/tools/folder.yaml".to_owned(), Code::NotAFile),
            ("agents/tools/sock.yaml".to_owned(), Code::NotAFile),
        ],
        "{:#?}",
        loaded.issues
    );
    let messages: Vec<&str> = loaded.issues.iter().map(|i| i.message.as_str()).collect();
    assert!(messages[0].contains("a named pipe (FIFO)"), "{messages:?}");
    assert!(
        messages[2].contains("a symbolic link to a folder"),
        "{messages:?}"
    );
    assert!(messages[3].contains("a socket"), "{messages:?}");
    assert!(
        loaded
            .issues
            .iter()
            .all(|i| i.line.is_none() && i.path.is_empty())
    );
    // Warnings: the project is still valid, the linked tool is loaded, the agent is checked.
    assert!(loaded.is_ok());
    assert!(loaded.project.tools.contains_key("linked"));
    assert!(loaded.project.agents.contains_key("chat"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_huge_sparse_file_is_refused_by_its_size_without_being_read() {
    let dir = scratch("sparse");
    let big = 3u64 << 30;
    for path in ["agents/prompts/huge.yaml", "agents/notes.bin"] {
        let file = std::fs::File::create(dir.join(path)).expect("create");
        file.set_len(big).expect("a sparse file");
    }
    // Just over the limit is refused too; at the limit is read.
    let file = std::fs::File::create(dir.join("agents/tools/edge.yaml")).expect("create");
    file.set_len(MAX_FILE_BYTES as u64 + 1).expect("sparse");

    let started = Instant::now();
    let loaded = load_within(&dir, Duration::from_secs(60));
    let took = started.elapsed();
    // Reading 3 GiB took 17 s and as much memory; a metadata check takes nothing.
    assert!(took < Duration::from_secs(3), "loading took {took:?}");
    assert_eq!(
        codes(&loaded),
        [
            // Not a definition path: its size does not matter, it is ignored as ever.
            ("agents/notes.bin".to_owned(), Code::UnsupportedFile),
            // `chat` names the tool `linked`, which this project lacks.
            ("agents/prompts/chat.yaml".to_owned(), Code::UnknownTool),
            ("agents/prompts/huge.yaml".to_owned(), Code::ReadError),
            ("agents/tools/edge.yaml".to_owned(), Code::ReadError),
        ],
        "{:#?}",
        loaded.issues
    );
    let huge = &loaded.issues[2];
    assert!(huge.message.contains("larger than 4 MiB"), "{huge:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_listing_says_what_was_skipped_and_why() {
    let dir = scratch("listing");
    let file = std::fs::File::create(dir.join("agents/tools/big.yaml")).expect("create");
    file.set_len(1 << 30).expect("sparse");
    let listing = duet_spec::fs::read_project(&dir).expect("readable");
    let skipped: Vec<(&str, &SkipReason)> = listing
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), &s.reason))
        .collect();
    assert_eq!(
        skipped,
        [("agents/tools/big.yaml", &SkipReason::TooLarge(1 << 30))]
    );
    assert_eq!(listing.files.len(), 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn skipped_entries_become_issues_with_no_io() {
    use duet_spec::{Listing, Project, Skipped};
    let skipped = |path: &str, reason| Skipped {
        path: path.to_owned(),
        reason,
    };
    let loaded = Project::from_listing(Listing {
        files: Vec::new(),
        skipped: vec![
            skipped(
                "agents/tools/locked.yaml",
                SkipReason::Unreadable("permission denied".into()),
            ),
            skipped(
                "agents/README.md",
                SkipReason::Unreadable("permission denied".into()),
            ),
            skipped("agents/x.sock", SkipReason::NotAFile("a socket".into())),
            skipped("elsewhere/x.yaml", SkipReason::TooLarge(1 << 40)),
        ],
    });
    let got: Vec<(Option<&str>, Code)> = loaded
        .issues
        .iter()
        .map(|i| (i.file.as_deref(), i.code))
        .collect();
    assert_eq!(
        got,
        [
            (Some("agents/README.md"), Code::UnsupportedFile),
            (Some("agents/tools/locked.yaml"), Code::ReadError),
            (Some("agents/x.sock"), Code::NotAFile),
        ]
    );
    assert!(loaded.issues[1].message.contains("permission denied"));
}
