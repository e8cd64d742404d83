//! The thread filesystem's rows as both backends write them: a commit's file writes folded to
//! one per path ([`fold`]), each as bind arguments in `files`' column order ([`file_row`]), the
//! statements SQLite's commit batch adds for them ([`file_statements`]), and the SQL text of a
//! listing ([`list_sql`]). A leaf beside `batch.rs`.

use std::collections::HashMap;

use duet_runtime::{Commit, FileQuery, FileRecord, FileWrite, files::path};

use crate::batch::{Arg, Batch};

/// `writes` with each path written once, in the order paths were first written, each the write
/// that leaves that path as applying them all in order would: a `Put` or a `Remove` stands
/// whatever came before; a `Mkdir` keeps what a `Put` or `Mkdir` before it left, and after a
/// `Remove` it is a `Put` of the directory (the path is then empty). One statement of a commit
/// may then write all its paths at once, in any order.
pub(crate) fn fold(writes: Vec<FileWrite>) -> Vec<FileWrite> {
    let mut order: Vec<String> = Vec::new();
    let mut last: HashMap<String, FileWrite> = HashMap::new();
    for w in writes {
        let path = w.path().to_owned();
        let before = last.remove(&path);
        if before.is_none() {
            order.push(path.clone());
        }
        let next = match (before, w) {
            (_, w @ (FileWrite::Put(_) | FileWrite::Remove(_))) => w,
            (None, w @ FileWrite::Mkdir(_)) => w,
            (Some(FileWrite::Remove(_)), FileWrite::Mkdir(r)) => FileWrite::Put(r),
            (Some(before), FileWrite::Mkdir(_)) => before,
        };
        last.insert(path, next);
    }
    order.into_iter().filter_map(|p| last.remove(&p)).collect()
}

/// `files`' columns after `thread`, in [`file_row`]'s order.
pub(crate) const FILE_COLUMNS: &str =
    "path, parent, kind, size, mime_type, declared_type, chunks, meta, created_at, updated_at";

/// What a `Put` writes over an existing row (every column but the key).
pub(crate) const FILE_UPDATE: &str = "parent = excluded.parent, kind = excluded.kind, \
     size = excluded.size, mime_type = excluded.mime_type, declared_type = excluded.declared_type, \
     chunks = excluded.chunks, meta = excluded.meta, created_at = excluded.created_at, \
     updated_at = excluded.updated_at";

/// Record `r`'s values in [`FILE_COLUMNS`] order.
pub(crate) fn file_row(r: &FileRecord) -> Vec<Arg> {
    vec![
        Arg::Text(Some(r.path.clone())),
        Arg::Text(Some(path::parent(&r.path).to_owned())),
        Arg::Text(Some(r.kind.as_str().to_owned())),
        Arg::Int(r.size),
        // Code declares a type as it likes: no NUL is stored (`duet_runtime::nul`).
        crate::batch::text(r.mime_type.as_deref()),
        crate::batch::text(r.declared_type.as_deref()),
        Arg::Text(Some(serde_json::json!(r.chunks).to_string())),
        Arg::Text(Some(duet_runtime::nul::json_text(&r.meta))),
        Arg::Int(r.created_at),
        Arg::Int(r.updated_at),
    ]
}

/// The statements of SQLite's commit batch that write `commit`'s files (`$1` the thread id,
/// `$2` the run: every one fenced by the lease, like the batch's others).
pub(crate) fn file_statements(batch: &mut Batch, commit: &Commit) {
    if commit.files.is_empty() {
        return;
    }
    let (mut removes, mut puts, mut mkdirs) = (Vec::new(), Vec::new(), Vec::new());
    for w in fold(commit.files.clone()) {
        match w {
            FileWrite::Remove(p) => removes.push(p),
            FileWrite::Put(r) => puts.push(file_row(&r)),
            FileWrite::Mkdir(r) => mkdirs.push(file_row(&r)),
        }
    }
    for paths in removes.chunks(500) {
        let list = paths
            .iter()
            .map(|p| batch.param(Arg::Text(Some(p.clone()))))
            .collect::<Vec<_>>()
            .join(", ");
        batch.sql.push_str(&format!(
            "DELETE FROM files WHERE thread = (SELECT num FROM threads WHERE id = $1 AND lease_owner = $2) \
             AND path IN ({list});\n"
        ));
    }
    for (rows, conflict) in [
        (puts, format!("DO UPDATE SET {FILE_UPDATE}")),
        (mkdirs, "DO NOTHING".to_owned()),
    ] {
        for chunk in rows.chunks(500) {
            let values = batch.values(chunk.to_vec());
            batch.sql.push_str(&format!(
                "INSERT INTO files (thread, {FILE_COLUMNS}) SELECT t.num, v.* FROM threads t, ({values}) v \
                 WHERE t.id = $1 AND t.lease_owner = $2 ON CONFLICT (thread, path) {conflict};\n"
            ));
        }
    }
}

