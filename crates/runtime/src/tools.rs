//! Running tools: argument validation against the tool's JSON Schema, declarative `result`
//! templates, and Rust `builtin` tools. (`Tools::call`, which schedules an `effect:` tool's
//! effect, is `crate::schedule`'s.) A bad call never crashes a run: it becomes an error
//! result the model sees.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use duet_spec::{Project, ToolImpl};

use crate::types::{ThreadId, ToolStatus};

/// What a tool call produced.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResult {
    /// Whether the call succeeded.
    pub status: ToolStatus,
    /// The result text the model sees (on failure, what went wrong).
    pub content: String,
    /// Thread files the call returns (written by the tool, or copied back from a child): their
    /// paths are listed in the stored tool message, and a sub-prompt's or a child's caller
    /// gets them.
    pub attachments: Vec<crate::files::AttachmentRef>,
}

impl ToolResult {
    /// A success whose text is `content`.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolResult {
            status: ToolStatus::Success,
            content: content.into(),
            attachments: Vec::new(),
        }
    }

    /// A failure whose text, telling the model what went wrong, is `content`.
    pub fn error(content: impl Into<String>) -> Self {
        ToolResult {
            status: ToolStatus::Error,
            content: content.into(),
            attachments: Vec::new(),
        }
    }

    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        self.status == ToolStatus::Success
    }
}

/// What a builtin tool knows of its call.
#[derive(Clone, Debug)]
pub struct ToolContext {
    /// The thread whose model made the call.
    pub thread: ThreadId,
    /// Stable across redeliveries of the same call (`thread:call id`): tools with side effects
    /// use it to act at most once, since a call whose result was not committed is redone.
    pub idempotency_key: String,
}

/// A tool implemented in Rust, registered by name and named by `builtin:` in a tool file.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// Runs one call with `args`, already checked against the tool's `args` schema. Failures are
    /// error results the model sees.
    async fn call(&self, ctx: ToolContext, args: serde_json::Value) -> ToolResult;
}

/// Runs the project's `http` tools: the runtime knows no HTTP, so a crate that does
/// implements this and the composition root registers it ([`crate::RuntimeBuilder::http_tools`]).
#[async_trait]
pub trait HttpTools: Send + Sync + 'static {
    /// Runs tool `name`, whose definition's `http` is `call`, with `args` (already checked
    /// against the tool's schema); `env` fills `{{env.NAME}}`. Failures (a non-2xx answer, a
    /// timeout, a body over the limit) are error results the model sees.
    ///
    /// (`env` is spelled `for<'a>`: `async_trait` would otherwise give its `&str` one fixed
    /// lifetime, and an implementation could not call it with its own strings.)
    async fn call(
        &self,
        ctx: ToolContext,
        name: &str,
        call: &duet_spec::HttpCall,
        args: &serde_json::Value,
        env: &(dyn for<'a> Fn(&'a str) -> Option<String> + Sync),
    ) -> ToolResult;
}

/// A server of tools that the project declares (an MCP server), registered by name
/// ([`crate::RuntimeBuilder::tool_server`]): what it offers, and calls to it.
#[async_trait]
pub trait ToolServer: Send + Sync + 'static {
    /// The tools it offers (an implementation lists them once and again after a restart).
    async fn tools(&self) -> Result<Vec<crate::model::ToolSpec>, String>;
    /// Calls its tool `tool` with `args`; the implementation checks them against the tool's
    /// schema. Failures are error results the model sees.
    async fn call(&self, ctx: ToolContext, tool: &str, args: serde_json::Value) -> ToolResult;
}

/// Checks tool arguments with the schema the tool's author wrote in code (a `.ts` tool's zod
/// `args`, [`duet_spec::ToolDef::args_zod`]): the runtime knows no JavaScript, so a crate that
/// does implements this (`duet-js`) and the composition root registers it
/// ([`crate::RuntimeBuilder::code_schemas`]).
#[async_trait]
pub trait CodeSchemas: Send + Sync + 'static {
    /// Parses `args` for tool `tool` with its code schema: the value the schema gives (defaults
    /// filled in, coercions applied), or every problem, each with its place (`/orderId: …`).
    /// `Err` with no problems is refused too (the schema could not be run: the message says).
    async fn parse(
        &self,
        tool: &str,
        args: &serde_json::Value,
    ) -> Result<serde_json::Value, Vec<String>>;
}

