use paceline::sim::run_fleet;
use paceline::sim::scenarios::*;
fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let h = FLEET_HORIZON_MS;
    let c = match which.as_str() {
        "fixed" => fixed_window_quota(h),
        "hidden" => hidden_limit(h),
        "outage" => provider_outage(h),
        "sine" => drifting_limit(h),
        "noise" => noisy_provider(h),
        _ => saturated(h),
    };
    let r = run_fleet(&c);
    let from: u64 = std::env::args().nth(2).map_or(0, |s| s.parse().unwrap());
    let to: u64 = std::env::args()
        .nth(3)
        .map_or(c.duration_ms / 1000, |s| s.parse().unwrap());
    for s in from..to {
        let t = s * 1000;
        let eff: Vec<f64> = r
            .effective_rps
            .iter()
            .filter(|(x, _)| *x >= t && *x < t + 1000)
            .map(|(_, v)| *v)
            .collect();
        let e = eff.last().copied().unwrap_or(f64::NAN);
        println!(
            "{s:4} sent {:3} 429 {:3} eff {:6.2}",
            r.dispatches_between(t, t + 1000),
            r.dispatches_between(t, t + 1000) - r.accepted_between(t, t + 1000),
            e
        );
    }
}
