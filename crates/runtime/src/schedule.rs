//! Scheduling effects from code: [`ThreadState::schedule_effect`],
//! [`ThreadState::scheduled_effects`] and [`ThreadState::remove_scheduled_effect`] (the spec's
//! `scheduleEffect`, `getScheduledEffects`, `removeScheduledEffect`). A scheduled effect is a
//! timer of kind `effect` written with the commit of the delivery (or step, or effect run) that
//! scheduled it, so it exists exactly when that commit does; a removal is a cancel in that
//! commit. Arguments are checked against the effect's `args` schema here, and again when it runs.
//!
//! An `effect:` tool (a duet extension) schedules without code: [`tool_timer`] makes a call's
//! timer, which the caller writes with its commit (the step's, the approved call's, the
//! handler delivery's).

use serde::Serialize;
use uuid::Uuid;

use duet_spec::ToolImpl;

use crate::handler::{HandlerError, ThreadState};
use crate::store::{NewTimer, Timer, TimerKind, TimerQuery, TimerStatus};
use crate::tools::{ToolContext, ToolResult, Tools};

/// A pending scheduled effect (the spec's `ScheduledEffect`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledEffect {
    /// Its id (what `schedule_effect` returned).
    pub id: Uuid,
    /// The effect's name.
    pub name: String,
    /// Its arguments.
    pub args: serde_json::Value,
    /// When it is due (ms since the Unix epoch).
    pub scheduled_at: i64,
    /// When it was scheduled (ms).
    pub created_at: i64,
}

impl ScheduledEffect {
    fn of(t: &Timer) -> Self {
        ScheduledEffect {
            id: t.id,
            name: t.name.clone(),
            args: t.args.clone(),
            scheduled_at: t.due_at,
            created_at: t.created_at,
        }
    }
}

/// How many pending effects of a thread [`ThreadState::scheduled_effects`] reads at most.
const LIST_LIMIT: usize = 1_000;

/// The timer that schedules effect `name` of `project` with `args`, due at `due_at`; refused
/// (with why) when the project defines no such effect or `args` do not pass its schema.
pub(crate) fn effect_timer(
    project: &duet_spec::Project,
    name: &str,
    args: serde_json::Value,
    due_at: i64,
) -> Result<NewTimer, String> {
    let Some(def) = project.effects.get(name).map(|d| &d.def) else {
        let names: Vec<&str> = project.effects.keys().map(String::as_str).collect();
        let known = if names.is_empty() {
            "the project defines none".to_owned()
        } else {
            format!("effects: {}", names.join(", "))
        };
        return Err(format!("no effect `{name}` ({known})"));
    };
    check_args(def, &args)?;
    Ok(NewTimer {
        id: Uuid::now_v7(),
        kind: TimerKind::Effect,
        name: name.to_owned(),
        args,
        subject: None,
        due_at,
        max_attempts: def.max_attempts,
    })
}

/// A call of `tool`, an `effect:` tool scheduling `effect`, at `now`: its timer (the call's
/// arguments less `delayMs` / `at`, due that many ms after `now`, at that time, or at `now`)
/// and the result the model sees. An error result, nothing scheduled, when the time or the
/// effect's arguments are refused.
pub(crate) fn tool_timer(
    project: &duet_spec::Project,
    tool: &str,
    effect: &str,
    args: &serde_json::Value,
    now: i64,
) -> Result<(NewTimer, ToolResult), ToolResult> {
    let refused = |why: String| ToolResult::error(format!("Nothing was scheduled: {why}"));
    let mut rest = match args {
        serde_json::Value::Object(m) => m.clone(),
        serde_json::Value::Null => serde_json::Map::new(),
        _ => {
            return Err(refused(format!(
                "the arguments of `{tool}` are not an object"
            )));
        }
    };
    // A model may send an optional property as null: that is not saying when.
    let mut take = |key: &str| rest.remove(key).filter(|v| !v.is_null());
    let (delay, at) = (take(ToolImpl::DELAY_ARG), take(ToolImpl::AT_ARG));
    let due_at = match (delay, at) {
        (Some(_), Some(_)) => {
            return Err(refused("give `delayMs` or `at`, not both".to_owned()));
        }
        (Some(d), None) => match d.as_u64() {
            Some(ms) => now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX)),
            None => {
                return Err(refused(format!(
                    "`delayMs` is a whole number of milliseconds, 0 or more, not {d}"
                )));
            }
        },
        (None, Some(at)) => match at.as_str().map(chrono::DateTime::parse_from_rfc3339) {
            Some(Ok(t)) => t.timestamp_millis(),
            _ => {
                return Err(refused(format!(
                    "`at` is an RFC 3339 time (2030-01-31T09:00:00Z), not {at}"
                )));
            }
        },
        (None, None) => now,
    };
    let timer =
        effect_timer(project, effect, serde_json::Value::Object(rest), due_at).map_err(refused)?;
    let result = ToolResult::ok(format!(
        "Scheduled {effect} (id {}) for {}",
        timer.id,
        rfc3339(due_at)
    ));
    Ok((timer, result))
}

