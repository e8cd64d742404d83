//! The API keys' part of the shared store implementation (`KeyStore` on the `api_keys` and
//! `sign_ins` tables), stamped out inside `store_impl!`.

/// `impl KeyStore for $store` and the decoder of an `api_keys` row of `$db` (see `store_impl!`).
macro_rules! keys_impl {
    ($store:ident, $db:ty) => {
        fn key_from_row(row: &<$db as sqlx::Database>::Row) -> Result<ApiKey, StoreError> {
            Ok(ApiKey {
                id: row.try_get("id").map_err(db_error)?,
                principal: row.try_get("principal").map_err(db_error)?,
                admin: row.try_get("admin").map_err(db_error)?,
                roles: {
                    let roles: String = row.try_get("roles").map_err(db_error)?;
                    serde_json::from_str(&roles).map_err(|e| {
                        StoreError::Corrupt(format!("api key roles `{roles}`: {e}"))
                    })?
                },
                label: row.try_get("label").map_err(db_error)?,
                created_at: row.try_get("created_at").map_err(db_error)?,
                revoked_at: row.try_get("revoked_at").map_err(db_error)?,
            })
        }

        #[async_trait]
        impl KeyStore for $store {
            async fn create_key(&self, key: &ApiKey, hash: &str) -> Result<(), StoreError> {
                // A taken id or hash breaks a key: `db_error` makes it a `Conflict`.
                sqlx::query(
                    "INSERT INTO api_keys (id, hash, principal, admin, label, created_at, revoked_at, roles) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(&key.id)
                .bind(hash)
                .bind(&key.principal)
                .bind(key.admin)
                .bind(&key.label)
                .bind(key.created_at)
                .bind(key.revoked_at)
                .bind(serde_json::json!(key.roles).to_string())
                .execute(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError> {
                let row = sqlx::query("SELECT * FROM api_keys WHERE hash = $1")
                    .bind(hash)
                    .fetch_optional(&self.read)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(key_from_row).transpose()
            }

            async fn keys(&self) -> Result<Vec<ApiKey>, StoreError> {
                let rows = sqlx::query("SELECT * FROM api_keys ORDER BY created_at, id")
                    .fetch_all(&self.read)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(key_from_row).collect()
            }

            async fn revoke_key(&self, id: &str, now: i64) -> Result<bool, StoreError> {
                let done = sqlx::query("UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
                    .bind(now)
                    .bind(id)
                    .execute(&mut *self.writer().await?)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() == 1)
            }

            async fn create_sign_in(&self, hash: &str, key_hash: &str, now: i64, expires_at: i64) -> Result<(), StoreError> {
                let mut conn = self.writer().await?;
                sqlx::query("DELETE FROM sign_ins WHERE expires_at <= $1")
                    .bind(now)
                    .execute(&mut *conn)
                    .await
                    .map_err(db_error)?;
                sqlx::query("INSERT INTO sign_ins (hash, key_hash, created_at, expires_at) VALUES ($1, $2, $3, $4)")
                    .bind(hash)
                    .bind(key_hash)
                    .bind(now)
                    .bind(expires_at)
                    .execute(&mut *conn)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            async fn sign_in_key(&self, hash: &str, now: i64) -> Result<Option<ApiKey>, StoreError> {
                let row = sqlx::query(
                    "SELECT k.* FROM sign_ins s JOIN api_keys k ON k.hash = s.key_hash WHERE s.hash = $1 AND s.expires_at > $2",
                )
                .bind(hash)
                .bind(now)
                .fetch_optional(&self.read)
                .await
                .map_err(db_error)?;
                row.as_ref().map(key_from_row).transpose()
            }

            async fn end_sign_in(&self, hash: &str) -> Result<bool, StoreError> {
                let done = sqlx::query("DELETE FROM sign_ins WHERE hash = $1")
                    .bind(hash)
                    .execute(&mut *self.writer().await?)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() == 1)
            }
        }
    };
}
pub(crate) use keys_impl;
