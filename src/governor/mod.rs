//! The governor: what every tool call of a play run goes through. It holds
//! the run's row and tool slots, asks the pacer for provider permits,
//! charges the run's budgets, guards the lineage of child plays, and feeds
//! providers' answers back to the pacer.
//!
//! Single-threaded: futures are not `Send`, state is shared through `Rc`.

mod budget;
mod call;
mod feedback;
mod latency;
mod lease;
mod lineage;
mod pacing;
mod play;
mod policy;
mod quota_headers;
mod retry_after;

pub use call::{
    CallError, CallOptions, ProviderResponse, BASE_BACKOFF_MS, DEFAULT_MAX_ATTEMPTS, MAX_BACKOFF_MS,
};
pub use latency::ToolLatencies;
pub use lease::ToolLease;
pub use lineage::GovernanceSnapshot;
pub use pacing::{
    undeclared_provider, PacingDeclaration, PacingResolver, PacingTable, RateScope,
    RateScopeResolver, ToolPacing,
};
pub use play::{Governor, GovernorConfig, RunScope};
pub use policy::{
    Adapter, BudgetOverrides, BudgetPolicy, ConcurrencyOverrides, ConcurrencyPolicy,
    ExecutionPolicy, PacingOverrides, PacingPolicy, PolicyOverrides,
};
pub use quota_headers::QuotaHeaders;
pub use retry_after::{imf_fixdate_ms, retry_after_ms, DEFAULT_RETRY_AFTER_MS, MAX_RETRY_AFTER_MS};
