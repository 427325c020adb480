//! Arithmetic in GF(2^8) with the primitive polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11D),
//! by exponent and logarithm tables built at compile time.
//!
//! This is the field of RS(255,243) as minFlash's controller, and the `reed-solomon` 0.2
//! crate the model used before, define it: parity written by either is the same.

/// The primitive polynomial, with its x^8 term.
const PRIMITIVE_POLYNOMIAL: u16 = 0x11D;

/// `EXPONENTS[i] = alpha^i` for `i` in `0..510` (doubled, so a sum of two logarithms
/// needs no reduction).
pub static EXPONENTS: [u8; 512] = build_exponents();
/// `LOGARITHMS[x] = i` with `alpha^i = x`, for `x != 0` (entry 0 is unused).
pub static LOGARITHMS: [u8; 256] = build_logarithms();

const fn build_exponents() -> [u8; 512] {
    let mut table = [0u8; 512];
    let mut value: u16 = 1;
    let mut index = 0;
    while index < 512 {
        table[index] = value as u8;
        value <<= 1;
        if value & 0x100 != 0 {
            value ^= PRIMITIVE_POLYNOMIAL;
        }
        index += 1;
    }
    table
}

const fn build_logarithms() -> [u8; 256] {
    let exponents = build_exponents();
    let mut table = [0u8; 256];
    let mut index = 0;
    while index < 255 {
        table[exponents[index] as usize] = index as u8;
        index += 1;
    }
    table
}

/// `a * b` in the field.
#[inline]
pub fn multiply(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        return 0;
    }
    EXPONENTS[LOGARITHMS[a as usize] as usize + LOGARITHMS[b as usize] as usize]
}

/// `a / b` in the field; `b` must not be zero.
#[inline]
pub fn divide(a: u8, b: u8) -> u8 {
    assert!(b != 0, "division by zero in GF(2^8)");
    if a == 0 {
        return 0;
    }
    EXPONENTS[LOGARITHMS[a as usize] as usize + 255 - LOGARITHMS[b as usize] as usize]
}

/// `alpha^power` for any non-negative power.
#[inline]
pub fn alpha_power(power: usize) -> u8 {
    EXPONENTS[power % 255]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_inverse_and_alpha_generates_the_field() {
        let mut seen = [false; 256];
        for (power, &value) in EXPONENTS.iter().enumerate().take(255) {
            assert!(value != 0 && !seen[value as usize], "alpha^{power} repeats");
            seen[value as usize] = true;
            assert_eq!(LOGARITHMS[value as usize] as usize, power);
        }
        assert_eq!(EXPONENTS[8], 0x1D, "alpha^8 reduces by 0x11D");
    }

    #[test]
    fn multiply_and_divide_agree_with_carry_less_multiplication() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                let mut product: u16 = 0;
                for bit in 0..8 {
                    if b >> bit & 1 == 1 {
                        product ^= u16::from(a) << bit;
                    }
                }
                for bit in (8..16).rev() {
                    if product >> bit & 1 == 1 {
                        product ^= PRIMITIVE_POLYNOMIAL << (bit - 8);
                    }
                }
                assert_eq!(multiply(a, b), product as u8, "{a} * {b}");
                if b != 0 {
                    assert_eq!(divide(multiply(a, b), b), a);
                }
            }
        }
    }
}
