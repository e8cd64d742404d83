//! Model providers: implementations of the runtime's [`Provider`] port, and the only crate that
//! knows provider wire formats.
//!
//! - `scripted` plays a model definition's `script` (offline, deterministic);
//! - `openai` speaks Chat Completions, for OpenAI and every compatible server (vLLM, Ollama,
//!   llama.cpp, LM Studio, LiteLLM, OpenRouter);
//! - `anthropic` speaks the Messages API, with tool use and extended thinking.
//!
//! [`providers_for`] builds them for a project: the built-ins (configured from `OPENAI_*` and
//! `ANTHROPIC_*` variables) and the project's own `agents/providers/` definitions, each under
//! its name (a defined `openai` replaces the built-in). See [`config`] for the rules.

mod anthropic;
mod assemble;
pub mod config;
mod http;
mod openai;
mod options;
mod retry;
mod scripted;

pub use anthropic::Anthropic;
pub use config::{ApiKey, ProviderConfig};
pub use openai::OpenAi;
pub use retry::RetryPolicy;
pub use scripted::{Scripted, ScriptedModel, scripted_answer};

use duet_runtime::Providers;
use duet_spec::{Project, ProviderType};

/// The built-in providers, configured from the process environment: `scripted`, `openai` and
/// `anthropic`.
pub fn providers() -> Providers {
    providers_for(&Project::default())
}

/// The providers a project's models may name: the built-ins and the project's own
/// definitions, configured from the process environment.
pub fn providers_for(project: &Project) -> Providers {
    providers_with_env(project, &|name| std::env::var(name).ok())
}

/// As [`providers_for`], with variables read through `env`.
pub fn providers_with_env(project: &Project, env: &dyn Fn(&str) -> Option<String>) -> Providers {
    let mut providers = Providers::new().with("scripted", Scripted);
    let names = duet_spec::PROVIDERS
        .iter()
        .copied()
        .chain(project.providers.keys().map(String::as_str));
    for name in names {
        if let Some(def) = project.provider(name) {
            let config = ProviderConfig::from_def(&def, env);
            providers = match def.provider_type {
                ProviderType::Openai => providers.with(name, OpenAi::new(config)),
                ProviderType::Anthropic => providers.with(name, Anthropic::new(config)),
            };
        }
    }
    providers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_models_own_provider_is_registered_under_its_name() {
        let own = "name: own\nprovider: { type: anthropic, baseUrl: 'http://127.0.0.1:1', apiKeyEnv: OWN_KEY }\nmodel: m\n";
        let loaded = Project::from_files([duet_spec::SourceFile {
            path: "agents/models/own.yaml".into(),
            bytes: own.as_bytes().to_vec(),
        }]);
        assert!(loaded.is_ok(), "{:?}", loaded.issues);
        let providers = providers_with_env(&loaded.project, &|_| Some("k".repeat(40)));
        assert!(providers.get("model:own").is_some());
        assert!(providers.get("model:other").is_none());
    }
}
