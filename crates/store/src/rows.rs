//! Reading rows back: the decoders both backends share, stamped out per backend by `decoders!`
//! (inside `store_impl!`), since the row types differ.

/// `corrupt` and the `*_from_row` decoders for database `$db`'s rows.
macro_rules! decoders {
    ($db:ty) => {
        fn corrupt(what: &str, value: &str) -> StoreError {
            StoreError::Corrupt(format!("{what} `{value}`"))
        }

        fn queued_from_row(row: &<$db as sqlx::Database>::Row) -> Result<Queued, StoreError> {
            let role: String = row.try_get("role").map_err(db_error)?;
            let side: String = row.try_get("side").map_err(db_error)?;
            Ok(Queued {
                id: row.try_get("id").map_err(db_error)?,
                role: Role::parse(&role).ok_or_else(|| corrupt("role", &role))?,
                side: parse_side(&side).ok_or_else(|| corrupt("side", &side))?,
                content: row.try_get("content").map_err(db_error)?,
                human: row.try_get("human").map_err(db_error)?,
                silent: row.try_get("silent").map_err(db_error)?,
                follow_up: row.try_get("follow_up").map_err(db_error)?,
                trace: row.try_get("trace").map_err(db_error)?,
                message_id: row.try_get("message_id").map_err(db_error)?,
                attachments: match row
                    .try_get::<Option<String>, _>("attachments")
                    .map_err(db_error)?
                {
                    Some(s) => {
                        serde_json::from_str(&s).map_err(|_| corrupt("queued attachments", &s))?
                    }
                    None => Vec::new(),
                },
                images: match row
                    .try_get::<Option<String>, _>("images")
                    .map_err(db_error)?
                {
                    Some(s) => {
                        serde_json::from_str(&s).map_err(|_| corrupt("queued images", &s))?
                    }
                    None => Vec::new(),
                },
                tool: {
                    let call: Option<String> = row.try_get("tool_call_id").map_err(db_error)?;
                    let name: Option<String> = row.try_get("tool_name").map_err(db_error)?;
                    let status: Option<String> = row.try_get("tool_status").map_err(db_error)?;
                    match call {
                        None => None,
                        Some(call_id) => {
                            let status = status.unwrap_or_default();
                            Some(ToolReply {
                                call_id,
                                name: name.unwrap_or_default(),
                                status: ToolStatus::parse(&status)
                                    .ok_or_else(|| corrupt("tool status", &status))?,
                            })
                        }
                    }
                },
                decision: match row
                    .try_get::<Option<String>, _>("decision")
                    .map_err(db_error)?
                {
                    Some(s) => {
                        Some(serde_json::from_str(&s).map_err(|_| corrupt("queued decision", &s))?)
                    }
                    None => None,
                },
                created_at: row.try_get("created_at").map_err(db_error)?,
            })
        }

        fn thread_from_row(row: &<$db as sqlx::Database>::Row) -> Result<Thread, StoreError> {
            let text = |c: &str| row.try_get::<String, _>(c).map_err(db_error);
            let opt = |c: &str| row.try_get::<Option<String>, _>(c).map_err(db_error);
            let int = |c: &str| row.try_get::<i64, _>(c).map_err(db_error);
            let uuid = |s: String| Uuid::parse_str(&s).map_err(|_| corrupt("thread id", &s));
            let status = text("status")?;
            Ok(Thread {
                id: uuid(text("id")?)?,
                key: text("key")?,
                agent: text("agent")?,
                origin: text("origin")?,
                parent: opt("parent")?.map(uuid).transpose()?,
                principal: opt("principal")?,
                source: opt("source")?,
                status: ThreadStatus::parse(&status).ok_or_else(|| corrupt("status", &status))?,
                status_text: opt("status_text")?,
                session: int("session")?,
                session_open: row.try_get::<bool, _>("session_open").map_err(db_error)?,
                stop_reason: match opt("stop_reason")? {
                    Some(s) => {
                        Some(StopReason::parse(&s).ok_or_else(|| corrupt("stop reason", &s))?)
                    }
                    None => None,
                },
                result: opt("result")?,
                turns: duet_runtime::PerSide::new(int("turns_a")?, int("turns_b")?),
                steps: duet_runtime::PerSide::new(int("steps_a")?, int("steps_b")?),
                steps_total: int("steps_total")?,
                acting: opt("acting")?.and_then(|s| parse_side(&s)),
                watermarks: duet_runtime::PerSide::new(int("watermark_a")?, int("watermark_b")?),
                next_seq: int("next_seq")?,
                lease_owner: opt("lease_owner")?.map(uuid).transpose()?,
                lease_expires: int("lease_expires")?,
                created_at: int("created_at")?,
                updated_at: int("updated_at")?,
            })
        }

        fn child_from_row(row: &<$db as sqlx::Database>::Row) -> Result<Child, StoreError> {
            let text = |c: &str| row.try_get::<String, _>(c).map_err(db_error);
            let uuid = |s: String| Uuid::parse_str(&s).map_err(|_| corrupt("thread id", &s));
            let owner = text("owner")?;
            Ok(Child {
                child: uuid(text("child")?)?,
                parent: uuid(text("parent")?)?,
                relationship: text("relationship")?,
                owner: parse_side(&owner).ok_or_else(|| corrupt("side", &owner))?,
                agent: text("agent")?,
                name: row.try_get("name").map_err(db_error)?,
                blocking: row.try_get("blocking").map_err(db_error)?,
                explicit: row.try_get("explicit").map_err(db_error)?,
                status: {
                    let s = text("status")?;
                    ChildStatus::parse(&s).ok_or_else(|| corrupt("child status", &s))?
                },
                status_text: row.try_get("status_text").map_err(db_error)?,
                awaiting: row.try_get("awaiting").map_err(db_error)?,
                created_at: row.try_get("created_at").map_err(db_error)?,
                arguments: {
                    let s = text("arguments")?;
                    serde_json::from_str(&s).map_err(|_| corrupt("child arguments", &s))?
                },
                env: {
                    let s = text("env")?;
                    serde_json::from_str(&s).map_err(|_| corrupt("child env", &s))?
                },
            })
        }

        /// The column `name` of `row`'s result set, by position.
        fn column(row: &<$db as sqlx::Database>::Row, name: &str) -> Result<usize, StoreError> {
            row.try_column(name)
                .map(sqlx::Column::ordinal)
                .map_err(db_error)
        }

        /// Where a message's columns are in a result set: found by name once for all its rows
        /// (a lookup by name hashes the name, for every column of every row).
        #[derive(Clone, Copy)]
        struct MessageAt {
            seq: usize,
            session: usize,
            role: usize,
            side: usize,
            content: usize,
            thinking: usize,
            tool_calls: usize,
            tool_call_id: usize,
            tool_name: usize,
            tool_status: usize,
            silent: usize,
            model: usize,
            data: usize,
            created_at: usize,
        }

        impl MessageAt {
            fn of(row: &<$db as sqlx::Database>::Row) -> Result<Self, StoreError> {
                Ok(Self {
                    seq: column(row, "seq")?,
                    session: column(row, "session")?,
                    role: column(row, "role")?,
                    side: column(row, "side")?,
                    content: column(row, "content")?,
                    thinking: column(row, "thinking")?,
                    tool_calls: column(row, "tool_calls")?,
                    tool_call_id: column(row, "tool_call_id")?,
                    tool_name: column(row, "tool_name")?,
                    tool_status: column(row, "tool_status")?,
                    silent: column(row, "silent")?,
                    model: column(row, "model")?,
                    data: column(row, "data")?,
                    created_at: column(row, "created_at")?,
                })
            }
        }

        impl MessageAt {
            /// `found`, or where the columns are in `row` when nothing was found yet (a result
            /// set whose first rows are not messages).
            fn once(
                found: &mut Option<Self>,
                row: &<$db as sqlx::Database>::Row,
            ) -> Result<Self, StoreError> {
                match found {
                    Some(at) => Ok(*at),
                    None => Ok(*found.insert(Self::of(row)?)),
                }
            }
        }

        /// Where a record's columns are in a result set ([`MessageAt`]'s reason).
        #[derive(Clone, Copy)]
        struct RecordAt {
            seq: usize,
            kind: usize,
            data: usize,
            created_at: usize,
        }

        impl RecordAt {
            fn of(row: &<$db as sqlx::Database>::Row) -> Result<Self, StoreError> {
                Ok(Self {
                    seq: column(row, "seq")?,
                    kind: column(row, "kind")?,
                    data: column(row, "data")?,
                    created_at: column(row, "created_at")?,
                })
            }
        }

        fn message_from_row(row: &<$db as sqlx::Database>::Row) -> Result<Message, StoreError> {
            message_at(row, &MessageAt::of(row)?)
        }

        fn message_at(
            row: &<$db as sqlx::Database>::Row,
            at: &MessageAt,
        ) -> Result<Message, StoreError> {
            let opt = |c: usize| row.try_get::<Option<String>, _>(c).map_err(db_error);
            let role: String = row.try_get(at.role).map_err(db_error)?;
            let tool_calls = match opt(at.tool_calls)? {
                Some(s) => serde_json::from_str(&s).map_err(|_| corrupt("tool calls", &s))?,
                None => Vec::new(),
            };
            // A message's `data`: its usage, provider data, files and sender's id, if any.
            let unreadable = |e: crate::message_data::Unreadable| corrupt(e.what, &e.text);
            let mut data =
                crate::message_data::read(opt(at.data)?.as_deref()).map_err(unreadable)?;
            Ok(Message {
                seq: row.try_get(at.seq).map_err(db_error)?,
                session: row.try_get(at.session).map_err(db_error)?,
                role: Role::parse(&role).ok_or_else(|| corrupt("role", &role))?,
                side: opt(at.side)?.and_then(|s| parse_side(&s)),
                content: opt(at.content)?,
                thinking: opt(at.thinking)?,
                tool_calls,
                tool_call_id: opt(at.tool_call_id)?,
                tool_name: opt(at.tool_name)?,
                tool_status: opt(at.tool_status)?.and_then(|s| ToolStatus::parse(&s)),
                silent: row.try_get(at.silent).map_err(db_error)?,
                model: opt(at.model)?,
                usage: data.usage(),
                images: data.images().map_err(unreadable)?,
                attachments: data.attachments().map_err(unreadable)?,
                message_id: data.message_id(),
                provider_data: data.provider_data(),
                created_at: row.try_get(at.created_at).map_err(db_error)?,
            })
        }

        /// The rows of one result set as messages.
        fn messages(rows: &[<$db as sqlx::Database>::Row]) -> Result<Vec<Message>, StoreError> {
            let Some(first) = rows.first() else {
                return Ok(Vec::new());
            };
            let at = MessageAt::of(first)?;
            rows.iter().map(|row| message_at(row, &at)).collect()
        }

        /// The rows of one result set as journal entries: a message (kind `message`) or a
        /// record each.
        fn entries(rows: &[<$db as sqlx::Database>::Row]) -> Result<Vec<JournalEntry>, StoreError> {
            let Some(first) = rows.first() else {
                return Ok(Vec::new());
            };
            let record = RecordAt::of(first)?;
            // Found at the first message: a result set of records alone need not have them.
            let mut message = None;
            rows.iter()
                .map(|row| {
                    let kind: String = row.try_get(record.kind).map_err(db_error)?;
                    if kind != "message" {
                        return record_at(row, &record, &kind).map(JournalEntry::Record);
                    }
                    let at = MessageAt::once(&mut message, row)?;
                    message_at(row, &at).map(JournalEntry::Message)
                })
                .collect()
        }

        /// The rows of one result set as records.
        fn records(rows: &[<$db as sqlx::Database>::Row]) -> Result<Vec<Record>, StoreError> {
            let Some(first) = rows.first() else {
                return Ok(Vec::new());
            };
            let at = RecordAt::of(first)?;
            rows.iter()
                .map(|row| {
                    let kind: String = row.try_get(at.kind).map_err(db_error)?;
                    record_at(row, &at, &kind)
                })
                .collect()
        }

        /// A record of kind `kind` (its column, read by the caller).
        fn record_at(
            row: &<$db as sqlx::Database>::Row,
            at: &RecordAt,
            kind: &str,
        ) -> Result<Record, StoreError> {
            let data: String = row.try_get(at.data).map_err(db_error)?;
            let body =
                RecordBody::from_stored(kind, &data).map_err(|_| corrupt("record data", &data))?;
            Ok(Record {
                seq: row.try_get(at.seq).map_err(db_error)?,
                body,
                created_at: row.try_get(at.created_at).map_err(db_error)?,
            })
        }
    };
}
pub(crate) use decoders;
