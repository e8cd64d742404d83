//! The HTTP clients `fetch` sends with: none follows a redirect or uses a proxy (either would
//! send the request somewhere the guard did not check). A host given as an IP address uses the
//! shared client; a name uses a client pinned to the addresses it was checked at
//! (`resolve_to_addrs`), kept for the next request that resolves the same way so its
//! connections are reused.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Mutex;

use reqwest::header::{ACCEPT, HeaderMap, HeaderValue};

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

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(Pin, reqwest::Client)>> {
        // A panic elsewhere while holding it left a list of clients, each still sound.
        self.pinned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn build(pin: Option<(&str, &[SocketAddr])>) -> Result<reqwest::Client, String> {
    // What `fetch` sends when the code does not say (as Node's does: some APIs refuse a
    // request without `User-Agent`).
    let mut defaults = HeaderMap::new();
    defaults.insert(ACCEPT, HeaderValue::from_static("*/*"));
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(concat!("duet/", env!("CARGO_PKG_VERSION")))
        .default_headers(defaults);
    if let Some((host, addrs)) = pin {
        builder = builder.resolve_to_addrs(host, addrs);
    }
    builder
        .build()
        .map_err(|e| format!("fetch cannot start its HTTP client: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_resolved_the_same_way_reuses_its_client_and_the_oldest_goes_first() {
        let clients = Clients::new();
        let a: SocketAddr = "93.184.215.14:443".parse().expect("an address");
        let b: SocketAddr = "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:443"
            .parse()
            .expect("an address");
        clients
            .pinned("api.example.com", &[a, b])
            .expect("a client");
        clients
            .pinned("api.example.com", &[b, a])
            .expect("a client");
        assert_eq!(
            clients.lock().len(),
            1,
            "the same addresses in another order"
        );
        clients.pinned("api.example.com", &[a]).expect("a client");
        assert_eq!(clients.lock().len(), 2, "other addresses, another client");
        for n in 0..KEPT {
            clients
                .pinned(&format!("h{n}.example.com"), &[a])
                .expect("a client");
        }
        let kept = clients.lock();
        assert_eq!(kept.len(), KEPT);
        assert!(kept.iter().all(|((host, _), _)| host != "api.example.com"));
    }
}
