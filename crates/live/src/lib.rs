//! Live Linux drivers: the sans-IO mechanisms of `vantage-core` run in real
//! time against real traffic.