/// The tools a runtime can run: the project's definitions, their compiled argument schemas, the
/// registered builtins, the http client and the tool servers.
#[derive(Clone)]
pub struct Tools {
    project: Arc<Project>,
    builtins: BTreeMap<String, Arc<dyn Tool>>,
    validators: Arc<HashMap<String, jsonschema::Validator>>,
    http: Option<Arc<dyn HttpTools>>,
    servers: BTreeMap<String, Arc<dyn ToolServer>>,
    code: Option<Arc<dyn CodeSchemas>>,
    /// Runs `.ts` tools' `execute` (and their `fetch`).
    pub(crate) hosting: crate::code::Hosting,
}

impl Tools {
    /// Compiles every tool's schema once. Schemas were checked at load time, so one that does not
    /// compile here is skipped (and its calls run unvalidated) rather than failing the runtime.
    pub fn new(
        project: Arc<Project>,
        builtins: BTreeMap<String, Arc<dyn Tool>>,
        http: Option<Arc<dyn HttpTools>>,
        servers: BTreeMap<String, Arc<dyn ToolServer>>,
    ) -> Self {
        let validators = project
            .tools
            .iter()
            .filter_map(|(name, d)| {
                let schema = d.def.args.as_ref()?;
                jsonschema::validator_for(schema)
                    .ok()
                    .map(|v| (name.clone(), v))
            })
            .collect();
        Tools {
            project,
            builtins,
            validators: Arc::new(validators),
            http,
            servers,
            code: None,
            hosting: crate::code::Hosting::default(),
        }
    }

    /// These tools, with `.ts` tools' zod `args` checked by `code` (without it, by their JSON
    /// Schema).
    pub fn with_code_schemas(mut self, code: Option<Arc<dyn CodeSchemas>>) -> Self {
        self.code = code;
        self
    }

    /// The tool server registered as `name`.
    pub fn server(&self, name: &str) -> Option<&Arc<dyn ToolServer>> {
        self.servers.get(name)
    }

    /// The builtin tool names (for `Project::check_builtins`).
    pub fn builtin_names(&self) -> impl Iterator<Item = &str> {
        self.builtins.keys().map(String::as_str)
    }

