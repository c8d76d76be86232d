//! How much one play run may do at once and in total, per runtime adapter,
//! with the host's overrides applied field by field.

use crate::json_value::Value;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::json::{as_object, number_text, Decode, Fields};
use crate::protocol::{limits, BudgetCounts, BudgetKind, PacingRule};

/// The runtime a run executes in. Its limits differ, so its defaults do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Adapter {
    /// A Cloudflare Worker isolate running the ESM play runner.
    #[serde(rename = "esm_workers")]
    EsmWorkers,
    /// A Node 20 process running the CommonJS play runner.
    #[serde(rename = "cjs_node20")]
    CjsNode20,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionPolicy {
    pub concurrency: ConcurrencyPolicy,
    pub pacing: PacingPolicy,
    pub budgets: BudgetPolicy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrencyPolicy {
    /// Map rows in flight when the play does not ask for a number.
    pub default_row_concurrency: usize,
    /// The most map rows in flight a play may ask for.
    pub max_row_concurrency: usize,
    /// Tool calls in flight across the whole run (the tool slots).
    pub max_tool_concurrency: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PacingPolicy {
    /// The pace of a provider that declared no limit of its own.
    pub default_provider_requests_per_second: f64,
    /// How long a provider call usually takes; with the live rate it gives
    /// the parallelism that keeps a provider busy (Little's law).
    pub typical_tool_call_ms: u64,
    /// The adaptive ceiling stamped on the default pace's rules
    /// (`adaptiveMaxRps`): a rate past what the tool slots can keep busy
    /// buys nothing.
    pub suggested_max_parallelism: f64,
}

/// Run-wide limits, lineage-global: a child play counts against its root.
/// It reads and writes as `{maxToolCallCount, …, maxChildPlayCallsPerParent,
/// maxDepth}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetPolicy {
    /// The most of each kind the lineage may use.
    pub max: BudgetCounts,
    pub max_child_play_calls_per_parent: u64,
    pub max_depth: u64,
}

/// The policy's names of the two limits that are not budget kinds.
const CHILD_PLAY_CALLS_NAME: &str = "maxChildPlayCallsPerParent";
const DEPTH_NAME: &str = "maxDepth";

/// The budget limits as the policy writes them: one entry per kind, then
/// the per-parent fan-out and the depth.
fn serialize_limits<S: Serializer, T: Serialize>(
    s: S,
    max: &BudgetCounts<T>,
    child_play_calls: &T,
    depth: &T,
) -> std::result::Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(BudgetKind::ALL.len() + 2))?;
    max.serialize_entries(&mut map, BudgetKind::limit_name)?;
    map.serialize_entry(CHILD_PLAY_CALLS_NAME, child_play_calls)?;
    map.serialize_entry(DEPTH_NAME, depth)?;
    map.end()
}

impl Serialize for BudgetPolicy {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        serialize_limits(
            s,
            &self.max,
            &self.max_child_play_calls_per_parent,
            &self.max_depth,
        )
    }
}

impl ExecutionPolicy {
    pub fn for_adapter(adapter: Adapter) -> Self {
        let concurrency = match adapter {
            // A Worker invocation keeps at most six outbound connections
            // open; a seventh fetch queues inside the runtime, where neither
            // an abort nor the pacer's dispatch time reaches it. Rows beyond
            // the tool slots only wait, so the row cap bounds what a 128 MB
            // isolate holds in flight rather than throughput.
            Adapter::EsmWorkers => ConcurrencyPolicy {
                default_row_concurrency: 6,
                max_row_concurrency: 50,
                max_tool_concurrency: 6,
            },
            // Node has no connection cap of its own. Sixteen calls of about a
            // second each outrun the default provider pace threefold, so the
            // pacer, not the slots, sets the speed of an undeclared provider.
            Adapter::CjsNode20 => ConcurrencyPolicy {
                default_row_concurrency: 16,
                max_row_concurrency: 200,
                max_tool_concurrency: 16,
            },
        };
        let suggested_max_parallelism = concurrency.max_tool_concurrency as f64;
        ExecutionPolicy {
            concurrency,
            pacing: PacingPolicy {
                // Undeclared is not unlimited: 5 per second (300 a minute)
                // sits inside the free tier of most APIs. It is also the
                // ceiling the gateway's adaptive rate climbs back to, so a
                // provider that allows more should declare it in its hints.
                default_provider_requests_per_second: 5.0,
                // Typical of an enrichment API round trip.
                typical_tool_call_ms: 1_000,
                // One call per tool slot per second, the slots being the
                // most a run can keep in flight.
                suggested_max_parallelism,
            },
            budgets: BudgetPolicy {
                max: BudgetCounts::from_fn(|kind| match kind {
                    // Every child play a run starts, at any depth. A play
                    // that fans out further than this is almost surely a
                    // loop.
                    BudgetKind::PlayCall => 200,
                    // A 10,000-row sheet through a ten-step waterfall.
                    BudgetKind::ToolCall => 100_000,
                    // One retry per ten tool calls before the run counts as
                    // retrying itself to death.
                    BudgetKind::Retry => 10_000,
                    // Every fork charges this and playCall together, so the
                    // same bound; it differs only if a host charges playCall
                    // for plays it runs outside a fork.
                    BudgetKind::Descendant => 200,
                    // Each waterfall step is at most one tool call.
                    BudgetKind::WaterfallStep => 100_000,
                }),
                // Fan-out of one parent, so one play cannot spend the whole
                // lineage's play budget on its own children.
                max_child_play_calls_per_parent: 50,
                // The cycle guard catches a play calling its ancestor; this
                // catches a chain of distinct plays that never ends.
                max_depth: 8,
            },
        }
    }

