//! The counters a crash campaign adds up over its seeds and prints at its end: one
//! [`tally!`](crate::tally!) declaration gives the struct (every field a count or another
//! tally) and its `add`, instead of a hand-written `add` per campaign that must name every
//! field again.

/// A count that campaigns add up seed by seed.
pub trait Tallied {
    /// Adds `other`'s counts to this one's.
    fn add_counts(&mut self, other: &Self);
}

impl Tallied for u64 {
    fn add_counts(&mut self, other: &Self) {
        *self += *other;
    }
}

impl Tallied for u32 {
    fn add_counts(&mut self, other: &Self) {
        *self += *other;
    }
}

/// Declares a campaign's tally: `tally! { /// doc  struct Name { field: u64, nested: Other } }`
/// gives the struct (Debug, Default, Clone, Copy), `Name::add(&mut self, &Name)`, which
/// adds every field, and `Sum` (the total of a campaign's tallies). A field's type is `u64`, `u32` or another tally.
#[macro_export]
macro_rules! tally {
    ($(#[$meta:meta])* struct $name:ident { $($(#[$field_meta:meta])* $field:ident : $kind:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Default, Clone, Copy)]
        struct $name {
            $($(#[$field_meta])* $field: $kind,)*
        }

        impl $name {
            /// Adds `other`'s counts to this tally's, field by field.
            fn add(&mut self, other: &$name) {
                $($crate::tally::Tallied::add_counts(&mut self.$field, &other.$field);)*
            }
        }

        impl $crate::tally::Tallied for $name {
            fn add_counts(&mut self, other: &Self) {
                self.add(other);
            }
        }

        impl std::iter::Sum for $name {
            /// The tallies of a campaign's seeds, added up.
            fn sum<I: Iterator<Item = $name>>(tallies: I) -> $name {
                let mut total = $name::default();
                for tally in tallies {
                    total.add(&tally);
                }
                total
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::tally! {
        /// A nested tally.
        struct Inner { torn: u64 }
    }

    crate::tally! {
        /// An outer tally.
        struct Outer { runs: u64, inner: Inner }
    }

    #[test]
    fn add_sums_every_field_nested_ones_included() {
        let mut total = Outer::default();
        let one = Outer {
            runs: 1,
            inner: Inner { torn: 2 },
        };
        total.add(&one);
        total.add(&one);
        assert_eq!(total.runs, 2);
        assert_eq!(total.inner.torn, 4);
    }

    #[test]
    fn a_sum_adds_every_tally() {
        let one = Outer {
            runs: 1,
            inner: Inner { torn: 2 },
        };
        let total: Outer = [one, one, one].into_iter().sum();
        assert_eq!(total.runs, 3);
        assert_eq!(total.inner.torn, 6);
    }
}
