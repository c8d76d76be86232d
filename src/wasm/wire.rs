//! The protocol's endpoint table for JS: the routers, the Durable Object
//! and the transports written in JS route by it, so a path or the body
//! limit is written once, in the protocol.

use js_sys::{Array, Object, Reflect};
use wasm_bindgen::prelude::*;

use crate::protocol::{limits, BUCKET_VIEW_PREFIX, ROUTES};

#[wasm_bindgen(typescript_custom_section)]
const TS_WIRE: &'static str = r#"
type WireAcquireRequest = import("./glue/fetch-port.js").AcquireRequest;
type WireAcquireResponse = import("./glue/fetch-port.js").AcquireResponse;
type WireReleaseRequest = import("./glue/fetch-port.js").ReleaseRequest;
type WireReleaseResponse = import("./glue/fetch-port.js").ReleaseResponse;
type WirePenalizeRequest = import("./glue/fetch-port.js").PenalizeRequest;
type WirePenalizeResponse = import("./glue/fetch-port.js").PenalizeResponse;
type WireObserveRequest = import("./glue/fetch-port.js").ObserveRequest;
type WireObserveResponse = import("./glue/fetch-port.js").ObserveResponse;
type WireChargeRequest = import("./glue/fetch-port.js").ChargeRequest;
type WireChargeResponse = import("./glue/fetch-port.js").ChargeResponse;
/** One POST endpoint of the gateway, from the protocol's endpoint table. */
export interface GatewayRoute {
  /** `acquire`, `release`, `penalize`, `observe` or `charge`. */
  name: string;
  path: string;
  /** The request field naming the state it touches. */
  owner: "bucketId" | "rootRunId";
}
/** The bucket a rate state's methods and `GatewayCore.bucket` name. */
export interface BucketRef {
  bucketId: string;
  /** From mintRateScopeToken, for a gateway with a secret. */
  rateScopeToken?: string | null;
}
export interface GatewayWire {
  routes: GatewayRoute[];
  /** `GET` this plus a percent-encoded bucket id: the bucket's state. */
  bucketViewPrefix: string;
  /** The largest request or answer body, in bytes. */
  maxBodyBytes: number;
}
"#;

fn set(target: &Object, key: &str, value: &JsValue) {
    // A plain data property on a fresh object cannot throw.
    let _ = Reflect::set(target, &JsValue::from_str(key), value);
}

/// The endpoint table, for routers and transports written in JS.
#[wasm_bindgen(js_name = gatewayWire, unchecked_return_type = "GatewayWire")]
pub fn gateway_wire() -> JsValue {
    let routes = Array::new();
    for r in ROUTES {
        let route = Object::new();
        set(&route, "name", &JsValue::from_str(r.name));
        set(&route, "path", &JsValue::from_str(r.path));
        set(&route, "owner", &JsValue::from_str(r.owner.field()));
        routes.push(&route);
    }
    let wire = Object::new();
    set(&wire, "routes", &routes);
    set(
        &wire,
        "bucketViewPrefix",
        &JsValue::from_str(BUCKET_VIEW_PREFIX),
    );
    set(
        &wire,
        "maxBodyBytes",
        &JsValue::from_f64(limits::MAX_BODY_BYTES as f64),
    );
    wire.into()
}
