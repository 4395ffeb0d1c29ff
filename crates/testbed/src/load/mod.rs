//! Load generator (being written).
