//! The notifications' part of the shared store implementation (`NotifyStore` on the `notices`,
//! `outbox`, `links`, `subscriptions` and `secrets` tables of migration 0018), stamped out inside
//! `store_impl!`. The notices themselves are written by the database's triggers on `journal` and
//! `answers`, never here.

use duet_server_store::{DeliveryQuery, DeliveryStatus};

/// The SQL of `NotifyStore::deliveries` for `q`, newest first, made of fixed fragments (every
/// value is a bind: `$1` thread, `$2` notice, `$3` subject, `$4` channel, `$5` recipient, `$6`
/// the cursor, `$7` the limit). An absent filter's fragment still names its parameter
/// (`$n IS NULL`), so every listing binds the same seven; a present one is a plain comparison
/// (through `$n IS NULL OR …` SQLite's planner would use no index: `outbox_subject` is what the
/// inbox's question page reads).
pub(crate) fn deliveries_sql(q: &DeliveryQuery) -> String {
    let mut sql = String::from("SELECT * FROM outbox WHERE TRUE");
    for (present, filter, absent) in [
        (q.thread.is_some(), " AND thread = $1", " AND $1 IS NULL"),
        (q.notice.is_some(), " AND notice = $2", " AND $2 IS NULL"),
        (q.subject.is_some(), " AND subject = $3", " AND $3 IS NULL"),
        (q.channel.is_some(), " AND channel = $4", " AND $4 IS NULL"),
        (
            q.recipient.is_some(),
            " AND recipient = $5",
            " AND $5 IS NULL",
        ),
        (q.before.is_some(), " AND id < $6", " AND $6 IS NULL"),
    ] {
        sql.push_str(if present { filter } else { absent });
    }
    let statuses: Vec<&str> = [
        DeliveryStatus::Pending,
        DeliveryStatus::Delivered,
        DeliveryStatus::Failed,
    ]
    .into_iter()
    .filter(|s| q.status.contains(s))
    .map(|s| match s {
        DeliveryStatus::Pending => "'pending'",
        DeliveryStatus::Delivered => "'delivered'",
        DeliveryStatus::Failed => "'failed'",
    })
    .collect();
    if !statuses.is_empty() {
        sql.push_str(" AND status IN (");
        sql.push_str(&statuses.join(", "));
        sql.push(')');
    }
    sql.push_str(" ORDER BY id DESC LIMIT CAST($7 AS BIGINT)");
    sql
}

