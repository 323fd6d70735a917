//! The command line: TEI 1.9's flags, each also read from TEI's environment variable (as its
//! container images are configured), plus ours in the same style. A TEI flag that has no meaning
//! here is refused by name, with the reason, rather than ignored.

use std::net::IpAddr;

use anyhow::{bail, Result};
use clap::{CommandFactory, FromArgMatches, Parser};
use roformer::Pooling;

use roformer_cli as common;

#[derive(Parser)]
#[command(about = "Serve a RoFormer checkpoint over text-embeddings-inference's HTTP API")]
pub struct Args {
    /// Checkpoint folder or Hub id.
    #[arg(long, alias = "model-id", env = "MODEL_ID")]
    pub model: String,
    #[command(flatten)]
    pub run: common::RunArgs,
    /// cls, mean or pooler, for /embed (default: the checkpoint's pooler if it has one, else
    /// mean); splade, on a masked-LM checkpoint, for /embed_sparse.
    #[arg(long, env = "POOLING")]
    pub pooling: Option<ServePooling>,
    /// Address to listen on (default 127.0.0.1). `HOSTNAME` is read only when it is an IP address:
    /// Docker and Kubernetes set it to the container's name.
    #[arg(long, alias = "hostname")]
    pub host: Option<String>,
    /// Port to listen on; 0 picks a free one.
    #[arg(long, short = 'p', default_value_t = 8080, env = "PORT")]
    pub port: u16,
    /// Also serve the API on this Unix socket.
    #[arg(long, env = "UDS_PATH")]
    pub uds_path: Option<std::path::PathBuf>,
    /// Port of a second listener, on the same address, that serves /metrics alone, so that the
    /// API port can stay private; 0 picks a free one. Taken, it is reported and the API serves on.
    #[arg(long, default_value_t = 9000, env = "PROMETHEUS_PORT")]
    pub prometheus_port: u16,
    /// One JSON object per log line, on stderr, and for the `listening on` line on stdout (the
    /// address in `fields.address`).
    #[arg(long, env = "JSON_OUTPUT", num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set)]
    pub json_output: bool,
    /// TEI's switch for its trace spans in the logs; the logs here have no spans, so it changes
    /// nothing.
    #[arg(long, env = "DISABLE_SPANS", num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set)]
    pub disable_spans: bool,
    /// Export a trace span per request, with one per phase (tokenization, queue, inference), as
    /// OTLP over gRPC to this endpoint, e.g. `http://127.0.0.1:4317` (feature `otlp`).
    #[arg(long, env = "OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// The service name of OTLP's spans (only with --otlp-endpoint).
    #[arg(long, env = "OTLP_SERVICE_NAME", default_value = "roformer-serve")]
    pub otlp_service_name: String,
    /// The prompt (a name of the sentence-transformers folder's `prompts`) put before every text
    /// a request does not give a `prompt_name` for.
    #[arg(long, env = "DEFAULT_PROMPT_NAME", conflicts_with = "default_prompt")]
    pub default_prompt_name: Option<String>,
    /// A prompt text put before every text a request does not give a `prompt_name` for.
    #[arg(long, env = "DEFAULT_PROMPT")]
    pub default_prompt: Option<String>,
    /// TEI's path to a Dense module: refused, as a sentence-transformers folder's modules.json
    /// names its Dense modules here.
    #[arg(long, env = "DENSE_PATH")]
    pub dense_path: Option<String>,
    /// Hub access token (default: `HF_TOKEN`, then the token file of `huggingface-cli login`).
    #[arg(long, env = "HF_TOKEN", conflicts_with = "hf_api_token")]
    pub hf_token: Option<String>,
    /// TEI's deprecated spelling of --hf-token.
    #[arg(long, env = "HF_API_TOKEN", hide = true)]
    pub hf_api_token: Option<String>,
    /// The Hub cache folder (default: `HF_HUB_CACHE`, else `HF_HOME/hub`).
    #[arg(long, env = "HUGGINGFACE_HUB_CACHE")]
    pub huggingface_hub_cache: Option<std::path::PathBuf>,
    /// Threads that validate and tokenize requests (the async runtime's); default one per core.
    #[arg(long, env = "TOKENIZATION_WORKERS")]
    pub tokenization_workers: Option<usize>,
    /// Tokens one batch may hold (the sum of its inputs' lengths).
    #[arg(long, default_value_t = 16384, env = "MAX_BATCH_TOKENS")]
    pub max_batch_tokens: usize,
    /// Inputs one batch may hold (no limit by default); 1 turns dynamic batching off.
    #[arg(long, env = "MAX_BATCH_REQUESTS")]
    pub max_batch_requests: Option<usize>,
    /// Inputs queued or running at once. A request that finds them all taken gets 429; once in,
    /// each of its inputs waits for its turn.
    #[arg(long, default_value_t = 512, env = "MAX_CONCURRENT_REQUESTS")]
    pub max_concurrent_requests: usize,
    /// Inputs one request may hold.
    #[arg(long, default_value_t = 32, env = "MAX_CLIENT_BATCH_SIZE")]
    pub max_client_batch_size: usize,
    /// Truncate inputs past the max length when the request does not say (`--auto-truncate false`
    /// answers them 422 instead).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set, env = "AUTO_TRUNCATE")]
    pub auto_truncate: bool,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 2_000_000, env = "PAYLOAD_LIMIT")]
    pub payload_limit: usize,
    /// The model name /info and /v1/embeddings report (default: --model).
    #[arg(long, env = "SERVED_MODEL_NAME")]
    pub served_model_name: Option<String>,
    /// Requests must carry `Authorization: Bearer KEY` (health, metrics and docs excepted), else 401.
    #[arg(long, env = "API_KEY")]
    pub api_key: Option<String>,
    /// Origins browsers may call from (CORS), e.g. `https://example.com`; `*` for any. Repeat or
    /// separate with commas.
    #[arg(long, value_delimiter = ',', env = "CORS_ALLOW_ORIGIN")]
    pub cors_allow_origin: Option<Vec<String>>,
    /// Seconds a client has to send a request's headers before the connection is closed.
    #[arg(long, default_value_t = 30.0, env = "HEADER_READ_TIMEOUT")]
    pub header_read_timeout: f64,
    /// Seconds a client has to send a request's body before it gets 408 and the connection closes.
    #[arg(long, default_value_t = 60.0, env = "BODY_READ_TIMEOUT")]
    pub body_read_timeout: f64,
}

