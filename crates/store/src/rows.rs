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

        fn message_from_row(row: &<$db as sqlx::Database>::Row) -> Result<Message, StoreError> {
            let opt = |c: &str| row.try_get::<Option<String>, _>(c).map_err(db_error);
            let role: String = row.try_get("role").map_err(db_error)?;
            let tool_calls = match opt("tool_calls")? {
                Some(s) => serde_json::from_str(&s).map_err(|_| corrupt("tool calls", &s))?,
                None => Vec::new(),
            };
            // A message's `data`: its usage and provider data, when it has any.
            let extra: Option<serde_json::Value> = match opt("data")? {
                Some(s) => Some(serde_json::from_str(&s).map_err(|_| corrupt("message data", &s))?),
                None => None,
            };
            Ok(Message {
                seq: row.try_get("seq").map_err(db_error)?,
                session: row.try_get("session").map_err(db_error)?,
                role: Role::parse(&role).ok_or_else(|| corrupt("role", &role))?,
                side: opt("side")?.and_then(|s| parse_side(&s)),
                content: opt("content")?,
                thinking: opt("thinking")?,
                tool_calls,
                tool_call_id: opt("tool_call_id")?,
                tool_name: opt("tool_name")?,
                tool_status: opt("tool_status")?.and_then(|s| ToolStatus::parse(&s)),
                silent: row.try_get("silent").map_err(db_error)?,
                model: opt("model")?,
                usage: extra
                    .as_ref()
                    .and_then(|e| e.get("usage"))
                    .and_then(|u| serde_json::from_value(u.clone()).ok()),
                images: match extra.as_ref().and_then(|e| e.get("images")) {
                    Some(v) => serde_json::from_value(v.clone())
                        .map_err(|_| corrupt("message images", &v.to_string()))?,
                    None => Vec::new(),
                },
                attachments: match extra.as_ref().and_then(|e| e.get("attachments")) {
                    Some(v) => serde_json::from_value(v.clone())
                        .map_err(|_| corrupt("message attachments", &v.to_string()))?,
                    None => Vec::new(),
                },
                message_id: extra
                    .as_ref()
                    .and_then(|e| e.get("messageId"))
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned),
                provider_data: extra
                    .and_then(|mut e| e.get_mut("providerData").map(serde_json::Value::take)),
                created_at: row.try_get("created_at").map_err(db_error)?,
            })
        }

        /// A journal row as what it is: a message (kind `message`) or a record.
        fn entry_from_row(row: &<$db as sqlx::Database>::Row) -> Result<JournalEntry, StoreError> {
            let kind: String = row.try_get("kind").map_err(db_error)?;
            if kind == "message" {
                message_from_row(row).map(JournalEntry::Message)
            } else {
                record_from_row(row).map(JournalEntry::Record)
            }
        }

        fn record_from_row(row: &<$db as sqlx::Database>::Row) -> Result<Record, StoreError> {
            let kind: String = row.try_get("kind").map_err(db_error)?;
            let data: String = row.try_get("data").map_err(db_error)?;
            let body =
                RecordBody::from_stored(&kind, &data).map_err(|_| corrupt("record data", &data))?;
            Ok(Record {
                seq: row.try_get("seq").map_err(db_error)?,
                body,
                created_at: row.try_get("created_at").map_err(db_error)?,
            })
        }
    };
}
pub(crate) use decoders;
