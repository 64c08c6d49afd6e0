//! Compiles the droidmesh protos with protox (pure Rust; no `protoc` needed) and writes the
//! encoded file descriptor set for gRPC reflection.
use prost::Message;
use std::path::PathBuf;

const FILES: &[&str] = &[
    "droidmesh/v1/common.proto",
    "droidmesh/v1/events.proto",
    "droidmesh/v1/device.proto",
    "droidmesh/v1/agents.proto",
    "droidmesh/v1/gateway.proto",
    "droidmesh/v1/replica.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    for file in FILES {
        println!("cargo:rerun-if-changed={file}");
    }
    let fds = protox::compile(FILES, ["."])?;
    std::fs::write(
        out_dir.join("droidmesh_descriptor.bin"),
        fds.encode_to_vec(),
    )?;
    tonic_prost_build::configure()
        // A secret to mask must not reach a log through `{:?}`: its Debug is written by hand.
        .skip_debug([".droidmesh.v1.SecretMask"])
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
