//! The one error type every layer returns. A refusal to pace (wait until `t`)
//! is a value, not an error; an `Error` is something the caller must act on.

use std::fmt;

/// The stable string codes JS callers switch on (`err.code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidInput,
    ForbiddenScope,
    BudgetExceeded,
    ProviderExhausted,
    GatewayUnavailable,
    Aborted,
    CycleDetected,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 7] = [
        ErrorCode::InvalidInput,
        ErrorCode::ForbiddenScope,
        ErrorCode::BudgetExceeded,
        ErrorCode::ProviderExhausted,
        ErrorCode::GatewayUnavailable,
        ErrorCode::Aborted,
        ErrorCode::CycleDetected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::ForbiddenScope => "FORBIDDEN_SCOPE",
            ErrorCode::BudgetExceeded => "BUDGET_EXCEEDED",
            ErrorCode::ProviderExhausted => "PROVIDER_EXHAUSTED",
            ErrorCode::GatewayUnavailable => "GATEWAY_UNAVAILABLE",
            ErrorCode::Aborted => "ABORTED",
            ErrorCode::CycleDetected => "CYCLE_DETECTED",
        }
    }

    pub fn parse(code: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == code)
    }

    /// The HTTP status a gateway answers with for this code.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidInput => 400,
            ErrorCode::ForbiddenScope => 403,
            ErrorCode::BudgetExceeded | ErrorCode::CycleDetected => 409,
            ErrorCode::ProviderExhausted => 429,
            ErrorCode::Aborted => 499,
            ErrorCode::GatewayUnavailable => 503,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Structured facts that travel with some codes so callers need not parse
/// the message.
#[derive(Debug, Clone, PartialEq)]
pub enum Detail {
    /// `BUDGET_EXCEEDED`: which counter, the count it would have reached, its limit.
    Budget {
        key: String,
        observed: u64,
        limit: u64,
    },
    /// `PROVIDER_EXHAUSTED`: the provider is cooling down until this time.
    Cooldown { until_ms: u64 },
    /// `GATEWAY_UNAVAILABLE`: the HTTP status the gateway answered, if any.
    Status(u16),
    /// An exception the host raised (a user callback, `fetch`), kept by the
    /// bindings under this handle so it reaches the caller unchanged.
    Foreign(u64),
    /// A host value that explains the error (an abort signal's reason, what
    /// a getter threw), kept by the bindings under this handle and attached
    /// as the JS error's `cause`.
    Cause(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
    pub detail: Option<Detail>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
            detail: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::InvalidInput, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::ForbiddenScope, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::GatewayUnavailable, message)
    }

    /// The seeds' wording, which clients match on to recover the fields.
    pub fn budget_exceeded(key: &str, observed: u64, limit: u64) -> Self {
        Error {
            code: ErrorCode::BudgetExceeded,
            message: format!("Play execution {key} budget exceeded ({observed}/{limit})."),
            detail: Some(Detail::Budget {
                key: key.to_owned(),
                observed,
                limit,
            }),
        }
    }

    pub fn with_detail(mut self, detail: Detail) -> Self {
        self.detail = Some(detail);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}
