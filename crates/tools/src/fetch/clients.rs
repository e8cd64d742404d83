//! The HTTP clients `fetch` sends with: none follows a redirect or uses a proxy (either would
//! send the request somewhere the guard did not check). A host given as an IP address uses the
//! shared client; a name uses a client pinned to the addresses it was checked at
//! (`resolve_to_addrs`), kept for the next request that resolves the same way so its
//! connections are reused.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Mutex;

/// How many pinned clients are kept.
const KEPT: usize = 32;

/// A name and the addresses it was checked at.
type Pin = (String, Vec<SocketAddr>);

/// The shared client and the pinned ones.
pub(super) struct Clients {
    shared: Result<reqwest::Client, String>,
    /// Most recently used last.
    pinned: Mutex<VecDeque<(Pin, reqwest::Client)>>,
}

impl Clients {
    pub(super) fn new() -> Clients {
        Clients {
            shared: build(None),
            pinned: Mutex::new(VecDeque::new()),
        }
    }

    /// The client for a host given as an IP address.
    pub(super) fn shared(&self) -> Result<reqwest::Client, String> {
        self.shared.clone()
    }

    /// A client that reaches `host` only at `addrs`.
    pub(super) fn pinned(
        &self,
        host: &str,
        addrs: &[SocketAddr],
    ) -> Result<reqwest::Client, String> {
        let mut sorted = addrs.to_vec();
        sorted.sort_unstable();
        let pin = (host.to_owned(), sorted);
        {
            let mut kept = self.lock();
            if let Some(at) = kept.iter().position(|(p, _)| *p == pin)
                && let Some(found) = kept.remove(at)
            {
                let client = found.1.clone();
                kept.push_back(found);
                return Ok(client);
            }
        }
        // Built unlocked: two requests racing may both build one, and both are right.
        let client = build(Some((host, addrs)))?;
        let mut kept = self.lock();
        if kept.len() >= KEPT {
            kept.pop_front();
        }
        kept.push_back((pin, client.clone()));
        Ok(client)
    }
}

impl Clients {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(Pin, reqwest::Client)>> {
        // A panic elsewhere while holding it left a list of clients, each still sound.
        self.pinned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn build(pin: Option<(&str, &[SocketAddr])>) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy();
    if let Some((host, addrs)) = pin {
        builder = builder.resolve_to_addrs(host, addrs);
    }
    builder
        .build()
        .map_err(|e| format!("fetch cannot start its HTTP client: {e}"))
}
