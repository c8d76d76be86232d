//! The gateway's HTTP face, as a pure function from a request to a status
//! and a JSON body. Every host (the Durable Object, the Node dev server,
//! tests) routes through this one function, so they cannot drift apart.

use super::GatewayCore;
use crate::error::{Error, ErrorCode, Result};
use crate::json::quoted;
use crate::json_write::{to_text, Encode};
use crate::protocol::{
    decode, encode, AcquireRequest, ChargeRequest, Endpoint, ErrorBody, ObserveRequest,
    PenalizeRequest, ReleaseRequest, Route, BUCKET_VIEW_PREFIX,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    pub body: String,
}

impl HttpResponse {
    fn ok(message: &impl Encode) -> Self {
        HttpResponse {
            status: 200,
            body: encode(message),
        }
    }

    fn error(e: &Error) -> Self {
        HttpResponse {
            status: e.code.http_status(),
            body: encode(&ErrorBody::from(e)),
        }
    }
}

/// Serves one request. `path` may carry a query string; the bucket view
/// reads its token from `?token=`.
pub fn handle(
    core: &mut GatewayCore,
    method: &str,
    path: &str,
    body: &[u8],
    now_ms: u64,
) -> HttpResponse {
    match route(core, method, path, body, now_ms) {
        Ok(response) => response,
        Err(e) => HttpResponse::error(&e),
    }
}

// Strings are split with closures, not `char` patterns: a `char` pattern
// brings core's searcher for it into the wasm (0.6 KB).
#[allow(clippy::manual_pattern_char_comparison)]
fn route(
    core: &mut GatewayCore,
    method: &str,
    path: &str,
    body: &[u8],
    now_ms: u64,
) -> Result<HttpResponse> {
    let (path, query) = path.split_once(|c| c == '?').unwrap_or((path, ""));
    let is = |e: Route| method == "POST" && path == e.path;
    match path.strip_prefix(BUCKET_VIEW_PREFIX) {
        _ if is(AcquireRequest::ROUTE) => call(body, |r: AcquireRequest| core.acquire(&r, now_ms)),
        _ if is(ReleaseRequest::ROUTE) => call(body, |r: ReleaseRequest| core.release(&r, now_ms)),
        _ if is(PenalizeRequest::ROUTE) => {
            call(body, |r: PenalizeRequest| core.penalize(&r, now_ms))
        }
        _ if is(ObserveRequest::ROUTE) => call(body, |r: ObserveRequest| core.observe(&r, now_ms)),
        _ if is(ChargeRequest::ROUTE) => call(body, |r: ChargeRequest| core.charge(&r, now_ms)),
        Some(id) if method == "GET" => {
            let bucket_id = percent_decode(id)?;
            let token = query
                .split(|c| c == '&')
                .find_map(|pair| pair.strip_prefix("token="))
                .map(percent_decode)
                .transpose()?;
            match core.bucket(&bucket_id, token.as_deref(), now_ms)? {
                Some(view) => Ok(HttpResponse {
                    status: 200,
                    body: to_text(&view),
                }),
                None => Ok(HttpResponse {
                    status: 404,
                    body: encode(&ErrorBody::from(&Error::invalid(format!(
                        "the gateway holds no bucket {bucket_id}"
                    )))),
                }),
            }
        }
        _ if crate::protocol::route(path).is_some() => Ok(HttpResponse {
            status: 405,
            body: encode(&ErrorBody::from(&Error::invalid(format!(
                "{path} takes POST, not {method}"
            )))),
        }),
        _ => Ok(HttpResponse {
            status: 404,
            body: encode(&ErrorBody::from(&Error::invalid(format!(
                "no gateway endpoint at {method} {path}"
            )))),
        }),
    }
}

/// Decodes the request, serves it, encodes the answer: the one place the
/// gateway reads a request body and writes an answer body.
fn call<E: Endpoint>(
    body: &[u8],
    f: impl FnOnce(E) -> Result<E::Response>,
) -> Result<HttpResponse> {
    let request = decode::<E>(body)?;
    f(request).map(|response| HttpResponse::ok(&response))
}

fn percent_decode(text: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| Error::invalid(format!("bad percent-escape in {}", quoted(text))))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| {
        Error::new(
            ErrorCode::InvalidInput,
            format!("{} is not UTF-8 once decoded", quoted(text)),
        )
    })
}
