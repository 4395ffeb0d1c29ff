//! Beyond the paper: the learned-client model on the testbed's mixture
//! (`scenarios/certes-live/configurations.toml`, `mix-*`: half Linux 3.7,
//! SYNs at 0, 1, 3, 7, 15 s; half Linux ≥ 6.5, 0, 1, 2, 3, 4, 5, 7, 11,
//! 19 s; every client gives up at 21 s) in the simulator, under the
//! accept-queue overload of `overload-instability` (about 76 % of SYNs
//! dropped). The model told `linux-6.5` (the testbed's told daemon) misses
//! the paper's 2.5 %; the model given the clients learned from the server's
//! SYNs meets it (docs/certes-live.md).

use vantage_core::certes::learn::GiveUpPlacement;
use vantage_core::certes::{Certes, CertesConfig};
use vantage_core::tcp::{ClientMix, SynProfile};
use vantage_core::Nanos;
use vantage_lab::studies::certes;
use vantage_sim::syn::Effort;
use vantage_sim::webserver::{self, WebRun};

fn whole_run_mean_s(run: &WebRun, config: CertesConfig) -> f64 {
    let mut certes = Certes::new(config).unwrap();
    let (mut total, mut n) = (0.0, 0.0);
    for counters in &run.counters {
        let e = certes.on_interval(counters);
        total += e.total_time_nanos();
        n += e.transactions();
    }
    total / n / 1e9
}

#[test]
fn learned_model_meets_the_bound_on_the_testbeds_mixture() {
    let mut s = certes::scenarios()
        .unwrap()
        .into_iter()
        .find(|s| s.name == "overload-instability")
        .unwrap();
    let profile = |name: &str| SynProfile::builtin(name).unwrap();
    s.populations = vec![ClientMix::new(
        "linux-3.7 + linux-6.5",
        vec![(profile("linux-3.7"), 0.5), (profile("linux-6.5"), 0.5)],
    )
    .unwrap()];
    s.system.clients.frustration_timeouts = vec![(Nanos::from_secs(21), 1.0)];
    let (system, model) = s.configs(0, Effort { quick: true });
    let run = webserver::simulate(&system, 5).unwrap();
    let truth = run.truth_mean(0..run.len()).unwrap().as_secs_f64();
    let offered: u64 = run.stats.offered_by_attempt.iter().sum();
    let dropped: u64 = run.stats.dropped_by_attempt.iter().sum();

    let told = CertesConfig {
        clients: ClientMix::single(profile("linux-6.5")),
        frustration_timeouts: vec![(Nanos::from_secs(21), 1.0)],
        ..model.clone()
    };
    let told_err = whole_run_mean_s(&run, told) / truth - 1.0;
    let learned = run.syn_learner.learn(GiveUpPlacement::Midpoint).unwrap();
    let learned_err = whole_run_mean_s(&run, learned.configure(&model)) / truth - 1.0;
    // Where in (19, 31] the clients give up no SYN shows: told 21 s, which
    // the learned cell holds, the give-ups go there.
    let with_told = run
        .syn_learner
        .learn(GiveUpPlacement::Told(Nanos::from_secs(21)))
        .unwrap();
    let with_told_err = whole_run_mean_s(&run, with_told.configure(&model)) / truth - 1.0;
    let share = |names: &[&str]| -> f64 {
        learned
            .clients
            .entries()
            .iter()
            .filter(|(p, _)| names.contains(&p.name.as_str()))
            .map(|(_, w)| w)
            .sum()
    };
    eprintln!(
        "SYNs dropped {dropped} of {offered} ({:.1} %); truth {truth:.3} s",
        100.0 * dropped as f64 / offered as f64
    );
    eprintln!(
        "| told linux-6.5 21 s | {:+.1} % | learned, give-ups at the cell's middle | {:+.1} % | learned, give-ups at the told 21 s | {:+.1} % | linux-3.7 {:.3}, linux-6.5 + macos {:.3} | give-ups {:?} | {:?} |",
        100.0 * told_err,
        100.0 * learned_err,
        100.0 * with_told_err,
        share(&["linux-3.7"]),
        share(&["linux-6.5", "macos"]),
        learned.give_ups,
        learned.attempt_uses(),
    );
    assert!((share(&["linux-3.7"]) - 0.5).abs() < 0.03, "{learned:?}");
    assert!(told_err.abs() > certes::CERTES_BOUND, "{told_err}");
    assert!(learned_err > certes::CERTES_BOUND, "{learned_err}");
    assert!(
        with_told_err.abs() <= certes::CERTES_BOUND,
        "{with_told_err}"
    );
}