/// `impl NotifyStore for $store`, the decoders of its rows, and `outbox_insert` (which
/// `push_impl!` shares). `$begin` starts write transactions; `$skip_locked` ends the select a
/// claim takes rows from.
macro_rules! notify_impl {
    ($store:ident, $db:ty, $begin:literal, $skip_locked:literal) => {
        fn notice_from_row(row: &<$db as sqlx::Database>::Row) -> Result<duet_server_store::Notice, StoreError> {
            let thread: String = row.try_get("thread").map_err(db_error)?;
            Ok(duet_server_store::Notice {
                id: row.try_get("id").map_err(db_error)?,
                thread: thread.parse().map_err(|_| corrupt("notice thread", &thread))?,
                seq: row.try_get("seq").map_err(db_error)?,
                session: row.try_get("session").map_err(db_error)?,
                fact: row.try_get("fact").map_err(db_error)?,
                data: row.try_get("data").map_err(db_error)?,
                created_at: row.try_get("created_at").map_err(db_error)?,
            })
        }

        fn delivery_from_row(row: &<$db as sqlx::Database>::Row) -> Result<duet_server_store::Delivery, StoreError> {
            let thread: Option<String> = row.try_get("thread").map_err(db_error)?;
            let status: String = row.try_get("status").map_err(db_error)?;
            Ok(duet_server_store::Delivery {
                id: row.try_get("id").map_err(db_error)?,
                channel: row.try_get("channel").map_err(db_error)?,
                stream: row.try_get("stream").map_err(db_error)?,
                target: row.try_get("target").map_err(db_error)?,
                notice: row.try_get("notice").map_err(db_error)?,
                thread: thread
                    .map(|t| t.parse().map_err(|_| corrupt("delivery thread", &t)))
                    .transpose()?,
                event: row.try_get("event").map_err(db_error)?,
                subject: row.try_get("subject").map_err(db_error)?,
                subscription: row.try_get("subscription").map_err(db_error)?,
                recipient: row.try_get("recipient").map_err(db_error)?,
                body: row.try_get("body").map_err(db_error)?,
                meta: row.try_get("meta").map_err(db_error)?,
                idempotency_key: row.try_get("idempotency_key").map_err(db_error)?,
                attempts: row.try_get("attempts").map_err(db_error)?,
                status: duet_server_store::DeliveryStatus::parse(&status)
                    .ok_or_else(|| corrupt("delivery status", &status))?,
                next_at: row.try_get("next_at").map_err(db_error)?,
                last_error: row.try_get("last_error").map_err(db_error)?,
                response: row.try_get("response").map_err(db_error)?,
                created_at: row.try_get("created_at").map_err(db_error)?,
                finished_at: row.try_get("finished_at").map_err(db_error)?,
            })
        }

        fn link_from_row(row: &<$db as sqlx::Database>::Row) -> Result<duet_server_store::Link, StoreError> {
            Ok(duet_server_store::Link {
                id: row.try_get("id").map_err(db_error)?,
                approval: row.try_get("approval").map_err(db_error)?,
                action: row.try_get("action").map_err(db_error)?,
                approver: row.try_get("approver").map_err(db_error)?,
                roles: row.try_get("roles").map_err(db_error)?,
                delivery: row.try_get("delivery").map_err(db_error)?,
                expires_at: row.try_get("expires_at").map_err(db_error)?,
                used_at: row.try_get("used_at").map_err(db_error)?,
                used_by: row.try_get("used_by").map_err(db_error)?,
                revoked_at: row.try_get("revoked_at").map_err(db_error)?,
                created_at: row.try_get("created_at").map_err(db_error)?,
            })
        }

        fn subscription_from_row(row: &<$db as sqlx::Database>::Row) -> Result<duet_server_store::Subscription, StoreError> {
            Ok(duet_server_store::Subscription {
                id: row.try_get("id").map_err(db_error)?,
                principal: row.try_get("principal").map_err(db_error)?,
                channel: row.try_get("channel").map_err(db_error)?,
                target: row.try_get("target").map_err(db_error)?,
                events: row.try_get("events").map_err(db_error)?,
                agents: row.try_get("agents").map_err(db_error)?,
                secret: row.try_get("secret").map_err(db_error)?,
                created_at: row.try_get("created_at").map_err(db_error)?,
            })
        }

        /// Puts `d` in the outbox inside `tx`, pending and due at its `due_at`, made at
        /// `created_at`: its id.
        async fn outbox_insert(
            tx: &mut sqlx::Transaction<'_, $db>,
            d: &duet_server_store::NewDelivery,
            created_at: i64,
        ) -> Result<i64, StoreError> {
            sqlx::query_scalar(
                "INSERT INTO outbox (channel, stream, target, notice, thread, event, subject, subscription, recipient, body, meta, \
                 idempotency_key, attempts, next_at, status, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 0, $13, 'pending', $14) RETURNING id",
            )
            .bind(&d.channel)
            .bind(&d.stream)
            .bind(&d.target)
            .bind(d.notice)
            .bind(d.thread.map(|t| t.to_string()))
            .bind(&d.event)
            .bind(&d.subject)
            .bind(&d.subscription)
            .bind(&d.recipient)
            .bind(&d.body)
            .bind(&d.meta)
            .bind(&d.idempotency_key)
            .bind(d.due_at)
            .bind(created_at)
            .fetch_one(&mut **tx)
            .await
            .map_err(db_error)
        }

        #[async_trait]
        impl duet_server_store::NotifyStore for $store {
            async fn notices(&self, limit: usize) -> Result<Vec<duet_server_store::Notice>, StoreError> {
                let rows = sqlx::query("SELECT * FROM notices WHERE routed_at IS NULL ORDER BY id LIMIT CAST($1 AS BIGINT)")
                    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                    .fetch_all(&self.read)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(notice_from_row).collect()
            }

            async fn route_notice(
                &self,
                id: i64,
                deliveries: &[duet_server_store::NewDelivery],
                links: &[(duet_server_store::Link, Option<usize>)],
                now: i64,
            ) -> Result<bool, StoreError> {
                // A link naming a delivery that is not there is the caller's bug: refused
                // before anything is written.
                if let Some((link, Some(at))) = links.iter().find(|(_, at)| at.is_some_and(|at| at >= deliveries.len())) {
                    return Err(StoreError::Conflict(format!(
                        "link `{}` names delivery {at} of {} routed from notice {id}",
                        link.id,
                        deliveries.len()
                    )));
                }
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                // The row lock decides between two routers: the second finds it routed (or gone).
                let marked = sqlx::query("UPDATE notices SET routed_at = $2 WHERE id = $1 AND routed_at IS NULL")
                    .bind(id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                if marked.rows_affected() != 1 {
                    tx.rollback().await.map_err(db_error)?;
                    return Ok(false);
                }
                if deliveries.is_empty() {
                    sqlx::query("DELETE FROM notices WHERE id = $1")
                        .bind(id)
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                }
                let mut ids = Vec::with_capacity(deliveries.len());
                for d in deliveries {
                    ids.push(outbox_insert(&mut tx, d, now).await?);
                }
                for (l, at) in links {
                    sqlx::query(
                        "INSERT INTO links (id, approval, action, approver, roles, delivery, expires_at, used_at, used_by, revoked_at, created_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                    )
                    .bind(&l.id)
                    .bind(&l.approval)
                    .bind(&l.action)
                    .bind(&l.approver)
                    .bind(&l.roles)
                    .bind(at.and_then(|at| ids.get(at).copied()))
                    .bind(l.expires_at)
                    .bind(l.used_at)
                    .bind(&l.used_by)
                    .bind(l.revoked_at)
                    .bind(l.created_at)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                }
                tx.commit().await.map_err(db_error)?;
                Ok(true)
            }

            async fn route_to_nobody(&self, ids: &[i64], _now: i64) -> Result<usize, StoreError> {
                if ids.is_empty() {
                    return Ok(0);
                }
                // One statement for a pass's notices (a router's batch: a few dozen ids). A
                // notice another router marked first (its deliveries in the same transaction)
                // has `routed_at` set and stays.
                let list = (1..=ids.len()).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ");
                let sql = format!("DELETE FROM notices WHERE routed_at IS NULL AND id IN ({list})");
                // Only numbered placeholders are spliced in: the ids are bound.
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
                for id in ids {
                    query = query.bind(id);
                }
                let mut conn = self.writer().await?;
                let done = query.execute(&mut *conn).await.map_err(db_error)?;
                Ok(usize::try_from(done.rows_affected()).unwrap_or(usize::MAX))
            }

            async fn hold_notices(&self, until: i64, now: i64) -> Result<bool, StoreError> {
                // The conditions are the row's own and a read of `subscriptions`; a
                // subscription committed meanwhile is seen by the copies' own check.
                let mut conn = self.writer().await?;
                let done = sqlx::query(
                    "UPDATE notices_held SET held_until = $1 WHERE id = 1 AND needed_until <= $2 \
                       AND NOT EXISTS (SELECT 1 FROM subscriptions)",
                )
                .bind(until)
                .bind(now)
                .execute(&mut *conn)
                .await
                .map_err(db_error)?;
                Ok(done.rows_affected() > 0)
            }

            async fn need_notices(&self, until: i64) -> Result<(), StoreError> {
                let mut conn = self.writer().await?;
                sqlx::query("UPDATE notices_held SET held_until = 0, needed_until = $1 WHERE id = 1")
                    .bind(until)
                    .execute(&mut *conn)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            async fn enqueue(&self, deliveries: &[duet_server_store::NewDelivery]) -> Result<Vec<i64>, StoreError> {
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                let mut ids = Vec::with_capacity(deliveries.len());
                for d in deliveries {
                    ids.push(outbox_insert(&mut tx, d, d.due_at).await?);
                }
                tx.commit().await.map_err(db_error)?;
                Ok(ids)
            }

            async fn claim_deliveries(&self, now: i64, lease_ms: i64, limit: usize) -> Result<Vec<duet_server_store::Delivery>, StoreError> {
                if limit == 0 {
                    return Ok(Vec::new());
                }
                // One statement: the due heads of their streams (a pending row with an older
                // pending row in its stream waits), locked (Postgres: skipping those another
                // claim holds) and leased.
                let rows = sqlx::query(concat!(
                    "UPDATE outbox SET next_at = $3 WHERE id IN (SELECT o.id FROM outbox o \
                     WHERE o.status = 'pending' AND o.next_at <= $1 \
                     AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.stream = o.stream AND e.status = 'pending' AND e.id < o.id) \
                     ORDER BY o.id LIMIT CAST($2 AS BIGINT)",
                    $skip_locked,
                    ") RETURNING *"
                ))
                .bind(now)
                .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                .bind(now.saturating_add(lease_ms))
                .fetch_all(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                let mut claimed: Vec<duet_server_store::Delivery> = rows.iter().map(delivery_from_row).collect::<Result<_, _>>()?;
                claimed.sort_by_key(|d| d.id);
                Ok(claimed)
            }

            async fn delivered(&self, id: i64, response: Option<&str>, now: i64) -> Result<(), StoreError> {
                sqlx::query(
                    // What it was sent with (a webhook's secret, a push config's credentials)
                    // is not kept past its delivery.
                    "UPDATE outbox SET status = 'delivered', response = $2, finished_at = $3, next_at = $3, meta = NULL \
                     WHERE id = $1 AND status = 'pending'",
                )
                .bind(id)
                .bind(response)
                .bind(now)
                .execute(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            async fn delivery_failed(&self, id: i64, next_at: Option<i64>, error: &str, now: i64) -> Result<(), StoreError> {
                let query = match next_at {
                    Some(at) => sqlx::query(
                        "UPDATE outbox SET attempts = attempts + 1, next_at = $2, last_error = $3 WHERE id = $1 AND status = 'pending'",
                    )
                    .bind(id)
                    .bind(at)
                    .bind(error),
                    None => sqlx::query(
                        "UPDATE outbox SET attempts = attempts + 1, status = 'failed', next_at = $2, finished_at = $2, last_error = $3 \
                         WHERE id = $1 AND status = 'pending'",
                    )
                    .bind(id)
                    .bind(now)
                    .bind(error),
                };
                query.execute(&mut *self.writer().await?).await.map_err(db_error)?;
                Ok(())
            }

            async fn retry_delivery(&self, id: i64, now: i64) -> Result<bool, StoreError> {
                let done = sqlx::query(
                    "UPDATE outbox SET status = 'pending', attempts = 0, next_at = $2, finished_at = NULL \
                     WHERE id = $1 AND status = 'failed'",
                )
                .bind(id)
                .bind(now)
                .execute(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                Ok(done.rows_affected() == 1)
            }

            async fn delivery(&self, id: i64) -> Result<Option<duet_server_store::Delivery>, StoreError> {
                let row = sqlx::query("SELECT * FROM outbox WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.read)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(delivery_from_row).transpose()
            }

            async fn deliveries(&self, q: &duet_server_store::DeliveryQuery) -> Result<Vec<duet_server_store::Delivery>, StoreError> {
                if q.limit == 0 {
                    return Ok(Vec::new());
                }
                let sql = crate::notify_sql::deliveries_sql(q);
                // No value is in the text: it is one of the fixed fragments' combinations.
                let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(q.thread.map(|t| t.to_string()))
                    .bind(q.notice)
                    .bind(&q.subject)
                    .bind(&q.channel)
                    .bind(&q.recipient)
                    .bind(q.before)
                    .bind(i64::try_from(q.limit).unwrap_or(i64::MAX))
                    .fetch_all(&self.read)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(delivery_from_row).collect()
            }

            async fn delivery_counts(&self) -> Result<Vec<(String, duet_server_store::DeliveryStatus, i64)>, StoreError> {
                let rows = sqlx::query("SELECT channel, status, COUNT(*) AS n FROM outbox GROUP BY channel, status ORDER BY channel, status")
                    .fetch_all(&self.read)
                    .await
                    .map_err(db_error)?;
                rows.iter()
                    .map(|row| {
                        let status: String = row.try_get("status").map_err(db_error)?;
                        Ok((
                            row.try_get("channel").map_err(db_error)?,
                            duet_server_store::DeliveryStatus::parse(&status)
                                .ok_or_else(|| corrupt("delivery status", &status))?,
                            row.try_get("n").map_err(db_error)?,
                        ))
                    })
                    .collect()
            }

            async fn link(&self, id: &str) -> Result<Option<duet_server_store::Link>, StoreError> {
                let row = sqlx::query("SELECT * FROM links WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.read)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(link_from_row).transpose()
            }

            async fn use_link(&self, id: &str, by: &str, now: i64) -> Result<duet_server_store::LinkUse, StoreError> {
                use duet_server_store::LinkUse;
                let mut conn = self.writer().await?;
                // One statement takes it: of two followers, the second finds it used (Postgres
                // re-reads the row the first one locked; SQLite has one writer).
                let first = sqlx::query(
                    "UPDATE links SET used_at = $3, used_by = $2 \
                     WHERE id = $1 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $3 RETURNING *",
                )
                .bind(id)
                .bind(by)
                .bind(now)
                .fetch_optional(&mut *conn)
                .await
                .map_err(db_error)?;
                if let Some(row) = first {
                    return Ok(LinkUse::First(link_from_row(&row)?));
                }
                let row = sqlx::query("SELECT * FROM links WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&mut *conn)
                    .await
                    .map_err(db_error)?;
                let Some(link) = row.as_ref().map(link_from_row).transpose()? else {
                    return Ok(LinkUse::Unknown);
                };
                Ok(if link.used_at.is_some() {
                    LinkUse::Used(link)
                } else if link.revoked_at.is_some() {
                    LinkUse::Revoked(link)
                } else {
                    // Not used, not revoked, and the update did not take it: past its time.
                    LinkUse::Expired(link)
                })
            }

            async fn revoke_links(&self, approval: &str, now: i64) -> Result<u64, StoreError> {
                let done = sqlx::query(
                    "UPDATE links SET revoked_at = $2 WHERE approval = $1 AND used_at IS NULL AND revoked_at IS NULL",
                )
                .bind(approval)
                .bind(now)
                .execute(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                Ok(done.rows_affected())
            }

            async fn put_subscription(&self, s: &duet_server_store::Subscription) -> Result<(), StoreError> {
                // A taken id: `db_error` makes it a `Conflict`.
                sqlx::query(
                    "INSERT INTO subscriptions (id, principal, channel, target, events, agents, secret, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(&s.id)
                .bind(&s.principal)
                .bind(&s.channel)
                .bind(&s.target)
                .bind(&s.events)
                .bind(&s.agents)
                .bind(&s.secret)
                .bind(s.created_at)
                .execute(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            async fn subscriptions(&self, principal: Option<&str>) -> Result<Vec<duet_server_store::Subscription>, StoreError> {
                let rows = sqlx::query("SELECT * FROM subscriptions WHERE ($1 IS NULL OR principal = $1) ORDER BY created_at, id")
                    .bind(principal)
                    .fetch_all(&self.read)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(subscription_from_row).collect()
            }

            async fn delete_subscription(&self, principal: Option<&str>, id: &str) -> Result<bool, StoreError> {
                let done = sqlx::query("DELETE FROM subscriptions WHERE id = $2 AND ($1 IS NULL OR principal = $1)")
                    .bind(principal)
                    .bind(id)
                    .execute(&mut *self.writer().await?)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() == 1)
            }

            async fn secret(&self, name: &str, fresh: &str) -> Result<String, StoreError> {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
                let mut conn = self.writer().await?;
                // The first writer's stays; a concurrent second waits for it, then reads it.
                sqlx::query("INSERT INTO secrets (name, value, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING")
                    .bind(name)
                    .bind(fresh)
                    .bind(now)
                    .execute(&mut *conn)
                    .await
                    .map_err(db_error)?;
                sqlx::query_scalar("SELECT value FROM secrets WHERE name = $1")
                    .bind(name)
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(db_error)
            }
        }
    };
}
pub(crate) use notify_impl;
