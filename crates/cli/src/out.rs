//! Standard output for the commands that print a listing or a document: a reader that went
//! away (`duet serve --openapi | head`) ends the command quietly, exit 0, instead of a panic
//! (Rust ignores SIGPIPE, so `println!` panics on `EPIPE`). `duet run` and `duet send` print
//! through `chat.rs`, which stops printing but lets the run finish and commit.

use std::io::Write;

/// Writes one line to standard output (see the module's note on a closed pipe).
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}
pub(crate) use outln;

/// Writes `args` and a newline to standard output; exits quietly (0) when nobody reads it any
/// more, and with 1 when it cannot be written otherwise.
pub(crate) fn line(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    if let Err(e) = written {
        closed(&e);
    }
}

/// Ends the process after a failed write to standard output: quietly when the reader went away.
pub(crate) fn closed(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("duet: cannot write to standard output: {e}");
    std::process::exit(1)
}
