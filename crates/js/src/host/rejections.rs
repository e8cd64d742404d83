//! Promises rejected with no handler, as QuickJS's rejection tracker reports them: a rejection
//! still unhandled when the call's work is done fails the call.

use std::cell::RefCell;

use rquickjs::{Coerced, Ctx, Persistent, Value};

type Kept = Persistent<Value<'static>>;

/// The promises rejected and not (yet) handled, with their reasons.
#[derive(Default)]
pub(crate) struct Rejections(RefCell<Vec<(Kept, Kept)>>);

impl Rejections {
    /// The tracker: `promise` was rejected with `reason` and nothing handles it (`handled`
    /// false), or something now does.
    pub(crate) fn track<'js>(
        &self,
        ctx: &Ctx<'js>,
        promise: Value<'js>,
        reason: Value<'js>,
        handled: bool,
    ) {
        let mut kept = self.0.borrow_mut();
        if !handled {
            kept.push((
                Persistent::save(ctx, promise),
                Persistent::save(ctx, reason),
            ));
            return;
        }
        if let Some(i) = kept
            .iter()
            .position(|(p, _)| p.clone().restore(ctx).is_ok_and(|p| p == promise))
        {
            let (p, r) = kept.remove(i);
            let _ = (p.restore(ctx), r.restore(ctx));
        }
    }

    /// The first reason still unhandled, as `String(reason)` gives it; forgets them all.
    pub(crate) fn take(&self, ctx: &Ctx<'_>) -> Option<String> {
        let kept = std::mem::take(&mut *self.0.borrow_mut());
        let mut first = None;
        for (p, r) in kept {
            let _ = p.restore(ctx);
            let reason = r.restore(ctx);
            if first.is_none() {
                first = Some(reason.map_or_else(
                    |_| "a reason that cannot be shown".to_owned(),
                    |r| {
                        r.get::<Coerced<String>>()
                            .map_or_else(|_| "a reason that cannot be shown".to_owned(), |s| s.0)
                    },
                ));
            }
        }
        first
    }

    /// Forgets them all (what a module's loading left is not a call's).
    pub(crate) fn clear(&self, ctx: &Ctx<'_>) {
        for (p, r) in std::mem::take(&mut *self.0.borrow_mut()) {
            let _ = (p.restore(ctx), r.restore(ctx));
        }
    }
}