    /// This policy with every field the overrides set replaced, checked.
    pub fn with_overrides(mut self, overrides: &PolicyOverrides) -> Result<Self> {
        fn set<T: Copy>(field: &mut T, value: Option<T>) {
            if let Some(v) = value {
                *field = v;
            }
        }
        if let Some(o) = &overrides.concurrency {
            let c = &mut self.concurrency;
            set(&mut c.default_row_concurrency, o.default_row_concurrency);
            set(&mut c.max_row_concurrency, o.max_row_concurrency);
            set(&mut c.max_tool_concurrency, o.max_tool_concurrency);
        }
        if let Some(o) = &overrides.pacing {
            let p = &mut self.pacing;
            set(
                &mut p.default_provider_requests_per_second,
                o.default_provider_requests_per_second,
            );
            set(&mut p.typical_tool_call_ms, o.typical_tool_call_ms);
            set(
                &mut p.suggested_max_parallelism,
                o.suggested_max_parallelism,
            );
        }
        if let Some(o) = &overrides.budgets {
            let b = &mut self.budgets;
            for kind in BudgetKind::ALL {
                set(&mut b.max[kind], o.max[kind]);
            }
            set(
                &mut b.max_child_play_calls_per_parent,
                o.max_child_play_calls_per_parent,
            );
            set(&mut b.max_depth, o.max_depth);
        }
        self.validate()?;
        Ok(self)
    }

    fn validate(&self) -> Result<()> {
        let c = &self.concurrency;
        for (name, value) in [
            ("defaultRowConcurrency", c.default_row_concurrency),
            ("maxRowConcurrency", c.max_row_concurrency),
            ("maxToolConcurrency", c.max_tool_concurrency),
        ] {
            if value == 0 {
                return Err(Error::invalid(format!(
                    "policy.concurrency.{name} must be at least 1"
                )));
            }
        }
        if c.default_row_concurrency > c.max_row_concurrency {
            return Err(Error::invalid(format!(
                "policy.concurrency.defaultRowConcurrency ({}) exceeds maxRowConcurrency ({})",
                c.default_row_concurrency, c.max_row_concurrency
            )));
        }
        for (name, rps) in [
            (
                "defaultProviderRequestsPerSecond",
                self.pacing.default_provider_requests_per_second,
            ),
            (
                "suggestedMaxParallelism",
                self.pacing.suggested_max_parallelism,
            ),
        ] {
            if !(MIN_DEFAULT_RPS..=MAX_DEFAULT_RPS).contains(&rps) {
                return Err(Error::invalid(format!(
                    "policy.pacing.{name} must be from {} to {}, got {}",
                    number_text(MIN_DEFAULT_RPS),
                    number_text(MAX_DEFAULT_RPS),
                    number_text(rps)
                )));
            }
        }
        if self.pacing.typical_tool_call_ms == 0 {
            return Err(Error::invalid(
                "policy.pacing.typicalToolCallMs must be at least 1",
            ));
        }
        let b = &self.budgets;
        // The gateway refuses a charge whose limit is past MAX_BUDGET, so a
        // larger limit would fail every charge instead of allowing more.
        let within = |name: &str, value: u64| match value > limits::MAX_BUDGET {
            true => Err(Error::invalid(format!(
                "policy.budgets.{name} must be at most {}, got {value}",
                limits::MAX_BUDGET
            ))),
            false => Ok(()),
        };
        for kind in BudgetKind::ALL {
            within(kind.limit_name(), b.max[kind])?;
        }
        within(CHILD_PLAY_CALLS_NAME, b.max_child_play_calls_per_parent)?;
        within(DEPTH_NAME, b.max_depth)
    }

    /// The default pace as a rule. A whole number per second is a one-second
    /// window; a fraction keeps its three decimals in a longer window (2.5/s
    /// is 5 per 2 s), which the gateway spaces just as evenly. It carries
    /// `suggestedMaxParallelism` as its adaptive ceiling, as the TypeScript
    /// runtime's default pace does. paceline's gateway holds a rule as a hard
    /// limit, so that ceiling can lower the default pace but never lift the
    /// rate above it: an undeclared provider's real limit is unknown.
    pub fn default_provider_rule(&self) -> PacingRule {
        let rps = self.pacing.default_provider_requests_per_second;
        let per_million_ms = (rps * 1_000.0).round() as u64;
        // Never shorter than a second: the rule reads as "n per second".
        let divisor = gcd(per_million_ms, 1_000);
        PacingRule::new(per_million_ms / divisor, 1_000_000 / divisor)
            .with_adaptive_max_rps(self.pacing.suggested_max_parallelism)
    }
}

