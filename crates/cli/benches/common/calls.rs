//! Counts the calls into the database driver (`BENCH_CALLS=1`), with the runtime's
//! [`DriverCalls`] subscriber, so a phase can report its calls per operation. Off by default: a
//! subscriber costs a little on every call, and the timed numbers are taken without it.

use std::collections::BTreeMap;

use duet_runtime::testing::DriverCalls;

/// The counter, installed on first use when `BENCH_CALLS` is set.
pub fn counter() -> Option<&'static DriverCalls> {
    std::env::var_os("BENCH_CALLS")?;
    DriverCalls::install()
}

/// Prints the calls of a phase of `ops` operations (when counting), by statement, and starts
/// the next.
pub fn report(phase: &str, ops: usize) {
    let Some(calls) = counter() else { return };
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    for summary in calls.take() {
        *seen.entry(summary.chars().take(60).collect()).or_default() += 1;
    }
    let total: u64 = seen.values().sum();
    let per = |n: u64| n as f64 / ops.max(1) as f64;
    println!("    {phase}: {:.2} driver calls per operation", per(total));
    for (summary, n) in seen {
        println!("      {:>8.2}  {summary}", per(n));
    }
}
