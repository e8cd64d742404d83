//! A Standard Agents project: every definition of `agents/`, loaded from files handed in.
//!
//! [`Project::from_files`] (`loading.rs`: each file read here, then `validate.rs`) is pure: it
//! takes file names and bytes and never touches the disk ([`crate::fs`] reads a directory into
//! that shape). Loading never panics and never stops at
//! the first problem: every issue of every file comes back together.

use std::collections::{BTreeMap, BTreeSet};

use crate::agent::{self, AgentDef, ParentHookRequirement, Side, SideId};
use crate::decode::{Ctx, is_snake_case};
use crate::effect::{self, EffectDef};
use crate::eval::{EvalError, Evaluated};
use crate::hook::{self, HandlerDef, HookDef};
use crate::issue::{Code, Issue, Severity};
use crate::mcp::{self, McpServerDef};
use crate::model::{self, ModelDef};
use crate::node::{Node, Span, Value};
use crate::notification::{self, NotificationDef};
use crate::prompt::{self, PromptDef};
use crate::provider::{self, ProviderDef};
use crate::remote::{self, RemoteAgentDef};
use crate::tool::{self, ToolDef};
use crate::{ts_file, yaml};

/// Definition files larger than this are refused (a definition is a few kilobytes).
pub const MAX_FILE_BYTES: usize = 4 << 20;

/// One file of a project, as the caller read it.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// The path relative to the project root, with `/` separators: `agents/agents/x.yaml`.
    pub path: String,
    /// The file's contents, as read.
    pub bytes: Vec<u8>,
}

/// An entry of a project folder that was not read, and why: each becomes an issue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The path relative to the project root, with `/` separators.
    pub path: String,
    /// Why it was not read.
    pub reason: SkipReason,
}

/// Why an entry of a project folder was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// Not a regular file, nor a symbolic link to one; says what it is (`a named pipe (FIFO)`).
    /// It was never opened.
    NotAFile(String),
    /// Its metadata gives a size over [`MAX_FILE_BYTES`], so it was not read.
    TooLarge(u64),
    /// The file system refused to read it (the error, in words).
    Unreadable(String),
}

/// What reading a project folder gives: the files read, and the entries that were not.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// The files read.
    pub files: Vec<SourceFile>,
    /// The entries that were not read.
    pub skipped: Vec<Skipped>,
}

/// The syntax a definition was written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    /// A `.yaml` or `.yml` file.
    Yaml,
    /// A `.ts`, `.js` or `.mjs` file: `export default defineX({...})`, evaluated when the
    /// loader has an evaluator ([`crate::Evaluator`]), else read statically.
    Ts,
}

/// The kinds of definition, each with its folder under `agents/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `agents/agents/`: [`AgentDef`]s.
    Agent,
    /// `agents/prompts/`: [`PromptDef`]s.
    Prompt,
    /// `agents/tools/`: [`ToolDef`]s.
    Tool,
    /// `agents/hooks/`: [`HookDef`]s.
    Hook,
    /// `agents/handlers/`: [`HandlerDef`]s.
    Handler,
    /// `agents/models/`: [`ModelDef`]s.
    Model,
    /// `agents/providers/`: [`ProviderDef`]s.
    Provider,
    /// `agents/mcp/`: [`McpServerDef`]s.
    Mcp,
    /// `agents/remotes/`: [`RemoteAgentDef`]s (each also an agent, and a handler).
    Remote,
    /// `agents/effects/`: [`EffectDef`]s.
    Effect,
    /// `agents/notifications/`: [`NotificationDef`]s (a duet extension).
    Notification,
}

impl Kind {
    /// Every kind, in this order.
    pub(crate) const ALL: [Kind; 11] = [
        Kind::Agent,
        Kind::Prompt,
        Kind::Tool,
        Kind::Hook,
        Kind::Handler,
        Kind::Model,
        Kind::Provider,
        Kind::Mcp,
        Kind::Remote,
        Kind::Effect,
        Kind::Notification,
    ];