/// A thousandth of a request per second is the finest pace a rule keeps.
const MIN_DEFAULT_RPS: f64 = 0.001;
/// A default past this is no pacing at all; declare real limits instead.
const MAX_DEFAULT_RPS: f64 = 1_000.0;

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The host's changes to an adapter's policy, named as the policy writes
/// them (`{budgets: {maxToolCallCount: 3}}`). An unknown name is refused rather
/// than ignored: a misspelt budget would otherwise silently not apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyOverrides {
    pub concurrency: Option<ConcurrencyOverrides>,
    pub pacing: Option<PacingOverrides>,
    pub budgets: Option<BudgetOverrides>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrencyOverrides {
    pub default_row_concurrency: Option<usize>,
    pub max_row_concurrency: Option<usize>,
    pub max_tool_concurrency: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PacingOverrides {
    pub default_provider_requests_per_second: Option<f64>,
    pub typical_tool_call_ms: Option<u64>,
    pub suggested_max_parallelism: Option<f64>,
}

/// Each of [`BudgetPolicy`]'s limits, where the host sets it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BudgetOverrides {
    pub max: BudgetCounts<Option<u64>>,
    pub max_child_play_calls_per_parent: Option<u64>,
    pub max_depth: Option<u64>,
}

impl Serialize for BudgetOverrides {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        serialize_limits(
            s,
            &self.max,
            &self.max_child_play_calls_per_parent,
            &self.max_depth,
        )
    }
}

/// Read by hand with the protocol's field reader rather than derived: a
/// derived serde reader brings core's float formatter (for its error
/// messages) into the wasm, some 14 KB gzipped with the snapshot's.
impl Decode for PolicyOverrides {
    fn from_value(value: &Value) -> Result<Self> {
        let f = as_object(value, "policy")?;
        f.refuse_unknown(&["concurrency", "pacing", "budgets"])?;
        let int = |o: &Fields<'_>, k: &str| o.opt_integer(k, 0, u64::MAX);
        let size = |o: &Fields<'_>, k: &str| -> Result<Option<usize>> {
            Ok(int(o, k)?.map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
        };
        let concurrency = match f.opt_object("concurrency")? {
            None => None,
            Some(c) => {
                c.refuse_unknown(&[
                    "defaultRowConcurrency",
                    "maxRowConcurrency",
                    "maxToolConcurrency",
                ])?;
                Some(ConcurrencyOverrides {
                    default_row_concurrency: size(&c, "defaultRowConcurrency")?,
                    max_row_concurrency: size(&c, "maxRowConcurrency")?,
                    max_tool_concurrency: size(&c, "maxToolConcurrency")?,
                })
            }
        };
        let pacing = match f.opt_object("pacing")? {
            None => None,
            Some(p) => {
                p.refuse_unknown(&[
                    "defaultProviderRequestsPerSecond",
                    "typicalToolCallMs",
                    "suggestedMaxParallelism",
                ])?;
                Some(PacingOverrides {
                    default_provider_requests_per_second: p
                        .opt_number("defaultProviderRequestsPerSecond")?,
                    typical_tool_call_ms: int(&p, "typicalToolCallMs")?,
                    suggested_max_parallelism: p.opt_number("suggestedMaxParallelism")?,
                })
            }
        };
        let budgets = match f.opt_object("budgets")? {
            None => None,
            Some(b) => {
                let mut names = BudgetKind::ALL.map(BudgetKind::limit_name).to_vec();
                names.extend_from_slice(&[CHILD_PLAY_CALLS_NAME, DEPTH_NAME]);
                b.refuse_unknown(&names)?;
                let mut max = BudgetCounts::default();
                for kind in BudgetKind::ALL {
                    max[kind] = int(&b, kind.limit_name())?;
                }
                Some(BudgetOverrides {
                    max,
                    max_child_play_calls_per_parent: int(&b, CHILD_PLAY_CALLS_NAME)?,
                    max_depth: int(&b, DEPTH_NAME)?,
                })
            }
        };
        Ok(PolicyOverrides {
            concurrency,
            pacing,
            budgets,
        })
    }
}

impl Adapter {
    /// The adapter a host names: `esm_workers` or `cjs_node20`, the names
    /// play runners already give these runtimes in their configuration.
    pub fn from_name(name: &str) -> Option<Adapter> {
        match name {
            "esm_workers" => Some(Adapter::EsmWorkers),
            "cjs_node20" => Some(Adapter::CjsNode20),
            _ => None,
        }
    }
}
