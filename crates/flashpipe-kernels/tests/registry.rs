//! The registry and option parsing: every listed kernel builds from sample options and reports
//! the schedule and output its entry declares; bad options give errors naming the problem.

use flashpipe_kernels::error::OptionsError;
use flashpipe_kernels::options::{KernelOptions, OptionSpec};
use flashpipe_kernels::registry::{find_kernel, KERNELS};

const SPECS: &[OptionSpec] = &[
    OptionSpec::optional("size", "4K", "a size"),
    OptionSpec::required("name", "a name"),
];

fn parse(arguments: &[&str]) -> Result<KernelOptions, OptionsError> {
    let arguments: Vec<String> = arguments
        .iter()
        .map(|argument| argument.to_string())
        .collect();
    KernelOptions::parse("test", SPECS, &arguments)
}

#[test]
fn options_parse_defaults_and_refuse_mistakes_with_clear_messages() {
    let options = parse(&["name=x"]).expect("valid");
    assert_eq!(options.integer("size", 0, u64::MAX).expect("default"), 4096);
    assert_eq!(options.text("name").expect("given"), "x");
    let cases: &[(&[&str], &str)] = &[
        (&[], "needs option 'name'"),
        (
            &["name=x", "colour=red"],
            "no option 'colour'; its options: size, name",
        ),
        (&["name=x", "name=y"], "given more than once"),
        (&["name"], "not of the form key=value"),
    ];
    for (arguments, message) in cases {
        let error = parse(arguments).expect_err("refused");
        assert!(
            error.to_string().contains(message),
            "{arguments:?}: {error}"
        );
    }
    let options = parse(&["name=x", "size=12Q"]).expect("parsed lazily");
    assert!(options.integer("size", 0, 100).is_err());
    let options = parse(&["name=x", "size=1M"]).expect("parsed");
    let error = options.integer("size", 0, 100).expect_err("out of range");
    assert!(error.to_string().contains("between 0 and 100"), "{error}");
    for (value, expected) in [
        ("64M", Some(64 << 20)),
        ("64KiB", Some(64 << 10)),
        ("-1", None),
        ("", None),
        ("K", None),
    ] {
        let size = format!("size={value}");
        let options = parse(&["name=x", size.as_str()]).expect("parsed lazily");
        assert_eq!(
            options.integer("size", 0, u64::MAX).ok(),
            expected,
            "{value:?}"
        );
    }
}

#[test]
fn every_registered_kernel_builds_and_matches_its_entry() {
    let directory = tempfile::tempdir().expect("temp dir");
    let queries = directory.path().join("queries.f32");
    std::fs::write(&queries, [0u8; 16]).expect("queries");
    let sequences = directory.path().join("queries.fa");
    std::fs::write(&sequences, b">q\nACGTACGTACGT\n").expect("sequences");
    let profiles = directory.path().join("profiles.bin");
    let model = flashpipe_kernels::langid::model::train(
        &[("eng".to_string(), b"hello world".to_vec())],
        Default::default(),
    );
    flashpipe_kernels::langid::profile_file::save_profile(&model, &profiles).expect("profile");
    let mut names: Vec<&str> = KERNELS.iter().map(|spec| spec.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), KERNELS.len(), "names are unique");
    for spec in KERNELS {
        let arguments: Vec<String> = match spec.name {
            "des-ecb" => vec!["key=0123456789abcdef".into()],
            "des-cbc" => vec!["key=0123456789abcdef".into(), "iv=0000000000000000".into()],
            "aes128-ctr" => vec![
                format!("key={}", "00".repeat(16)),
                format!("iv={}", "00".repeat(16)),
            ],
            "langid" => vec![format!("profiles={}", profiles.display())],
            "grep" => vec!["pattern=x".into()],
            "knn" => vec![
                format!("queries={}", queries.display()),
                "dimensions=4".into(),
            ],
            "sort" | "search-index" => vec!["record=8".into()],
            "wasm" => vec![format!(
                "module_path={}",
                flashpipe_kernels::wasm::examples::examples_folder()
                    .join("histogram.wat")
                    .display()
            )],
            "blastn" => vec![format!("queries={}", sequences.display())],
            _ => vec![],
        };
        let kernel = spec
            .build(&arguments)
            .unwrap_or_else(|error| panic!("{}: {error}", spec.name));
        assert_eq!(kernel.name(), spec.name);
        assert_eq!(kernel.schedule(), spec.schedule, "{}", spec.name);
        assert_eq!(kernel.output_kind(), spec.output, "{}", spec.name);
        for option in spec.options {
            assert!(!option.help.is_empty());
        }
    }
    let error = find_kernel("rot13").expect_err("unknown");
    assert!(
        error.to_string().contains("des-ecb"),
        "lists known kernels: {error}"
    );
}