    /// The folder under `agents/` that holds this kind.
    pub(crate) fn folder(self) -> &'static str {
        match self {
            Kind::Agent => "agents",
            Kind::Prompt => "prompts",
            Kind::Tool => "tools",
            Kind::Hook => "hooks",
            Kind::Handler => "handlers",
            Kind::Model => "models",
            Kind::Provider => "providers",
            Kind::Mcp => "mcp",
            Kind::Remote => "remotes",
            Kind::Effect => "effects",
            Kind::Notification => "notifications",
        }
    }

    /// The TS define function for this kind.
    pub(crate) fn define_function(self) -> &'static str {
        match self {
            Kind::Agent => "defineAgent",
            Kind::Prompt => "definePrompt",
            Kind::Tool => "defineTool",
            Kind::Hook => "defineHook",
            Kind::Handler => "defineHandler",
            Kind::Model => "defineModel",
            Kind::Provider => "defineProvider",
            Kind::Mcp => "defineMcpServer",
            Kind::Remote => "defineRemoteAgent",
            Kind::Effect => "defineEffect",
            Kind::Notification => "defineNotification",
        }
    }

    /// The word for messages.
    pub(crate) fn noun(self) -> &'static str {
        match self {
            Kind::Agent => "agent",
            Kind::Prompt => "prompt",
            Kind::Tool => "tool",
            Kind::Hook => "hook",
            Kind::Handler => "handler",
            Kind::Model => "model",
            Kind::Provider => "provider",
            Kind::Mcp => "MCP server",
            Kind::Remote => "remote agent",
            Kind::Effect => "effect",
            Kind::Notification => "notification",
        }
    }

    fn from_folder(folder: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.folder() == folder)
    }
}

/// Where a definition came from, able to locate any of its fields.
#[derive(Clone, Debug)]
pub struct Source {
    /// The path relative to the project root.
    pub file: String,
    /// The syntax it is written in.
    pub syntax: Syntax,
    node: Node,
    /// The written index of each decoded item of lists that drop items (see [`Source::item`]).
    written: BTreeMap<String, Vec<usize>>,
}

impl Source {
    /// The path of the `i`-th item of the decoded list at `list` (`parentHooks`,
    /// `sideA.subagents`) as written in the file. Decoding drops invalid and duplicate items
    /// (each with its own issue), so the third requirement kept may be the fourth written.
    pub(crate) fn item(&self, list: &str, i: usize) -> String {
        let written = self
            .written
            .get(list)
            .and_then(|w| w.get(i))
            .copied()
            .unwrap_or(i);
        format!("{list}[{written}]")
    }

    /// The position of the value at `path` (`sideA.subagents[0].agent`), or of the nearest
    /// enclosing value that exists.
    pub(crate) fn span(&self, path: &str) -> Span {
        let mut node = &self.node;
        for seg in path.split('.').filter(|s| !s.is_empty()) {
            let (key, indices) = match seg.find('[') {
                Some(i) => (&seg[..i], &seg[i..]),
                None => (seg, ""),
            };
            let next = if key.is_empty() {
                Some(node)
            } else {
                node.get(key)
            };
            let Some(mut next) = next else {
                return node.span;
            };
            for idx in indices.split(['[', ']']).filter(|s| !s.is_empty()) {
                let item = match (&next.value, idx.parse::<usize>()) {
                    (Value::Array(items), Ok(i)) => items.get(i),
                    _ => None,
                };
                match item {
                    Some(item) => next = item,
                    None => return next.span,
                }
            }
            node = next;
        }
        node.span
    }
}

/// A definition with its source.
#[derive(Clone, Debug)]
pub struct Defined<T> {
    /// The definition as decoded.
    pub def: T,
    /// The file it was decoded from.
    pub source: Source,
}

