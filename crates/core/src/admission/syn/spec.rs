//! The `[filter]` table: the one format of a SYN filter's parameters, read
//! by the simulator's scenarios, the live gate and the testbed's model of
//! the gate, so that a filter tuned in one runs unchanged in the others.
//!
//! ```toml
//! [filter]
//! kind = "abacus"        # tbf | tbf-reject | abacus | greedy (the gate; a scenario lists its filters)
//! bucket_size = 120      # W; or bucket_refill_s = 1 (W = r_t × 1 s)
//! refill_rate = 120      # r_t tokens/s, or "measure" (the gate; then initial_refill_rate)
//! interval_ms = 1000     # T0; or interval_s = 1
//! window_s = 50          # S; omitted: S = max{T_i ≤ r/h}
//! greedy_window_s = 50   # S_G; omitted: T_N of the clients
//! delay_cost = 1         # h
//! reject_cost = 75       # r
//! arrival_smoothing = 0.3
//! population = "mix-2026"   # the gate; or { "linux-6.5" = 0.7, "macos" = 0.3 }
//! ```
//!
//! `population` was named `clients`; the old name is read, with a warning,
//! until [`crate::config::OLD_NAMES_REFUSED_FROM`].

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{AbacusWindow, FilterKind, FilterParams, DEFAULT_ARRIVAL_SMOOTHING};
use crate::config::{Checker, ConfigError};
use crate::tcp::{ClientMix, SynProfile};
use crate::Nanos;

/// Default T0: one second, the paper's Section 6 setting.
pub const DEFAULT_FILTER_INTERVAL: Nanos = Nanos(1_000_000_000);
/// Default h and r: the paper's Section 6 costs (h = 1/(s·req), r = 75/req,
/// "equal to the timeout delay cost for all clients").
pub const DEFAULT_DELAY_COST: f64 = 1.0;
pub const DEFAULT_REJECT_COST: f64 = 75.0;

/// The `[filter]` table as written; [`FilterSpec::validate`] checks it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterSpec {
    pub kind: Option<String>,
    pub bucket_size: Option<f64>,
    /// W as seconds of refill (W = r_t × this), instead of `bucket_size`.
    pub bucket_refill_s: Option<f64>,
    /// Tokens per second, or `"measure"`.
    pub refill_rate: Option<toml::Value>,
    pub initial_refill_rate: Option<f64>,
    pub interval_s: Option<f64>,
    pub interval_ms: Option<f64>,
    /// Seconds, or `"cost-optimal"`.
    pub window_s: Option<toml::Value>,
    pub greedy_window_s: Option<f64>,
    pub delay_cost: Option<f64>,
    pub reject_cost: Option<f64>,
    pub arrival_smoothing: Option<f64>,
    /// The client population: a profile or mixture name, or a table of
    /// weights.
    pub population: Option<toml::Value>,
    /// `population`'s old name.
    #[serde(rename = "clients")]
    pub old_clients: Option<toml::Value>,
}

/// Where r_t comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refill {
    /// The configured `refill_rate`.
    Fixed,
    /// Measured from the server's counters each interval, starting from
    /// `initial_refill_rate` (held in [`FilterParams::refill_rate`]).
    Measure,
}

/// A checked `[filter]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidFilter {
    /// `kind`, when given.
    pub kind: Option<FilterKind>,
    /// Every parameter; W follows r_t when `bucket_refill` is given.
    pub params: FilterParams,
    pub refill: Refill,
    /// `bucket_refill_s`, when W follows r_t.
    pub bucket_refill_secs: Option<f64>,
    /// `population`, when given.
    pub population: Option<ClientMix>,
    /// Old key names read, one line each (file, line, old and new key).
    pub warnings: Vec<String>,
}

