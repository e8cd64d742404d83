//! `duet`: the command-line tool. This is the composition root: the only place (with the
//! server's `main`) that picks concrete implementations.

mod validate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// duet: a durable runtime for two-sided Standard Agents sessions.
#[derive(Parser)]
#[command(name = "duet", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check every definition of a Standard Agents project and list all problems at once.
    Validate(validate::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with success; usage errors exit 2.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        Command::Validate(args) => validate::run(&args),
    }
}