/// Every well-formed definition of a project, by name (hooks by id).
///
/// A definition whose own file has errors that leave it incomplete is not in these maps; its
/// issues say why. Cross-references are checked against every *declared* name, so a broken
/// prompt does not also make every agent that names it report an unknown prompt.
#[derive(Clone, Debug, Default)]
pub struct Project {
    /// The definitions' revision: a hash of every file under `agents/`, its path and its bytes
    /// (12 hex digits of SHA-256). A parked thread records the revision it parked under.
    pub revision: String,
    /// `agents/agents/`, by `name`.
    pub agents: BTreeMap<String, Defined<AgentDef>>,
    /// `agents/prompts/`, by `name`.
    pub prompts: BTreeMap<String, Defined<PromptDef>>,
    /// `agents/tools/`, by file name.
    pub tools: BTreeMap<String, Defined<ToolDef>>,
    /// `agents/hooks/`, by `id`.
    pub hooks: BTreeMap<String, Defined<HookDef>>,
    /// `agents/handlers/`, by file name.
    pub handlers: BTreeMap<String, Defined<HandlerDef>>,
    /// `agents/models/`, by `name`.
    pub models: BTreeMap<String, Defined<ModelDef>>,
    /// `agents/providers/`, by `name`.
    pub providers: BTreeMap<String, Defined<ProviderDef>>,
    /// `agents/mcp/`, by `name`.
    pub mcp: BTreeMap<String, Defined<McpServerDef>>,
    /// `agents/remotes/`, by `name` (each is in `agents` and `handlers` too).
    pub remotes: BTreeMap<String, Defined<RemoteAgentDef>>,
    /// `agents/effects/`, by file name.
    pub effects: BTreeMap<String, Defined<EffectDef>>,
    /// `agents/notifications/`, by file name (issue #31).
    pub notifications: BTreeMap<String, Defined<NotificationDef>>,
    /// `agents/api/`'s thread endpoints, in file order (issue #33).
    pub endpoints: Vec<crate::endpoint::EndpointDef>,
    /// `agents/code.yaml`: how the project's own code runs (issue #33).
    pub code: crate::code::CodeConfig,
    /// Every name a file declared, well-formed or not.
    pub(crate) declared: BTreeMap<Kind, BTreeMap<String, String>>,
    /// What could be read of agents whose files leave them incomplete, so their references
    /// still get checked.
    pub(crate) partial: Vec<PartialAgent>,
}

/// An agent whose file has errors that leave it incomplete: the parts that are well-formed.
#[derive(Clone, Debug)]
pub(crate) struct PartialAgent {
    pub(crate) name: String,
    pub(crate) source: Source,
    /// Well-formed sides, and the well-formed parts of a side that is not.
    pub(crate) sides: Vec<(SideId, Side)>,
    pub(crate) hooks: Vec<String>,
    pub(crate) parent_hooks: Vec<ParentHookRequirement>,
}

/// A project and every issue found while loading and validating it.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The well-formed definitions.
    pub project: Project,
    /// Sorted by file, line and column; project-wide issues first.
    pub issues: Vec<Issue>,
}

impl Loaded {
    /// How many issues have `severity`.
    pub fn count(&self, severity: Severity) -> usize {
        self.issues
            .iter()
            .filter(|i| i.severity == severity)
            .count()
    }

    /// Whether the project can run: no errors.
    pub fn is_ok(&self) -> bool {
        self.count(Severity::Error) == 0
    }
}

impl Project {
    /// What to say after "no agent named `name`": the nearest agent's name when one is close
    /// enough to be what was meant (`did you mean `x`?`), else the agents there are. One
    /// wording for every door that names an agent (the CLI, REST, the control plane).
    pub fn agent_hint(&self, name: &str) -> String {
        let names: Vec<&str> = self.agents.keys().map(String::as_str).collect();
        match crate::nearest(name, &names) {
            Some(near) => format!("did you mean `{near}`?"),
            None if names.is_empty() => "the project defines no agents".to_owned(),
            None => format!("agents: {}", names.join(", ")),
        }
    }

    /// Whether a file declared a definition of `kind` named `name` (even a broken one).
    pub(crate) fn declares(&self, kind: Kind, name: &str) -> bool {
        self.declared
            .get(&kind)
            .is_some_and(|m| m.contains_key(name))
    }

