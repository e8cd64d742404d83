//! Which schema a build may run on, for rolling upgrades: two processes of different versions
//! on one database. Migrations within a release are additive, so a build meeting a database
//! that a newer build migrated further goes on (the newer migrations it does not know are left
//! alone); a migration older builds cannot run on raises `duet_schema.min_compatible` to its
//! own version, and a build whose newest migration is older than that stops at start with a
//! message saying so, before it writes anything.

use duet_runtime::StoreError;
use sqlx::migrate::Migrator;

/// The newest migration this build knows.
pub(crate) fn newest(migrator: &Migrator) -> i64 {
    migrator.iter().map(|m| m.version).max().unwrap_or(0)
}

/// This build's migrator: one that leaves alone what a newer build applied beyond it.
pub(crate) fn tolerant(mut migrator: Migrator) -> Migrator {
    migrator.set_ignore_missing(true);
    migrator
}

/// Refuses to go on when the database needs a newer build: `min_compatible` (none before the
/// table exists) past this build's `newest` migration; `applied` is the newest the database
/// has.
pub(crate) fn check(
    min_compatible: Option<i64>,
    applied: Option<i64>,
    newest: i64,
) -> Result<(), StoreError> {
    match min_compatible {
        Some(min) if min > newest => Err(StoreError::backend(std::io::Error::other(format!(
            "this database's schema (migration {}) needs a newer duet: it is incompatible with builds before migration {min}, and this build knows migrations up to {newest}; upgrade duet (nothing was written)",
            applied.unwrap_or(min)
        )))),
        _ => {
            if let Some(applied) = applied.filter(|a| *a > newest) {
                tracing::info!(
                    applied,
                    newest,
                    "the database has migrations newer than this build; they are additive, so it runs on"
                );
            }
            Ok(())
        }
    }
}

/// The newest migration of the last release: every migration after it must be additive
/// (checked below), or raise `min_compatible`.
#[cfg(test)]
const RELEASED_THROUGH: i64 = 11;

#[cfg(test)]
mod tests {
    use super::{RELEASED_THROUGH, check};

    /// Triggers and indexes a migration drops to create again, each checked by hand: (its
    /// migration, the object, upper-cased). A drop listed nowhere is not additive: an older
    /// build may name the object (SQLite's `INDEXED BY` fails without it, or with a condition
    /// it cannot use) or rely on what it did.
    const REPLACED: &[(i64, &str)] = &[
        // The same rows, spelled without `IN` lists. No build names a trigger, and none before
        // 0023 named `journal_settles` (its settles read went by the journal's key).
        (23, "JOURNAL_NOTICES"),
        (23, "JOURNAL_SETTLES"),
        // The same copies, held off while a router finds nobody to tell (`notices_held`); an
        // older build renews no hold, so within one the copies start again by themselves.
        (24, "JOURNAL_NOTICES"),
        (24, "ANSWERS_NOTICES"),
    ];

    /// Whether `statement` (upper-cased, one of a migration's) leaves older builds working: new
    /// tables, indexes, functions and rows, columns they need not write, and a trigger or an
    /// index dropped to be created again that [`REPLACED`] lists for this migration (`replaced`).
    fn additive(statement: &str, added: &[String], replaced: &[&str]) -> bool {
        let s = statement.split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some(name) = s
            .strip_prefix("DROP TRIGGER IF EXISTS ")
            .or_else(|| s.strip_prefix("DROP INDEX IF EXISTS "))
        {
            return replaced.contains(&name);
        }
        // A backfill of a column this migration adds: older builds never read it.
        let backfill = s.contains("UPDATE ")
            && s.split(" SET ").nth(1).is_some_and(|set| {
                set.split_whitespace()
                    .next()
                    .is_some_and(|column| added.iter().any(|a| a == column))
            });
        // A function's planner settings (`ALTER FUNCTION f(…) SET name = value …`): it is
        // called as before and does what it did.
        let sets_only = s.strip_prefix("ALTER FUNCTION ").is_some_and(|rest| {
            let actions: Vec<&str> = rest
                .rsplit_once(')')
                .map_or("", |(_, after)| after)
                .split_whitespace()
                .collect();
            !actions.is_empty()
                && actions.len().is_multiple_of(4)
                && actions
                    .chunks(4)
                    .all(|a| a[0] == "SET" && a[2] == "=" && a[1].starts_with("ENABLE_"))
        });
        if sets_only {
            return true;
        }
        let adds_column = s.starts_with("ALTER TABLE")
            && s.contains(" ADD COLUMN ")
            && (!s.contains("NOT NULL") || s.contains("DEFAULT"));
        adds_column
            || backfill
            || [
                "CREATE TABLE",
                "CREATE INDEX",
                "CREATE UNIQUE INDEX",
                "CREATE OR REPLACE FUNCTION",
                "CREATE FUNCTION",
                "CREATE TRIGGER",
                "INSERT INTO",
            ]
            .iter()
            .any(|p| s.starts_with(p))
    }