/// The environment variables of the flags shared with the library's examples (`RunArgs`), named
/// as TEI names its own (`REVISION`, `DTYPE`) and, for ours, in the same style.
const RUN_ENV: [(&str, &str); 8] = [
    ("revision", "REVISION"),
    ("dtype", "DTYPE"),
    ("device", "DEVICE"),
    ("batch_size", "BATCH_SIZE"),
    ("max_length", "MAX_LENGTH"),
    ("quantize", "QUANTIZE"),
    ("rope_scaling", "ROPE_SCALING"),
    ("threads", "THREADS"),
];

/// `--pooling`: the library's poolings, or SPLADE, which a masked-LM head computes.
#[derive(Clone, Copy)]
pub enum ServePooling {
    Dense(Pooling),
    Splade,
}

impl std::str::FromStr for ServePooling {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "splade" => Ok(ServePooling::Splade),
            "last-token" | "last_token" => Err(format!(
                "pooling `{s}` is TEI's for causal models; RoFormer's encoder reads both ways (cls, mean, pooler or splade)"
            )),
            _ => s
                .parse()
                .map(ServePooling::Dense)
                .map_err(|_| format!("unknown pooling `{s}` (cls, mean, pooler or splade)")),
        }
    }
}

impl Args {
    /// The command line, with every flag's environment variable; [`Args::check`] checks it.
    pub fn parse() -> Self {
        let mut command = Args::command();
        for (id, var) in RUN_ENV {
            command = command.mut_arg(id, |arg| arg.env(var));
        }
        let mut args = Args::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit());
        // TEI's spellings of the dtypes.
        args.run.dtype = match args.run.dtype.as_str() {
            "float32" => "f32",
            "float16" => "f16",
            "bfloat16" => "bf16",
            other => other,
        }
        .to_string();
        args
    }

    /// The address to listen on: `--host`, else `HOSTNAME` where it is an IP address.
    pub fn host(&self) -> String {
        self.host.clone().unwrap_or_else(|| {
            std::env::var("HOSTNAME")
                .ok()
                .filter(|h| h.parse::<IpAddr>().is_ok())
                .unwrap_or_else(|| "127.0.0.1".to_string())
        })
    }

    /// Refuses counts of 0, an empty API key and the TEI flags that have no meaning here.
    pub fn check(&self) -> Result<()> {
        let counts = [
            ("--max-batch-tokens", Some(self.max_batch_tokens)),
            ("--max-batch-requests", self.max_batch_requests),
            ("--max-concurrent-requests", Some(self.max_concurrent_requests)),
            ("--max-client-batch-size", Some(self.max_client_batch_size)),
            ("--tokenization-workers", self.tokenization_workers),
        ];
        let zero: Vec<&str> = counts.iter().filter(|(_, n)| *n == Some(0)).map(|(flag, _)| *flag).collect();
        if !zero.is_empty() {
            bail!("{} must be at least 1", zero.join(", "));
        }
        // `API_KEY=` in an env file, say: the server would start and refuse every request.
        if self.api_key.as_deref().is_some_and(|key| key.trim().is_empty()) {
            bail!("--api-key (or API_KEY) is empty: every request would be refused; give a key, or unset it");
        }
        if let Some(path) = &self.dense_path {
            bail!(
                "--dense-path {path}: not supported: a sentence-transformers folder's modules.json names the \
                 Dense modules it applies; point --model at a folder whose modules.json names the one you want"
            );
        }
        #[cfg(not(feature = "otlp"))]
        if let Some(endpoint) = &self.otlp_endpoint {
            bail!(
                "--otlp-endpoint {endpoint}: this roformer-serve was built without OpenTelemetry export \
                 (`cargo install roformer-serve --features otlp`); the request phases' timings are on /metrics \
                 (te_request_tokenization_duration, te_request_queue_duration, te_request_inference_duration) \
                 and in each answer's x-*-time headers"
            );
        }
        Ok(())
    }
}
