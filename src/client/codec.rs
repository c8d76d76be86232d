//! The client's half of the wire: each request encoded once, each answer
//! decoded once, and an error answer turned back into the error the gateway
//! raised. Every transport goes through here, so a JS port, the in-process
//! gateway and the simulation read answers alike.

use crate::json_value::Value;

use super::transport::{GatewayReply, GatewayTransport};
use crate::error::{Error, Result};
use crate::protocol::{decode, encode, parse_body, Endpoint, ErrorBody, Message};
use crate::rt::LocalBoxFuture;

/// Enough of a proxy's HTML error page to recognise it in a log.
const EXCERPT_BYTES: usize = 120;

/// Posts `req` to its endpoint and decodes the answer. Only the encoding
/// and the reading of the answer's fields are per endpoint: the round trip,
/// the status and an error body are handled by one copy of the code for
/// every message type.
pub(crate) fn call<'a, T, E>(transport: &'a T, req: E) -> LocalBoxFuture<'a, Result<E::Response>>
where
    T: GatewayTransport + ?Sized,
    E: Endpoint,
    E::Response: 'a,
{
    let path = E::ROUTE.path;
    let reply = transport.post(path, encode(&req).into_bytes());
    Box::pin(async move { answer(path, reply.await?) })
}

/// A 2xx body as the endpoint's answer; anything else as the error it
/// carries. A body that says nothing usable is `GATEWAY_UNAVAILABLE` with
/// the status, naming what came back.
pub(crate) fn answer<M: Message>(path: &str, reply: GatewayReply) -> Result<M> {
    let body = answer_body(path, &reply)?;
    M::from_value(&body).map_err(|e| not_its_answer(path, &reply, &e))
}

/// The JSON of a 2xx answer, or the error an answer of any other status
/// carries.
#[inline(never)]
fn answer_body(path: &str, reply: &GatewayReply) -> Result<Value> {
    if (200..300).contains(&reply.status) {
        return parse_body(&reply.body).map_err(|e| not_its_answer(path, reply, &e));
    }
    match decode::<ErrorBody>(&reply.body) {
        Ok(error) => Err(error.into_error()),
        Err(_) => Err(unusable(
            path,
            reply,
            describe(&reply.body, "without an error code"),
        )),
    }
}

#[inline(never)]
fn not_its_answer(path: &str, reply: &GatewayReply, e: &Error) -> Error {
    let what = describe(&reply.body, "that is not its answer");
    unusable(path, reply, format!("{what} ({})", e.message))
}

fn unusable(path: &str, reply: &GatewayReply, what: String) -> Error {
    // Widened: u64's formatter is in the module already, u16's would be
    // there for this message alone.
    Error::unavailable(format!(
        "paceline gateway answered HTTP {} to POST {path} with {what}",
        u64::from(reply.status)
    ))
}

fn describe(body: &[u8], what: &str) -> String {
    if body.is_empty() {
        return "an empty body".into();
    }
    let text = lossy_text(body);
    let start = crate::json::head(&text, EXCERPT_BYTES);
    let ellipsis = if start.len() < text.len() { "…" } else { "" };
    let excerpt = crate::json::quoted(&format!("{start}{ellipsis}"));
    format!("a body {what}: {excerpt}")
}

/// `bytes` as `String::from_utf8_lossy` reads them (each invalid sequence
/// one U+FFFD), through `str::from_utf8`, which the JSON reader already
/// brings into the wasm, rather than the library's lossy reader (1 KB).
fn lossy_text(mut bytes: &[u8]) -> String {
    let mut text = String::new();
    loop {
        match std::str::from_utf8(bytes) {
            Ok(rest) => {
                text.push_str(rest);
                return text;
            }
            Err(e) => {
                let valid = bytes.get(..e.valid_up_to()).unwrap_or_default();
                text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                text.push(char::REPLACEMENT_CHARACTER);
                let skipped = e.valid_up_to() + e.error_len().unwrap_or(bytes.len());
                bytes = bytes.get(skipped..).unwrap_or_default();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Detail, ErrorCode};
    use crate::protocol::{AcquireResponse, ChargeResponse};

    #[test]
    fn a_body_that_is_not_utf8_reads_as_from_utf8_lossy_reads_it() {
        let bodies: [&[u8]; 7] = [
            b"",
            b"plain",
            b"bad \xff byte",
            b"\xf0\x9f\x98 cut emoji, then \xf0\x9f\x98\x80 whole",
            b"ends in a cut sequence \xe2\x82",
            b"\xc0\xaf\xed\xa0\x80 overlong and surrogate",
            b"\x80\x80\x80",
        ];
        for body in bodies {
            assert_eq!(lossy_text(body), String::from_utf8_lossy(body), "{body:?}");
        }
    }

    fn reply(status: u16, body: &str) -> GatewayReply {
        GatewayReply {
            status,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_2xx_body_decodes_as_the_endpoints_answer() {
        let r: AcquireResponse = answer(
            "/p",
            reply(200, r#"{"granted":1,"waitMs":0,"scheduledAtMs":[5]}"#),
        )
        .unwrap();
        assert_eq!((r.granted, r.scheduled_at_ms), (1, Some(vec![5])));
    }

    #[test]
    fn an_error_body_becomes_the_gateways_error_with_its_fields() {
        let body = r#"{"error":{"code":"BUDGET_EXCEEDED","message":"over","key":"toolCall","observed":6,"limit":5}}"#;
        let e = answer::<ChargeResponse>("/p", reply(409, body)).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::BudgetExceeded, "over")
        );
        assert_eq!(
            e.detail,
            Some(Detail::Budget {
                key: "toolCall".into(),
                observed: 6,
                limit: 5
            })
        );
        let body = r#"{"error":{"code":"FORBIDDEN_SCOPE","message":"bad token"}}"#;
        let e = answer::<ChargeResponse>("/p", reply(403, body)).unwrap_err();
        assert_eq!(e.code, ErrorCode::ForbiddenScope);
        assert_eq!(e.message, "bad token");
    }

    #[test]
    fn an_unknown_code_from_a_newer_gateway_is_gateway_unavailable_with_its_message() {
        let body = r#"{"error":{"code":"SOMETHING_NEW","message":"later"}}"#;
        let e = answer::<ChargeResponse>("/p", reply(400, body)).unwrap_err();
        assert_eq!(e.code, ErrorCode::GatewayUnavailable);
        assert!(e.message.contains("later"), "{}", e.message);
    }

    #[test]
    fn unusable_bodies_are_gateway_unavailable_naming_status_path_and_an_excerpt() {
        let page = format!("<html>{}</html>", "x".repeat(300));
        for (status, body, says) in [
            (502, page.as_str(), "without an error code: \"<html>xxx"),
            (500, "", "an empty body"),
            (200, "[1]", "that is not its answer: \"[1]\""),
            (200, r#"{"granted":"#, "that is not its answer"),
            (404, r#"{"error":{}}"#, "without an error code"),
        ] {
            let e = answer::<AcquireResponse>("/v1/rate/acquire", reply(status, body)).unwrap_err();
            assert_eq!(e.code, ErrorCode::GatewayUnavailable, "{body}");
            let head = format!("HTTP {status} to POST /v1/rate/acquire");
            assert!(e.message.contains(&head), "{}", e.message);
            assert!(e.message.contains(says), "{}", e.message);
            assert!(e.message.len() < 400, "{}", e.message);
        }
    }
}
