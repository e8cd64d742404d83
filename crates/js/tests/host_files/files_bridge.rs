//! A bridge that answers the file members from a map of paths to bytes, the way the runtime's
//! `code/files.rs` shapes them (`FileRecord`, `{"$bytes"}`, `readFileChunk`), and records every
//! request.

use std::collections::BTreeMap;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use duet_runtime::Bridge;
use serde_json::{Value, json};

const CHUNK: usize = 1 << 20;

#[derive(Default)]
pub(crate) struct Files {
    pub(crate) bytes: BTreeMap<String, Vec<u8>>,
    pub(crate) seen: Vec<(String, Value)>,
}

fn record(path: &str, data: &[u8]) -> Value {
    json!({
        "path": path,
        "name": path.rsplit('/').next(),
        "type": "file",
        "mimeType": "application/octet-stream",
        "size": data.len(),
        "createdAt": 1,
        "updatedAt": 1,
    })
}

fn path(params: &Value) -> String {
    params["path"].as_str().unwrap_or_default().to_owned()
}

impl Files {
    fn answer(&mut self, method: &str, params: &Value) -> Result<Value, String> {
        let p = path(params);
        Ok(match method {
            "writeFile" => {
                let data = match &params["data"] {
                    Value::String(s) => s.as_bytes().to_vec(),
                    v => STANDARD
                        .decode(v["$bytes"].as_str().ok_or("not $bytes")?)
                        .map_err(|e| e.to_string())?,
                };
                let r = record(&p, &data);
                self.bytes.insert(p, data);
                r
            }
            "readFile" => self
                .bytes
                .get(&p)
                .map_or(Value::Null, |b| json!({ "$bytes": STANDARD.encode(b) })),
            "readFileChunk" => match self.bytes.get(&p) {
                None => Value::Null,
                Some(b) => {
                    let from = params["offset"].as_u64().unwrap_or(0) as usize;
                    let piece = &b[from.min(b.len())..(from + CHUNK).min(b.len())];
                    json!({
                        "data": { "$bytes": STANDARD.encode(piece) },
                        "offset": from,
                        "size": b.len(),
                        "updatedAt": 1,
                    })
                }
            },
            "statFile" => self.bytes.get(&p).map_or(Value::Null, |b| record(&p, b)),
            "readdirFile" => {
                let dir = format!("{}/", p.trim_end_matches('/'));
                let entries: Vec<Value> = self
                    .bytes
                    .iter()
                    .filter(|(k, _)| k.strip_prefix(&dir).is_some_and(|r| !r.contains('/')))
                    .map(|(k, b)| record(k, b))
                    .collect();
                json!({ "entries": entries })
            }
            "grepFiles" => {
                let pattern = params["pattern"].as_str().unwrap_or_default();
                let mut found = Vec::new();
                for (k, b) in &self.bytes {
                    let Ok(text) = std::str::from_utf8(b) else {
                        continue;
                    };
                    for (i, line) in text.lines().enumerate() {
                        if line.contains(pattern) {
                            found.push(json!({ "path": k, "line": i + 1, "text": line }));
                        }
                    }
                }
                Value::Array(found)
            }
            "findFiles" => {
                let prefix = params["pattern"]
                    .as_str()
                    .unwrap_or_default()
                    .trim_end_matches('*');
                let paths: Vec<&String> = self
                    .bytes
                    .keys()
                    .filter(|k| k.starts_with(prefix))
                    .collect();
                json!({ "paths": paths, "truncated": false })
            }
            "getFileStats" => json!({
                "files": self.bytes.len(),
                "directories": 0,
                "bytes": self.bytes.values().map(Vec::len).sum::<usize>(),
            }),
            "getFileThumbnail" => {
                return Err("`state.getFileThumbnail` is not available in duet yet: duet has no image library to make thumbnails: read the image with `readFile`".into());
            }
            other => return Err(format!("not a file member: {other}")),
        })
    }
}

#[async_trait]
impl Bridge for Files {
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let answer = self.answer(method, &params);
        self.seen.push((method.to_owned(), params));
        answer
    }
}