/// The SQL text of a listing for `q`, made only of the fixed fragments below (every value is a
/// bind: `$1` thread id, `$2` dir, `$3`/`$4` the bounds of `under`, `$5` the cursor, `$6` the
/// limit; see [`under_bounds`]). An absent filter's fragment still names its parameter, so every
/// listing binds the same six, as `reads_sql::list_sql` does.
pub(crate) fn list_sql(q: &FileQuery) -> String {
    let mut sql = String::from(
        "SELECT path, kind, size, mime_type, declared_type, chunks, meta, created_at, updated_at \
         FROM files WHERE thread = (SELECT num FROM threads WHERE id = $1)",
    );
    sql.push_str(match q.dir {
        Some(_) => " AND parent = $2 AND path <> '/'",
        None => " AND $2 IS NULL",
    });
    sql.push_str(match q.under {
        Some(_) => " AND path > $3 AND path < $4",
        None => " AND $3 IS NULL AND $4 IS NULL",
    });
    if q.files_only {
        sql.push_str(" AND kind = 'file'");
    }
    sql.push_str(match q.after {
        Some(_) => " AND path > $5",
        None => " AND $5 IS NULL",
    });
    sql.push_str(" ORDER BY path LIMIT CAST($6 AS BIGINT)");
    sql
}

/// The paths strictly inside directory `dir`, at any depth, as a range in byte order: above
/// `dir/` and below `dir0` (`0` follows `/`), so `/a` holds `/a/b` and `/a/b/c` but not `/ab`.
pub(crate) fn under_bounds(dir: &str) -> (String, String) {
    let prefix = if dir == "/" {
        "/".to_owned()
    } else {
        format!("{}/", dir.trim_end_matches('/'))
    };
    let mut upper = prefix.clone();
    upper.pop();
    upper.push('0');
    (prefix, upper)
}

#[cfg(test)]
mod tests {
    use super::{fold, under_bounds};
    use duet_runtime::{FileKind, FileRecord, FileWrite};

    fn file(path: &str, size: i64) -> FileRecord {
        FileRecord {
            kind: FileKind::File,
            size,
            ..FileRecord::directory(path.into(), 1)
        }
    }

    #[test]
    fn a_commits_writes_fold_to_one_per_path_with_the_same_outcome() {
        use FileWrite::{Mkdir, Put, Remove};
        let dir = |p: &str| FileRecord::directory(p.into(), 2);
        let cases: Vec<(Vec<FileWrite>, Vec<FileWrite>)> = vec![
            (
                vec![Put(file("/a", 1)), Put(file("/a", 2))],
                vec![Put(file("/a", 2))],
            ),
            (
                vec![Put(file("/a", 1)), Remove("/a".into())],
                vec![Remove("/a".into())],
            ),
            (
                vec![Remove("/a".into()), Put(file("/a", 1))],
                vec![Put(file("/a", 1))],
            ),
            (
                vec![Put(file("/a", 1)), Mkdir(dir("/a"))],
                vec![Put(file("/a", 1))],
            ),
            (
                vec![Mkdir(dir("/a")), Mkdir(file("/a", 9))],
                vec![Mkdir(dir("/a"))],
            ),
            (
                vec![Remove("/a".into()), Mkdir(dir("/a"))],
                vec![Put(dir("/a"))],
            ),
            (
                vec![
                    Mkdir(dir("/d")),
                    Put(file("/d/x", 1)),
                    Remove("/d".into()),
                    Mkdir(dir("/d")),
                ],
                vec![Put(dir("/d")), Put(file("/d/x", 1))],
            ),
        ];
        for (writes, folded) in cases {
            assert_eq!(fold(writes.clone()), folded, "{writes:?}");
        }
    }

    #[test]
    fn under_is_a_byte_range() {
        assert_eq!(under_bounds("/"), ("/".into(), "0".into()));
        assert_eq!(under_bounds("/a"), ("/a/".into(), "/a0".into()));
        let (lo, hi) = under_bounds("/a");
        for (p, inside) in [
            ("/a/b", true),
            ("/a/b/c", true),
            ("/a", false),
            ("/ab", false),
            ("/a0", false),
        ] {
            assert_eq!(p > lo.as_str() && p < hi.as_str(), inside, "{p}");
        }
    }
}
