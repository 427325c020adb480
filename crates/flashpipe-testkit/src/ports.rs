//! A free TCP port on loopback, for a test that starts servers or nodes on their own ports.

use std::net::TcpListener;

/// A TCP port free on `127.0.0.1` now (the kernel's pick; another process could take it
/// before the test binds it, which loopback tests on one machine accept).
pub fn free_loopback_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("a free loopback port")
        .local_addr()
        .expect("the bound address")
        .port()
}
