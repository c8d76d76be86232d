//! The gateway's endpoints, each written once: the path a request is posted
//! to, the answer it gets, and which gateway object owns its state. The
//! client's codec, the gateway's router and every JS host route from here.

use crate::json_value::Value;

use super::{
    AcquireRequest, AcquireResponse, ChargeRequest, ChargeResponse, Message, ObserveRequest,
    ObserveResponse, PenalizeRequest, PenalizeResponse, ReleaseRequest, ReleaseResponse,
};
use crate::error::{Error, Result};

/// Which state a request reads and writes: a rate bucket, or a run's budget
/// ledger. A host that shards the gateway (one Durable Object per owner)
/// sends the request to the object named by that field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// Named by `bucketId`.
    Bucket,
    /// Named by `rootRunId`.
    Run,
}

impl Owner {
    /// The request field that names the owner.
    pub fn field(self) -> &'static str {
        match self {
            Owner::Bucket => "bucketId",
            Owner::Run => "rootRunId",
        }
    }
}

/// One POST endpoint: a request message, its path and its answer.
pub trait Endpoint: Message {
    type Response: Message;
    const ROUTE: Route;
}

/// The part of an endpoint a router needs, without its message types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// A short name: `acquire`, `release`, ...
    pub name: &'static str,
    pub path: &'static str,
    pub owner: Owner,
}

/// Writes each endpoint's `Endpoint` impl and the list of them, so a new
/// endpoint is one line here.
macro_rules! endpoints {
    ($($request:ident => $response:ident: $name:literal at $path:literal, owned by $owner:ident;)+) => {
        $(
            impl Endpoint for $request {
                type Response = $response;
                const ROUTE: Route = Route {
                    name: $name,
                    path: $path,
                    owner: Owner::$owner,
                };
            }
        )+

        /// Every POST endpoint.
        pub const ROUTES: [Route; [$($name),+].len()] = [$($request::ROUTE),+];
    };
}

endpoints! {
    AcquireRequest => AcquireResponse: "acquire" at "/v1/rate/acquire", owned by Bucket;
    ReleaseRequest => ReleaseResponse: "release" at "/v1/rate/release", owned by Bucket;
    PenalizeRequest => PenalizeResponse: "penalize" at "/v1/rate/penalize", owned by Bucket;
    ObserveRequest => ObserveResponse: "observe" at "/v1/rate/observe", owned by Bucket;
    ChargeRequest => ChargeResponse: "charge" at "/v1/budget/charge", owned by Run;
}

/// `GET` this prefix plus a percent-encoded bucket id: the bucket's live
/// state (its owner is that bucket).
pub const BUCKET_VIEW_PREFIX: &str = "/v1/rate/buckets/";

/// The route posted to at `path` (without a query), if any.
pub fn route(path: &str) -> Option<Route> {
    ROUTES.into_iter().find(|r| r.path == path)
}

/// The name of the gateway object that owns a request posted to `route`:
/// its bucket id, or `run:` and its run id (so a run never shares an object
/// with a bucket of the same name). Reads only that field; the object
/// validates the rest.
pub fn owner_name(route: Route, body: &[u8]) -> Result<String> {
    let value = super::parse_body(body)?;
    let field = route.owner.field();
    let id = value
        .get(field)
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| {
            Error::invalid(format!(
                "{field} is required and must be a non-empty string"
            ))
        })?;
    Ok(match route.owner {
        Owner::Bucket => id.to_owned(),
        Owner::Run => format!("run:{id}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_is_the_bucket_or_the_prefixed_run() {
        let body = br#"{"bucketId":"org:p","rules":[]}"#;
        assert_eq!(owner_name(AcquireRequest::ROUTE, body).unwrap(), "org:p");
        let body = br#"{"rootRunId":"r1","reservationId":"x","charges":[]}"#;
        assert_eq!(owner_name(ChargeRequest::ROUTE, body).unwrap(), "run:r1");
        for bad in [
            &b"{"[..],
            b"[]",
            br#"{"bucketId":""}"#,
            br#"{"bucketId":7}"#,
        ] {
            let e = owner_name(ReleaseRequest::ROUTE, bad).unwrap_err();
            assert_eq!(e.code, crate::error::ErrorCode::InvalidInput);
        }
    }

    #[test]
    fn every_route_has_its_own_path_and_name() {
        for (i, a) in ROUTES.iter().enumerate() {
            assert_eq!(route(a.path), Some(*a));
            for b in &ROUTES[i + 1..] {
                assert_ne!(a.path, b.path);
                assert_ne!(a.name, b.name);
            }
            assert!(!a.path.starts_with(BUCKET_VIEW_PREFIX));
        }
        assert_eq!(route("/v1/rate/acquire?x=1"), None);
    }
}
