//! `duet backup FILE`: an online copy of the SQLite database to a new file, safe while `duet
//! serve` or any other process writes to it (`duet_store::sqlite_backup`). A Postgres database
//! is backed up with Postgres's own tools; this says so and names them.

use crate::out::outln;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use crate::Place;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The file to write (a new file, unless --force).
    #[arg(value_name = "FILE")]
    to: PathBuf,
    /// Replace FILE if it exists.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    place: Place,
}

/// Where the Postgres procedure is written down.
const POSTGRES: &str = "duet backup copies a SQLite database; this one is on Postgres. Back it \
     up with Postgres's tools: `pg_dump -Fc` for a snapshot, or `pg_basebackup` with WAL \
     archiving for point-in-time recovery (docs/operations.md, \"Backups\")";

pub(crate) async fn run(args: Args) -> ExitCode {
    let url = match crate::compose::database(&args.place) {
        Ok(url) => url,
        Err(e) => {
            eprintln!("duet: {e:#}");
            return ExitCode::from(2);
        }
    };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        eprintln!("duet: {POSTGRES}");
        return ExitCode::from(2);
    }
    let source = match duet_store::sqlite_location(&url) {
        Ok((path, _)) => path,
        Err(e) => {
            eprintln!("duet: --db {e}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    match duet_store::sqlite_backup(&source, &args.to, args.force).await {
        Ok(copy) => {
            outln!(
                "backed up {} to {}: {} bytes, {} thread{}, in {} ms (integrity ok)",
                source.display(),
                copy.path.display(),
                copy.bytes,
                copy.threads,
                if copy.threads == 1 { "" } else { "s" },
                started.elapsed().as_millis()
            );
            ExitCode::SUCCESS
        }
        Err(duet_store::BackupError::Exists(path)) => {
            eprintln!(
                "duet: {} exists; nothing was written (--force replaces it)",
                path.display()
            );
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("duet: cannot back up {}: {e}", source.display());
            ExitCode::from(1)
        }
    }
}
