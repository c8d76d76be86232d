//! Which limits a tool's calls obey, and which bucket they draw from.
//!
//! Pacing comes from the first of: the host's built-in table, the tool's
//! declaration (through the pacing resolver), or the policy's default pace.
//! A tool that declares nothing still gets the default pace, in a bucket of
//! its own: undeclared is not unlimited. Only an explicit opt-out
//! ([`PacingDeclaration::Unpaced`]) takes a tool out of pacing. The bucket
//! is the rate-scope resolver's answer (a credential of the caller's own may
//! carry its own limit), else `<orgId>:<provider>`.

use crate::by_name::ByName;
use crate::cell::RefCell;

use crate::json_value::Value;
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::error::{Error, Result};
use crate::json::{as_object, quote, Decode};
use crate::protocol::{limits, rules_from, PacingRule};
use crate::rt::LocalBoxFuture;

/// The provider a tool calls and the limits its calls obey.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolPacing {
    /// Blank in a declaration when the provider is not known: the tool then
    /// draws from a bucket of its own.
    pub provider: String,
    /// Empty in a declaration when the tool names its provider but no
    /// limits: the policy's default pace applies.
    pub rules: Vec<PacingRule>,
}

/// What a host says about a tool's pacing.
#[derive(Debug, Clone, PartialEq)]
pub enum PacingDeclaration {
    /// Nothing is known: the policy's default pace, in the tool's own bucket.
    Undeclared,
    Declared(ToolPacing),
    /// The tool calls nothing rate-limited (a formatter, a parser): its calls
    /// take no permit at all.
    Unpaced,
}

/// The provider name of a tool whose provider is not known, so its calls
/// share a bucket with no other tool's.
pub fn undeclared_provider(tool_id: &str) -> String {
    format!("tool:{tool_id}")
}

/// The bucket a call draws from, with the token that proves the caller may.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateScope {
    /// Blank in a resolver's answer: the org's bucket of the provider, with
    /// the answer's token.
    pub bucket_id: String,
    pub token: Option<String>,
}

/// The tool's declared pacing. Hosts that fetch hints should cache them:
/// this runs on every acquire.
pub type PacingResolver = Box<dyn Fn(&str) -> LocalBoxFuture<'static, Result<PacingDeclaration>>>;

/// `(toolId, provider)` to a bucket of the caller's own, or `None` for the
/// org's bucket of that provider. Runs on every acquire, so a token that
/// expires can be renewed.
pub type RateScopeResolver =
    Box<dyn Fn(&str, &str) -> LocalBoxFuture<'static, Result<Option<RateScope>>>>;

pub(crate) struct Pacing {
    pub builtin: PacingTable,
    pub resolve_pacing: PacingResolver,
    pub resolve_rate_scope: Option<RateScopeResolver>,
    pub org_id: String,
    /// The provider's default pace, for tools that declare none.
    pub default_rule: PacingRule,
    /// The scope each tool drew from last, so feedback that arrives after
    /// the call (a 429, a success) lands in that bucket and not in whichever
    /// scope its provider resolved to most recently. Keyed by tool alone: a
    /// report naming the provider differently still finds it.
    last_scope: RefCell<ByName<RateScope>>,
}

impl Pacing {
    pub fn new(
        builtin: PacingTable,
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
            last_scope: RefCell::default(),
        }
    }

    /// The tool's pacing, `None` only for a tool declared unpaced.
    pub async fn resolve(&self, tool_id: &str) -> Result<Option<ToolPacing>> {
        let declaration = match self.builtin.get(tool_id) {
            Some(builtin) => builtin.clone(),
            None => (self.resolve_pacing)(tool_id).await?,
        };
        let declared = match declaration {
            PacingDeclaration::Unpaced => return Ok(None),
            PacingDeclaration::Undeclared => ToolPacing {
                provider: String::new(),
                rules: Vec::new(),
            },
            PacingDeclaration::Declared(declared) => declared,
        };
        let provider = match declared.provider.trim() {
            "" => undeclared_provider(tool_id),
            named => named.to_owned(),
        };
        let rules = if declared.rules.is_empty() {
            vec![self.default_rule.clone()]
        } else {
            declared.rules
        };
        Ok(Some(ToolPacing { provider, rules }))
    }

    /// The bucket a call of the tool draws from now.
    pub async fn resolve_scope(&self, tool_id: &str, provider: &str) -> Result<RateScope> {
        let resolved = match &self.resolve_rate_scope {
            Some(resolve) => resolve(tool_id, provider).await?,
            None => None,
        };
        Ok(match resolved {
            Some(RateScope { bucket_id, token }) => RateScope {
                bucket_id: match bucket_id.trim() {
                    "" => self.org_bucket(provider),
                    _ => bucket_id,
                },
                token: token.filter(|t| !t.trim().is_empty()),
            },
            None => self.org_scope(provider),
        })
    }

    /// Records the scope a permit of the tool came from, for its feedback.
    pub fn remember(&self, tool_id: &str, scope: &RateScope) {
        let mut last = self.last_scope.borrow_mut();
        // Keep the entry's allocations when the scope is the one it has:
        // this runs on every acquire.
        if last.get(tool_id) != Some(scope) {
            last.insert(tool_id.to_owned(), scope.clone());
        }
    }

    /// Where feedback about `provider` goes: the scope `tool_id` last drew
    /// from, else the org's bucket of the provider.
    pub fn feedback_scope(&self, provider: &str, tool_id: Option<&str>) -> RateScope {
        tool_id
            .and_then(|t| self.tool_scope(t))
            .unwrap_or_else(|| self.org_scope(provider))
    }

    /// The scope `tool_id` last drew from, if it was ever paced.
    pub fn tool_scope(&self, tool_id: &str) -> Option<RateScope> {
        self.last_scope.borrow().get(tool_id).cloned()
    }

    fn org_bucket(&self, provider: &str) -> String {
        format!("{}:{provider}", self.org_id)
    }

    fn org_scope(&self, provider: &str) -> RateScope {
        RateScope {
            bucket_id: self.org_bucket(provider),
            token: None,
        }
    }
}

