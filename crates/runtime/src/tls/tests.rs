#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::TlsConfig;
use std::path::PathBuf;

#[test]
fn a_half_set_section_is_refused_naming_each_field() {
    let cert_only = TlsConfig {
        cert: Some(PathBuf::from("/c.pem")),
        ..TlsConfig::default()
    };
    assert_eq!(cert_only.problems(), ["tls.key: must be set with tls.cert"]);
    assert!(!cert_only.serves());

    let mutual_without_ca = TlsConfig {
        cert: Some(PathBuf::from("/c.pem")),
        key: Some(PathBuf::from("/k.pem")),
        mutual: true,
        ..TlsConfig::default()
    };
    let problems = mutual_without_ca.problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("tls.mutual: needs"), "{problems:?}");

    let bad = TlsConfig {
        server_name: Some("not a name!".to_owned()),
        handshake_timeout_ms: 0,
        gateway_client_certs: true,
        ..TlsConfig::default()
    };
    let problems = bad.problems().join("\n");
    for field in [
        "tls.server_name",
        "tls.handshake_timeout_ms",
        "tls.gateway_client_certs",
    ] {
        assert!(problems.contains(field), "{field} missing from: {problems}");
    }
    assert!(TlsConfig::default().problems().is_empty());
}

#[test]
fn dev_certificates_are_refused_a_path_for_a_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let names = vec!["localhost".to_owned()];
    for bad in ["", "../x", ".hidden", "a/b"] {
        assert!(
            super::dev::write_dev_certs(dir.path(), bad, &names, 1).is_err(),
            "{bad:?}"
        );
    }
    assert!(super::dev::write_dev_certs(dir.path(), "tls", &[], 1).is_err());
    let files = super::dev::write_dev_certs(dir.path(), "tls", &names, 1).unwrap();
    assert!(files.new_ca);
    let again = super::dev::write_dev_certs(dir.path(), "client", &names, 1).unwrap();
    assert!(!again.new_ca, "the folder's CA signs the next certificate");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&files.key).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "a key readable by others: {mode:o}");
    }
}