    #[test]
    fn migrations_after_the_last_release_are_additive_or_say_they_are_not() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        for backend in ["sqlite", "postgres"] {
            let dir = std::fs::read_dir(root.join(backend)).expect("migrations");
            for entry in dir.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let version: i64 = name
                    .split('_')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("a numbered migration");
                if version <= RELEASED_THROUGH {
                    continue;
                }
                let sql = std::fs::read_to_string(entry.path())
                    .expect("read")
                    .to_uppercase();
                if sql.contains("UPDATE DUET_SCHEMA SET MIN_COMPATIBLE") {
                    continue;
                }
                let code: String = sql
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("--"))
                    .collect::<Vec<_>>()
                    .join("\n");
                // A function's body (`$$ … $$`) runs when it is called, not when the migration
                // is: its statements are no change to the schema.
                let code: String = code
                    .split("$$")
                    .step_by(2)
                    .collect::<Vec<_>>()
                    .join("$$ $$");
                // A SQLite trigger's body (`BEGIN … END`) runs on its event, not now.
                let mut code = code;
                while let Some(at) = code.find("CREATE TRIGGER") {
                    let (Some(begin), Some(end)) = (
                        code[at..].find("\nBEGIN").map(|b| at + b),
                        code[at..].find("\nEND").map(|e| at + e),
                    ) else {
                        break;
                    };
                    code = format!(
                        "{}CREATE_TRIGGER{}{}",
                        &code[..at],
                        &code[at + "CREATE TRIGGER".len()..begin],
                        &code[end + "\nEND".len()..]
                    );
                }
                let code = code.replace("CREATE_TRIGGER", "CREATE TRIGGER");
                // Columns this migration adds (a backfill of one is additive).
                let added: Vec<String> = code
                    .split(';')
                    .filter_map(|st| {
                        let st = st.split_whitespace().collect::<Vec<_>>();
                        let at = st.windows(2).position(|w| w == ["ADD", "COLUMN"])?;
                        st.get(at + 2).map(|c| (*c).to_owned())
                    })
                    .collect();
                let replaced: Vec<&str> = REPLACED
                    .iter()
                    .filter(|(v, _)| *v == version)
                    .map(|(_, name)| *name)
                    .collect();
                for statement in code.split(';').filter(|s| !s.trim().is_empty()) {
                    assert!(
                        additive(statement, &added, &replaced),
                        "{backend}/{name}: `{}` is not additive: older builds on this schema would break; make it additive or raise duet_schema.min_compatible",
                        statement.trim()
                    );
                }
            }
        }
        for (statement, ok) in [
            ("CREATE TABLE x (id INT)", true),
            ("ALTER TABLE threads ADD COLUMN note TEXT", true),
            (
                "ALTER TABLE threads ADD COLUMN n INT NOT NULL DEFAULT 0",
                true,
            ),
            ("ALTER TABLE threads ADD COLUMN n INT NOT NULL", false),
            ("ALTER TABLE threads DROP COLUMN note", false),
            // A function's planner settings, and what else ALTER FUNCTION does.
            (
                "ALTER FUNCTION F(TEXT[], BIGINT) SET ENABLE_SEQSCAN = OFF SET ENABLE_HASHJOIN = OFF",
                true,
            ),
            ("ALTER FUNCTION F(TEXT) RENAME TO G", false),
            ("ALTER FUNCTION F(TEXT) SET SEARCH_PATH = X", false),
            (
                "ALTER FUNCTION F(TEXT) SET ENABLE_SEQSCAN = OFF RENAME TO G",
                false,
            ),
            ("ALTER TABLE threads RENAME TO t", false),
            ("DROP TABLE threads", false),
            ("UPDATE threads SET agent = 'x'", false),
            // A backfill of the column the migration adds (`ROOT`, upper-cased as the test reads).
            ("UPDATE THREADS SET ROOT = NUM", true),
            ("UPDATE THREADS SET AGENT = 'X'", false),
            ("CREATE TRIGGER T AFTER INSERT ON THREADS", true),
            // A trigger or an index whose replacement was checked, and one whose was not.
            ("DROP TRIGGER IF EXISTS T", true),
            ("DROP TRIGGER IF EXISTS U", false),
            ("DROP INDEX IF EXISTS T", true),
            ("DROP INDEX IF EXISTS U", false),
        ] {
            assert_eq!(
                additive(statement, &["ROOT".to_owned()], &["T"]),
                ok,
                "{statement}"
            );
        }
    }

    #[test]
    fn a_build_runs_on_any_schema_it_is_compatible_with() {
        for (min, applied, newest, ok) in [
            (None, None, 11, true),
            (None, Some(10), 11, true),
            (Some(1), Some(11), 11, true),
            (Some(1), Some(12), 11, true),
            (Some(11), Some(12), 11, true),
            (Some(12), Some(12), 11, false),
            (Some(13), Some(14), 11, false),
        ] {
            assert_eq!(
                check(min, applied, newest).is_ok(),
                ok,
                "{min:?} {applied:?} {newest}"
            );
        }
    }
}
