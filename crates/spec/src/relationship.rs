//! What a subagent relationship decides at run time from the env it is evaluated in.

use crate::agent::SubagentRelationship;

/// Whether an env flag is on: `true`, `1` or `yes`, in any case.
fn flag_on(value: Option<String>) -> bool {
    value.is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
}

impl SubagentRelationship {
    /// Whether the relationship is enabled: it names no `optional` flag, or `env` has that flag
    /// on (`true`, `1` or `yes`, in any case).
    pub fn enabled(&self, env: &dyn Fn(&str) -> Option<String>) -> bool {
        self.optional
            .as_deref()
            .is_none_or(|flag| flag_on(env(flag)))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn flags_read_true_one_or_yes() {
        for (v, on) in [
            ("true", true),
            (" YES ", true),
            ("1", true),
            ("0", false),
            ("no", false),
        ] {
            assert_eq!(super::flag_on(Some(v.to_owned())), on, "{v}");
        }
        assert!(!super::flag_on(None));
    }
}
