//! DES-ECB/CBC against the NIST CAVP known-answer tests (single DES = TDES with three equal keys)
//! and AES-128-CTR against NIST SP 800-38A; every vector under many chunkings.

mod common;

use common::{hex, run_all_ways};
use flashpipe_kernels::error::{KernelErrorKind, OptionsError};
use flashpipe_kernels::registry::build_kernel;

/// One CAVP vector.
#[derive(Debug, Default, Clone)]
struct CavpVector {
    decrypt: bool,
    keys: Vec<String>,
    iv: Option<String>,
    plaintext: String,
    ciphertext: String,
}

/// Parses a CAVP `.rsp` file into its vectors.
fn parse_rsp(text: &str) -> Vec<CavpVector> {
    let mut vectors = Vec::new();
    let mut decrypt = false;
    let mut current: Option<CavpVector> = None;
    for line in text.lines().map(str::trim) {
        if line == "[ENCRYPT]" || line == "[DECRYPT]" {
            decrypt = line == "[DECRYPT]";
            continue;
        }
        let Some((name, value)) = line.split_once(" = ") else {
            continue;
        };
        match name {
            "COUNT" => {
                vectors.extend(current.take());
                current = Some(CavpVector {
                    decrypt,
                    ..Default::default()
                });
            }
            "KEYs" => current.as_mut().expect("COUNT first").keys = vec![value.to_string(); 3],
            "KEY1" | "KEY2" | "KEY3" => current
                .as_mut()
                .expect("COUNT first")
                .keys
                .push(value.to_string()),
            "IV" => current.as_mut().expect("COUNT first").iv = Some(value.to_string()),
            "PLAINTEXT" => current.as_mut().expect("COUNT first").plaintext = value.to_string(),
            "CIPHERTEXT" => current.as_mut().expect("COUNT first").ciphertext = value.to_string(),
            _ => {}
        }
    }
    vectors.extend(current);
    vectors
}

fn des_folder(mode: &str) -> Option<std::path::PathBuf> {
    let folder =
        flashpipe_kernels::shared_data::optional_shared_folder(env!("CARGO_MANIFEST_DIR"), "des")?
            .join(mode);
    if folder.is_dir() {
        Some(folder)
    } else {
        eprintln!(
            "uses extra data from ../shared when present: NIST DES vectors not found at {}",
            folder.display()
        );
        None
    }
}

/// Runs every single-DES vector of every `.rsp` file in `mode`'s folder; returns how many ran.
fn check_cavp_folder(mode: &str, kernel_name: &str) -> usize {
    let Some(folder) = des_folder(mode) else {
        return 0;
    };
    let mut checked = 0;
    let mut paths: Vec<_> = std::fs::read_dir(&folder)
        .expect("des folder")
        .map(|entry| entry.expect("entry").path())
        .collect();
    paths.sort();
    for path in paths
        .iter()
        .filter(|path| path.extension().is_some_and(|extension| extension == "rsp"))
    {
        let text = std::fs::read_to_string(path).expect("rsp file");
        for vector in parse_rsp(&text) {
            if vector.keys.len() != 3 || vector.keys.iter().any(|key| key != &vector.keys[0]) {
                continue;
            }
            let mut arguments = vec![
                format!("key={}", vector.keys[0]),
                "padding=none".to_string(),
                format!(
                    "direction={}",
                    if vector.decrypt { "decrypt" } else { "encrypt" }
                ),
            ];
            arguments.extend(vector.iv.iter().map(|iv| format!("iv={iv}")));
            let kernel = build_kernel(kernel_name, &arguments).expect("valid vector options");
            let (input, expected) = if vector.decrypt {
                (hex(&vector.ciphertext), hex(&vector.plaintext))
            } else {
                (hex(&vector.plaintext), hex(&vector.ciphertext))
            };
            let (output, _) = run_all_ways(kernel.as_ref(), &input).expect("vector runs");
            assert_eq!(output, expected, "{} vector {:?}", path.display(), vector);
            checked += 1;
        }
    }
    checked
}

#[test]
#[ignore = "data test: needs ../shared/data/des (scripts/test-data runs it)"]
fn des_ecb_matches_every_nist_cavp_vector() {
    assert_eq!(
        check_cavp_folder("ECB", "des-ecb"),
        490,
        "every ECB vector runs"
    );
}

#[test]
#[ignore = "data test: needs ../shared/data/des (scripts/test-data runs it)"]
fn des_cbc_matches_every_nist_cavp_vector() {
    assert_eq!(
        check_cavp_folder("CBC", "des-cbc"),
        490,
        "every CBC vector runs"
    );
}

const DES_KEY: &str = "key=133457799bbcdff1";
const DES_IV: &str = "iv=0001020304050607";

