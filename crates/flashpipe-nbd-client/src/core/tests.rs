//! Unit tests of the client core: the reconnect backoff, the reply timeout's rule, cookies.

use super::*;

fn policy(first_delay_ms: u64) -> ClientPolicy {
    ClientPolicy {
        write_with_fua: false,
        read_only: false,
        reconnect_attempts: 8,
        reconnect_first_delay_ms: first_delay_ms,
        reconnect_durability: ReconnectDurability::default(),
    }
}

#[test]
fn the_backoff_doubles_from_the_first_delay_up_to_one_second() {
    let delays: Vec<u64> = (0..7)
        .map(|attempt| policy(50).reconnect_delay_ms(attempt))
        .collect();
    assert_eq!(delays, [50, 100, 200, 400, 800, 1000, 1000]);
    let from_zero: Vec<u64> = (0..4)
        .map(|attempt| policy(0).reconnect_delay_ms(attempt))
        .collect();
    assert_eq!(from_zero, [0, 1, 2, 4]);
    assert_eq!(policy(5000).reconnect_delay_ms(0), 5000);
    assert_eq!(policy(5000).reconnect_delay_ms(1), 1000);
    assert_eq!(policy(u64::MAX).reconnect_delay_ms(40), 1000);
}

#[test]
fn silence_ends_only_a_connection_with_requests_waiting() {
    assert_eq!(
        silence_ends_connection("d", 0, 10_000_000_000, 1_000_000),
        None
    );
    assert_eq!(silence_ends_connection("d", 3, 999_999, 1_000_000), None);
    let reason = silence_ends_connection("d", 3, 1_000_000, 1_000_000).expect("timed out");
    assert_eq!(
        reason,
        "d: no reply from the server for 1 ms with 3 requests in flight"
    );
}

#[test]
fn cookies_name_parent_and_part() {
    let cookie = 77 << PART_BITS | 5;
    assert_eq!(parent_id_of_cookie(cookie), 77);
    assert_eq!(part_of_cookie(cookie), 5);
}
