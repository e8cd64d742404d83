//! Validation issues and their stable codes.
//!
//! Every problem found while loading or validating a project is an [`Issue`] with a [`Code`].
//! Codes are part of duet's public contract: tools match on them, so a code is never renamed or
//! reused. `docs/validation-codes.md` lists them all (a test keeps it in step with this file).

use serde::Serialize;
use std::fmt;

use crate::node::Span;

/// How bad an issue is. Errors stop a project from loading; warnings do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The definition cannot be used as written.
    Error,
    /// The definition works, but probably not as its author meant.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, $sev:ident, $group:literal, $summary:literal; )*) => {
        /// A stable issue code. See `docs/validation-codes.md`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum Code {
            $( $(#[$doc])* #[doc = $summary] $variant, )*
        }

        impl Code {
            /// Every code, in documentation order.
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            /// The code as written in output (`unknown_field`).
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $name,)* }
            }

            /// The severity issues with this code have.
            pub fn severity(self) -> Severity {
                match self { $(Code::$variant => Severity::$sev,)* }
            }

            /// The group the code is documented under.
            pub(crate) fn group(self) -> &'static str {
                match self { $(Code::$variant => $group,)* }
            }

            /// One sentence saying what the code means.
            pub(crate) fn summary(self) -> &'static str {
                match self { $(Code::$variant => $summary,)* }
            }
        }
    };
}