fn des_round_trip(kernel_name: &str, length_bytes: usize) {
    let plaintext: Vec<u8> = (0..length_bytes)
        .map(|index| (index * 31 % 251) as u8)
        .collect();
    let mut arguments = vec![DES_KEY.to_string()];
    if kernel_name == "des-cbc" {
        arguments.push(DES_IV.to_string());
    }
    let encrypt = build_kernel(kernel_name, &arguments).expect("options");
    let (ciphertext, _) = run_all_ways(encrypt.as_ref(), &plaintext).expect("encrypts");
    assert_eq!(
        ciphertext.len(),
        (length_bytes / 8 + 1) * 8,
        "PKCS#7 always adds 1 to 8 bytes"
    );
    arguments.push("direction=decrypt".into());
    let decrypt = build_kernel(kernel_name, &arguments).expect("options");
    let (recovered, _) = run_all_ways(decrypt.as_ref(), &ciphertext).expect("decrypts");
    assert_eq!(
        recovered, plaintext,
        "{kernel_name} round trip of {length_bytes} bytes"
    );
}

#[test]
fn des_pkcs7_round_trips_empty_one_byte_one_block_and_odd_lengths() {
    for kernel_name in ["des-ecb", "des-cbc"] {
        for length_bytes in [0, 1, 7, 8, 9, 100, 5000] {
            des_round_trip(kernel_name, length_bytes);
        }
    }
}

#[test]
fn des_rejects_bad_lengths_padding_and_options() {
    let no_padding =
        build_kernel("des-ecb", &[DES_KEY.into(), "padding=none".into()]).expect("options");
    let error = run_all_ways(no_padding.as_ref(), &[1, 2, 3]).expect_err("3 bytes is not a block");
    assert!(
        matches!(error.kind, KernelErrorKind::WrongLength(_)),
        "{error}"
    );
    assert!(
        error.to_string().contains("input.bin"),
        "error names the file: {error}"
    );
    let decrypt = build_kernel(
        "des-cbc",
        &[DES_KEY.into(), DES_IV.into(), "direction=decrypt".into()],
    )
    .expect("options");
    let error =
        run_all_ways(decrypt.as_ref(), &[0u8; 16]).expect_err("garbage is not padded ciphertext");
    assert!(
        matches!(error.kind, KernelErrorKind::InvalidPadding),
        "{error}"
    );
    for (kernel_name, arguments) in [
        ("des-ecb", vec!["key=1234"]),
        ("des-ecb", vec!["key=zz3457799bbcdff1"]),
        ("des-ecb", vec![DES_KEY, "direction=sideways"]),
        ("des-ecb", vec![DES_KEY, "padding=zero"]),
        ("des-ecb", vec![DES_KEY, "mode=cbc"]),
        ("des-ecb", vec![DES_KEY, DES_KEY]),
        ("des-ecb", vec!["keyonly"]),
        ("des-cbc", vec![DES_KEY]),
        ("aes128-ctr", vec!["key=00", "iv=00"]),
    ] {
        let arguments: Vec<String> = arguments.into_iter().map(String::from).collect();
        let error = build_kernel(kernel_name, &arguments)
            .err()
            .expect("bad options are refused");
        assert!(!error.to_string().is_empty());
    }
    assert!(matches!(
        build_kernel("des-xyz", &[]),
        Err(OptionsError::UnknownKernel { .. })
    ));
}

/// NIST SP 800-38A, F.5.1 CTR-AES128.Encrypt (F.5.2 decrypt is the same operation reversed).
#[test]
fn aes128_ctr_matches_sp800_38a() {
    let arguments = vec![
        "key=2b7e151628aed2a6abf7158809cf4f3c".to_string(),
        "iv=f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff".to_string(),
    ];
    let plaintext = hex(concat!(
        "6bc1bee22e409f96e93d7e117393172a",
        "ae2d8a571e03ac9c9eb76fac45af8e51",
        "30c81c46a35ce411e5fbc1191a0a52ef",
        "f69f2445df4f9b17ad2b417be66c3710"
    ));
    let ciphertext = hex(concat!(
        "874d6191b620e3261bef6864990db6ce",
        "9806f66b7970fdff8617187bb9fffdff",
        "5ae4df3edbd5d35e5b4f09020db03eab",
        "1e031dda2fbe03d1792170a0f3009cee"
    ));
    let kernel = build_kernel("aes128-ctr", &arguments).expect("options");
    let (output, _) = run_all_ways(kernel.as_ref(), &plaintext).expect("encrypts");
    assert_eq!(output, ciphertext);
    let (recovered, _) = run_all_ways(kernel.as_ref(), &ciphertext).expect("decrypts");
    assert_eq!(recovered, plaintext);
    for length_bytes in [0usize, 1, 16, 17] {
        let (output, _) =
            run_all_ways(kernel.as_ref(), &plaintext[..length_bytes]).expect("short input");
        assert_eq!(
            output,
            ciphertext[..length_bytes],
            "prefix of {length_bytes} bytes"
        );
    }
}
