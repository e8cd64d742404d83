//! A model and its `fallbacks`, as one model: when a model fails (after its provider's own
//! retries) before anything of its answer was streamed, the next is tried, announced by a
//! `retrying` chunk; once something was streamed, the failure stands (a caller cannot unsee
//! text).

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::{self, BoxStream};

use crate::model::{Model, ModelChunk, ModelError, ModelRequest};

/// Models tried in order, by name.
pub(crate) struct Chain {
    pub(crate) links: Vec<(String, Arc<dyn Model>)>,
}

/// A model that cannot be built (its provider is missing): every call fails with why.
pub(crate) struct Unavailable(pub(crate) ModelError);

impl Model for Unavailable {
    fn stream(&self, _: ModelRequest) -> BoxStream<'static, Result<ModelChunk, ModelError>> {
        stream::iter([Err(self.0.clone())]).boxed()
    }
}

struct State {
    links: Vec<(String, Arc<dyn Model>)>,
    request: ModelRequest,
    at: usize,
    current: Option<BoxStream<'static, Result<ModelChunk, ModelError>>>,
    /// Something of the answer went out: no fallback may follow.
    streamed: bool,
    done: bool,
}

impl Model for Chain {
    fn stream(&self, request: ModelRequest) -> BoxStream<'static, Result<ModelChunk, ModelError>> {
        let state = State {
            links: self.links.clone(),
            request,
            at: 0,
            current: None,
            streamed: false,
            done: false,
        };
        stream::unfold(state, |mut s| async move {
            if s.done {
                return None;
            }
            let at = s.at;
            let current = match &mut s.current {
                Some(c) => c,
                None => {
                    let (_, model) = s.links.get(at)?;
                    s.current.insert(model.stream(s.request.clone()))
                }
            };
            let item = match current.next().await? {
                Ok(chunk) => {
                    if !matches!(
                        chunk,
                        ModelChunk::Usage(_) | ModelChunk::Finish(_) | ModelChunk::Retrying { .. }
                    ) {
                        s.streamed = true;
                    }
                    Ok(chunk)
                }
                Err(e) if !s.streamed && at + 1 < s.links.len() => {
                    let (failed, next) = (&s.links[at].0, &s.links[at + 1].0);
                    let chunk = ModelChunk::Retrying {
                        attempt: u32::try_from(at + 2).unwrap_or(u32::MAX),
                        max_attempts: u32::try_from(s.links.len()).unwrap_or(u32::MAX),
                        delay_ms: 0,
                        reason: format!(
                            "model `{failed}` failed ({e}); trying its fallback `{next}`"
                        ),
                    };
                    s.at += 1;
                    s.current = None;
                    Ok(chunk)
                }
                Err(e) => {
                    s.done = true;
                    Err(e)
                }
            };
            Some((item, s))
        })
        .boxed()
    }
}
