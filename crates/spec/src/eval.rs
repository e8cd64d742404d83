//! The evaluator port: how `.ts`/`.js` definition files are run to get their values.
//!
//! This crate never runs code. A loader that can (`duet-js`, an embedded JavaScript engine)
//! implements [`Evaluator`] and hands it to [`crate::Project::from_listing_with`]; each file's
//! `export default` comes back as a [`JsValue`], which loading lays over the file's static
//! reading so every value keeps the line and column it was written at. Without an evaluator,
//! definition files are read statically (literals only).

use crate::SourceFile;

/// What an evaluated definition file's `export default` holds, as plain data.
#[derive(Clone, Debug, PartialEq)]
pub enum JsValue {
    /// `undefined` (an object's key holding it is treated as absent).
    Undefined,
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A finite number.
    Number(f64),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<JsValue>),
    /// A plain object, its own enumerable string keys in order.
    Object(Vec<(String, JsValue)>),
    /// A function (a tool's `execute`, a hook's body).
    Function,
    /// A zod schema, as the JSON Schema of what it accepts (`z.toJSONSchema(s, { io: "input" })`).
    /// The schema itself stays with the code, which checks arguments with it.
    Schema(serde_json::Value),
    /// A provider from a provider package (`@standardagents/openai`): the factory itself (`openai`)
    /// or what calling it gave (`openai({ baseUrl })`).
    Provider(ProviderValue),
    /// Something JSON cannot hold (a symbol, a `Map`, a class instance, `NaN`), in words.
    Other(String),
}

/// A provider package's factory, as a definition used it.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderValue {
    /// The wire format: `openai` or `anthropic`.
    pub provider_type: String,
    /// `None` for the factory itself; the options it was called with otherwise, already in
    /// duet's provider fields (`baseUrl`, `apiKeyEnv`, `timeoutMs`, `headers`, `maxAttempts`).
    pub options: Option<Vec<(String, JsValue)>>,
}

/// One evaluated definition file.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluated {
    /// The define function that made the default export (`defineTool`); `None` when the
    /// export was not made by one.
    pub define: Option<String>,
    /// The default export (for `defineEffect(description, args, handler)`, the object
    /// `{ description, args, handler }`).
    pub value: JsValue,
    /// The project files the evaluation loaded besides the file itself (helpers it imports),
    /// as project-relative paths.
    pub imports: Vec<String>,
}

/// Why a definition file could not be evaluated.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalError {
    /// What kind of failure.
    pub kind: EvalErrorKind,
    /// What went wrong, in words.
    pub message: String,
    /// The project file it happened in, when not the definition itself (a helper that threw).
    pub file: Option<String>,
    /// 1-based line and column in that file's source (mapped through the TypeScript strip).
    pub at: Option<(u32, u32)>,
    /// The value it concerns (`args` for a schema zod cannot express), located by the loader
    /// when `at` is not given.
    pub path: Option<String>,
    /// How to fix it, when the evaluator knows.
    pub hint: Option<String>,
}

/// The kinds of [`EvalError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalErrorKind {
    /// The file is not well-formed TypeScript or JavaScript.
    Syntax,
    /// Evaluating threw (or a promise it awaited rejected).
    Thrown,
    /// Evaluation ran past its deadline or its memory ceiling and was stopped.
    Limit,
    /// An import that cannot be resolved: outside the project, not found, or an unknown package.
    Import,
    /// An npm package the file imports (zod) is not installed.
    PackageMissing,
    /// A zod schema that JSON Schema cannot express.
    Schema,
}

/// Runs definition files. Implementations keep the files' code away from the host: no file
/// system, network, process or timers; a deadline and a memory ceiling per evaluation.
pub trait Evaluator: Sync {
    /// Evaluates each of `targets` (paths among `files`, `.ts`, `.js` or `.mjs`), returning one
    /// result per target in order. `files` are every file of the listing, for relative imports
    /// among them.
    fn evaluate(&self, files: &[SourceFile], targets: &[&str])
    -> Vec<Result<Evaluated, EvalError>>;
}
