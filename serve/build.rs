//! With the `grpc` feature, TEI's proto (proto/tei.proto) compiled into the gRPC server's and a
//! client's Rust code. `protox` parses it in Rust, so no `protoc` is needed.

fn main() {
    println!("cargo:rerun-if-changed=proto/tei.proto");
    #[cfg(feature = "grpc")]
    {
        let descriptors = protox::compile(["proto/tei.proto"], ["proto"]).expect("proto/tei.proto compiles");
        tonic_prost_build::configure()
            .build_client(true)
            .build_server(true)
            .compile_fds(descriptors)
            .expect("the gRPC code of proto/tei.proto is generated");
    }
}