/// A declaration as JS writes it: `null` (undeclared), `{ unpaced: true }`,
/// or `{ provider?, rules? }`, where a blank provider and empty rules mean
/// "not known" as they do in the TypeScript runtime.
impl Decode for PacingDeclaration {
    fn from_value(value: &Value) -> Result<Self> {
        Self::read(value, "pacing")
    }
}

impl PacingDeclaration {
    /// Reads a declaration, naming its fields under `path` in errors.
    fn read(value: &Value, path: &str) -> Result<Self> {
        if value.is_null() {
            return Ok(PacingDeclaration::Undeclared);
        }
        let f = as_object(value, path)?;
        let given = |k: &str| value.get(k).is_some_and(|v| !v.is_null());
        let unpaced = match value.get("unpaced") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "{} must be true or false, got {}",
                    f.name("unpaced"),
                    quote(other)
                )))
            }
        };
        match unpaced {
            true if given("provider") || given("rules") => Err(Error::invalid(format!(
                "{path} has unpaced: true, so it takes no provider or rules"
            ))),
            true => Ok(PacingDeclaration::Unpaced),
            false => {
                let declares_rules = f
                    .opt_array("rules", limits::MAX_RULES)?
                    .is_some_and(|r| !r.is_empty());
                Ok(PacingDeclaration::Declared(ToolPacing {
                    provider: f
                        .opt_string("provider", limits::MAX_ID_BYTES)?
                        .unwrap_or_default()
                        .to_owned(),
                    rules: if declares_rules {
                        rules_from(&f, "rules")?
                    } else {
                        Vec::new()
                    },
                }))
            }
        }
    }
}

/// Declarations by tool id, as a host's options carry its built-in table.
#[derive(Debug, Clone, Default)]
pub struct PacingTable(ByName<PacingDeclaration>);

impl PacingTable {
    /// Sets the tool's declaration, replacing any it had.
    pub fn insert(&mut self, tool_id: String, declaration: PacingDeclaration) {
        self.0.insert(tool_id, declaration);
    }

    pub fn get(&self, tool_id: &str) -> Option<&PacingDeclaration> {
        self.0.get(tool_id)
    }
}

impl Decode for PacingTable {
    fn from_value(value: &Value) -> Result<Self> {
        let Value::Object(map) = value else {
            return Err(Error::invalid(
                "builtinPacing must be an object keyed by tool id",
            ));
        };
        let mut table = PacingTable::default();
        for (tool, v) in map {
            let path = format!("builtinPacing.{tool}");
            // An entry of null would mean "not known": a table need not say.
            if v.is_null() {
                return Err(Error::invalid(format!(
                    "{path} must be a pacing declaration, not null"
                )));
            }
            table.insert(tool.clone(), PacingDeclaration::read(v, &path)?);
        }
        Ok(table)
    }
}

impl Serialize for PacingDeclaration {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            PacingDeclaration::Undeclared => s.serialize_none(),
            PacingDeclaration::Declared(pacing) => pacing.serialize(s),
            PacingDeclaration::Unpaced => {
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry("unpaced", &true)?;
                map.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each tool finds its own declaration, a later one for the same tool
    /// replaces the first, and an unknown tool finds none.
    #[test]
    fn a_pacing_table_finds_each_tools_latest_declaration() {
        let mut table = PacingTable::from_value(
            &crate::json_parse::parse(
                br#"{"fmt": {"unpaced": true}, "p.search": {"provider": "p"}}"#,
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(table.get("fmt"), Some(&PacingDeclaration::Unpaced));
        let declared = |provider: &str| {
            PacingDeclaration::Declared(ToolPacing {
                provider: provider.to_owned(),
                rules: Vec::new(),
            })
        };
        assert_eq!(table.get("p.search"), Some(&declared("p")));
        table.insert("fmt".to_owned(), declared("q"));
        table.insert("new".to_owned(), PacingDeclaration::Undeclared);
        assert_eq!(table.get("fmt"), Some(&declared("q")));
        assert_eq!(table.get("p.search"), Some(&declared("p")));
        assert_eq!(table.get("new"), Some(&PacingDeclaration::Undeclared));
        assert_eq!(table.get("p"), None);
    }
}
