//! The simulated disk in virtual time with seeded faults and crashes (being written for
//! issue #2).
