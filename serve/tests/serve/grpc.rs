//! TEI's gRPC API through a client generated from TEI's proto by tonic: every `tei.v1` method,
//! streaming ones included, against the same request over HTTP; TEI's status codes for bad input
//! and keys; HTTP/1.1 and gRPC on the one port.

use serde_json::{json, Value};
use tokio_stream::StreamExt;
use tonic::transport::Channel;
use tonic::{Code, Request};

use crate::*;

mod pb {
    #![allow(clippy::all)]
    tonic::include_proto!("tei.v1");
}

use pb::embed_client::EmbedClient;
use pb::info_client::InfoClient;
use pb::predict_client::PredictClient;
use pb::rerank_client::RerankClient;
use pb::tokenize_client::TokenizeClient;

async fn channel(server: &Server) -> Channel {
    Channel::from_shared(server.base.clone()).unwrap().connect().await.unwrap()
}

fn close(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-5, "{what}: {g} vs {w}");
    }
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_method_answers_as_http_does() {
    let server = Server::start(&model("cls"), &["--prometheus-port", "0"]);
    let channel = channel(&server).await;
    let texts = ["a great film", "the movie was terrible and boring", "x"];

    let info = InfoClient::new(channel.clone()).info(pb::InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.model_type, pb::ModelType::Classifier as i32);
    assert_eq!(info.max_client_batch_size, 32);

    // Predict, PredictPair and their streams against /predict.
    let mut predict = PredictClient::new(channel.clone());
    for text in texts {
        let got = predict
            .predict(pb::PredictRequest { inputs: text.into(), raw_scores: true, ..Default::default() })
            .await
            .unwrap()
            .into_inner();
        let want = server.ok("/predict", json!({"inputs": text, "raw_scores": true}));
        for (g, w) in got.predictions.iter().zip(want.as_array().unwrap()) {
            assert_eq!(g.label, w["label"].as_str().unwrap());
            assert!((g.score - w["score"].as_f64().unwrap() as f32).abs() < 1e-5);
        }
        assert!(got.metadata.unwrap().compute_tokens > 0);
    }
    let pair = pb::PredictPairRequest { inputs: vec!["a cat".into(), "a dog".into()], ..Default::default() };
    let got = predict.predict_pair(pair.clone()).await.unwrap().into_inner();
    let want = server.ok("/predict", json!({"inputs": ["a cat", "a dog"]}));
    close("pair", &[got.predictions[0].score], &[want[0]["score"].as_f64().unwrap() as f32]);
    let requests = texts.map(|t| pb::PredictRequest { inputs: t.into(), ..Default::default() });
    let answers: Vec<_> =
        predict.predict_stream(tokio_stream::iter(requests)).await.unwrap().into_inner().collect().await;
    assert_eq!(answers.len(), 3);
    for (answer, text) in answers.iter().zip(texts) {
        let want = server.ok("/predict", json!({"inputs": text}));
        close(
            text,
            &[answer.as_ref().unwrap().predictions[0].score],
            &[want[0]["score"].as_f64().unwrap() as f32],
        );
    }
    let pairs =
        predict.predict_pair_stream(tokio_stream::iter([pair.clone(), pair])).await.unwrap().into_inner();
    assert_eq!(pairs.collect::<Vec<_>>().await.len(), 2);

    // Embed (normalised by default, as TEI), EmbedAll and their streams against /embed and /embed_all.
    let mut embed = EmbedClient::new(channel.clone());
    let requests = texts.map(|t| pb::EmbedRequest { inputs: t.into(), ..Default::default() });
    let answers: Vec<_> =
        embed.embed_stream(tokio_stream::iter(requests.clone())).await.unwrap().into_inner().collect().await;
    for ((answer, request), text) in answers.iter().zip(requests).zip(texts) {
        let want = floats(&server.ok("/embed", json!({"inputs": text}))[0]);
        close(text, &answer.as_ref().unwrap().embeddings, &want);
        close(text, &embed.embed(request).await.unwrap().into_inner().embeddings, &want);
    }
    let cut = pb::EmbedRequest {
        inputs: "a".into(),
        normalize: Some(false),
        dimensions: Some(4),
        ..Default::default()
    };
    let want = floats(&server.ok("/embed", json!({"inputs": "a", "normalize": false, "dimensions": 4}))[0]);
    close("dimensions", &embed.embed(cut).await.unwrap().into_inner().embeddings, &want);
    let all = pb::EmbedAllRequest { inputs: texts[0].into(), ..Default::default() };
    let got = embed.embed_all(all.clone()).await.unwrap().into_inner();
    let want = server.ok("/embed_all", json!({"inputs": texts[0]}));
    for (g, w) in got.token_embeddings.iter().zip(want[0].as_array().unwrap()) {
        close("embed_all", &g.embeddings, &floats(w));
    }
    let streamed = embed.embed_all_stream(tokio_stream::iter([all])).await.unwrap().into_inner();
    assert_eq!(streamed.collect::<Vec<_>>().await.len(), 1);

    // Tokenize and Decode, and their streams, against /tokenize and /decode.
    let mut tokenize = TokenizeClient::new(channel.clone());
    let request =
        pb::EncodeRequest { inputs: "Héllo world".into(), add_special_tokens: true, prompt_name: None };
    let got = tokenize.tokenize(request.clone()).await.unwrap().into_inner();
    let want = server.ok("/tokenize", json!({"inputs": "Héllo world"}));
    let want = want[0].as_array().unwrap();
    assert_eq!(got.tokens.len(), want.len());
    for (g, w) in got.tokens.iter().zip(want) {
        assert_eq!(
            (g.id, g.text.as_str(), g.special),
            (w["id"].as_u64().unwrap() as u32, w["text"].as_str().unwrap(), w["special"].as_bool().unwrap())
        );
        assert_eq!(g.start.map(u64::from), w["start"].as_u64());
    }
    let streamed = tokenize.tokenize_stream(tokio_stream::iter([request])).await.unwrap().into_inner();
    assert_eq!(streamed.collect::<Vec<_>>().await.len(), 1);
    let ids: Vec<u32> = got.tokens.iter().map(|t| t.id).collect();
    let decode = pb::DecodeRequest { ids: ids.clone(), skip_special_tokens: true };
    let text = tokenize.decode(decode.clone()).await.unwrap().into_inner().text;
    assert_eq!(json!([text]), server.ok("/decode", json!({"ids": ids, "skip_special_tokens": true})));
    let streamed: Vec<_> =
        tokenize.decode_stream(tokio_stream::iter([decode])).await.unwrap().into_inner().collect().await;
    assert_eq!(streamed[0].as_ref().unwrap().text, text);

    // HTTP/1.1 still answers on the same port.
    assert_eq!(server.get("/health").0, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn rerank_and_sparse_answer_as_http_does() {
    let server = Server::start(&st_model("cross_encoder"), &["--prometheus-port", "0"]);
    let mut rerank = RerankClient::new(channel(&server).await);
    let texts = vec!["a great film".to_string(), "the cat sat".to_string()];
    let request = pb::RerankRequest {
        query: "a good movie".into(),
        texts: texts.clone(),
        return_text: true,
        ..Default::default()
    };
    let got = rerank.rerank(request).await.unwrap().into_inner();
    let want = server.ok("/rerank", json!({"query": "a good movie", "texts": texts, "return_text": true}));
    for (g, w) in got.ranks.iter().zip(want.as_array().unwrap()) {
        assert_eq!(u64::from(g.index), w["index"].as_u64().unwrap());
        assert_eq!(g.text.as_deref(), w["text"].as_str());
        assert!((g.score - w["score"].as_f64().unwrap() as f32).abs() < 1e-5);
    }
    let stream = texts.iter().map(|t| pb::RerankStreamRequest {
        query: "a good movie".into(),
        text: t.clone(),
        ..Default::default()
    });
    let streamed =
        rerank.rerank_stream(tokio_stream::iter(stream.collect::<Vec<_>>())).await.unwrap().into_inner();
    assert_eq!(
        streamed.ranks.iter().map(|r| r.index).collect::<Vec<_>>(),
        got.ranks.iter().map(|r| r.index).collect::<Vec<_>>()
    );
    let status = rerank.rerank_stream(tokio_stream::iter(Vec::new())).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("`texts` cannot be empty"), "{status:?}");

    let splade = Server::start(&model("mlm"), &["--pooling", "splade", "--prometheus-port", "0"]);
    let mut embed = EmbedClient::new(channel(&splade).await);
    let request = pb::EmbedSparseRequest { inputs: "a great film".into(), ..Default::default() };
    let got = embed.embed_sparse(request.clone()).await.unwrap().into_inner();
    let want = splade.ok("/embed_sparse", json!({"inputs": "a great film"}));
    let want = want[0].as_array().unwrap();
    assert_eq!(got.sparse_embeddings.len(), want.len());
    for (g, w) in got.sparse_embeddings.iter().zip(want) {
        assert_eq!(u64::from(g.index), w["index"].as_u64().unwrap());
        assert!((g.value - w["value"].as_f64().unwrap() as f32).abs() < 1e-5);
    }
    let streamed: Vec<_> =
        embed.embed_sparse_stream(tokio_stream::iter([request])).await.unwrap().into_inner().collect().await;
    assert_eq!(streamed[0].as_ref().unwrap().sparse_embeddings.len(), want.len());
    // SPLADE has no normalised /embed, as over HTTP.
    let status =
        embed.embed(pb::EmbedRequest { inputs: "a".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
}

/// `message` with the server's key.
fn keyed<T>(message: T) -> Request<T> {
    let mut request = Request::new(message);
    request.metadata_mut().insert("authorization", "Bearer s3cret".parse().unwrap());
    request
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_gets_tei_s_codes_and_the_server_serves_on() {
    let server = Server::start(
        &st_model("st6_cls_dense"),
        &[
            "--prometheus-port",
            "0",
            "--api-key",
            "s3cret",
            "--max-client-batch-size",
            "2",
            "--payload-limit",
            "2000",
        ],
    );
    let channel = channel(&server).await;
    let mut embed = EmbedClient::new(channel.clone());
    let ok = embed.embed(keyed(pb::EmbedRequest { inputs: "a".into(), ..Default::default() })).await;
    assert!(ok.is_ok(), "{ok:?}");
    for (request, code) in [
        // No key, and a wrong one.
        (Request::new(pb::EmbedRequest { inputs: "a".into(), ..Default::default() }), Code::Unauthenticated),
        (
            {
                let mut r = Request::new(pb::EmbedRequest { inputs: "a".into(), ..Default::default() });
                r.metadata_mut().insert("authorization", "Bearer nope".parse().unwrap());
                r
            },
            Code::Unauthenticated,
        ),
        (keyed(pb::EmbedRequest { inputs: "".into(), ..Default::default() }), Code::InvalidArgument),
        (
            keyed(pb::EmbedRequest {
                inputs: "a".into(),
                prompt_name: Some("nope".into()),
                ..Default::default()
            }),
            Code::InvalidArgument,
        ),
        (
            keyed(pb::EmbedRequest { inputs: "a".into(), dimensions: Some(0), ..Default::default() }),
            Code::InvalidArgument,
        ),
        // Over --payload-limit: tonic's own code for a message too large to decode.
        (keyed(pb::EmbedRequest { inputs: "word ".repeat(1000), ..Default::default() }), Code::OutOfRange),
    ] {
        let status = embed.embed(request).await.unwrap_err();
        assert_eq!(status.code(), code, "{status:?}");
    }
    // An embedding model does not serve Predict: failed precondition, as TEI.
    let status = PredictClient::new(channel.clone())
        .predict(keyed(pb::PredictRequest { inputs: "a".into(), ..Default::default() }))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    // Too many inputs (three texts over --max-client-batch-size 2): invalid argument, checked
    // before the model's kind, as over HTTP.
    let texts = vec!["a".to_string(), "b".to_string(), "c".to_string()];
    let status = RerankClient::new(channel.clone())
        .rerank(keyed(pb::RerankRequest { query: "q".into(), texts, ..Default::default() }))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("batch size 3 > maximum allowed batch size 2"), "{status:?}");
    // And it still serves, over gRPC and HTTP.
    let again = embed.embed(keyed(pb::EmbedRequest { inputs: "a".into(), ..Default::default() })).await;
    assert!(again.is_ok(), "{again:?}");
    let (status, _, _) = server.request("GET", "/health", &[], "");
    assert_eq!(status, 200);
}
