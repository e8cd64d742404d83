//! `duet files ls|get|put|rm KEY …`: a thread's files on the database, through the runtime's
//! `ThreadFiles` (`Runtime::files()`), as `duet serve`'s `/threads/{key}/files` reaches them:
//! content streamed a chunk at a time both ways, paths checked by the file API. A thread that
//! is not there (or another principal's) exits 2, as `duet threads show` does; a refusal of the
//! file API (a bad path, nothing there, a limit) exits 2; a failing database or local file, 1.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use duet_runtime::Thread;
use duet_runtime::files::{FileError, FileKind, FileRecord};
use futures::StreamExt;

use crate::Place;

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Files,
    /// Print JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(flatten)]
    acting: crate::acting::Acting,
    #[command(flatten)]
    place: Place,
}

#[derive(clap::Subcommand)]
enum Files {
    /// List a directory of the thread (default `/`).
    Ls {
        /// The thread's key.
        key: String,
        /// The directory.
        dir: Option<String>,
    },
    /// Write a file of the thread to standard output, or to OUT.
    Get {
        /// The thread's key.
        key: String,
        /// The file's path in the thread.
        path: String,
        /// Write it here instead.
        #[arg(short, long)]
        out: Option<PathBuf>,
    },
    /// Store a local file in the thread, at PATH (default `/attachments/<its name>`).
    Put {
        /// The thread's key.
        key: String,
        /// The local file.
        local: PathBuf,
        /// Its path in the thread.
        path: Option<String>,
    },
    /// Remove a file of the thread.
    Rm {
        /// The thread's key.
        key: String,
        /// The file's path in the thread.
        path: String,
    },
}

impl Files {
    fn key(&self) -> &str {
        match self {
            Files::Ls { key, .. }
            | Files::Get { key, .. }
            | Files::Put { key, .. }
            | Files::Rm { key, .. } => key,
        }
    }
}

/// A refusal or failure of the file API, said; its exit code.
fn failed(e: &FileError) -> ExitCode {
    eprintln!("duet: {e}");
    match e {
        FileError::Store(_) => ExitCode::from(1),
        _ => ExitCode::from(2),
    }
}

pub(crate) async fn run(args: Args) -> ExitCode {
    let who = match args.acting.who() {
        Ok(w) => w,
        Err(code) => return code,
    };
    let (rt, tables) = match crate::compose::compose(&args.place).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let key = args.command.key().to_owned();
    let store = rt.store();
    let thread: Thread = match store.thread(&who.stored(&key)).await {
        Ok(Some(t)) if who.principal().is_none() || who.owns(&t) => t,
        Ok(Some(t)) => {
            eprintln!("duet: {}", who.not_yours(&key, &t));
            return ExitCode::from(2);
        }
        Ok(None) => {
            let why = who.not_found(store.as_ref(), tables.as_ref(), &key).await;
            eprintln!("duet: {why}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("duet: {e}");
            return ExitCode::from(1);
        }
    };
    let files = rt.files();
    match args.command {
        Files::Ls { dir, .. } => {
            let dir = dir.unwrap_or_else(|| "/".to_owned());
            let mut after: Option<String> = None;
            let mut all = Vec::new();
            loop {
                let page = match files.list(thread.id, &dir, after.as_deref(), 500).await {
                    Ok(p) => p,
                    Err(e) => return failed(&e),
                };
                after = page.last().map(|r| r.path.clone());
                let done = page.len() < 500;
                all.extend(page);
                if done {
                    break;
                }
            }
            print_list(&all, args.json);
            ExitCode::SUCCESS
        }
        Files::Get { path, out, .. } => {
            let record = match files.file(thread.id, &path).await {
                Ok(r) => r,
                Err(e) => return failed(&e),
            };
            let mut sink: Box<dyn Write> = match &out {
                Some(p) => match std::fs::File::create(p) {
                    Ok(f) => Box::new(std::io::BufWriter::new(f)),
                    Err(e) => {
                        eprintln!("duet: cannot write {}: {e}", p.display());
                        return ExitCode::from(1);
                    }
                },
                None => Box::new(std::io::stdout().lock()),
            };
            let size = u64::try_from(record.size).unwrap_or(0);
            let mut pieces = std::pin::pin!(files.range(&record, 0, size));
            while let Some(piece) = pieces.next().await {
                let written = match piece {
                    Ok(bytes) => sink.write_all(&bytes),
                    Err(e) => return failed(&e),
                };
                if let Err(e) = written {
                    // A reader that went away (`| head`) ends the output quietly.
                    if e.kind() == std::io::ErrorKind::BrokenPipe {
                        return ExitCode::SUCCESS;
                    }
                    eprintln!("duet: {e}");
                    return ExitCode::from(1);
                }
            }
            if let Err(e) = sink.flush() {
                eprintln!("duet: {e}");
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Files::Put { local, path, .. } => {
            let file = match std::fs::File::open(&local) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("duet: cannot read {}: {e}", local.display());
                    return ExitCode::from(1);
                }
            };
            let path = path.unwrap_or_else(|| {
                let name = local
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                format!(
                    "{}/{}",
                    duet_runtime::files::ATTACHMENTS,
                    duet_runtime::files::path::safe_name(&name)
                )
            });
            let pieces = futures::stream::iter(Pieces(file));
            let record = match files.store_stream(&path, pieces, None, None).await {
                Ok(r) => r,
                Err(duet_runtime::StreamError::File(e)) => return failed(&e),
                Err(duet_runtime::StreamError::Source(e)) => {
                    eprintln!("duet: cannot read {}: {e}", local.display());
                    return ExitCode::from(1);
                }
            };
            match files.put(thread.id, record).await {
                Ok(r) => {
                    print_list(std::slice::from_ref(&r), args.json);
                    ExitCode::SUCCESS
                }
                Err(e) => failed(&e),
            }
        }
        Files::Rm { path, .. } => {
            let writes = match files.plan_unlink(thread.id, &path, &[]).await {
                Ok(w) => w,
                Err(e) => return failed(&e),
            };
            match files.apply(thread.id, writes).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => failed(&e),
            }
        }
    }
}

/// A local file read a chunk at a time.
struct Pieces(std::fs::File);

impl Iterator for Pieces {
    type Item = Result<Vec<u8>, std::io::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut buf = vec![0; duet_runtime::files::chunk::CHUNK_BYTES];
        let mut filled = 0;
        while filled < buf.len() {
            match self.0.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Some(Err(e)),
            }
        }
        buf.truncate(filled);
        (filled > 0).then_some(Ok(buf))
    }
}

fn print_list(records: &[FileRecord], json: bool) {
    let mut out = std::io::stdout().lock();
    if json {
        let list: Vec<_> = records
            .iter()
            .map(|r| {
                serde_json::json!({
                    "path": r.path,
                    "type": if r.kind == FileKind::File { "file" } else { "directory" },
                    "mimeType": r.mime_type,
                    "size": r.size,
                    "createdAt": r.created_at,
                    "updatedAt": r.updated_at,
                })
            })
            .collect();
        let _ = writeln!(out, "{}", serde_json::Value::Array(list));
        return;
    }
    let _ = writeln!(out, "PATH\tTYPE\tSIZE\tMIME");
    for r in records {
        let kind = if r.kind == FileKind::File {
            "file"
        } else {
            "dir"
        };
        let _ = writeln!(
            out,
            "{}\t{kind}\t{}\t{}",
            r.path,
            r.size,
            r.mime_type.as_deref().unwrap_or("-")
        );
    }
}
