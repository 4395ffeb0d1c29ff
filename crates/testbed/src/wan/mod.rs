//! WAN emulator (being written).
