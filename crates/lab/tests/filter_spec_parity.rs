//! One `[filter]` table, two drivers: the live gate's filter (built through
//! its configuration loading) and the simulator's (built through a scenario
//! point) give the same verdict for every SYN of the same arrival sequence,
//! with every optional key of the table omitted, for every filter kind.
//!
//! No root needed: nothing is run but the filters themselves. The
//! sequence keeps the filters overloaded long enough that a greedy window
//! of 50 s instead of T_N = 21 s (the old default of the testbed's model of
//! the gate) changes Predictive Greedy's verdicts under Windows 9x/NT.

use vantage_core::admission::syn::{FilterKind, SynFilter, Verdict};
use vantage_core::Nanos;
use vantage_live::gate::GateConfig;
use vantage_sim::syn::scenario::Scenario;

/// The table under test: the two required keys, nothing else.
const FILTER: &str = "bucket_size = 20\nrefill_rate = 40\n";

/// A population given to both drivers besides the gate's default one:
/// Windows 9x/NT, T_N = 21 s, shorter than any fixed default window.
const WINDOWS: &str = "windows-9x-nt";

fn gate_filter(kind: FilterKind, population: Option<&str>) -> Box<dyn SynFilter + Send> {
    let population = population.map_or_else(String::new, |p| format!("population = \"{p}\"\n"));
    let text = format!(
        "[[listeners]]\nport = 80\n[filter]\nkind = \"{}\"\n{FILTER}{population}",
        kind.name()
    );
    let config = GateConfig::from_toml(&text, "gate.toml").expect("gate configuration loads");
    config.filter.build().expect("gate filter builds")
}

fn sim_filter(kind: FilterKind, population: Option<&str>) -> Box<dyn SynFilter + Send> {
    // The gate's default population when none is given.
    let population = population.unwrap_or(vantage_live::gate::config::DEFAULT_POPULATION);
    let text = format!(
        "[scenario]\nstudy = \"abacus\"\nfigure = \"parity\"\ntitle = \"parity\"\nkind = \"sweep\"\n\
         populations = [\"{population}\"]\nfilters = [\"{}\"]\nrepetitions = 1\nhorizon_s = 60\n\n\
         [workload]\nkind = \"burst\"\nsize = 10\nspread_ms = 100\n\n[filter]\n{FILTER}",
        kind.name()
    );
    let scenario = Scenario::from_toml(&text, "parity.toml").expect("scenario loads");
    let point = scenario.point(None, None).expect("scenario point");
    point
        .filter
        .build(kind, &scenario.populations[0])
        .expect("simulator filter builds")
}

/// About 1500 SYNs over 30 one-second intervals: a steady 45 per second
/// (above r_t, so that the predicted congestion outlasts short windows) with
/// a burst of 150 in 300 ms every 8 s, and a quiet stretch.
fn arrivals() -> Vec<Nanos> {
    let mut times = Vec::new();
    for second in 0..30u64 {
        if (20..23).contains(&second) {
            continue;
        }
        for i in 0..45 {
            times.push(Nanos::from_micros(second * 1_000_000 + i * 22_000 + 7));
        }
        if second % 8 == 2 {
            for i in 0..150 {
                times.push(Nanos::from_millis(second * 1000 + 400) + Nanos::from_micros(i * 2000));
            }
        }
    }
    times.sort_unstable();
    times
}

fn verdicts(filter: &mut dyn SynFilter, times: &[Nanos]) -> Vec<Verdict> {
    times.iter().map(|&t| filter.on_syn(t)).collect()
}

#[test]
fn gate_and_simulator_give_the_same_verdicts_from_one_filter_table() {
    let times = arrivals();
    assert!(times.len() > 300, "{} SYNs", times.len());
    for clients in [None, Some(WINDOWS)] {
        for kind in FilterKind::ALL {
            let gate = verdicts(gate_filter(kind, clients).as_mut(), &times);
            let sim = verdicts(sim_filter(kind, clients).as_mut(), &times);
            let accepted = gate.iter().filter(|v| **v == Verdict::Accept).count();
            assert!(
                accepted > 0 && accepted < gate.len(),
                "{kind:?} under {clients:?}: the sequence must overload the filter"
            );
            if let Some(at) = gate.iter().zip(&sim).position(|(g, s)| g != s) {
                panic!(
                    "{kind:?} under {clients:?}: SYN {at} at {:?}: gate {:?}, simulator {:?}",
                    times[at], gate[at], sim[at]
                );
            }
        }
    }
}