codes! {
    ReadError = "read_error", Error, "files",
        "A definition file cannot be read, or is not UTF-8 text.";
    YamlSyntax = "yaml_syntax", Error, "files",
        "A YAML file is not well-formed YAML.";
    MultipleDocuments = "multiple_documents", Error, "files",
        "A YAML file holds more than one document; each file holds one definition.";
    TsSyntax = "ts_syntax", Error, "files",
        "A `.ts` file is not well-formed TypeScript.";
    TsNoDefinition = "ts_no_definition", Error, "files",
        "A `.ts` file's default export was not made by a define function (`export default defineX({...})`).";
    TsNotStatic = "ts_not_static", Error, "files",
        "A value in a `.ts` file would need evaluation (an identifier, a spread, a call, a computed key, a `${}` template), and the project is read statically (`duet_spec::load`; `duet validate` and `duet::load` evaluate).";
    TsEvalError = "ts_eval_error", Error, "files",
        "Evaluating a `.ts`/`.js` definition file threw an exception (or a promise it awaited rejected).";
    TsEvalLimit = "ts_eval_limit", Error, "files",
        "Evaluating a definition file ran past its deadline or its memory ceiling and was stopped.";
    TsImport = "ts_import", Error, "files",
        "An import cannot be resolved: a relative path outside the project or not found, or a package duet does not provide.";
    TsPackageMissing = "ts_package_missing", Error, "files",
        "A package a definition imports (zod) is not installed in the project's `node_modules`.";
    TsSchema = "ts_schema", Error, "files",
        "A zod schema cannot be expressed as the JSON Schema models are sent (a date, a bigint, a custom type...).";
    CodeAndBuiltin = "code_and_builtin", Error, "files",
        "A hook, handler or effect has its own function (`execute`, an effect's `handler`) and names a Rust `builtin` too: it runs one way, so keep one.";
    WrongDefineFunction = "wrong_define_function", Error, "files",
        "A file calls the define function of another kind than its folder holds (`definePrompt` under `agents/agents/`).";
    DuplicateKey = "duplicate_key", Error, "files",
        "An object has the same key twice.";
    UnsupportedFile = "unsupported_file", Warning, "files",
        "A file under `agents/` is not a definition duet reads (unknown extension or folder); it is ignored.";
    UnknownField = "unknown_field", Error, "shape",
        "A field that this kind of definition does not have; the allowed fields are named.";
    WrongType = "wrong_type", Error, "shape",
        "A field holds the wrong type of value (`maxSessionTurns: \"ten\"`).";
    MissingField = "missing_field", Error, "shape",
        "A required field is missing.";
    InvalidValue = "invalid_value", Error, "shape",
        "A field has the right type but a value it cannot take (an unknown enum member, zero where a positive count belongs, an empty name).";
    InvalidJsonSchema = "invalid_json_schema", Error, "shape",
        "A tool's or effect's `args` or a prompt's `requiredSchema` is not a valid JSON Schema for an object (or a tool's `approval.when` not a valid JSON Schema).";
    DeprecatedField = "deprecated_field", Warning, "shape",
        "A field the spec deprecates (`title`, `tenvs`, a prompt's `exposeAsTool`).";
    NameNotSnakeCase = "name_not_snake_case", Error, "names",
        "A definition name (or a tool or handler file name) is not snake_case (`^[a-z][a-z0-9_]*$`).";
    DuplicateName = "duplicate_name", Error, "names",
        "Two definitions of one kind share a name (or two hooks an id).";
    ReservedName = "reserved_name", Error, "names",
        "A definition or relationship takes a reserved lifecycle tool name (`subagent_create`, `subagent_message`, `subagents`, `send_to_agent`).";
    BothSidesHuman = "both_sides_human", Error, "spec",
        "Spec §8.1: both sides are human-backed, which 0.2.0 reserves.";
    SubagentsOnHumanSide = "subagents_on_human_side", Error, "spec",
        "Spec §8.2: `subagents` on a human-backed side.";
    ApproverNotHuman = "approver_not_human", Error, "spec",
        "`approver` (a duet extension: the human side decides, its parks are approvals) on a side that is not human-backed.";
    SideBacking = "side_backing", Error, "spec",
        "Spec §8.3: a side has no backing, or more than one of `human` / `prompt` / `handler`.";
    UnknownHandler = "unknown_handler", Error, "spec",
        "Spec §8.4: a handler side names a handler that is not defined.";
    UnknownPrompt = "unknown_prompt", Error, "spec",
        "Spec §8.4: a prompt side names a prompt that is not defined.";
    RelationshipNameConflict = "relationship_name_conflict", Error, "spec",
        "Spec §8.5: a relationship name (`as`) is on both sides of one agent, or collides with another tool name on its side.";
    PromptOnlyField = "prompt_only_field", Error, "spec",
        "Spec §8.6: session bindings, `maxSteps` or stop bindings on a side that is not prompt-backed.";
    SessionBindingNotObject = "session_binding_not_object", Error, "spec",
        "Spec §8.7: a session binding that is not in object form (`{ name, messageProperty? }`).";
    LegacyAgentType = "legacy_agent_type", Error, "legacy",
        "A 0.1.0 agent `type:`; 0.2.0 derives behaviour from the sides' backings.";
    LegacyResumable = "legacy_resumable", Error, "legacy",
        "A 0.1.0 `resumable:` field; every 0.2.0 child is persistent.";
    LegacyMissingSideB = "legacy_missing_side_b", Error, "legacy",
        "An agent without `sideB`; 0.2.0 needs both sides explicit.";
    LegacySubagentTool = "legacy_subagent_tool", Error, "legacy",
        "A prompt's `tools` entry with 0.1.0 subagent keys; relationships live in the owning side's `subagents`.";
    LegacyBindingAlias = "legacy_binding_alias", Error, "legacy",
        "A 0.1.0 binding alias (`endSessionTool`, `failSessionTool`, `statusTool`).";
    UnknownModel = "unknown_model", Error, "references",
        "A prompt names a model that is not defined.";
    UnknownFallbackModel = "unknown_fallback_model", Error, "references",
        "A model's `fallbacks` names a model that is not defined (or itself).";
    UnknownTool = "unknown_tool", Error, "references",
        "A prompt's `tools` names nothing callable: no tool, prompt or exposed agent.";
    UnknownHook = "unknown_hook", Error, "references",
        "An agent's or prompt's `hooks` names a hook id that is not defined.";
    UnknownAgent = "unknown_agent", Error, "references",
        "A subagent relationship (or a notification's `agents`) names an agent that is not defined.";
    RelationshipTargetNotExposed = "relationship_target_not_exposed", Error, "references",
        "A subagent relationship targets an agent without `exposeAsTool: true`.";
    BindingToolNotInPrompt = "binding_tool_not_in_prompt", Error, "references",
        "A session binding or `stopTool` names a tool the side's prompt does not offer.";
    HandlerInPromptTools = "handler_in_prompt_tools", Error, "references",
        "A prompt's `tools` names a handler; handlers take turns, they are not tools.";
    AmbiguousToolReference = "ambiguous_tool_reference", Error, "references",
        "A prompt's `tools` entry names more than one kind of callable (a tool and a prompt, say).";
    HandoffWithoutHumanSide = "handoff_without_human_side", Error, "references",
        "A handoff target lacks a human side where the agents handing off to it have theirs.";
    UnknownBuiltin = "unknown_builtin", Warning, "references",
        "A `builtin:` tool, handler, hook or effect names nothing registered in this build of duet. A warning (the code may live elsewhere), an error with `duet validate --strict`, and an error before `duet run` / `duet send` runs an agent that needs it.";
    ParentHooksNotExposed = "parent_hooks_not_exposed", Error, "parent hooks",
        "`parentHooks` on an agent without `exposeAsTool: true`.";
    ParentHookMissingReason = "parent_hook_missing_reason", Error, "parent hooks",
        "A `parentHooks` requirement without a non-empty `reason`.";
    ParentHookBadStage = "parent_hook_bad_stage", Error, "parent hooks",
        "A `parentHooks` stage other than `before_parent` or `after_parent`.";
    ParentHookDuplicate = "parent_hook_duplicate", Error, "parent hooks",
        "The same hook id twice in one agent's `parentHooks`.";
    ParentHookUnknown = "parent_hook_unknown", Error, "parent hooks",
        "A `parentHooks` requirement names a hook id that is not defined (composition fails closed).";
    ParentHookUserScoped = "parent_hook_user_scoped", Error, "parent hooks",
        "A `parentHooks` requirement names a user-scoped hook; only thread hooks can be required.";
    ToolNoImplementation = "tool_no_implementation", Error, "tools",
        "A tool says none of `builtin`, `result`, `http` and `effect`, so nothing can run it.";
    ToolManyImplementations = "tool_many_implementations", Error, "tools",
        "A tool says more than one of `builtin`, `result`, `http` and `effect`.";
    TemplateUnknownArg = "template_unknown_arg", Warning, "tools",
        "A `{{name}}` in a tool's `result` or in its `http` url, body or headers names no argument of its `args` schema.";
    ApprovalNoDecision = "approval_no_decision", Error, "tools",
        "A tool's `approval.decisions` (a duet extension) is empty: nobody could answer its calls.";
    ApprovalRememberWithoutApprove = "approval_remember_without_approve", Error, "tools",
        "A tool's `approval.remember` offers to remember an approval that `approval.decisions` does not offer (`approve` is missing).";
    ApprovalUnknownArg = "approval_unknown_arg", Warning, "tools",
        "A tool's `approval.when` schema tests a property its `args` schema does not declare.";
    DeadlineDuration = "deadline_duration", Error, "deadlines",
        "A `deadline` (a duet extension on a human side or a tool's `approval`) holds a duration that is not whole milliseconds or a number with `s`, `m`, `h` or `d` (`90s`, `48h`, `3d`), or is under 1 ms or over 10 years.";
    DeadlineNoAction = "deadline_no_action", Error, "deadlines",
        "A `deadline` with neither `default` (with `after`), `remind` nor `escalate`: it does nothing.";
    DeadlineAfterDefault = "deadline_after_default", Warning, "deadlines",
        "A deadline's reminder or escalation is due at or after its `default` answers: it never happens.";
    DeadlineEscalateNobody = "deadline_escalate_nobody", Error, "deadlines",
        "A deadline's `escalate` names no `roles` and no `principals`: nobody new could answer.";
    DeadlineDefaultNotOffered = "deadline_default_not_offered", Error, "deadlines",
        "A tool approval's `deadline.default` decides `approve` or `reject` where `approval.decisions` does not offer it.";
    UnknownProvider = "unknown_provider", Error, "models",
        "A model's `provider` is neither built in (`scripted`, `openai`, `anthropic`) nor defined in `agents/providers/`.";
    ScriptNotScripted = "script_not_scripted", Error, "models",
        "A model has a `script` but its provider is not `scripted`.";
    UnboundedPromptPair = "unbounded_prompt_pair", Warning, "advice",
        "Both sides are prompts and `maxSessionTurns` is not set: nothing external stops two models.";
    ExposedWithoutDescription = "exposed_without_description", Warning, "advice",
        "`exposeAsTool: true` without `toolDescription`: the model sees no description of the tool.";
    HookNeverRuns = "hook_never_runs", Warning, "advice",
        "A hook of a kind duet never fires: `before_update_message` and `after_update_message` (messages are never updated) and the user-scoped kinds (duet has no user clients yet).";
    ImmediateOnHandlerSide = "immediate_on_handler_side", Warning, "advice",
        "A handler side's relationship is `immediate`: immediate children start when a prompt side activates, so this one never starts by itself (start it from the handler).";
    NotAFile = "not_a_file", Warning, "files",
        "An entry under `agents/` is not a regular file (a named pipe, a socket, a device, a symbolic link to a folder or to nothing); it is skipped without being opened. A symbolic link to a regular file is followed.";
    TsMultipleDefaultExports = "ts_multiple_default_exports", Error, "files",
        "A `.ts` file has more than one `export default`; each file holds one definition (the first is read).";
    McpTransport = "mcp_transport", Error, "mcp",
        "An MCP server (`agents/mcp/`) says neither or both of `command` (a stdio server duet starts) and `url` (a streamable-HTTP server), or a field of the other transport (`args` with `url`, `headers` with `command`).";
    UnknownMcpServer = "unknown_mcp_server", Error, "mcp",
        "A prompt's `tools` entry `SERVER/TOOL` names an MCP server that `agents/mcp/` does not declare.";
    UnboundedHandlerPair = "unbounded_handler_pair", Warning, "advice",
        "Neither side is human, at least one is a handler, and `maxSessionTurns` is not set: nothing external stops the two sides answering each other (as `unbounded_prompt_pair` for two prompts).";
    ProviderKeyUnset = "provider_key_unset", Warning, "models",
        "A model's provider reads its API key from an environment variable that is not set where `duet validate` runs (a warning: it may be set where duet runs). Checked by `duet validate`, not by loading.";
    UnknownBindingTool = "unknown_binding_tool", Error, "references",
        "A session binding or `stopTool` names a tool that is not defined at all (no tool, prompt or exposed agent of that name); the nearest name is suggested.";
    ScriptBranchesMixed = "script_branches_mixed", Error, "models",
        "A scripted model's `script` entry has `branches` and an answer of its own (`text` or `tool_calls`); each branch carries its answer.";
    ScriptBranchUnreachable = "script_branch_unreachable", Warning, "models",
        "A branch of a scripted entry's `branches` comes after one without `when` (the fallback, which matches every answer), so it never plays.";
    ScriptToolNotOffered = "script_tool_not_offered", Warning, "models",
        "A scripted model's `script` calls a tool that no prompt using the model offers (nor a relationship, lifecycle or handoff tool of their sides): the call would fail at run time.";
    UnknownSchemaKeyword = "unknown_schema_keyword", Warning, "shape",
        "A JSON Schema in a definition (`args`, `requiredSchema`) has a keyword JSON Schema does not define (`propertie:`): validators ignore it, so what it meant to say is not checked.";
    ProviderKeyShort = "provider_key_short", Warning, "models",
        "A model's provider key (the variable its `apiKeyEnv` names, where `duet validate` runs) is shorter than 8 characters: no real key is, and a value that short is never redacted from error messages. Checked by `duet validate`, not by loading.";
    UnknownEffect = "unknown_effect", Error, "references",
        "A tool's `effect:` (a duet extension: a call schedules that effect) names an effect `agents/effects/` does not define; the nearest name is suggested.";
    EffectToolTiming = "effect_tool_timing", Error, "tools",
        "An `effect:` tool's `args` declare `delayMs` as other than an integer, or `at` as other than a string: calls giving them would be refused.";
    EffectToolUntimed = "effect_tool_untimed", Warning, "tools",
        "An `effect:` tool's `args` declare neither `delayMs` (milliseconds from the call) nor `at` (an RFC 3339 time): the model cannot say when, so every call runs the effect at once.";
    NotificationChannel = "notification_channel", Error, "notifications",
        "A notification (`agents/notifications/`, a duet extension) has no channel, or more than one of `webhook`, `slack` and `email`.";
    UnknownEvent = "unknown_event", Error, "notifications",
        "A notification's `events` names an event duet does not emit (`question.parked`, `question.answered`, `question.expired`, `question.escalated`, `question.reminded`, `session.ended`, `thread.failed`); the nearest name is suggested.";
    InvalidAddress = "invalid_address", Error, "notifications",
        "A notification's `email.to` holds something that is not an email address (one `@` with something on each side, no whitespace or control characters).";
    LinkTtl = "link_ttl", Error, "notifications",
        "A notification's `linkTtl` is not a duration (`90s`, `48h`, `3d`, or whole milliseconds) over zero and at most 90 days.";
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One problem found in a project.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Issue {
    /// The stable code.
    pub code: Code,
    /// Error or warning: `code.severity()`, unless the issue was [escalated](Issue::escalated).
    pub severity: Severity,
    /// What is wrong, in a sentence.
    pub message: String,
    /// Where in the definition: `sideB.human`, `tools[2]`; empty for the whole file.
    pub path: String,
    /// The file, relative to the project root, with `/` separators; `None` for a project-wide
    /// problem.
    pub file: Option<String>,
    /// 1-based line, when known.
    pub line: Option<u32>,
    /// 1-based column, when known.
    pub column: Option<u32>,
    /// How to fix it, when a fix is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Issue {
    /// A new issue with `code`'s severity, not yet placed in a file.
    pub(crate) fn new(code: Code, message: impl Into<String>) -> Self {
        Issue {
            code,
            severity: code.severity(),
            message: message.into(),
            path: String::new(),
            file: None,
            line: None,
            column: None,
            hint: None,
        }
    }

    /// Places the issue at `path` in `file`, at `span`.
    pub(crate) fn at(mut self, file: &str, path: &str, span: Option<Span>) -> Self {
        self.file = Some(file.to_owned());
        self.path = path.to_owned();
        self.line = span.map(|s| s.line);
        self.column = span.map(|s| s.column);
        self
    }

    /// The issue as an error, whatever its code's severity: `unknown_builtin` is a warning in a
    /// project, and an error for the agent about to run (and under `duet validate --strict`).
    pub fn escalated(mut self) -> Self {
        self.severity = Severity::Error;
        self
    }

    /// Adds a fix hint.
    pub(crate) fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for Issue {
    /// Compiler-style: `file:line:col: error[code]: message (at path)`, then the hint.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}:")?;
            if let (Some(l), Some(c)) = (self.line, self.column) {
                write!(f, "{l}:{c}:")?;
            }
            f.write_str(" ")?;
        }
        write!(f, "{}[{}]: {}", self.severity, self.code, self.message)?;
        if !self.path.is_empty() {
            write!(f, " (at `{}`)", self.path)?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n  = hint: {hint}")?;
        }
        Ok(())
    }
}

/// The documentation table of every code, as `docs/validation-codes.md` holds it.
pub fn codes_markdown() -> String {
    let mut out = String::from(
        "# Validation codes\n\n\
         Every issue `duet validate` reports carries one of these codes. Codes are stable: they are\n\
         never renamed or reused. This file is checked against `crates/spec/src/issue.rs` by a test\n\
         (`cargo test -p duet-spec codes_doc`); regenerate it with `duet validate --codes`.\n",
    );
    // Groups in the order they first appear; new codes go at the end of the table, and are
    // still listed under their group.
    let mut groups: Vec<&str> = Vec::new();
    for code in Code::ALL {
        if !groups.contains(&code.group()) {
            groups.push(code.group());
        }
    }
    for group in groups {
        out.push_str(&format!(
            "\n## {group}\n\n| code | severity | meaning |\n| --- | --- | --- |\n"
        ));
        for code in Code::ALL.iter().filter(|c| c.group() == group) {
            out.push_str(&format!(
                "| `{}` | {} | {} |\n",
                code.as_str(),
                code.severity(),
                code.summary().replace('|', "\\|")
            ));
        }
    }
    out
}