impl FilterSpec {
    /// Checks every key; `prefix` is the table's key path (`filter`,
    /// `gate.config.filter`). Omitted keys take the defaults above; the
    /// filters themselves are not built here (they need the population).
    pub fn validate<E: From<ConfigError>>(
        &self,
        c: &Checker<'_, E>,
        prefix: &str,
    ) -> Result<ValidFilter, E> {
        let key = |name: &str| format!("{prefix}.{name}");
        let kind = match self.kind.as_deref() {
            None => None,
            Some(name) => Some(
                FilterKind::ALL
                    .into_iter()
                    .find(|k| k.name() == name)
                    .ok_or_else(|| {
                        c.fail(
                            &key("kind"),
                            format!("must be tbf, tbf-reject, abacus or greedy, got \"{name}\""),
                        )
                    })?,
            ),
        };
        let (refill, refill_rate) = self.refill_rate(c, prefix)?;
        let (bucket_size, bucket_refill_secs) = match (self.bucket_size, self.bucket_refill_s) {
            (Some(_), Some(_)) => {
                return Err(c.fail(
                    &key("bucket_refill_s"),
                    format!("conflicts with {prefix}.bucket_size: give one"),
                ))
            }
            (None, None) => {
                return Err(c.fail(&key("bucket_size"), "is missing (W, tokens)".into()))
            }
            // W = 0 is a bucket that is always empty (the Abacus paper's
            // Figure 4 drops a whole burst).
            (Some(v), None) => (c.whole(&key("bucket_size"), v, 0.0, 1e9)?, None),
            (None, Some(s)) => {
                let secs = c.range(&key("bucket_refill_s"), s, 0.0, 1e6)?;
                ((refill_rate * secs).round() as u64, Some(secs))
            }
        };
        let interval = match (self.interval_s, self.interval_ms) {
            (Some(_), Some(_)) => {
                return Err(c.fail(
                    &key("interval_ms"),
                    format!("conflicts with {prefix}.interval_s: give one"),
                ))
            }
            (Some(s), None) => Nanos::from_secs_f64(c.range(&key("interval_s"), s, 1e-6, 1e5)?),
            (None, Some(ms)) => {
                Nanos::from_millis(c.whole(&key("interval_ms"), ms, 1.0, 100_000_000.0)?)
            }
            (None, None) => DEFAULT_FILTER_INTERVAL,
        };
        let window = match &self.window_s {
            None => AbacusWindow::CostOptimal,
            Some(toml::Value::String(s)) if s == "cost-optimal" => AbacusWindow::CostOptimal,
            Some(value) => {
                let seconds = number(value).ok_or_else(|| {
                    c.fail(
                        &key("window_s"),
                        format!("must be seconds (0 to 1e6) or \"cost-optimal\", got {value}"),
                    )
                })?;
                AbacusWindow::Fixed(Nanos::from_secs_f64(c.range(
                    &key("window_s"),
                    seconds,
                    0.0,
                    1e6,
                )?))
            }
        };
        let greedy_window = match self.greedy_window_s {
            Some(v) => Some(Nanos::from_secs_f64(c.range(
                &key("greedy_window_s"),
                v,
                0.0,
                1e5,
            )?)),
            None => None,
        };
        let delay_cost = match self.delay_cost {
            Some(v) => c.range(&key("delay_cost"), v, 0.0, 1e9)?,
            None => DEFAULT_DELAY_COST,
        };
        let reject_cost = match self.reject_cost {
            Some(v) => c.range(&key("reject_cost"), v, 0.0, 1e9)?,
            None => DEFAULT_REJECT_COST,
        };
        let arrival_smoothing = match self.arrival_smoothing {
            Some(v) if v > 0.0 && v <= 1.0 => v,
            Some(v) => {
                return Err(c.fail(
                    &key("arrival_smoothing"),
                    format!("must be in (0, 1], got {v}"),
                ))
            }
            None => DEFAULT_ARRIVAL_SMOOTHING,
        };
        let mut warnings = Vec::new();
        let population = match c.renamed(
            &key("population"),
            self.population.as_ref(),
            &key("clients"),
            self.old_clients.as_ref(),
            &mut warnings,
        )? {
            None => None,
            Some(value) => Some(population(c, &key("population"), value)?),
        };
        Ok(ValidFilter {
            kind,
            params: FilterParams {
                bucket_size,
                refill_rate,
                interval,
                window,
                greedy_window,
                delay_cost,
                reject_cost,
                arrival_smoothing,
            },
            refill,
            bucket_refill_secs,
            population,
            warnings,
        })
    }