impl Tools {
    /// Runs tool `name` as [`Tools::run`] does, for a caller that writes a commit: an
    /// `effect:` tool's call gives, beside its result, the timer it schedules (due from `now`),
    /// for the caller to write with its commit — and only if the result it keeps is a success.
    pub async fn call(
        &self,
        ctx: ToolContext,
        name: &str,
        args: &serde_json::Value,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
        now: i64,
    ) -> (ToolResult, Option<NewTimer>) {
        let Some(tool) = self.project().tools.get(name) else {
            return (self.run(ctx, name, args, env).await, None);
        };
        let Some(ToolImpl::Effect(effect)) = &tool.def.implementation else {
            return (self.run(ctx, name, args, env).await, None);
        };
        let args = match self.check(name, &tool.def, args).await {
            Ok(args) => args,
            Err(refused) => return (refused, None),
        };
        match tool_timer(self.project(), name, effect, &args, now) {
            Ok((timer, result)) => (result, Some(timer)),
            Err(refused) => (refused, None),
        }
    }
}

/// `ms` since the Unix epoch as an RFC 3339 UTC time (milliseconds shown when not zero).
fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms since the Unix epoch"),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
    )
}

/// Whether `args` pass effect `def`'s `args` schema as it is now (an object, without one).
pub(crate) fn check_args(
    def: &duet_spec::EffectDef,
    args: &serde_json::Value,
) -> Result<(), String> {
    let name = &def.name;
    let Some(schema) = &def.args else {
        return if args.is_object() {
            Ok(())
        } else {
            Err(format!("effect `{name}` takes an object of arguments"))
        };
    };
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| format!("effect `{name}`'s `args` schema cannot be compiled: {e}"))?;
    let problems = crate::tools::schema_problems(&validator, args);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "arguments refused by effect `{name}`'s `args` schema: {}",
            problems.join("; ")
        ))
    }
}

impl ThreadState<'_> {
    /// Schedules effect `name` (`agents/effects/`) to run with `args` in `delay_ms` (0: as
    /// soon as a process gets to it), written with this delivery's commit; its id. An unknown
    /// effect, or `args` its schema refuses, is an error at once.
    pub fn schedule_effect(
        &mut self,
        name: &str,
        args: serde_json::Value,
        delay_ms: u64,
    ) -> Result<Uuid, HandlerError> {
        let delay = i64::try_from(delay_ms).unwrap_or(i64::MAX);
        let timer = effect_timer(self.project, name, args, self.now.saturating_add(delay))
            .map_err(HandlerError::new)?;
        let id = timer.id;
        self.writes.timers.push(timer);
        Ok(id)
    }

    /// The thread's pending scheduled effects (of effect `name`, or all), soonest first: the
    /// store's, less those this delivery removed, and this delivery's own.
    pub async fn scheduled_effects(
        &self,
        name: Option<&str>,
    ) -> Result<Vec<ScheduledEffect>, HandlerError> {
        let query = TimerQuery {
            thread: Some(self.thread.id),
            status: Some(TimerStatus::Pending),
            kind: Some(TimerKind::Effect),
            name,
            after: None,
            newest_first: false,
            limit: LIST_LIMIT,
        };
        let mut out: Vec<ScheduledEffect> = self
            .store
            .timers(&query)
            .await?
            .iter()
            .filter(|t| !self.writes.cancel.contains(&t.id))
            .map(ScheduledEffect::of)
            .collect();
        out.extend(
            self.writes
                .timers
                .iter()
                .filter(|t| name.is_none_or(|n| t.name == n))
                .map(|t| ScheduledEffect {
                    id: t.id,
                    name: t.name.clone(),
                    args: t.args.clone(),
                    scheduled_at: t.due_at,
                    created_at: self.now,
                }),
        );
        out.sort_by_key(|e| (e.scheduled_at, e.id));
        Ok(out)
    }

    /// Removes a pending scheduled effect of this thread (cancelled with this delivery's
    /// commit); whether there was one to remove.
    pub async fn remove_scheduled_effect(&mut self, id: Uuid) -> Result<bool, HandlerError> {
        if let Some(i) = self.writes.timers.iter().position(|t| t.id == id) {
            self.writes.timers.remove(i);
            return Ok(true);
        }
        if self.writes.cancel.contains(&id) {
            return Ok(false);
        }
        let pending = self.store.timer(id).await?.is_some_and(|t| {
            t.thread == self.thread.id
                && t.kind == TimerKind::Effect
                && t.status == TimerStatus::Pending
        });
        if pending {
            self.writes.cancel.push(id);
        }
        Ok(pending)
    }
}
