//! The inbound side of a kept stream, over an in-memory pipe: answers in request
//! order, at most [`PIPELINE`] requests read ahead of the answers, and a malformed or
//! oversized item ends the stream.

use std::time::Duration;

use futures::{AsyncReadExt as _, AsyncWriteExt as _};
use interlink_core::wire::{DeliverRequest, DeliverResponse, VERSION};
use libp2p::PeerId;
use serde_bytes::ByteBuf;
use tokio::sync::mpsc;
use tokio_util::compat::TokioAsyncReadCompatExt as _;

use super::{LiveEvent, MAX_REQUEST_BYTES, PIPELINE, Streams, encoded_len_bound, serve};
use crate::cbor::{ItemReader, write_item};

fn request(n: u8) -> DeliverRequest {
    DeliverRequest {
        v: VERSION,
        envelopes: vec![ByteBuf::from(vec![n; 8])],
    }
}

fn response(n: u8) -> DeliverResponse {
    DeliverResponse {
        v: VERSION,
        receipt: Some(ByteBuf::from(vec![n])),
        results: Vec::new(),
    }
}

#[tokio::test]
async fn answers_go_out_in_request_order_and_reading_stops_a_pipeline_ahead() {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (events_tx, mut events) = mpsc::channel(64);
    let peer = PeerId::random();
    let server = tokio::spawn(serve(peer, theirs.compat(), events_tx));
    let (mut rd, mut wr) = ours.compat().split();
    let mut answers = ItemReader::default();
    for n in 0..(PIPELINE as u8 + 2) {
        write_item(&mut wr, request(n)).await.unwrap();
    }
    // Only a pipeline's worth is read while none is answered.
    let mut asked = Vec::new();
    for _ in 0..PIPELINE {
        match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
            Ok(Some(LiveEvent::Request {
                request, answer, ..
            })) => {
                asked.push((request.envelopes[0][0], answer));
            }
            other => panic!("expected a request, got {other:?}"),
        }
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(200), events.recv())
            .await
            .is_err(),
        "read more than {PIPELINE} requests ahead of the answers"
    );
    // Answered out of order; written in order.
    while let Some((n, answer)) = asked.pop() {
        answer.send(response(n)).unwrap();
    }
    for n in 0..PIPELINE as u8 {
        let got: DeliverResponse = answers.next(&mut rd, 1 << 16).await.unwrap();
        assert_eq!(got.receipt.unwrap()[0], n);
    }
    // The rest comes now that room was made.
    for expected in PIPELINE as u8..PIPELINE as u8 + 2 {
        match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
            Ok(Some(LiveEvent::Request {
                request, answer, ..
            })) => {
                assert_eq!(request.envelopes[0][0], expected);
                answer.send(response(expected)).unwrap();
            }
            other => panic!("expected a request, got {other:?}"),
        }
        let got: DeliverResponse = answers.next(&mut rd, 1 << 16).await.unwrap();
        assert_eq!(got.receipt.unwrap()[0], expected);
    }
    // The sender's close ends the stream.
    wr.close().await.unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .unwrap()
            .unwrap(),
        peer
    );
}

#[tokio::test]
async fn a_request_answered_after_the_sender_closed_still_goes_out() {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (events_tx, mut events) = mpsc::channel(64);
    let server = tokio::spawn(serve(PeerId::random(), theirs.compat(), events_tx));
    let (mut rd, mut wr) = ours.compat().split();
    let mut answers = ItemReader::default();
    write_item(&mut wr, request(1)).await.unwrap();
    wr.close().await.unwrap();
    let Some(LiveEvent::Request { answer, .. }) = events.recv().await else {
        panic!("no request");
    };
    answer.send(response(1)).unwrap();
    let got: DeliverResponse = answers.next(&mut rd, 1 << 16).await.unwrap();
    assert_eq!(got.receipt.unwrap()[0], 1);
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn garbage_or_an_oversized_item_ends_the_stream_unanswered() {
    // A byte string announced at 2 MiB, sent in full: more than one request may be.
    let oversized = [
        vec![0x5a],
        (2_u32 << 20).to_be_bytes().to_vec(),
        vec![0; 2 << 20],
    ]
    .concat();
    // A well-formed request larger than a kept stream takes (it goes on `deliver`).
    let too_large = cbor4ii::serde::to_vec(
        Vec::new(),
        &DeliverRequest {
            v: VERSION,
            envelopes: vec![ByteBuf::from(vec![7; 70 * 1024]); 2],
        },
    )
    .unwrap();
    assert!(too_large.len() > MAX_REQUEST_BYTES);
    for bad in [vec![0xff_u8; 64], oversized, too_large] {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (events_tx, mut events) = mpsc::channel(64);
        let server = tokio::spawn(serve(PeerId::random(), theirs.compat(), events_tx));
        let (mut rd, mut wr) = ours.compat().split();
        // The server stops reading part-way: the rest of the write fails.
        let writing = tokio::spawn(async move {
            let _ = wr.write_all(&bad).await;
            wr
        });
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("the stream did not end")
            .unwrap();
        assert!(events.try_recv().is_err(), "a bad item reached the node");
        let mut rest = Vec::new();
        rd.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "a bad item was answered");
        drop(writing);
    }
}

#[tokio::test]
async fn a_request_the_node_drops_unanswered_ends_the_stream() {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (events_tx, mut events) = mpsc::channel(64);
    let server = tokio::spawn(serve(PeerId::random(), theirs.compat(), events_tx));
    let (_rd, mut wr) = ours.compat().split();
    write_item(&mut wr, request(1)).await.unwrap();
    let Some(LiveEvent::Request { answer, .. }) = events.recv().await else {
        panic!("no request");
    };
    drop(answer);
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the stream did not end")
        .unwrap();
}

#[test]
fn the_length_bound_is_never_below_the_encoding() {
    for sizes in [
        vec![],
        vec![0],
        vec![23, 24, 255, 256],
        vec![65_535, 65_536],
        vec![1; 64],
    ] {
        let request = DeliverRequest {
            v: VERSION,
            envelopes: sizes.iter().map(|n| ByteBuf::from(vec![1; *n])).collect(),
        };
        let bytes = cbor4ii::serde::to_vec(Vec::new(), &request).unwrap();
        assert!(encoded_len_bound(&request) >= bytes.len(), "{sizes:?}");
    }
}

#[tokio::test]
async fn a_request_larger_than_a_kept_stream_takes_is_given_back_to_go_as_a_request() {
    let control = libp2p_stream::Behaviour::new().new_control();
    let protocol = libp2p::StreamProtocol::new("/interlink-p2p/test/deliver-stream/10");
    let mut streams = Streams::new(control, protocol, false);
    let peer = PeerId::random();
    let large = DeliverRequest {
        v: VERSION,
        envelopes: vec![ByteBuf::from(vec![7; 70 * 1024]); 2],
    };
    assert_eq!(streams.send(peer, large.clone()), Err(large));
    assert!(streams.send(peer, request(1)).is_ok());
}
