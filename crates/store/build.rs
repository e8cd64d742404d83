//! Rebuilds the crate when a migration changes: `sqlx::migrate!` embeds the files at compile
//! time, and cargo does not otherwise know they are inputs.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