    fn refill_rate<E: From<ConfigError>>(
        &self,
        c: &Checker<'_, E>,
        prefix: &str,
    ) -> Result<(Refill, f64), E> {
        let rate_key = format!("{prefix}.refill_rate");
        let initial_key = format!("{prefix}.initial_refill_rate");
        match &self.refill_rate {
            None => Err(c.fail(
                &rate_key,
                "is missing (r_t, tokens per second, or \"measure\")".into(),
            )),
            Some(toml::Value::String(s)) if s == "measure" => match self.initial_refill_rate {
                Some(v) => Ok((Refill::Measure, c.range(&initial_key, v, 0.0, 1e9)?)),
                None => Err(c.fail(
                    &initial_key,
                    "is missing: refill_rate = \"measure\" starts from it (tokens per second, 0 to 1e9)".into(),
                )),
            },
            Some(value) => {
                let rate = number(value).ok_or_else(|| {
                    c.fail(
                        &rate_key,
                        format!("must be tokens per second (0 to 1e9) or \"measure\", got {value}"),
                    )
                })?;
                if self.initial_refill_rate.is_some() {
                    return Err(c.fail(&initial_key, "is only for refill_rate = \"measure\"".into()));
                }
                Ok((Refill::Fixed, c.range(&rate_key, rate, 0.0, 1e9)?))
            }
        }
    }
}

/// A `population` value: a profile or mixture name, or a table of weights
/// (named `name=weight,…` in sorted order).
fn population<E: From<ConfigError>>(
    c: &Checker<'_, E>,
    key: &str,
    value: &toml::Value,
) -> Result<ClientMix, E> {
    match value {
        toml::Value::String(name) => ClientMix::builtin(name).map_err(|e| c.fail(key, e.to_string())),
        toml::Value::Table(table) => {
            let mut weights = BTreeMap::new();
            for (name, value) in table {
                let entry = format!("{key}.{name}");
                let weight = number(value)
                    .ok_or_else(|| c.fail(&entry, format!("must be a weight > 0, got {value}")))?;
                weights.insert(name.clone(), weight);
            }
            let mut entries = Vec::new();
            let mut label = Vec::new();
            for (name, weight) in &weights {
                let entry = format!("{key}.{name}");
                let profile = SynProfile::builtin(name).map_err(|e| c.fail(&entry, e.to_string()))?;
                entries.push((profile, *weight));
                label.push(format!("{name}={weight}"));
            }
            ClientMix::new(&label.join(","), entries).map_err(|e| c.fail(key, e.to_string()))
        }
        other => Err(c.fail(
            key,
            format!(
                "must be a profile or mixture name, or a table of weights such as {{ \"linux-6.5\" = 0.7, \"macos\" = 0.3 }}, got {other}"
            ),
        )),
    }
}

