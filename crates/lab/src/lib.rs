//! Studies and experiments: the testbed experiments that rerun a paper's
//! comparison with real clients beside the simulator ([`experiment`]).

pub mod experiment;
