//! A shop's API on 127.0.0.1 for the project's own code to `fetch`: `GET /orders/{id}` answers
//! `{"status":"shipped"}` for `A-1001` (404 for any other), `POST /charges` holds the first
//! request unanswered (a call in flight when its process is killed) and answers each later one
//! `201 {"charged":true}`. Every connection is counted and every request reported on a channel
//! the test awaits (an event, never a sleep). One request per connection (`Connection: close`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, mpsc};

/// One request the origin read.
#[derive(Clone, Debug)]
pub(crate) struct Hit {
    pub(crate) method: String,
    pub(crate) path: String,
    /// Header names lower-cased, in the order sent.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Hit {
    /// Header `name` (lower case), if sent.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The running origin.
pub(crate) struct Origin {
    /// `127.0.0.1:PORT`.
    pub(crate) addr: String,
    connections: Arc<AtomicUsize>,
    hits: mpsc::UnboundedReceiver<Hit>,
    /// Held requests' connections, kept open until the origin is dropped.
    _held: Arc<Mutex<Vec<TcpStream>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Origin {
    pub(crate) async fn start() -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let connections = Arc::new(AtomicUsize::new(0));
        let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let charges = Arc::new(AtomicUsize::new(0));
        let (tx, hits) = mpsc::unbounded_channel();
        let task = tokio::spawn({
            let (connections, held) = (connections.clone(), held.clone());
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    connections.fetch_add(1, Ordering::SeqCst);
                    let (tx, held, charges) = (tx.clone(), held.clone(), charges.clone());
                    tokio::spawn(serve(stream, tx, held, charges));
                }
            }
        });
        Origin {
            addr,
            connections,
            hits,
            _held: held,
            task,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The connections accepted so far.
    pub(crate) fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// The next request (panics after 20 s: a hung test, not a timing assertion).
    pub(crate) async fn next(&mut self) -> Hit {
        tokio::time::timeout(Duration::from_secs(20), self.hits.recv())
            .await
            .expect("a request reaches the origin")
            .expect("the origin runs")
    }

    /// The requests already reported, without waiting.
    pub(crate) fn seen(&mut self) -> Vec<Hit> {
        std::iter::from_fn(|| self.hits.try_recv().ok()).collect()
    }
}

/// Reads one request from `stream`, reports it, and answers it (or holds it).
async fn serve(
    mut stream: TcpStream,
    tx: mpsc::UnboundedSender<Hit>,
    held: Arc<Mutex<Vec<TcpStream>>>,
    charges: Arc<AtomicUsize>,
) {
    let Some(hit) = read(&mut stream).await else {
        return;
    };
    let (status, body) = match (hit.method.as_str(), hit.path.as_str()) {
        ("GET", "/orders/A-1001") => ("200 OK", r#"{"status":"shipped"}"#),
        ("POST", "/charges") => {
            if charges.fetch_add(1, Ordering::SeqCst) == 0 {
                let _ = tx.send(hit);
                held.lock().await.push(stream);
                return;
            }
            ("201 Created", r#"{"charged":true}"#)
        }
        _ => ("404 Not Found", r#"{"error":"not found"}"#),
    };
    let _ = tx.send(hit);
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// One request's head and body (a `content-length` body; 64 KiB at most).
async fn read(stream: &mut TcpStream) -> Option<Hit> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buf.len() > 64 << 10 {
            return None;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
        .min(64 << 10);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Hit {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}