    /// The declared names of `kind`, sorted.
    pub(crate) fn declared_names(&self, kind: Kind) -> BTreeSet<&str> {
        self.declared
            .get(&kind)
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// Reads one file's definition into the project, its issues into `issues`.
    pub(crate) fn load_file(
        &mut self,
        file: &SourceFile,
        evaluation: Option<&Result<Evaluated, EvalError>>,
        issues: &mut Vec<Issue>,
    ) {
        let path = file.path.as_str();
        let (kind, folder, stem, syntax) = match classify(path) {
            Class::Outside => return,
            Class::Unsupported(issue) => {
                issues.push(issue);
                return;
            }
            Class::Definition {
                kind,
                folder,
                stem,
                syntax,
            } => (kind, folder, stem, syntax),
        };
        if file.bytes.len() > MAX_FILE_BYTES {
            issues.push(Issue::new(Code::ReadError, too_large()).at(path, "", None));
            return;
        }
        let Ok(text) = std::str::from_utf8(&file.bytes) else {
            issues
                .push(Issue::new(Code::ReadError, "the file is not UTF-8 text").at(path, "", None));
            return;
        };
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);

        let mut schemas = BTreeSet::new();
        let mut evaluated = false;
        let (node, mut parse_issues) = match syntax {
            Syntax::Yaml => yaml::parse(text),
            Syntax::Ts => {
                let read = ts_file::read(path, text, kind, folder, evaluation);
                schemas = read.schemas;
                evaluated = read.evaluated;
                (read.node, read.issues)
            }
        };
        for i in &mut parse_issues {
            // Readers leave `file` empty for this file; an evaluation that failed in a helper
            // the file imports names the helper.
            if i.file.as_deref().is_none_or(str::is_empty) {
                i.file = Some(path.to_owned());
            }
        }
        issues.append(&mut parse_issues);
        let Some(node) = node else { return };
        let mut source = Source {
            file: path.to_owned(),
            syntax,
            node,
            written: BTreeMap::new(),
        };
        let mut ctx = Ctx::new(path, issues);
        ctx.evaluated = evaluated;
        let root = &source.node;

        let file_named = matches!(kind, Kind::Tool | Kind::Handler | Kind::Effect);
        if file_named && !is_snake_case(stem) {
            ctx.push(
                Issue::new(
                    Code::NameNotSnakeCase,
                    format!(
                        "{}s are named by their file, and `{stem}` is not snake_case",
                        kind.noun()
                    ),
                )
                .at(path, "", None)
                .hint("rename the file in snake_case"),
            );
        }
        if kind == Kind::Tool && agent::RESERVED_TOOL_NAMES.contains(&stem) {
            ctx.push(Issue::new(Code::ReservedName, format!("`{stem}` is a lifecycle tool the runtime injects; no tool may take its name")).at(path, "", None));
        }

        match kind {
            Kind::Agent => {
                let decoded = agent::decode(&mut ctx, root);
                source.written = std::mem::take(&mut ctx.written);
                let Some(name) = decoded.name else { return };
                if !self.declare(&mut ctx, kind, &name, &source) {
                    return;
                }
                match decoded.agent {
                    Some(def) => {
                        self.agents.insert(name, Defined { def, source });
                    }
                    None => self.partial.push(PartialAgent {
                        name,
                        source,
                        sides: decoded.sides,
                        hooks: decoded.hooks,
                        parent_hooks: decoded.parent_hooks,
                    }),
                }
            }
            Kind::Prompt => {
                let (name, def) = prompt::decode(&mut ctx, root);
                insert(self, &mut ctx, kind, name, def, source, |p| &mut p.prompts);
            }
            Kind::Model => {
                let (name, def) = model::decode(&mut ctx, root);
                let own = def.as_ref().and_then(|d| d.inline_provider.clone());
                // The model's own provider is declared with it (not again for a duplicate
                // model: that model's `duplicate_name` says it all).
                let first = name.as_deref().is_some_and(|n| !self.declares(kind, n));
                insert(self, &mut ctx, kind, name, def, source.clone(), |p| {
                    &mut p.models
                });
                if let Some(own) = own.filter(|_| first) {
                    let name = Some(own.name.clone());
                    insert(
                        self,
                        &mut ctx,
                        Kind::Provider,
                        name,
                        Some(own),
                        source,
                        |p| &mut p.providers,
                    );
                }
            }
            Kind::Provider => {
                let (name, def) = provider::decode(&mut ctx, root);
                insert(self, &mut ctx, kind, name, def, source, |p| {
                    &mut p.providers
                });
            }
            Kind::Mcp => {
                let (name, def) = mcp::decode(&mut ctx, root);
                insert(self, &mut ctx, kind, name, def, source, |p| &mut p.mcp);
            }
            Kind::Remote => {
                // A remote agent is an agent by name: it shares their names, and defines the
                // handler its side A names.
                let (name, def) = remote::decode(&mut ctx, root);
                let Some(name) = name else { return };
                if !self.declare(&mut ctx, Kind::Agent, &name, &source) {
                    return;
                }
                if let Some(def) = def {
                    let handler = def.handler();
                    if self.declare(&mut ctx, Kind::Handler, &handler.name, &source) {
                        self.handlers.insert(
                            handler.name.clone(),
                            Defined {
                                def: handler,
                                source: source.clone(),
                            },
                        );
                    }
                    self.agents.insert(
                        name.clone(),
                        Defined {
                            def: def.agent(),
                            source: source.clone(),
                        },
                    );
                    self.remotes.insert(name, Defined { def, source });
                }
            }
            Kind::Hook => {
                let (id, def) = hook::decode_hook(&mut ctx, root);
                insert(self, &mut ctx, kind, id, def, source, |p| &mut p.hooks);
            }
            Kind::Tool => {
                let mut def = tool::decode(&mut ctx, root, stem);
                if let Some(def) = &mut def {
                    def.args_zod = schemas.contains("args");
                }
                insert(
                    self,
                    &mut ctx,
                    kind,
                    Some(stem.to_owned()),
                    def,
                    source,
                    |p| &mut p.tools,
                );
            }
            Kind::Effect => {
                let def = effect::decode(&mut ctx, root, stem);
                insert(
                    self,
                    &mut ctx,
                    kind,
                    Some(stem.to_owned()),
                    def,
                    source,
                    |p| &mut p.effects,
                );
            }
            Kind::Notification => {
                let def = notification::decode(&mut ctx, root, stem);
                source.written = std::mem::take(&mut ctx.written);
                insert(
                    self,
                    &mut ctx,
                    kind,
                    Some(stem.to_owned()),
                    def,
                    source,
                    |p| &mut p.notifications,
                );
            }
            Kind::Handler => {
                let def = hook::decode_handler(&mut ctx, root, stem);
                insert(
                    self,
                    &mut ctx,
                    kind,
                    Some(stem.to_owned()),
                    def,
                    source,
                    |p| &mut p.handlers,
                );
            }
        }
    }