    /// Runs tool `name` with `args`: validates, then executes. Unknown tools, invalid arguments
    /// and failing tools all come back as error results. An `effect:` tool is an error here
    /// (its timer needs a commit: see [`Tools::call`]).
    pub async fn run(
        &self,
        ctx: ToolContext,
        name: &str,
        args: &serde_json::Value,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> ToolResult {
        let Some(tool) = self.project.tools.get(name) else {
            return ToolResult::error(format!("Unknown tool `{name}`."));
        };
        let args = match self.check(name, &tool.def, args).await {
            Ok(args) => args,
            Err(refused) => return refused,
        };
        let args: &serde_json::Value = &args;
        match &tool.def.implementation {
            Some(ToolImpl::Result(template)) => ToolResult::ok(render(template, args, env)),
            Some(ToolImpl::Builtin(b)) => match self.builtins.get(b) {
                Some(t) => t.call(ctx, args.clone()).await,
                None => ToolResult::error(format!(
                    "Tool `{name}` needs the builtin `{b}`, which this runtime does not register \
                     (`RuntimeBuilder::tool(\"{b}\", …)`)."
                )),
            },
            Some(ToolImpl::Http(call)) => match &self.http {
                Some(http) => http.call(ctx, name, call, args, env).await,
                None => ToolResult::error(format!(
                    "Tool `{name}` is an http tool, and this runtime has no http client registered."
                )),
            },
            Some(ToolImpl::Effect(effect)) => ToolResult::error(format!(
                "Tool `{name}` schedules effect `{effect}`, which is written with a step's commit: \
                 it cannot be called from here (a sub-prompt's model)."
            )),
            Some(ToolImpl::Code(_)) => ToolResult::error(format!(
                "Tool `{name}` runs the project's code with the thread's state: call it from a \
                 model step or from code (`state.invokeTool`), not from here."
            )),
            None => ToolResult::error(format!("Tool `{name}` has no implementation duet can run.")),
        }
    }

    /// The project whose tools these are.
    pub(crate) fn project(&self) -> &Project {
        &self.project
    }

    /// Whether `args` pass tool `name`'s `args` schema (none: no arguments): the arguments the
    /// tool runs with (a zod schema's output: defaults filled in, coercions applied), or the
    /// error result saying why not.
    pub(crate) async fn check<'a>(
        &self,
        name: &str,
        def: &duet_spec::ToolDef,
        args: &'a serde_json::Value,
    ) -> Result<Cow<'a, serde_json::Value>, ToolResult> {
        if let (true, Some(code)) = (def.args_zod, &self.code) {
            // The author's own schema decides, as it would in their runtime.
            return code
                .parse(name, args)
                .await
                .map(Cow::Owned)
                .map_err(|problems| {
                    ToolResult::error(format!(
                        "Invalid arguments for `{name}`: {}",
                        problems.join("; ")
                    ))
                });
        }
        if let Some(validator) = self.validators.get(name) {
            let errors = schema_problems(validator, args);
            if !errors.is_empty() {
                return Err(ToolResult::error(format!(
                    "Invalid arguments for `{name}`: {}",
                    errors.join("; ")
                )));
            }
        } else if def.args.is_none()
            && !args.is_null()
            && args.as_object().is_none_or(|o| !o.is_empty())
        {
            return Err(ToolResult::error(format!("`{name}` takes no arguments.")));
        }
        Ok(Cow::Borrowed(args))
    }
}

/// Fills `{{arg}}` from the arguments (strings as they are, other values as JSON) and
/// `{{env.NAME}}` from the environment; unknown placeholders become empty.
pub fn render(
    template: &str,
    args: &serde_json::Value,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> String {
    render_with(template, args, env, &|filled| match filled {
        Placeholder::Env(value) => value,
        Placeholder::Arg(serde_json::Value::String(s)) => s.clone(),
        Placeholder::Arg(other) => other.to_string(),
    })
}

/// What a template placeholder stands for, as [`render_with`] hands it to its writer.
pub enum Placeholder<'a> {
    /// `{{env.NAME}}`: the variable's value (empty when unset).
    Env(String),
    /// `{{arg}}`: the argument (never `null`: a missing or null argument is left empty).
    Arg(&'a serde_json::Value),
}

/// [`render`], with each placeholder's text written by `write` (to escape it for a URL or a
/// JSON body, say).
pub fn render_with<'a>(
    template: &str,
    args: &'a serde_json::Value,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
    write: &dyn Fn(Placeholder<'a>) -> String,
) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let key = after[..end].trim();
        if let Some(var) = key.strip_prefix("env.") {
            out.push_str(&write(Placeholder::Env(
                env(var.trim()).unwrap_or_default(),
            )));
        } else {
            match args.get(key) {
                Some(serde_json::Value::Null) | None => {}
                Some(value) => out.push_str(&write(Placeholder::Arg(value))),
            }
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// Checks `args` against `validator`: every problem, each with its place (`/city: …`).
pub fn schema_problems(validator: &jsonschema::Validator, args: &serde_json::Value) -> Vec<String> {
    validator
        .iter_errors(args)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates_fill_arguments_and_env() {
        let env = |k: &str| (k == "HOST").then(|| "example.org".to_owned());
        assert_eq!(
            render(
                "Decision: {{decision}}",
                &json!({"decision": "approved"}),
                &env
            ),
            "Decision: approved"
        );
        assert_eq!(
            render("{{ n }} at {{env.HOST}}{{missing}}", &json!({"n": 3}), &env),
            "3 at example.org"
        );
        assert_eq!(render("open {{ brace", &json!({}), &env), "open {{ brace");
    }
}
