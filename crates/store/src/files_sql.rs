//! The thread filesystem on both backends: `FileStore` (a thread's file rows: one entry, a
//! listing, stats, writes outside a run, which chunks rows name, the sweep of chunks none names)
//! and `BlobStore` on the database's own `blobs` table, stamped out by `files_impl!` in each
//! backend's module beside `store_impl!` (`sql.rs`), whose imports and decoders it uses. A
//! commit's file writes are the commit's own (`file_rows.rs`; SQLite's batch, Postgres's
//! `duet_commit_files`).

/// The statements that differ between the backends: which chunks file rows name, and the sweep.
/// `$named` reads the distinct hashes of every row's `chunks` that are among `$1` (a JSON array
/// of hashes), as column `hash`; `$sweep` deletes the blobs stored before `$1` that no row names.
macro_rules! files_impl {
    ($store:ident, $db:ty, $begin:literal, $named:literal, $sweep:literal) => {
        fn file_from_row(
            row: &<$db as sqlx::Database>::Row,
        ) -> Result<duet_runtime::FileRecord, StoreError> {
            let kind: String = row.try_get("kind").map_err(db_error)?;
            let chunks: String = row.try_get("chunks").map_err(db_error)?;
            let meta: String = row.try_get("meta").map_err(db_error)?;
            Ok(duet_runtime::FileRecord {
                path: row.try_get("path").map_err(db_error)?,
                kind: duet_runtime::FileKind::parse(&kind).ok_or_else(|| corrupt("file kind", &kind))?,
                size: row.try_get("size").map_err(db_error)?,
                mime_type: row.try_get("mime_type").map_err(db_error)?,
                declared_type: row.try_get("declared_type").map_err(db_error)?,
                chunks: serde_json::from_str(&chunks).map_err(|_| corrupt("file chunks", &chunks))?,
                meta: serde_json::from_str(&meta).map_err(|_| corrupt("file meta", &meta))?,
                created_at: row.try_get("created_at").map_err(db_error)?,
                updated_at: row.try_get("updated_at").map_err(db_error)?,
            })
        }

        /// Now, in ms since the epoch: when a blob is stored.
        fn blob_now() -> i64 {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                .unwrap_or(0)
        }

        #[async_trait]
        impl duet_runtime::FileStore for $store {
            async fn file(&self, thread: ThreadId, path: &str) -> Result<Option<duet_runtime::FileRecord>, StoreError> {
                let row = sqlx::query(
                    "SELECT path, kind, size, mime_type, declared_type, chunks, meta, created_at, updated_at \
                     FROM files WHERE thread = (SELECT num FROM threads WHERE id = $1) AND path = $2",
                )
                .bind(thread.to_string())
                .bind(path)
                .fetch_optional(&self.read)
                .await
                .map_err(db_error)?;
                row.as_ref().map(file_from_row).transpose()
            }

            async fn files(
                &self,
                thread: ThreadId,
                query: &duet_runtime::FileQuery,
            ) -> Result<Vec<duet_runtime::FileRecord>, StoreError> {
                let (lo, hi) = match query.under.as_deref() {
                    Some(d) => {
                        let (lo, hi) = crate::file_rows::under_bounds(d);
                        (Some(lo), Some(hi))
                    }
                    None => (None, None),
                };
                let limit = if query.limit == 0 { i64::MAX } else { i64::try_from(query.limit).unwrap_or(i64::MAX) };
                // No value is in the text: it is one of the fixed fragments' combinations.
                let rows = sqlx::query(sqlx::AssertSqlSafe(crate::file_rows::list_sql(query)))
                    .bind(thread.to_string())
                    .bind(query.dir.as_deref())
                    .bind(lo)
                    .bind(hi)
                    .bind(query.after.as_deref())
                    .bind(limit)
                    .fetch_all(&self.read)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(file_from_row).collect()
            }

            async fn file_stats(&self, thread: ThreadId) -> Result<duet_runtime::FileStats, StoreError> {
                let row = sqlx::query(
                    "SELECT CAST(COALESCE(SUM(CASE WHEN kind = 'file' THEN 1 ELSE 0 END), 0) AS BIGINT) AS files, \
                       CAST(COALESCE(SUM(CASE WHEN kind = 'directory' THEN 1 ELSE 0 END), 0) AS BIGINT) AS directories, \
                       CAST(COALESCE(SUM(CASE WHEN kind = 'file' THEN size ELSE 0 END), 0) AS BIGINT) AS bytes \
                     FROM files WHERE thread = (SELECT num FROM threads WHERE id = $1)",
                )
                .bind(thread.to_string())
                .fetch_one(&self.read)
                .await
                .map_err(db_error)?;
                Ok(duet_runtime::FileStats {
                    files: row.try_get("files").map_err(db_error)?,
                    directories: row.try_get("directories").map_err(db_error)?,
                    bytes: row.try_get("bytes").map_err(db_error)?,
                })
            }

            async fn write_files(&self, thread: ThreadId, writes: Vec<duet_runtime::FileWrite>) -> Result<(), StoreError> {
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                let num: i64 = sqlx::query_scalar("SELECT num FROM threads WHERE id = $1")
                    .bind(thread.to_string())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_error)?
                    .ok_or_else(|| StoreError::NotFound(thread.to_string()))?;
                // In order, one statement each: the writes of an upload or a copy are few.
                for w in &writes {
                    let written = match w {
                        duet_runtime::FileWrite::Remove(path) => {
                            sqlx::query("DELETE FROM files WHERE thread = $1 AND path = $2")
                                .bind(num)
                                .bind(path)
                                .execute(&mut *tx)
                                .await
                        }
                        duet_runtime::FileWrite::Put(r) | duet_runtime::FileWrite::Mkdir(r) => {
                            const PUT: &str = "INSERT INTO files (thread, path, parent, kind, size, mime_type, declared_type, chunks, meta, created_at, updated_at) \
                                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (thread, path) DO UPDATE SET \
                                 parent = excluded.parent, kind = excluded.kind, size = excluded.size, mime_type = excluded.mime_type, \
                                 declared_type = excluded.declared_type, chunks = excluded.chunks, meta = excluded.meta, \
                                 created_at = excluded.created_at, updated_at = excluded.updated_at";
                            const MKDIR: &str = "INSERT INTO files (thread, path, parent, kind, size, mime_type, declared_type, chunks, meta, created_at, updated_at) \
                                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (thread, path) DO NOTHING";
                            let sql = if matches!(w, duet_runtime::FileWrite::Put(_)) { PUT } else { MKDIR };
                            sqlx::query(sql)
                                .bind(num)
                                .bind(&r.path)
                                .bind(duet_runtime::files::path::parent(&r.path))
                                .bind(r.kind.as_str())
                                .bind(r.size)
                                .bind(r.mime_type.as_deref())
                                .bind(r.declared_type.as_deref())
                                .bind(serde_json::json!(r.chunks).to_string())
                                .bind(duet_runtime::nul::json_text(&r.meta))
                                .bind(r.created_at)
                                .bind(r.updated_at)
                                .execute(&mut *tx)
                                .await
                        }
                    };
                    if let Err(e) = written {
                        tx.rollback().await.map_err(db_error)?;
                        return Err(db_error(e));
                    }
                }
                tx.commit().await.map_err(db_error)?;
                Ok(())
            }

            async fn blobs_named(&self, hashes: &[String]) -> Result<Vec<String>, StoreError> {
                if hashes.is_empty() {
                    return Ok(Vec::new());
                }
                let named: Vec<String> = sqlx::query_scalar($named)
                    .bind(serde_json::json!(hashes).to_string())
                    .fetch_all(&self.read)
                    .await
                    .map_err(db_error)?;
                let named: std::collections::HashSet<String> = named.into_iter().collect();
                Ok(hashes.iter().filter(|h| named.contains(*h)).cloned().collect())
            }

            async fn sweep_blobs(&self, before: i64) -> Result<u64, StoreError> {
                let done = sqlx::query($sweep)
                    .bind(before)
                    .execute(&mut *self.writer().await?)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected())
            }
        }

        #[async_trait]
        impl duet_runtime::BlobStore for $store {
            async fn put_blob(&self, hash: &str, data: Vec<u8>) -> Result<(), StoreError> {
                // A chunk stored already is kept, its time made now: a sweep under way must not
                // take it from the write that is about to name it again.
                sqlx::query(
                    "INSERT INTO blobs (hash, size, data, created_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (hash) DO UPDATE SET created_at = excluded.created_at",
                )
                .bind(hash)
                .bind(i64::try_from(data.len()).unwrap_or(i64::MAX))
                .bind(data)
                .bind(blob_now())
                .execute(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            async fn blob(&self, hash: &str) -> Result<Option<Vec<u8>>, StoreError> {
                sqlx::query_scalar("SELECT data FROM blobs WHERE hash = $1")
                    .bind(hash)
                    .fetch_optional(&self.read)
                    .await
                    .map_err(db_error)
            }

            async fn sweep(
                &self,
                _: &dyn duet_runtime::FileStore,
                before: i64,
            ) -> Result<u64, StoreError> {
                duet_runtime::FileStore::sweep_blobs(self, before).await
            }

            async fn has_blob(&self, hash: &str) -> Result<bool, StoreError> {
                let found = sqlx::query("SELECT 1 FROM blobs WHERE hash = $1")
                    .bind(hash)
                    .fetch_optional(&self.read)
                    .await
                    .map_err(db_error)?;
                Ok(found.is_some())
            }
        }
    };
}
pub(crate) use files_impl;
