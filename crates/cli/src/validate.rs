//! `duet validate [DIR]`: compiler-style issues, or JSON for tools.
//!
//! Exit codes: 0 no errors (warnings allowed), 1 errors, 2 the directory cannot be read.
//! `--strict` makes `builtin:` names this build lacks errors instead of warnings.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use duet_spec::{Severity, codes_markdown};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// A project root (the folder holding `agents/`) or that `agents/` folder.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Print the table of issue codes (Markdown) and exit.
    #[arg(long)]
    codes: bool,
    /// Report `builtin:` names this build lacks as errors, not warnings.
    #[arg(long)]
    strict: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Human,
    Json,
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let mut out = std::io::stdout().lock();
    if args.codes {
        let _ = out.write_all(codes_markdown().as_bytes());
        return ExitCode::SUCCESS;
    }
    let mut loaded = match duet_js::load(&args.dir, &duet_js::node_path_from_env()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("duet: {e}");
            return ExitCode::from(2);
        }
    };
    // `builtin:` names this build lacks: a warning (the code may live elsewhere; `duet run`
    // refuses an agent that needs it), an error with `--strict`.
    let builtins = loaded
        .project
        .check_builtins(&crate::compose::builtins(&loaded.project));
    loaded.issues.extend(
        builtins
            .into_iter()
            .map(|i| if args.strict { i.escalated() } else { i }),
    );
    // A provider key variable unset here is a warning: it may be set where duet runs; so is a
    // key too short to be one.
    let keys = loaded
        .project
        .check_provider_keys(|var| std::env::var(var).ok());
    loaded.issues.extend(keys);
    // In position order, each root cause before the issues it caused.
    duet_spec::order_issues(&mut loaded.issues);
    let errors = loaded.count(Severity::Error);
    let warnings = loaded.count(Severity::Warning);
    let written = match args.format {
        Format::Json => {
            let doc = serde_json::json!({
                "issues": loaded.issues,
                "counts": { "errors": errors, "warnings": warnings },
            });
            writeln!(out, "{doc}")
        }
        Format::Human => {
            let mut r = Ok(());
            for issue in &loaded.issues {
                r = r.and_then(|()| writeln!(out, "{issue}"));
            }
            let p = &loaded.project;
            r.and_then(|()| {
                writeln!(
                    out,
                    "{} agents, {} prompts, {} tools, {} hooks, {} handlers, {} models, {} providers: {errors} error{}, {warnings} warning{}",
                    p.agents.len(),
                    p.prompts.len(),
                    p.tools.len(),
                    p.hooks.len(),
                    p.handlers.len(),
                    p.models.len(),
                    // A model's own provider (`model:NAME`) is counted with its model.
                    p.providers.keys().filter(|n| !n.starts_with("model:")).count(),
                    if errors == 1 { "" } else { "s" },
                    if warnings == 1 { "" } else { "s" },
                )
            })
        }
    };
    // A closed stdout (`duet validate | head`) loses output, not the verdict: the exit code
    // still tells it.
    drop(written);
    if errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