/// A TOML integer or float as `f64`.
fn number(value: &toml::Value) -> Option<f64> {
    match value {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(text: &str) -> Result<ValidFilter, ConfigError> {
        let c: Checker = Checker::new("f.toml", text);
        #[derive(Deserialize)]
        struct File {
            filter: FilterSpec,
        }
        let file: File = c.deserialize()?;
        file.filter.validate(&c, "filter")
    }

    #[test]
    fn omitted_keys_take_the_gate_defaults() {
        let v = valid("[filter]\nbucket_size = 10\nrefill_rate = 5\n").unwrap();
        assert_eq!(v.kind, None);
        assert_eq!(v.refill, Refill::Fixed);
        assert_eq!(v.population, None);
        assert_eq!(v.bucket_refill_secs, None);
        let p = &v.params;
        assert_eq!((p.bucket_size, p.refill_rate), (10, 5.0));
        assert_eq!(p.interval, Nanos::from_secs(1));
        assert_eq!(p.window, AbacusWindow::CostOptimal);
        assert_eq!(p.greedy_window, None);
        assert_eq!((p.delay_cost, p.reject_cost), (1.0, 75.0));
        assert_eq!(p.arrival_smoothing, DEFAULT_ARRIVAL_SMOOTHING);
        // S_G omitted is T_N of the clients: 21 s for Windows 9x/NT.
        let windows = ClientMix::builtin("windows-9x-nt").unwrap();
        assert_eq!(p.greedy_window_for(&windows), Nanos::from_secs(21));
    }

    #[test]
    fn every_key_is_read() {
        let v = valid(
            "[filter]\nkind = \"greedy\"\nbucket_refill_s = 2\nrefill_rate = \"measure\"\n\
             initial_refill_rate = 30\ninterval_ms = 500\nwindow_s = 9\ngreedy_window_s = 50\n\
             delay_cost = 2\nreject_cost = 21\narrival_smoothing = 0.5\npopulation = \"linux-6.5\"\n",
        )
        .unwrap();
        assert_eq!(v.kind, Some(FilterKind::Greedy));
        assert_eq!(v.refill, Refill::Measure);
        assert_eq!(v.bucket_refill_secs, Some(2.0));
        assert_eq!(v.params.bucket_size, 60);
        assert_eq!(v.params.interval, Nanos::from_millis(500));
        assert_eq!(v.params.window, AbacusWindow::Fixed(Nanos::from_secs(9)));
        assert_eq!(v.params.greedy_window, Some(Nanos::from_secs(50)));
        assert_eq!(v.population.map(|m| m.name), Some("linux-6.5".to_string()));
        assert!(v.warnings.is_empty(), "{:?}", v.warnings);
        let v = valid("[filter]\nbucket_size = 1\nrefill_rate = 1\ninterval_s = 0.25\n").unwrap();
        assert_eq!(v.params.interval, Nanos::from_millis(250));
    }

    #[test]
    fn errors_name_the_key_and_its_line() {
        let e = valid("[filter]\nbucket_size = 1\nrefill_rate = 1\nwindow_s = \"forever\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("f.toml:4: `filter.window_s` must be seconds"),
            "{e}"
        );
        let e = valid("[filter]\nrefill_rate = 1\n").unwrap_err();
        assert_eq!(e.key(), Some("filter.bucket_size"));
        assert_eq!(e.line(), Some(1));
        let e =
            valid("[filter]\nbucket_size = 1\nrefill_rate = 1\ninterval_s = 1\ninterval_ms = 1\n")
                .unwrap_err();
        assert_eq!(e.key(), Some("filter.interval_ms"));
        let e = valid("[filter]\nbucket_size = 1\nrefill_rate = 1\nrefil = 1\n").unwrap_err();
        assert!(e.to_string().contains("unknown field `refil`"), "{e}");
    }

    #[test]
    fn the_old_name_clients_is_read_with_a_warning() {
        use crate::config::OLD_NAMES_REFUSED_FROM;
        let v =
            valid("[filter]\nbucket_size = 1\nrefill_rate = 1\nclients = \"linux-6.5\"\n").unwrap();
        assert_eq!(v.population.map(|m| m.name), Some("linux-6.5".to_string()));
        assert_eq!(
            v.warnings,
            [format!("f.toml:4: `filter.clients` is the old name of `filter.population`; it is read until vantage {OLD_NAMES_REFUSED_FROM}, rename it")]
        );
        // A bad value under the old name is named by the new one.
        let e =
            valid("[filter]\nbucket_size = 1\nrefill_rate = 1\nclients = \"beos\"\n").unwrap_err();
        assert_eq!(e.key(), Some("filter.population"));
        let e = valid(
            "[filter]\nbucket_size = 1\nrefill_rate = 1\nclients = \"linux-6.5\"\npopulation = \"macos\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`filter.clients` and `filter.population` are the same setting"),
            "{e}"
        );
        let e = valid("[filter]\nbucket_size = 1\nrefill_rate = 1\npopulations = \"macos\"\n")
            .unwrap_err();
        assert!(e.to_string().contains("unknown field `populations`"), "{e}");
    }
}
