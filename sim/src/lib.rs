//! The simulation harness: the in-process Redis model and the simulator (in progress).
