//! A bridge that only reads: the `state` of a thread endpoint called while its thread runs (or
//! after it was terminated), when the endpoint holds no lease and nothing it wrote could be
//! committed. Each member that writes throws, saying why, before anything happens (a tool
//! invoked or a child spawned would act at once, outside any commit); reads, `env` and `fetch`
//! go through.

use async_trait::async_trait;
use serde_json::Value;

use crate::code::Bridge;

/// The `state` members that write to the thread (or act for it at once).
const WRITES: &[&str] = &[
    "setValue",
    "injectMessage",
    "queueMessage",
    "queueTool",
    "invokeTool",
    "scheduleEffect",
    "removeScheduledEffect",
    "emit",
    "notifyParent",
    "setStatus",
    "stopSession",
    "terminate",
    "writeFile",
    "unlinkFile",
    "mkdirFile",
    "rmdirFile",
];

/// `inner`, with every member that writes refused.
pub(crate) struct ReadOnly<'b> {
    inner: &'b mut (dyn Bridge + 'b),
    /// Why the thread may not be written now, for the error the code sees.
    why: &'b str,
    /// Whether the code tried a write.
    pub(crate) refused: bool,
}

impl<'b> ReadOnly<'b> {
    pub(crate) fn new(inner: &'b mut (dyn Bridge + 'b), why: &'b str) -> Self {
        ReadOnly {
            inner,
            why,
            refused: false,
        }
    }
}

#[async_trait]
impl Bridge for ReadOnly<'_> {
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        if WRITES.contains(&method) {
            self.refused = true;
            return Err(format!(
                "`state.{method}` writes to the thread, and {}",
                self.why
            ));
        }
        self.inner.call(method, params).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers every call with its method's name.
    struct Echo(Vec<String>);

    #[async_trait]
    impl Bridge for Echo {
        async fn call(&mut self, method: &str, _params: Value) -> Result<Value, String> {
            self.0.push(method.to_owned());
            Ok(Value::String(method.to_owned()))
        }
    }

    #[tokio::test]
    async fn reads_go_through_and_writes_are_refused_before_they_reach_the_state() {
        let mut echo = Echo(Vec::new());
        let mut reads = ReadOnly::new(&mut echo, "it is running");
        for member in [
            "getValue",
            "getMessages",
            "env",
            "fetch",
            "getScheduledEffects",
        ] {
            assert_eq!(
                reads.call(member, Value::Null).await,
                Ok(Value::String(member.to_owned()))
            );
        }
        assert!(!reads.refused);
        for member in WRITES {
            let e = reads
                .call(member, Value::Null)
                .await
                .expect_err("a write is refused");
            assert_eq!(
                e,
                format!("`state.{member}` writes to the thread, and it is running")
            );
        }
        assert!(reads.refused);
        assert_eq!(
            echo.0,
            [
                "getValue",
                "getMessages",
                "env",
                "fetch",
                "getScheduledEffects"
            ]
        );
    }
}
