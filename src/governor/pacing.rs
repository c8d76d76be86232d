//! Which limits a tool's calls obey, and which bucket they draw from.
//!
//! Pacing comes from the first of: the host's built-in table, the tool's
//! declared queue hints (through the pacing resolver), the policy's default
//! pace for a provider known only by name, or nothing (the tool is
//! unpaced). The bucket is the rate-scope resolver's answer (a credential of
//! the caller's own may carry its own limit), else `<orgId>:<provider>`.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::client::LocalBoxFuture;
use crate::error::{Error, Result};
use crate::protocol::PacingRule;

/// The provider a tool calls and the limits its calls obey.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolPacing {
    pub provider: String,
    /// Empty when the tool names its provider but declares no limits.
    pub rules: Vec<PacingRule>,
}

/// The bucket a call draws from, with the token that proves the caller may.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateScope {
    pub bucket_id: String,
    pub token: Option<String>,
}

/// The tool's declared pacing, or `None` if nothing is known about it.
/// Hosts that fetch hints should cache them: this runs on every acquire.
pub type PacingResolver = Box<dyn Fn(&str) -> LocalBoxFuture<'static, Result<Option<ToolPacing>>>>;

/// `(toolId, provider)` to a bucket of the caller's own, or `None` for the
/// org's bucket of that provider. Runs on every acquire, so a token that
/// expires can be renewed.
pub type RateScopeResolver =
    Box<dyn Fn(&str, &str) -> LocalBoxFuture<'static, Result<Option<RateScope>>>>;

pub(crate) struct Pacing {
    pub builtin: HashMap<String, ToolPacing>,
    pub resolve_pacing: PacingResolver,
    pub resolve_rate_scope: Option<RateScopeResolver>,
    pub org_id: String,
    /// The provider's default pace, for tools that declare none.
    pub default_rule: PacingRule,
    /// The provider and scope each tool drew from last, so feedback that
    /// arrives after the call (a 429, a success) lands in that bucket and
    /// not in whichever scope its provider resolved to most recently.
    last_scope: RefCell<HashMap<String, (String, RateScope)>>,
}

impl Pacing {
    pub fn new(
        builtin: HashMap<String, ToolPacing>,
        resolve_pacing: PacingResolver,
        resolve_rate_scope: Option<RateScopeResolver>,
        org_id: String,
        default_rule: PacingRule,
    ) -> Self {
        Pacing {
            builtin,
            resolve_pacing,
            resolve_rate_scope,
            org_id,
            default_rule,
            last_scope: RefCell::new(HashMap::new()),
        }
    }

    pub async fn resolve(&self, tool_id: &str) -> Result<Option<ToolPacing>> {
        if let Some(builtin) = self.builtin.get(tool_id) {
            return Ok(Some(builtin.clone()));
        }
        let Some(declared) = (self.resolve_pacing)(tool_id).await? else {
            return Ok(None);
        };
        let provider = declared.provider.trim();
        if provider.is_empty() {
            return Ok(None);
        }
        let rules = if declared.rules.is_empty() {
            vec![self.default_rule.clone()]
        } else {
            declared.rules
        };
        Ok(Some(ToolPacing {
            provider: provider.to_owned(),
            rules,
        }))
    }

    /// The bucket a call of the tool draws from now.
    pub async fn resolve_scope(&self, tool_id: &str, provider: &str) -> Result<RateScope> {
        let resolved = match &self.resolve_rate_scope {
            Some(resolve) => resolve(tool_id, provider).await?,
            None => None,
        };
        match resolved {
            Some(RateScope { bucket_id, .. }) if bucket_id.trim().is_empty() => {
                Err(Error::invalid(format!(
                    "the rate scope of tool {tool_id} has a blank bucketId"
                )))
            }
            Some(RateScope { bucket_id, token }) => Ok(RateScope {
                bucket_id,
                token: token.filter(|t| !t.trim().is_empty()),
            }),
            None => Ok(self.org_scope(provider)),
        }
    }

    /// Records the scope a permit of the tool came from, for its feedback.
    pub fn remember(&self, tool_id: &str, provider: &str, scope: &RateScope) {
        let mut last = self.last_scope.borrow_mut();
        match last.get_mut(tool_id) {
            // Keep the entry's allocations: this runs on every acquire.
            Some((p, s)) if p == provider && s == scope => {}
            Some(entry) => *entry = (provider.to_owned(), scope.clone()),
            None => {
                last.insert(tool_id.to_owned(), (provider.to_owned(), scope.clone()));
            }
        }
    }

    /// Where feedback about `provider` goes: the scope `tool_id` last drew
    /// from when that was this provider, else the org's bucket.
    pub fn feedback_scope(&self, provider: &str, tool_id: Option<&str>) -> RateScope {
        tool_id
            .and_then(|t| {
                self.last_scope
                    .borrow()
                    .get(t)
                    .filter(|(p, _)| p == provider)
                    .map(|(_, scope)| scope.clone())
            })
            .unwrap_or_else(|| self.org_scope(provider))
    }

    /// The scope `tool_id` last drew from, if it was ever paced.
    pub fn tool_scope(&self, tool_id: &str) -> Option<RateScope> {
        self.last_scope
            .borrow()
            .get(tool_id)
            .map(|(_, scope)| scope.clone())
    }

    fn org_scope(&self, provider: &str) -> RateScope {
        RateScope {
            bucket_id: format!("{}:{provider}", self.org_id),
            token: None,
        }
    }
}
