//! Generates the gRPC server and client from `proto/` (needs `protoc`, like the Temporal protos).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=../proto/runtimecloud/v1/runtime_cloud.proto");
    tonic_prost_build::configure().compile_protos(
        &["../proto/runtimecloud/v1/runtime_cloud.proto"],
        &["../proto"],
    )?;
    Ok(())
}