    /// Records `name` as declared; reports and refuses a second definition of it.
    fn declare(&mut self, ctx: &mut Ctx<'_>, kind: Kind, name: &str, source: &Source) -> bool {
        let names = self.declared.entry(kind).or_default();
        if let Some(first) = names.get(name) {
            let field = if kind == Kind::Hook { "id" } else { "name" };
            let span = source.node.get(field).map(|n| n.span);
            ctx.push(
                Issue::new(
                    Code::DuplicateName,
                    format!("{} `{name}` is already defined in {first}", kind.noun()),
                )
                .at(&source.file, if span.is_some() { field } else { "" }, span)
                .hint(format!(
                    "{} names are unique in a project: rename one of them",
                    kind.noun()
                )),
            );
            return false;
        }
        names.insert(name.to_owned(), source.file.clone());
        true
    }
}

fn insert<T>(
    project: &mut Project,
    ctx: &mut Ctx<'_>,
    kind: Kind,
    name: Option<String>,
    def: Option<T>,
    source: Source,
    map: impl FnOnce(&mut Project) -> &mut BTreeMap<String, Defined<T>>,
) {
    let Some(name) = name else { return };
    if !project.declare(ctx, kind, &name, &source) {
        return;
    }
    if let Some(def) = def {
        map(project).insert(name, Defined { def, source });
    }
}

