//! Certificates for the TLS tests, made by the `openssl` command (EC P-256): a CA, a
//! server certificate for `localhost`/127.0.0.1 and a client certificate signed by it,
//! and a second, unrelated CA with its own client certificate. Client folders are laid
//! out as gnutls (libnbd, qemu, nbdkit) expects: `ca-cert.pem`, `client-cert.pem`,
//! `client-key.pem`; server folders as nbdkit expects: `ca-cert.pem`, `server-cert.pem`,
//! `server-key.pem`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use flashpipe_testkit::tools::stdout_of;

/// Certificates in a temporary folder.
pub struct Certificates {
    pub folder: tempfile::TempDir,
}

impl Certificates {
    /// An nbdkit-style server folder: ca-cert.pem, server-cert.pem, server-key.pem.
    pub fn server_folder(&self, folder_name: &str) -> PathBuf {
        let folder = self.path(folder_name);
        std::fs::create_dir_all(&folder).unwrap();
        for name in ["ca-cert.pem", "server-cert.pem", "server-key.pem"] {
            std::fs::copy(self.path(name), folder.join(name)).unwrap();
        }
        folder
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.folder.path().join(name)
    }

    /// A gnutls-style client folder: `ca` as ca-cert.pem, the `client` pair when given.
    pub fn client_folder(&self, folder_name: &str, ca: &str, client: Option<&str>) -> PathBuf {
        let folder = self.path(folder_name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::copy(
            self.path(&format!("{ca}-cert.pem")),
            folder.join("ca-cert.pem"),
        )
        .unwrap();
        if let Some(client) = client {
            std::fs::copy(
                self.path(&format!("{client}-cert.pem")),
                folder.join("client-cert.pem"),
            )
            .unwrap();
            std::fs::copy(
                self.path(&format!("{client}-key.pem")),
                folder.join("client-key.pem"),
            )
            .unwrap();
        }
        folder
    }
}

fn openssl(folder: &Path, arguments: &[&str]) {
    stdout_of(
        Command::new("openssl").current_dir(folder).args(arguments),
        &format!("openssl {}", arguments.join(" ")),
    );
}

/// `openssl req` arguments for a new P-256 key, unencrypted, written to the file named
/// next.
const NEW_EC_KEY_INTO: &[&str] = &[
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-keyout",
];

fn make_ca(folder: &Path, name: &str) {
    let key = format!("{name}-key.pem");
    let certificate = format!("{name}-cert.pem");
    let subject = format!("/CN={name}");
    openssl(
        folder,
        &[
            &["req", "-x509"],
            NEW_EC_KEY_INTO,
            &[
                &key,
                "-out",
                &certificate,
                "-days",
                "3650",
                "-subj",
                &subject,
            ],
            &["-addext", "basicConstraints=critical,CA:TRUE"],
            &["-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ]
        .concat(),
    );
}

fn make_leaf(folder: &Path, name: &str, ca: &str, extensions: &str) {
    let key = format!("{name}-key.pem");
    let request = format!("{name}.csr");
    let certificate = format!("{name}-cert.pem");
    let extension_file = format!("{name}.ext");
    let subject = format!("/CN={name}");
    std::fs::write(folder.join(&extension_file), extensions).unwrap();
    openssl(
        folder,
        &[
            &["req"],
            NEW_EC_KEY_INTO,
            &[&key, "-out", &request, "-subj", &subject],
        ]
        .concat(),
    );
    openssl(
        folder,
        &[
            "x509",
            "-req",
            "-in",
            &request,
            "-CA",
            &format!("{ca}-cert.pem"),
            "-CAkey",
            &format!("{ca}-key.pem"),
            "-CAcreateserial",
            "-out",
            &certificate,
            "-days",
            "3650",
            "-extfile",
            &extension_file,
        ],
    );
}

pub fn make_certificates() -> Certificates {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path();
    make_ca(path, "ca");
    make_ca(path, "otherca");
    let leaf = "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n";
    make_leaf(
        path,
        "server",
        "ca",
        &format!("{leaf}subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
    );
    make_leaf(
        path,
        "client",
        "ca",
        &format!("{leaf}extendedKeyUsage=clientAuth\n"),
    );
    make_leaf(
        path,
        "strangerclient",
        "otherca",
        &format!("{leaf}extendedKeyUsage=clientAuth\n"),
    );
    Certificates { folder }
}
