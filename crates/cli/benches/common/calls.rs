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
    if let Some(seen) = take() {
        print(phase, ops, &seen);
    }
}

/// The calls since the last take, by statement (when counting); a phase of several spans adds
/// them up ([`add`]) and prints them once ([`print`]).
pub fn take() -> Option<BTreeMap<String, u64>> {
    let calls = counter()?;
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    for summary in calls.take() {
        *seen.entry(summary.chars().take(60).collect()).or_default() += 1;
    }
    Some(seen)
}

/// Adds `more` (a [`take`]) to `to`.
pub fn add(to: &mut BTreeMap<String, u64>, more: Option<BTreeMap<String, u64>>) {
    for (summary, n) in more.into_iter().flatten() {
        *to.entry(summary).or_default() += n;
    }
}

/// Prints `seen`, the calls of a phase of `ops` operations, by statement (when counting).
pub fn print(phase: &str, ops: usize, seen: &BTreeMap<String, u64>) {
    if counter().is_none() {
        return;
    }
    let total: u64 = seen.values().sum();
    let per = |n: u64| n as f64 / ops.max(1) as f64;
    println!("    {phase}: {:.2} driver calls per operation", per(total));
    for (summary, n) in seen {
        println!("      {:>8.2}  {summary}", per(*n));
    }
}
