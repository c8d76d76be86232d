//! The one error type every layer returns. A refusal to pace (wait until `t`)
//! is a value, not an error; an `Error` is something the caller must act on.

use std::any::Any;
use std::fmt;
use std::rc::Rc;

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
    /// What the host said caused the error (an exception its callback or
    /// `fetch` threw, an abort signal's reason), carried back to it.
    Cause(HostCause),
}

/// A value the host handed the core that explains an error. The core never
/// looks inside; it carries it so the host gets its own value back. Clones
/// share the value, and two causes are equal when they are the same value.
#[derive(Clone)]
pub struct HostCause(Rc<dyn Any>);

impl HostCause {
    pub fn new(value: impl Any) -> Self {
        HostCause(Rc::new(value))
    }

    /// The value, if the host put a `T` here.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl PartialEq for HostCause {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for HostCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HostCause(..)")
    }
}

/// An error's fields live behind one pointer, so that every `Result` the
/// crate returns carries a pointer rather than the fields: copying a
/// 48-byte error out through each `?` on its way up made the wasm modules
/// 4 to 13 KB larger in gzip. The fields read as the error's own
/// (`e.code`, `e.message`, through `Deref`).
#[derive(Clone, PartialEq)]
pub struct Error(Box<ErrorFields>);

/// What an [`Error`] says: its code, its message and the facts it carries.
#[derive(Clone, PartialEq)]
pub struct ErrorFields {
    pub code: ErrorCode,
    pub message: String,
    pub detail: Option<Detail>,
}

impl std::ops::Deref for Error {
    type Target = ErrorFields;

    fn deref(&self) -> &ErrorFields {
        &self.0
    }
}

impl std::ops::DerefMut for Error {
    fn deref_mut(&mut self) -> &mut ErrorFields {
        &mut self.0
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error(Box::new(ErrorFields {
            code,
            message: message.into(),
            detail: None,
        }))
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

    /// Worded `Play execution <key> budget exceeded (<observed>/<limit>).`:
    /// existing clients parse this message to recover the three fields, so
    /// it must stay word for word.
    pub fn budget_exceeded(key: &str, observed: u64, limit: u64) -> Self {
        Error::new(
            ErrorCode::BudgetExceeded,
            format!("Play execution {key} budget exceeded ({observed}/{limit})."),
        )
        .with_detail(Detail::Budget {
            key: key.to_owned(),
            observed,
            limit,
        })
    }

    pub fn with_detail(mut self, detail: Detail) -> Self {
        self.detail = Some(detail);
        self
    }
}

/// Written out rather than derived: a derived one quotes the message with
/// core's string escaping, kilobytes of wasm (with its Unicode tables) for
/// output that only a failed test or a panic shows.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({}: {}", self.code, self.message)?;
        match &self.detail {
            None => {}
            Some(Detail::Budget {
                key,
                observed,
                limit,
            }) => write!(f, "; budget {key}: {observed} of {limit}")?,
            Some(Detail::Cooldown { until_ms }) => write!(f, "; cooling down until {until_ms}")?,
            Some(Detail::Cause(_)) => f.write_str("; with a host cause")?,
        }
        f.write_str(")")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}