/// The syntax of the definition file at `path`, when it is one.
pub(crate) fn classify_syntax(path: &str) -> Option<Syntax> {
    match classify(path) {
        Class::Definition { syntax, .. } => Some(syntax),
        _ => None,
    }
}

/// Where a path under the project root belongs.
enum Class<'p> {
    /// Not under `agents/`: not part of the project.
    Outside,
    /// Under `agents/` but not a definition duet reads: the issue says why.
    Unsupported(Issue),
    Definition {
        kind: Kind,
        folder: &'p str,
        stem: &'p str,
        syntax: Syntax,
    },
}

fn classify(path: &str) -> Class<'_> {
    let mut parts = path.split('/');
    if parts.next() != Some("agents") {
        return Class::Outside;
    }
    let rest: Vec<&str> = parts.collect();
    let unsupported = |message: String| {
        Class::Unsupported(Issue::new(Code::UnsupportedFile, message).at(path, "", None))
    };
    let (folder, file_name) = match rest.as_slice() {
        [folder, file_name] => (*folder, *file_name),
        [_] => {
            return unsupported(
                "files directly under `agents/` are not definitions; it is ignored".into(),
            );
        }
        _ => {
            return unsupported(
                "definitions sit directly in their kind's folder; nested files are ignored".into(),
            );
        }
    };
    let Some(kind) = Kind::from_folder(folder) else {
        let message = match folder {
            "api" | "packed" => {
                format!("`agents/{folder}/` is not supported by duet yet; this file is ignored")
            }
            _ => format!(
                "`agents/{folder}/` is not a Standard Agents definition folder; this file is ignored"
            ),
        };
        return Class::Unsupported(
            Issue::new(Code::UnsupportedFile, message)
                .at(path, "", None)
                .hint(
                    "definition folders: agents, prompts, tools, hooks, handlers, effects, models, providers, mcp, remotes, notifications",
                ),
        );
    };
    let (stem, syntax) = if let Some(s) = file_name.strip_suffix(".d.ts") {
        (s, None)
    } else if let Some(s) = file_name
        .strip_suffix(".ts")
        .or_else(|| file_name.strip_suffix(".mjs"))
        .or_else(|| file_name.strip_suffix(".js"))
    {
        (s, Some(Syntax::Ts))
    } else if let Some(s) = file_name
        .strip_suffix(".yaml")
        .or_else(|| file_name.strip_suffix(".yml"))
    {
        (s, Some(Syntax::Yaml))
    } else {
        (file_name, None)
    };
    match syntax {
        Some(syntax) => Class::Definition {
            kind,
            folder,
            stem,
            syntax,
        },
        None => unsupported(
            "only `.yaml`, `.yml`, `.ts`, `.js` and `.mjs` files are definitions; this file is ignored".into(),
        ),
    }
}

fn too_large() -> String {
    format!(
        "the file is larger than {} MiB; a definition is a few kilobytes",
        MAX_FILE_BYTES >> 20
    )
}

/// The issue for an entry that was not read. A non-file is reported wherever it is; a file too
/// large or unreadable is an error only where a definition would be, and otherwise gets the
/// issue its path would have had anyway (its bytes were never needed).
pub(crate) fn skipped_issue(entry: &Skipped) -> Option<Issue> {
    let path = entry.path.as_str();
    let class = classify(path);
    if matches!(class, Class::Outside) {
        return None;
    }
    let message = match &entry.reason {
        SkipReason::NotAFile(what) => {
            return Some(
                Issue::new(
                    Code::NotAFile,
                    format!("this entry is {what}, not a regular file; it is skipped unopened"),
                )
                .at(path, "", None)
                .hint("definitions are regular files (a symbolic link to one is followed)"),
            );
        }
        SkipReason::TooLarge(_) => too_large(),
        SkipReason::Unreadable(why) => format!("the file cannot be read: {why}"),
    };
    match class {
        Class::Definition { .. } => Some(Issue::new(Code::ReadError, message).at(path, "", None)),
        Class::Unsupported(issue) => Some(issue),
        Class::Outside => None,
    }
}
