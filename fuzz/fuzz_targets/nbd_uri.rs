//! Fuzzes the NBD URI parser (#15; crates/flashpipe-nbd-client/src/uri.rs, docs/nbd-client.md):
//! any text parses or is refused with a reason, never a panic; a URI that parses keeps its
//! text, starts with an NBD scheme, and parses again to the same value.
#![no_main]

use flashpipe_nbd::client::{looks_like_nbd_uri, NbdUri};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let looks_like_uri = looks_like_nbd_uri(text);
    match NbdUri::parse(text) {
        Ok(uri) => {
            assert!(
                looks_like_uri,
                "{text:?} parsed but does not look like an NBD URI"
            );
            assert_eq!(uri.as_str(), text);
            assert_eq!(NbdUri::parse(&uri.to_string()), Ok(uri.clone()));
            let _ = uri.require_supported();
        }
        Err(error) => {
            assert!(!error.reason.is_empty());
            assert!(error.uri.chars().count() <= 200);
        }
    }
});
