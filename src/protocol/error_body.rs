//! Errors on the wire: `{"error": {"code", "message", ...}}`, with the budget
//! and cooldown facts as fields so clients need not parse messages.

use crate::json_value::Value;

use crate::error::{Detail, Error, ErrorCode, Result};
use crate::json::{as_object, Decode, Fields};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ErrorBody {
    pub error: ErrorFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ErrorFields {
    pub code: &'static str,
    pub message: String,
    pub key: Option<String>,
    pub observed: Option<u64>,
    pub limit: Option<u64>,
    pub cooldown_until_ms: Option<u64>,
}

impl From<&Error> for ErrorBody {
    fn from(e: &Error) -> Self {
        let mut fields = ErrorFields {
            code: e.code.as_str(),
            message: e.message.clone(),
            key: None,
            observed: None,
            limit: None,
            cooldown_until_ms: None,
        };
        match &e.detail {
            Some(Detail::Budget {
                key,
                observed,
                limit,
            }) => {
                fields.key = Some(key.clone());
                fields.observed = Some(*observed);
                fields.limit = Some(*limit);
            }
            Some(Detail::Cooldown { until_ms }) => fields.cooldown_until_ms = Some(*until_ms),
            Some(Detail::Cause(_)) | None => {}
        }
        ErrorBody { error: fields }
    }
}

impl ErrorBody {
    /// The error a client raises for this body. An unknown code from a newer
    /// gateway still surfaces, as `GATEWAY_UNAVAILABLE` with its message.
    pub fn into_error(self) -> Error {
        let f = self.error;
        let code = ErrorCode::parse(f.code).unwrap_or(ErrorCode::GatewayUnavailable);
        let mut error = Error::new(code, f.message);
        if let (Some(key), Some(observed), Some(limit)) = (f.key, f.observed, f.limit) {
            error.detail = Some(Detail::Budget {
                key,
                observed,
                limit,
            });
        } else if let Some(until_ms) = f.cooldown_until_ms {
            error.detail = Some(Detail::Cooldown { until_ms });
        }
        error
    }
}

impl Decode for ErrorBody {
    fn from_value(value: &Value) -> Result<Self> {
        as_object(value, "")?;
        let error = value
            .get("error")
            .ok_or_else(|| Error::invalid("error is required and must be an object"))?;
        let mut body = ErrorBody::default();
        body.error.read(&as_object(error, "error")?)?;
        Ok(body)
    }
}

impl ErrorFields {
    /// Reads the fields into `self`, as `AcquireResponse::read` does.
    fn read(&mut self, f: &Fields<'_>) -> Result<()> {
        let code_text = f.string("code", 64)?;
        self.code = ErrorCode::parse(code_text)
            .map(ErrorCode::as_str)
            .unwrap_or(ErrorCode::GatewayUnavailable.as_str());
        self.message = f
            .opt_string("message", 4096)?
            .unwrap_or(code_text)
            .to_owned();
        self.key = f.opt_string("key", 512)?.map(str::to_owned);
        self.observed = f.opt_integer("observed", 0, u64::MAX)?;
        self.limit = f.opt_integer("limit", 0, u64::MAX)?;
        self.cooldown_until_ms = f.opt_millis("cooldownUntilMs")?;
        Ok(())
    }
}
